package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// WriteStatus writes the status page (STATUS.md) of a report: where it
// ran, then each family's standing against its goals (a summary table,
// then per family the targets table and every miss with its figures), and
// how the goals are counted. roofline, when not empty, is the file name of
// the picture of the cases' rates to show under the summary.
func (r *Report) WriteStatus(w io.Writer, roofline string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Status: %s\n\n", r.Env.deviceLine())
	b.WriteString(r.statusLine() + "\n")
	rows, misses := r.targetTally()
	families := r.families()
	if r.Env.Graph > 0 {
		b.WriteString("\nThese runs were timed in CUDA graphs (" + r.Env.graphLine() + "): the goals are of one launch " +
			"at a time, so none is counted here.\n")
	}
	b.WriteString("\n")
	sum := &Table{Header: []string{"family", "cases", "goals met", "missed", "out of reach", "failed"}, Align: "lrrrrr"}
	for _, f := range families {
		var goals, met, beyond int
		for _, c := range rows {
			if c.family != f {
				continue
			}
			if targets[c.t].median {
				goals++
				met += min(c.met, 1)
				continue
			}
			goals, met, beyond = goals+c.cases, met+c.met, beyond+c.beyond
		}
		metCell, missed, beyondCell := dash, dash, dash
		if goals > 0 {
			metCell, missed, beyondCell = fmt.Sprintf("%d/%d", met, goals), fmt.Sprint(goals-met-beyond), fmt.Sprint(beyond)
		}
		n, failed := r.familyCases(f)
		sum.Add(f, fmt.Sprint(n), metCell, missed, beyondCell, fmt.Sprint(failed))
	}
	if err := sum.WriteMarkdown(&b); err != nil {
		return err
	}
	if roofline != "" {
		fmt.Fprintf(&b, "\n![Each case's rate against the copy ceiling](%s)\n\n"+
			"Each case's rate (GB/s: bytes read once and written once over the median time) against the bytes it moves, "+
			"under the roofline of this device: the copy ceiling, and for small cases the bytes over the fastest launch floor "+
			"(an empty kernel's time), with the copies of a case's own size that the run timed.\n", roofline)
	}
	for _, f := range families {
		fmt.Fprintf(&b, "\n## %s\n\n", f)
		var fr []targetCount
		for _, c := range rows {
			if c.family == f {
				fr = append(fr, c)
			}
		}
		switch {
		case len(fr) > 0:
			if err := targetsTable(fr, false).WriteMarkdown(&b); err != nil {
				return err
			}
		case r.Env.Graph > 0:
			b.WriteString("Not counted (CUDA graphs).\n")
		default:
			b.WriteString("No goal is asked of its measured cases.\n")
		}
		var lines []string
		for _, m := range misses {
			if m.family != f {
				continue
			}
			if m.op == "" {
				lines = append(lines, m.what)
			} else {
				lines = append(lines, m.op+" "+m.name+": "+m.what)
			}
		}
		if len(lines) > 0 {
			b.WriteString("\nMisses:\n\n")
		} else if len(fr) > 0 {
			b.WriteString("\nEvery goal met.\n")
		}
		for _, l := range lines {
			b.WriteString("- " + l + "\n")
		}
		var failed []string
		for _, e := range r.Entries {
			if e.Family == f && e.Err != "" {
				failed = append(failed, "- "+e.Op+" "+e.Case+": "+firstLine(e.Err))
			}
		}
		if len(failed) > 0 {
			b.WriteString("\nFailed to measure:\n\n" + strings.Join(failed, "\n") + "\n")
		}
	}
	b.WriteString("\n## How the goals are counted\n\n" + targetsMethod + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// statusLine says where and when the report's runs ran.
func (r *Report) statusLine() string {
	s := fmt.Sprintf("Measured on %s, %s, %s; last run %s", r.Env.deviceLine(), r.Env.driverLine(), r.Env.nvrtcLine(),
		r.Env.Date.Format(time.DateOnly))
	if n := len(r.Env.Floors); n > 1 {
		s += fmt.Sprintf(" (%d runs merged)", n)
	}
	if r.Env.CopyGBs > 0 {
		s += fmt.Sprintf("; copy ceiling %.0f GB/s", r.Env.CopyGBs)
	}
	if f := r.lowestFloor(); f > 0 {
		s += fmt.Sprintf("; fastest launch floor %.2f µs", f)
	}
	return s + "."
}

// families lists the report's families in the order of its entries.
func (r *Report) families() []string {
	var out []string
	for _, e := range r.Entries {
		if !slices.Contains(out, e.Family) {
			out = append(out, e.Family)
		}
	}
	return out
}

// familyCases counts family's cases and those that failed to measure.
func (r *Report) familyCases(family string) (n, failed int) {
	for _, e := range r.Entries {
		if e.Family == family {
			n++
			if e.Err != "" {
				failed++
			}
		}
	}
	return n, failed
}

// firstLine is s up to its first newline (a compile log stays out).
func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
