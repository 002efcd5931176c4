package bench

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// A target is one field of Goal as the reports count it: what a case has
// and what it must reach.
type target struct {
	label    func(goal float64) string
	goal     func(Goal) float64
	applies  func(e Entry) bool               // nil: every case
	value    func(r *Report, e Entry) float64 // 0: not measured
	decimals int                              // as the tables print value
	// median: the goal is of the median of value over the cases of a
	// family that ask it, not of each case.
	median bool
	// beyond, when set, says whether a missed goal is out of reach (see
	// targetsMethod) and why; miss describes a case's miss.
	beyond func(r *Report, e Entry, goal float64) (bool, string)
	miss   func(r *Report, e Entry, goal float64) string
}

// compileLabel is the label of the torch.compile goals.
func compileLabel(g float64) string { return fmt.Sprintf("≥ %.2f× torch.compile", g) }

// targets are the goals counted, in the order the reports list them.
var targets = []target{
	{
		label:    compileLabel,
		goal:     func(g Goal) float64 { return g.VsCompile },
		value:    func(_ *Report, e Entry) float64 { return e.SpeedupCompile() },
		decimals: 2,
		// A miss says how the runs spread and, where a same-size copy was
		// timed, how close ours comes to it: two kernels at the copy's
		// rate can only tie.
		miss: func(_ *Report, e Entry, goal float64) string {
			s := cut("%.2f×", 2, e.SpeedupCompile()) + " torch.compile"
			var notes []string
			if lo, hi := e.compileRange(); lo > 0 {
				n := "runs " + cut("%.2f", 2, lo) + "–" + cut("%.2f×", 2, hi)
				if reaches(hi, goal, 2) {
					n += ", one reached it"
				}
				notes = append(notes, n)
			}
			if p := e.PctSameCopy(); p > 0 {
				notes = append(notes, "ours at "+cut("%.0f%%", 0, p)+" of a same-size copy")
			}
			if len(notes) > 0 {
				s += " (" + strings.Join(notes, "; ") + ")"
			}
			return s
		},
	},
	{
		label:    func(g float64) string { return "median " + compileLabel(g) },
		goal:     func(g Goal) float64 { return g.VsCompileMedian },
		value:    func(_ *Report, e Entry) float64 { return e.SpeedupCompile() },
		decimals: 2,
		median:   true,
	},
	{
		label:    func(g float64) string { return fmt.Sprintf("≥ %.2f× eager", g) },
		goal:     func(g Goal) float64 { return g.VsEager },
		value:    func(_ *Report, e Entry) float64 { return e.SpeedupEager() },
		decimals: 2,
		beyond: func(r *Report, e Entry, goal float64) (bool, string) {
			need := e.Torch.EagerUS / goal
			if f := r.lowestFloor(); f > 0 && need < f {
				return true, fmt.Sprintf("under the %.2f µs of an empty kernel", f)
			}
			gbs := float64(e.Bytes) / (need * 1e3)
			if c, best := r.copyOfSize(e), r.bestOverCopy(); c > 0 && gbs > c*best {
				return true, fmt.Sprintf("%.0f GB/s, %s of a copy of its size", gbs, cut("%.0f%%", 0, 100*gbs/c))
			}
			return false, ""
		},
		miss: func(_ *Report, e Entry, goal float64) string {
			return fmt.Sprintf("%s eager; %.2f× needs %.2f µs", cut("%.2f×", 2, e.SpeedupEager()), goal, e.Torch.EagerUS/goal)
		},
	},
	{
		label: func(g float64) string {
			return fmt.Sprintf("≥ %.0f%% of a same-size copy, %.0f MB or more", g, CopyGoalMin/1e6)
		},
		goal:     func(g Goal) float64 { return g.CopyPct },
		applies:  func(e Entry) bool { return e.Bytes >= CopyGoalMin },
		value:    func(_ *Report, e Entry) float64 { return e.PctSameCopy() },
		decimals: 0,
		miss: func(_ *Report, e Entry, _ float64) string {
			return cut("%.0f%%", 0, e.PctSameCopy()) + " of a same-size copy"
		},
	},
}

// reaches reports whether v meets goal as the tables print v: cut to the
// given decimals (see cut), so that a printed miss is a counted one.
func reaches(v, goal float64, decimals int) bool {
	p := math.Pow10(decimals)
	return math.Floor(v*p+1e-9)/p >= goal
}

// lowestFloor is the fastest launch floor any of the report's runs timed
// (see Env.LowestFloor).
func (r *Report) lowestFloor() float64 { return r.Env.LowestFloor() }

// copyOfSize is the rate of a copy that moves as many bytes as e: the
// same-size copy where the run timed one, else the copy ceiling.
func (r *Report) copyOfSize(e Entry) float64 { return cmp.Or(e.SameCopyGBs, r.Env.CopyGBs) }

// bestOverCopy is the most that any kernel of the report, ours, eager or
// torch.compile's, moved beyond a copy of its case's size: the highest
// ratio of a case's rate to its same-size copy's, and at least 1. Kernels
// can outrun the driver's copy of their size by a few percent, so a goal
// counts as out of reach only past what the run saw a kernel do.
func (r *Report) bestOverCopy() float64 {
	best := 1.0
	for _, e := range r.Entries {
		if e.SameCopyGBs <= 0 || e.Err != "" {
			continue
		}
		times := []float64{e.Result.MedianUS}
		if e.Torch != nil {
			times = append(times, e.Torch.EagerUS, e.Torch.CompileUS)
		}
		for _, us := range times {
			if us > 0 {
				best = max(best, float64(e.Bytes)/(us*1e3)/e.SameCopyGBs)
			}
		}
	}
	return best
}

// targetCount is one row of the targets table: the cases of one family
// that one target asks the same goal of.
type targetCount struct {
	family             string
	t                  int // index into targets
	goal               float64
	cases, met, beyond int
	// values are the cases' figures of a median target, and median their
	// median.
	values []float64
	median float64
}

// label is the row's goal in words.
func (c targetCount) label() string { return targets[c.t].label(c.goal) }

// targetMiss is one case, or one family's median, that misses a goal, and
// how; op and name are empty for a median.
type targetMiss struct {
	family, op, name, what string
	t                      int // index into targets
}

// String is the miss as the lists print it.
func (m targetMiss) String() string {
	if m.op == "" {
		return m.family + ": " + m.what
	}
	return m.family + " " + m.op + " " + m.name + ": " + m.what
}

// targetTally counts every measured case of the report against its goals
// (Entry.Goal): one row per family, target and goal, in the report's
// family order, then the targets' order and the goals ascending; and every
// miss, by family and target. Runs timed inside CUDA graphs count nothing:
// the goals are of one launch at a time.
func (r *Report) targetTally() ([]targetCount, []targetMiss) {
	if r.Env.Graph > 0 {
		return nil, nil
	}
	var rows []targetCount
	var misses []targetMiss
	for ti, t := range targets {
		for _, e := range r.Entries {
			goal := t.goal(e.Goal)
			if goal <= 0 || e.Err != "" || (t.applies != nil && !t.applies(e)) {
				continue
			}
			v := t.value(r, e)
			if v <= 0 {
				continue
			}
			i := slices.IndexFunc(rows, func(c targetCount) bool { return c.family == e.Family && c.t == ti && c.goal == goal })
			if i < 0 {
				rows = append(rows, targetCount{family: e.Family, t: ti, goal: goal})
				i = len(rows) - 1
			}
			row := &rows[i]
			row.cases++
			switch {
			case t.median:
				row.values = append(row.values, v)
			case reaches(v, goal, t.decimals):
				row.met++
			default:
				m := targetMiss{family: e.Family, op: e.Op, name: e.Case, what: t.miss(r, e, goal), t: ti}
				if t.beyond != nil {
					if beyond, why := t.beyond(r, e, goal); beyond {
						m.what += ": out of reach, " + why
						row.beyond++
					}
				}
				misses = append(misses, m)
			}
		}
	}
	for i := range rows {
		c := &rows[i]
		if !targets[c.t].median {
			continue
		}
		c.median = median(slices.Clone(c.values))
		if reaches(c.median, c.goal, targets[c.t].decimals) {
			c.met = c.cases
			continue
		}
		misses = append(misses, targetMiss{family: c.family, t: c.t, what: fmt.Sprintf("median %s torch.compile over %d cases (goal %.2f×)",
			cut("%.2f×", 2, c.median), c.cases, c.goal)})
	}
	family := func(f string) int { return slices.IndexFunc(r.Entries, func(e Entry) bool { return e.Family == f }) }
	slices.SortStableFunc(rows, func(a, b targetCount) int {
		return cmp.Or(cmp.Compare(family(a.family), family(b.family)), cmp.Compare(a.t, b.t), cmp.Compare(a.goal, b.goal))
	})
	slices.SortStableFunc(misses, func(a, b targetMiss) int {
		return cmp.Or(cmp.Compare(family(a.family), family(b.family)), cmp.Compare(a.t, b.t))
	})
	return rows, misses
}

// targetsTable lays the tally's rows out, with the family column when
// family is set. A median row gives the median where the cases' count
// goes: under "met" when it reaches the goal, else under "missed".
func targetsTable(rows []targetCount, family bool) *Table {
	t := &Table{Header: []string{"goal", "cases", "met", "out of reach", "missed"}, Align: "lrrrr"}
	if family {
		t.Header, t.Align = append([]string{"family"}, t.Header...), "l"+t.Align
	}
	for _, c := range rows {
		met, beyond, missed := fmt.Sprint(c.met), dash, fmt.Sprint(c.cases-c.met-c.beyond)
		if targets[c.t].beyond != nil {
			beyond = fmt.Sprint(c.beyond)
		}
		if targets[c.t].median {
			met, missed = dash, dash
			if m := cut("%.2f×", 2, c.median); c.met > 0 {
				met = m
			} else {
				missed = m
			}
		}
		row := []string{c.label(), fmt.Sprint(c.cases), met, beyond, missed}
		if family {
			row = append([]string{c.family}, row...)
		}
		t.Add(row...)
	}
	return t
}

// targetsMethod explains the targets section of a report.
const targetsMethod = `Each case is counted against its goal (the registry's), from the figures in the table above, cut as they
print: torch.compile's time over ours on every case, and the median of that ratio over the family's cases
that ask it (the median row gives it under "met" or "missed"); PyTorch eager's time over ours (for top-k,
torch.topk's); and, for cases of 64 MB or more, ours as a share of one device-to-device copy of the case's
own size timed in the same run. An eager miss is out of reach when the time it needs is under the fastest
launch floor any run timed (an empty kernel), or needs a higher rate than a copy of the case's size reached
(the copy ceiling for cases under 16 MB, where no such copy is timed) times the most any kernel of the run,
ours or PyTorch's, outran a copy of its case's size by. Where one run's own torch.compile ratio met the goal,
the miss says so. Runs timed in CUDA graphs are not counted.`

// writeTargets writes the targets section in markdown: the counts, then
// every miss. It writes nothing when no case has a goal.
func (r *Report) writeTargets(b *strings.Builder) error {
	rows, misses := r.targetTally()
	if len(rows) == 0 {
		return nil
	}
	b.WriteString("\n## Targets\n\n")
	if err := targetsTable(rows, true).WriteMarkdown(b); err != nil {
		return err
	}
	if best := r.bestOverCopy(); best > 1 {
		fmt.Fprintf(b, "\nThe fastest kernel of these runs, ours or PyTorch's, outran a copy of its case's size by %.1f%%.\n", 100*(best-1))
	}
	writeMisses(b, misses)
	b.WriteString("\n" + targetsMethod + "\n")
	return nil
}

// writeMisses writes a markdown list of misses, if any.
func writeMisses(b *strings.Builder, misses []targetMiss) {
	if len(misses) == 0 {
		return
	}
	b.WriteString("\nMisses:\n\n")
	for _, m := range misses {
		b.WriteString("- " + m.String() + "\n")
	}
}
