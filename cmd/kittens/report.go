package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gokittens/kittens/bench"
)

// report merges the JSON outputs of several `kittens bench -json` runs on one
// device (a benchmark split to fit a time limit, or repeated: a case in
// several runs gets the median of their times, see bench.Merge) into one
// report: printed, written as markdown with -write, and with -status as a
// status page (STATUS.md: each family against its goals) and its picture
// (roofline.svg) in a folder. Like bench, it fails when the merged report
// lists a failed case, ours or PyTorch's.
func (c *cli) report(args []string) int {
	fs := c.flags("report")
	write := fs.String("write", "", "write the merged report as markdown to this file (results/<gpu>/BENCH.md)")
	status := fs.String("status", "", "write the status page "+statusFile+" and its picture "+rooflineFile+
		" into this folder (results/<gpu>)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
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
	outs := map[string]string{"write": *write}
	if *status != "" {
		outs["status"] = filepath.Join(*status, statusFile)
	}
	if !c.checkOutputs("report", outs) {
		return exitUsage
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
	switch {
	case err != nil:
	case len(rep.Entries) == 0:
		err = fmt.Errorf("the reports hold no cases")
	case *status != "" && rep.Env.CPUOnly():
		err = fmt.Errorf("-status: these runs are of the CPU path (no GPU): they have no rates or goals to show")
	}
	if err != nil {
		fmt.Fprintln(c.stderr, "kittens report:", err)
		return exitFail
	}
	setGoals(rep)
	res := []output{{*write, rep.WriteMarkdown}}
	if *status != "" {
		res = append(res,
			output{filepath.Join(*status, statusFile), func(w io.Writer) error { return rep.WriteStatus(w, rooflineFile) }},
			output{filepath.Join(*status, rooflineFile), func(w io.Writer) error { return writeRoofline(w, rep) }})
	}
	if !c.emit("report", rep.WriteText, res...) || rep.Failed() {
		return exitFail
	}
	return exitOK
}

// statusFile is the status page's name in the -status folder.
const statusFile = "STATUS.md"

// setGoals gives each entry of rep the goal the registry now sets for its
// case (every field of bench.Goal), since a run's JSON does not carry
// them; a case the registry no longer lists has none.
func setGoals(rep *bench.Report) {
	for i, e := range rep.Entries {
		if op, ok := families().Lookup(e.Op); ok {
			if j := slices.IndexFunc(op.Benches, func(b bench.Case) bool { return b.Name == e.Case }); j >= 0 {
				rep.Entries[i].Goal = op.Benches[j].Goal
			}
		}
	}
}
