package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/suite"
	"github.com/gokittens/kittens/tensor"
)

// check runs the parity cases of every selected op: on the GPU against the
// CPU reference, or the host path alone without one.
func (c *cli) check(args []string) int {
	fs := c.flags("check")
	sel := selectionFlags(fs)
	write := fs.String("write", "", "also write the status table as markdown to this file (results/<gpu>/KERNELS.md)")
	partial := partialFlag(fs)
	if code, ok := c.parse(fs, args); !ok {
		return code
	}
	if !c.checkOutputs("check", map[string]string{"write": *write}) {
		return exitUsage
	}
	ops, dev, ok := c.resolve(fs, sel, false)
	if !ok || c.refusePartial("check", *write, *partial, sel, dev) {
		return exitUsage
	}
	res := checkResults{Env: bench.Describe(dev), Rows: runChecks(dev, ops, c.stderr)}
	if !c.emit("check", res.writeText, output{*write, res.writeMarkdown}) || res.failed() > 0 {
		return exitFail
	}
	return exitOK
}

// checkRow is the outcome of one parity case.
type checkRow struct {
	Family, Op, Case string
	Seed             uint64 // replays the case's inputs (tensor.SeededRNG)
	Report           check.Report
	Err              error // the case could not run
}

func (r checkRow) pass() bool { return r.Err == nil && r.Report.Pass }

// result is the row's verdict: PASS, FAIL or, on the CPU path, "PASS (cpu)".
func (r checkRow) result() string {
	switch {
	case !r.pass():
		return "FAIL"
	case r.Report.CPUOnly:
		return "PASS (cpu)"
	}
	return "PASS"
}

// detail says what went wrong in a failed row.
func (r checkRow) detail() string {
	if r.Err != nil {
		return r.Err.Error()
	}
	return r.Report.String()
}

// compared reports whether the row has error figures: the case ran and
// was compared with the reference (the CPU path compares nothing).
func (r checkRow) compared() bool { return r.Err == nil && !r.Report.CPUOnly }

// errCell formats an error figure, or a dash where none was compared.
func errCell(v float64, compared bool) string {
	if !compared {
		return "—"
	}
	return fmt.Sprintf("%.3g", v)
}

// runChecks runs every parity case of ops on dev (nil: the host path), each
// with fresh inputs from its own seed. On a GPU the cases first warm up
// together (warmCases), so that each then runs without waiting for NVRTC.
func runChecks(dev *cuda.Device, ops []*suite.Op, stderr io.Writer) []checkRow {
	if dev != nil {
		warmCases(ops, checksOf, stderr, func(cs []check.Case, done func()) { check.WarmAll(dev, cs, done) })
	}
	var rows []checkRow
	eachCase(ops, checksOf, checkName, stderr, func(op *suite.Op, cs check.Case) {
		rng, seed := tensor.NewRNG()
		rep, err := cs.Run(dev, rng)
		rows = append(rows, checkRow{Family: op.Family, Op: op.Name, Case: cs.Name, Seed: seed, Report: rep, Err: err})
	})
	return rows
}

// checkResults is one check run: where it ran and every case.
type checkResults struct {
	Env  bench.Env
	Rows []checkRow
}

func (r *checkResults) failed() int {
	n := 0
	for _, row := range r.Rows {
		if !row.pass() {
			n++
		}
	}
	return n
}

// caseTable has one row per case.
func (r *checkResults) caseTable() *bench.Table {
	t := &bench.Table{Header: []string{"op", "case", "max|Δ|", "rel", "result"}, Align: "llrrl"}
	for _, row := range r.Rows {
		t.Add(row.Op, row.Case, errCell(row.Report.MaxAbs, row.compared()), errCell(row.Report.RelNorm, row.compared()), row.result())
	}
	return t
}

// opTable has one row per op: cases passed, the worst errors over the
// cases that were compared, the status. Both the absolute and the relative
// error are shown: cases with huge inputs (values near 1e30, to check that
// finite inputs stay finite) have large absolute differences that are one
// unit in the last place.
func (r *checkResults) opTable() *bench.Table {
	t := &bench.Table{Header: []string{"family", "op", "cases passed", "worst max|Δ|", "worst rel", "status"}, Align: "llrrrl"}
	for i := 0; i < len(r.Rows); {
		j, passed, compared, worst, worstRel := i, 0, false, 0.0, 0.0
		for ; j < len(r.Rows) && r.Rows[j].Op == r.Rows[i].Op; j++ {
			row := r.Rows[j]
			if row.pass() {
				passed++
			}
			if row.compared() {
				compared = true
				worst = max(worst, row.Report.MaxAbs)
				worstRel = max(worstRel, row.Report.RelNorm)
			}
		}
		first := r.Rows[i]
		status := "pass"
		switch {
		case passed < j-i:
			status = "FAIL"
		case first.Report.CPUOnly:
			status = "cpu only"
		}
		t.Add(first.Family, first.Op, fmt.Sprintf("%d/%d", passed, j-i), errCell(worst, compared), errCell(worstRel, compared), status)
		i = j
	}
	return t
}

// failures lists every failed case with its seed.
func (r *checkResults) failures() []string {
	var out []string
	for _, row := range r.Rows {
		if !row.pass() {
			out = append(out, fmt.Sprintf("%s %s (seed %d): %s", row.Op, row.Case, row.Seed, row.detail()))
		}
	}
	return out
}

// summary is the closing line. On the CPU path it says what ran: each
// case's host reference, checked for writing every output and nothing
// else; no kernel was compared.
func (r *checkResults) summary() string {
	n, failed := len(r.Rows), r.failed()
	if !r.Env.CPUOnly() {
		return fmt.Sprintf("%d/%d cases passed", n-failed, n)
	}
	const ran = "ran their CPU reference, which wrote every output and nothing else; no kernel was compared (CPU path only)"
	if failed == 0 {
		return fmt.Sprintf("%d host-path cases %s", n, ran)
	}
	return fmt.Sprintf("%d of %d host-path cases failed; the other %d %s", failed, n, n-failed, ran)
}

// writeText writes the terminal form: the case table, failures, a summary.
func (r *checkResults) writeText(w io.Writer) error {
	var b strings.Builder
	b.WriteString(r.Env.String() + "\n")
	if len(r.Rows) == 0 {
		b.WriteString("no parity cases registered\n")
	} else if err := r.caseTable().WriteText(&b); err != nil {
		return err
	}
	for _, f := range r.failures() {
		b.WriteString("FAIL " + f + "\n")
	}
	b.WriteString(r.summary() + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeMarkdown writes KERNELS.md: the environment, one row per op, the
// failures, then every case.
func (r *checkResults) writeMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Kernel status\n\n")
	b.WriteString("Every registered op's parity cases against its CPU reference (float64), written by `kittens check -write`.\n")
	b.WriteString("Each case draws fresh random inputs; a failure's seed replays them. On a GPU each case also runs\n")
	b.WriteString("captured into a CUDA graph and replayed, and must write exactly what the direct launch wrote.\n\n")
	if err := r.Env.Table().WriteMarkdown(&b); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\n%s.\n\n", r.summary())
	if err := r.opTable().WriteMarkdown(&b); err != nil {
		return err
	}
	if fs := r.failures(); len(fs) > 0 {
		b.WriteString("\n## Failures\n\n")
		for _, f := range fs {
			first, _, _ := strings.Cut(f, "\n") // a compile log stays in the terminal
			b.WriteString("- " + first + "\n")
		}
	}
	b.WriteString("\n## Cases\n\n")
	if err := r.caseTable().WriteMarkdown(&b); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}
