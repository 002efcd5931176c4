package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/gokittens/kittens/bench"
)

// report merges the JSON outputs of several `kittens bench -json` runs on one
// device (a benchmark split to fit a time limit, or repeated: a case in
// several runs gets the median of their times, see bench.Merge) into one
// report: printed, and written as markdown with -write. Like bench, it
// fails when the merged report lists a failed case, ours or PyTorch's.
func (c *cli) report(args []string) int {
	fs := c.flags("report")
	write := fs.String("write", "", "write the merged report as markdown to this file (BENCH.md)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(c.stderr, "kittens report: name one or more JSON files from kittens bench -json")
		return exitUsage
	}
	for _, a := range fs.Args() {
		if strings.HasPrefix(a, "-") {
			fmt.Fprintf(c.stderr, "kittens report: %q after the files: flags go before them\n", a)
			return exitUsage
		}
	}
	var reps []*bench.Report
	for _, path := range fs.Args() {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(c.stderr, "kittens report:", err)
			return exitFail
		}
		r, err := bench.ReadJSON(f)
		f.Close()
		if err != nil {
			fmt.Fprintln(c.stderr, "kittens report:", path+":", err)
			return exitFail
		}
		reps = append(reps, r)
	}
	rep, err := bench.Merge(reps...)
	if err == nil && len(rep.Entries) == 0 {
		err = fmt.Errorf("the reports hold no cases")
	}
	if err != nil {
		fmt.Fprintln(c.stderr, "kittens report:", err)
		return exitFail
	}
	setGoals(rep)
	if !c.emit("report", rep.WriteText, output{*write, rep.WriteMarkdown}) || rep.Failed() {
		return exitFail
	}
	return exitOK
}

// setGoals gives each entry of rep the goal the registry now sets for its
// case, since a run's JSON does not carry them; a case the registry no
// longer lists has none.
func setGoals(rep *bench.Report) {
	for i, e := range rep.Entries {
		if op, ok := lookup(e.Op); ok {
			if j := slices.IndexFunc(op.Benches, func(b bench.Case) bool { return b.Name == e.Case }); j >= 0 {
				rep.Entries[i].Goal = op.Benches[j].Goal
			}
		}
	}
}
