package bench

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// A target is one kind of goal an issue sets (Goal), as the
// report counts it: what a case has and what it must reach.
type target struct {
	label    func(goal float64) string
	goal     func(Goal) float64
	applies  func(e Entry) bool               // nil: every case
	value    func(r *Report, e Entry) float64 // 0: not measured
	decimals int                              // as the table prints value
	// beyond, when set, says whether a missed goal is out of reach (see
	// targetsMethod) and why; miss describes any miss.
	beyond func(r *Report, e Entry, goal float64) (bool, string)
	miss   func(r *Report, e Entry, goal float64) string
}

// large reports whether the issues' copy goal is asked of e (its data is
// CopyGoalMin or more).
func large(e Entry) bool { return e.Bytes >= CopyGoalMin }

// targets are the goals counted, in the order the report lists them. The
// share of a same-size copy is no issue's goal: it says how close the
// large cases come to a copy of their own size, against which the issues'
// copy goal is out of reach for many of them.
var targets = []target{
	{
		label:    func(g float64) string { return fmt.Sprintf("≥ %.2f× torch.compile", g) },
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
			return fmt.Sprintf("≥ %.0f%% of copy, %.0f MB or more", g, CopyGoalMin/1e6)
		},
		goal:     func(g Goal) float64 { return g.CopyPct },
		applies:  large,
		value:    func(r *Report, e Entry) float64 { return r.PctCopy(e) },
		decimals: 0,
		beyond: func(r *Report, e Entry, goal float64) (bool, string) {
			same, best := 100*ratio(e.SameCopyGBs, r.Env.CopyGBs), r.bestOverCopy()
			if same > 0 && !reaches(same*best, goal, 0) {
				return true, "a copy of its size reaches " + cut("%.0f%%", 0, same)
			}
			return false, ""
		},
		miss: func(r *Report, e Entry, _ float64) string { return cut("%.0f%%", 0, r.PctCopy(e)) + " of copy" },
	},
	{
		label: func(g float64) string {
			return fmt.Sprintf("≥ %.0f%% of a same-size copy, %.0f MB or more (no issue's goal)", g, CopyGoalMin/1e6)
		},
		goal:     func(g Goal) float64 { return g.CopyPct },
		applies:  large,
		value:    func(_ *Report, e Entry) float64 { return e.PctSameCopy() },
		decimals: 0,
		miss: func(_ *Report, e Entry, _ float64) string {
			return cut("%.0f%%", 0, e.PctSameCopy()) + " of a same-size copy"
		},
	},
}

// reaches reports whether v meets goal as the table prints v: cut to the
// given decimals (see cut), so that a printed miss is a counted one.
func reaches(v, goal float64, decimals int) bool {
	p := math.Pow10(decimals)
	return math.Floor(v*p+1e-9)/p >= goal
}

// lowestFloor is the fastest launch floor any of the report's runs timed
// in our process (0: none timed): no kernel launched there took less.
func (r *Report) lowestFloor() float64 {
	var low float64
	for _, f := range r.Env.Floors {
		for _, v := range []float64{f.Ours.StartUS, f.Ours.EndUS} {
			if v > 0 && (low == 0 || v < low) {
				low = v
			}
		}
	}
	return low
}

// copyOfSize is the rate of a copy that moves as many bytes as e: the
// same-size copy where the run timed one, else the copy ceiling.
func (r *Report) copyOfSize(e Entry) float64 { return cmp.Or(e.SameCopyGBs, r.Env.CopyGBs) }

// bestOverCopy is the most that any kernel of the report, ours, eager or
// torch.compile's, moved beyond a copy of its case's size: the highest
// ratio of a case's rate to its same-size copy's, and at least 1. Kernels
// can outrun the driver's copy of their size a little (torch.compile's
// rmsnorm 65536x128 by 2.3% in the thirty-first session's H100 runs), so a
// goal counts as out of reach only past what the run saw a kernel do.
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
}

// targetMiss is one case that misses a goal, and how.
type targetMiss struct{ family, op, name, what string }

// targetTally counts every measured case of the report against its goals
// (Entry.Goal): one row per family, target and goal, in the report's
// family order, then the targets' order and the goals ascending; and every
// miss, in the same order. Runs timed inside CUDA graphs count nothing: the
// issues time one launch at a time.
func (r *Report) targetTally() ([]targetCount, []targetMiss) {
	var rows []targetCount
	var misses []targetMiss
	if r.Env.Graph > 0 {
		return nil, nil
	}
	for ti, t := range targets {
		for _, e := range r.Entries {
			goal := t.goal(e.Goal)
			v := t.value(r, e)
			if goal <= 0 || e.Err != "" || v <= 0 || (t.applies != nil && !t.applies(e)) {
				continue
			}
			i := slices.IndexFunc(rows, func(c targetCount) bool { return c.family == e.Family && c.t == ti && c.goal == goal })
			if i < 0 {
				rows = append(rows, targetCount{family: e.Family, t: ti, goal: goal})
				i = len(rows) - 1
			}
			rows[i].cases++
			if reaches(v, goal, t.decimals) {
				rows[i].met++
				continue
			}
			m := targetMiss{family: e.Family, op: e.Op, name: e.Case, what: t.miss(r, e, goal)}
			if t.beyond != nil {
				if beyond, why := t.beyond(r, e, goal); beyond {
					m.what += ": out of reach, " + why
					rows[i].beyond++
				}
			}
			misses = append(misses, m)
		}
	}
	family := func(f string) int { return slices.IndexFunc(r.Entries, func(e Entry) bool { return e.Family == f }) }
	slices.SortStableFunc(rows, func(a, b targetCount) int {
		return cmp.Or(cmp.Compare(family(a.family), family(b.family)), cmp.Compare(a.t, b.t), cmp.Compare(a.goal, b.goal))
	})
	slices.SortStableFunc(misses, func(a, b targetMiss) int { return cmp.Compare(family(a.family), family(b.family)) })
	return rows, misses
}

// targetsTable lays the tally's rows out.
func targetsTable(rows []targetCount) *Table {
	t := &Table{Header: []string{"family", "target", "cases", "met", "out of reach", "missed"}, Align: "llrrrr"}
	for _, c := range rows {
		beyond := dash
		if targets[c.t].beyond != nil {
			beyond = fmt.Sprint(c.beyond)
		}
		t.Add(c.family, targets[c.t].label(c.goal), fmt.Sprint(c.cases), fmt.Sprint(c.met), beyond,
			fmt.Sprint(c.cases-c.met-c.beyond))
	}
	return t
}

// targetsMethod explains the targets section of BENCH.md.
const targetsMethod = `Each case is counted against what its family's issue asks of it (the registry's goal for the case),
from the figures in the table above, cut as they print. A miss is out of reach when no kernel could meet the goal
in this run's terms: for eager, when the time it needs is under the fastest launch floor any run timed (an empty
kernel), or needs a higher rate than a copy of the case's own size reached (the copy ceiling for cases under 16
MB, where no such copy is timed); for the copy goal, when a copy of the case's own size fell short of it
itself. Where a kernel of the run, ours or PyTorch's, outran a copy of its case's size, that margin is granted
first: the goal is out of reach only past the copy's rate times the best such ratio the run saw.
torch.compile's misses are never counted out of reach; where a run's own ratio met the goal, the miss says so.`

// writeTargets writes the targets section in markdown: the counts, then
// every miss. It writes nothing when no case has a goal.
func (r *Report) writeTargets(b *strings.Builder) error {
	rows, misses := r.targetTally()
	if len(rows) == 0 {
		return nil
	}
	b.WriteString("\n## Targets\n\n")
	if err := targetsTable(rows).WriteMarkdown(b); err != nil {
		return err
	}
	if best := r.bestOverCopy(); best > 1 {
		fmt.Fprintf(b, "\nThe fastest kernel of these runs, ours or PyTorch's, outran a copy of its case's size by %.1f%%: "+
			"a goal is out of reach only past a copy's rate and that margin.\n", 100*(best-1))
	}
	if len(misses) > 0 {
		b.WriteString("\nMisses:\n\n")
		for _, m := range misses {
			fmt.Fprintf(b, "- %s %s %s: %s\n", m.family, m.op, m.name, m.what)
		}
	}
	b.WriteString("\n" + targetsMethod + "\n")
	return nil
}
