package bench

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
)

// Entry is one measured case of a report.
type Entry struct {
	Family, Op, Case string
	Bytes, Flops     int64
	Result           Result       // our time: the kernel, or the host path on the CPU
	SameCopyGBs      float64      // CopyAt(Bytes) in the same run, when measured
	Torch            *TorchResult // PyTorch's times, when compared
	Err              string       // why the case could not be measured
	// Goal is what the registry asks of the case; a run's JSON does not
	// record it, so a report read back from JSON has none until the caller
	// sets it (kittens report sets the registry's).
	Goal Goal
	// Samples are the times of each run, where Merge combined several runs
	// of this case; the times above are then their medians.
	Samples []Sample
}

// Sample is one run's times of a case, in µs (0: not measured).
type Sample struct {
	OursUS    float64 `json:"ours_us"`
	EagerUS   float64 `json:"eager_us,omitempty"`
	CompileUS float64 `json:"compile_us,omitempty"`
}

// samples returns the entry's per-run times: Samples, or its own times as
// one run. A failed measurement has none.
func (e Entry) samples() []Sample {
	if len(e.Samples) > 0 || e.Err != "" {
		return e.Samples
	}
	s := Sample{OursUS: e.Result.MedianUS}
	if e.Torch != nil {
		s.EagerUS, s.CompileUS = e.Torch.EagerUS, e.Torch.CompileUS
	}
	return []Sample{s}
}

// compileRange is the lowest and highest of the runs' own ratios of
// torch.compile's time over ours (0, 0 when fewer than two runs have one).
func (e Entry) compileRange() (lo, hi float64) {
	n := 0
	for _, s := range e.Samples {
		if r := ratio(s.CompileUS, s.OursUS); r > 0 {
			if n == 0 || r < lo {
				lo = r
			}
			hi = max(hi, r)
			n++
		}
	}
	if n < 2 {
		return 0, 0
	}
	return lo, hi
}

// SpeedupEager is PyTorch eager's time over ours (above 1: we are faster),
// 0 when either is unknown.
func (e Entry) SpeedupEager() float64 {
	if e.Torch == nil {
		return 0
	}
	return ratio(e.Torch.EagerUS, e.Result.MedianUS)
}

// SpeedupCompile is torch.compile's time over ours, 0 when either is unknown.
func (e Entry) SpeedupCompile() float64 {
	if e.Torch == nil {
		return 0
	}
	return ratio(e.Torch.CompileUS, e.Result.MedianUS)
}

func ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

// Report is the outcome of one benchmark run: where it ran and every case.
// It only formats; measuring is Measure's and the caller's job.
type Report struct {
	Env     Env
	Entries []Entry
}

// PctCopy is the entry's bandwidth as a percentage of the measured copy
// ceiling, 0 when either is unknown.
func (r *Report) PctCopy(e Entry) float64 { return 100 * ratio(e.Result.GBs, r.Env.CopyGBs) }

// PctSameCopy is the entry's bandwidth as a percentage of a copy that moves
// as many bytes in one launch, 0 when either is unknown.
func (e Entry) PctSameCopy() float64 { return 100 * ratio(e.Result.GBs, e.SameCopyGBs) }

// sameCopied reports whether any entry has a same-size copy measured.
func (r *Report) sameCopied() bool {
	for _, e := range r.Entries {
		if e.SameCopyGBs > 0 {
			return true
		}
	}
	return false
}

// repeated reports whether any entry combines several runs with PyTorch
// times (see Merge).
func (r *Report) repeated() bool {
	for _, e := range r.Entries {
		if lo, _ := e.compileRange(); lo > 0 {
			return true
		}
	}
	return false
}

// compared reports whether any entry has PyTorch times.
func (r *Report) compared() bool {
	for _, e := range r.Entries {
		if e.Torch != nil {
			return true
		}
	}
	return false
}

// dash stands for a number that is not known.
const dash = "—"

// num formats v with format f, or a dash when v is not positive.
func num(f string, v float64) string {
	if v <= 0 {
		return dash
	}
	return fmt.Sprintf(f, v)
}

// cut formats a ratio or a percentage, which a target is met by at 1.0× or
// 95%, cut to the given decimals rather than rounded, so that a miss never
// prints as met: 0.998 prints 0.99×, 94.98 prints 94%. (The 1e-9 absorbs
// the float error of v·10^decimals: 1.15·100 is 114.99999999999999.)
func cut(f string, decimals int, v float64) string {
	if v <= 0 {
		return dash
	}
	p := math.Pow10(decimals)
	return fmt.Sprintf(f, math.Floor(v*p+1e-9)/p)
}

// table lays the entries out in the columns both text and markdown use.
func (r *Report) table() *Table {
	if r.Env.CPUOnly() {
		t := &Table{Header: []string{"op", "case", "host µs"}, Align: "llr"}
		for _, e := range r.Entries {
			t.Add(e.Op, e.Case, r.ours(e))
		}
		return t
	}
	t := &Table{Header: []string{"op", "case", "ours µs", "GB/s", "% of copy"}}
	same := r.sameCopied()
	if same {
		t.Header = append(t.Header, "% of same-size copy")
	}
	torch, repeated := r.compared(), r.repeated()
	if torch {
		t.Header = append(t.Header, "torch eager µs", "torch.compile µs", "vs eager", "vs compile")
	}
	if repeated {
		t.Header = append(t.Header, "vs compile, each run")
	}
	t.Align = "ll" + strings.Repeat("r", len(t.Header)-2)
	for _, e := range r.Entries {
		row := []string{e.Op, e.Case, r.ours(e), num("%.0f", e.Result.GBs), cut("%.0f%%", 0, r.PctCopy(e))}
		if same {
			row = append(row, cut("%.0f%%", 0, e.PctSameCopy()))
		}
		if torch {
			eager, compile := e.torchCells()
			row = append(row, eager, compile, cut("%.2f×", 2, e.SpeedupEager()), cut("%.2f×", 2, e.SpeedupCompile()))
		}
		if repeated {
			cell := dash
			if lo, hi := e.compileRange(); lo > 0 {
				cell = cut("%.2f", 2, lo) + "–" + cut("%.2f×", 2, hi) + fmt.Sprintf(" (%d)", len(e.Samples))
			}
			row = append(row, cell)
		}
		t.Add(row...)
	}
	return t
}

// torchCells are the entry's PyTorch eager and torch.compile cells: each
// time PyTorch measured, "failed" for the one its error stopped (eager, or
// torch.compile after eager succeeded), and a dash for a time not measured.
func (e Entry) torchCells() (eager, compile string) {
	if e.Torch == nil {
		return dash, dash
	}
	eager, compile = num("%.2f", e.Torch.EagerUS), num("%.2f", e.Torch.CompileUS)
	if e.Torch.Error != "" {
		switch {
		case e.Torch.EagerUS <= 0:
			eager = "failed" // torch.compile did not run
		case e.Torch.CompileUS <= 0:
			compile = "failed"
		}
	}
	return eager, compile
}

// ours is the entry's own time cell.
func (r *Report) ours(e Entry) string {
	if e.Err != "" {
		return "failed"
	}
	return num("%.2f", e.Result.MedianUS)
}

// failures lists what went wrong, one line per failed measurement.
func (r *Report) failures() []string {
	var out []string
	for _, e := range r.Entries {
		if e.Err != "" {
			out = append(out, fmt.Sprintf("%s %s: %s", e.Op, e.Case, e.Err))
		}
		if e.Torch != nil && e.Torch.Error != "" {
			out = append(out, fmt.Sprintf("%s %s: torch: %s", e.Op, e.Case, e.Torch.Error))
		}
	}
	return out
}

// Failed reports whether any case failed, on our side or on PyTorch's (the
// table then lacks its time): what WriteText and WriteMarkdown list as
// failures.
func (r *Report) Failed() bool { return len(r.failures()) > 0 }

// WriteText writes the terminal form: the environment, the table, then
// every failure.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	b.WriteString(r.Env.String() + "\n")
	if len(r.Entries) == 0 {
		b.WriteString("no cases\n")
	} else if err := r.table().WriteText(&b); err != nil {
		return err
	}
	for _, f := range r.failures() {
		b.WriteString("FAILED " + f + "\n")
	}
	if rows, _ := r.targetTally(); len(rows) > 0 {
		b.WriteString("\ntargets:\n")
		if err := targetsTable(rows, true).WriteText(&b); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// methodGPU, methodCPU and the rest explain the numbers at the end of a
// markdown report.
const (
	methodGPU = `Ours: CUDA events around every launch; a spin kernel queued first so the host runs ahead of the GPU
and the events measure GPU time, not launch latency; enough independent input sets, rotated, to touch three
times the L2 (at most 16 sets: a case of less than about 3 MB stays in L2, ours and PyTorch's alike); a warm-up round; the median of the timed launches (200 unless -runs says otherwise).
Every median here, of launches or of runs, ours or PyTorch's, is the middle value, of an even count the upper
of the middle two. GB/s counts each input read once and each output written once; "% of copy" is that over
the copy ceiling measured in the same run (the median of 20 device-to-device copies of 1 GiB, counting bytes
read plus bytes written), so an op that mostly reads can pass 100%. "% of same-size copy" compares with one device-to-device copy that moves as many bytes as the case,
timed the same way (cases of 16 MB and more; each half of the copy rounded up to 64 KiB, since the driver's
copy runs 4-17% slower on sizes off a 4 KiB grid): a single launch of that size pays its ramp-up and drain
once, where the 1 GiB copy amortizes them. PyTorch: the same case built by the family's snippet, eagerly and after
` + "`torch.compile(dynamic=False)`" + `, timed in the same run the same way as ours (as many input sets rotated, each set's outputs kept
until its next call so that outputs rotate as ours do, launches back to back behind a spin kernel, an event
between each, the median; ` + "`triton.testing.do_bench`" + `'s L2 flush adds 0.6-1.1 µs to a small kernel, ours and
PyTorch's alike; an output reused at once, still in the L2, takes up to 10% off a small one). "vs eager" and "vs compile" are PyTorch's time over ours:
above 1 we are faster. Percentages and ratios are cut to the digits shown, not rounded, so that none below
95% or 1.00× prints as reaching it (0.998× prints 0.99×, 94.98% prints 94%).
The machines are shared and vary from run to run; compare numbers of one run (or one merged set of runs) only.`
	methodStaleL2 = `Our kernels read launches larger than L2 under an evict-last policy, and a line keeps that
priority after the kernel ends: a case that follows such a launch finds its inputs evicted ahead of those
lines (on an H100 up to 7% slower). torch.compile's reductions read under the same policy and leave such
lines too.`
	methodL2Reset       = ` Before each case, ours and PyTorch's alike, L2's persisting lines are reset to normal priority (` + "`cuCtxResetPersistingL2Cache`" + `).`
	methodNoL2Reset     = ` These runs did not reset L2's persisting lines between cases.`
	methodDefaultStream = ` Ours and PyTorch's launches, and the copies, are timed on the legacy default stream, PyTorch's current stream and our ops' default.`
	methodOwnStream     = ` These runs timed ours on a stream of their own and PyTorch's on the legacy default stream, its current stream.`
	methodStreams       = ` How long a small kernel takes alone depends on the process that launches it: its CUDA context draws one of two speeds for every launch, about 0.2 µs apart on an H200, and keeps it.`
	methodFloor         = ` So each side times an empty kernel as it times the cases, before its first case and after its last (a process's floor may still rise early in its life): the "launch floor" above. A small case moves with its process's floor; where the two sides' floors differ, so does the ratio of their small cases.`
	methodGraph         = ` Every case, ours and PyTorch's, ran inside a CUDA graph: at least %d launches, a whole number of rotations over the input sets, were captured into one graph, each timed run replayed it, and the time per launch is the replay's divided by their number. The GPU then starts each kernel as the one before it ends, as in a serving engine's decode graph, so small kernels take less than one timed alone.`
	methodDependent     = ` Our launches in those graphs were programmatic dependent launches: each kernel may start while the one before it runs, and waits for it on the GPU before it touches memory. torch.compile's kernels were compiled with Inductor's ` + "`triton.enable_pdl`" + `, which launches them the same way; eager PyTorch's kernels have no such option.`
	methodRepeated      = `Cases measured in several runs (` + "`kittens report`" + ` merging runs that repeat them) show the median
of the runs for every time, ours and PyTorch's alike, and the percentages and ratios are of those medians;
"vs compile, each run" is the range of each run's own ratio, with the number of runs. Each run starts
PyTorch in a process of its own, whose torch.compile picks its kernels' configs afresh (Inductor's
autotuner, which does not save its picks here); how fast a small kernel is depends on that pick, so one run
alone can land several percent either way.`
	methodCPU = `No GPU was used, so these are the CPU path's wall times: each op's parity cases run on host tensors
(the float64 reference), the median of a few runs (of an even count, the upper of the middle two), each
drawing fresh inputs. They show the host path works; they say nothing about the kernels' speed.`
)

// WriteMarkdown writes the markdown report (BENCH.md): a heading, the environment, the table,
// failures and a note on the method.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Benchmarks\n\n")
	if err := r.Env.Table().WriteMarkdown(&b); err != nil {
		return err
	}
	b.WriteString("\n")
	if err := r.table().WriteMarkdown(&b); err != nil {
		return err
	}
	if fs := r.failures(); len(fs) > 0 {
		b.WriteString("\nFailures:\n\n")
		for _, f := range fs {
			b.WriteString("- " + f + "\n")
		}
	}
	if err := r.writeTargets(&b); err != nil {
		return err
	}
	b.WriteString("\n## Method\n\n")
	if r.Env.CPUOnly() {
		b.WriteString(methodCPU)
	} else {
		b.WriteString(methodGPU)
		b.WriteString("\n" + methodStaleL2)
		if r.Env.L2Reset {
			b.WriteString(methodL2Reset)
		} else {
			b.WriteString(methodNoL2Reset)
		}
		if r.Env.DefaultStream {
			b.WriteString(methodDefaultStream)
		} else {
			b.WriteString(methodOwnStream)
		}
		b.WriteString(methodStreams)
		if len(r.Env.Floors) > 0 {
			b.WriteString(methodFloor)
		}
		if r.Env.Graph > 0 {
			b.WriteString(fmt.Sprintf(methodGraph, r.Env.Graph))
			if r.Env.Dependent {
				b.WriteString(methodDependent)
			}
		}
	}
	if r.repeated() {
		b.WriteString("\n\n" + methodRepeated)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// jsonEntry is an Entry with every derived number spelled out.
type jsonEntry struct {
	Family         string   `json:"family"`
	Op             string   `json:"op"`
	Case           string   `json:"case"`
	Bytes          int64    `json:"bytes"`
	Flops          int64    `json:"flops"`
	MedianUS       float64  `json:"median_us"`
	MinUS          float64  `json:"min_us"`
	GBs            float64  `json:"gbs"`
	TFLOPs         float64  `json:"tflops"`
	PctCopy        float64  `json:"pct_copy"`
	SameCopyGBs    float64  `json:"same_copy_gbs,omitempty"`
	Sets           int      `json:"sets"`
	Runs           int      `json:"runs"`
	TorchEagerUS   float64  `json:"torch_eager_us,omitempty"`
	TorchCompileUS float64  `json:"torch_compile_us,omitempty"`
	TorchError     string   `json:"torch_error,omitempty"`
	SpeedupEager   float64  `json:"speedup_eager,omitempty"`
	SpeedupCompile float64  `json:"speedup_compile,omitempty"`
	Error          string   `json:"error,omitempty"`
	Samples        []Sample `json:"samples,omitempty"`
}

// WriteJSON writes the report as one indented JSON object: the environment
// and every entry with every number, derived ones included.
func (r *Report) WriteJSON(w io.Writer) error {
	out := struct {
		Env     Env         `json:"env"`
		CPUOnly bool        `json:"cpu_only"`
		Entries []jsonEntry `json:"entries"`
	}{Env: r.Env, CPUOnly: r.Env.CPUOnly(), Entries: make([]jsonEntry, len(r.Entries))}
	for i, e := range r.Entries {
		j := jsonEntry{Family: e.Family, Op: e.Op, Case: e.Case, Bytes: e.Bytes, Flops: e.Flops,
			MedianUS: e.Result.MedianUS, MinUS: e.Result.MinUS, GBs: e.Result.GBs, TFLOPs: e.Result.TFLOPs,
			PctCopy: r.PctCopy(e), SameCopyGBs: e.SameCopyGBs, Sets: e.Result.Sets, Runs: e.Result.Runs,
			SpeedupEager: e.SpeedupEager(), SpeedupCompile: e.SpeedupCompile(), Error: e.Err, Samples: e.Samples}
		if e.Torch != nil {
			j.TorchEagerUS, j.TorchCompileUS, j.TorchError = e.Torch.EagerUS, e.Torch.CompileUS, e.Torch.Error
		}
		out.Entries[i] = j
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// ReadJSON reads a report WriteJSON wrote. GB/s and TFLOP/s are read as
// written; the speedups and % of copy, which WriteJSON derives, are not read
// but derived again from the times and the copy ceiling when the report is
// written.
// The input must be one such object: one without "env" and "entries" is
// not a report, and a second value after it (two reports joined into one
// file) is refused rather than dropped. A malformed input's error gives
// the line and column where reading stopped.
func ReadJSON(r io.Reader) (*Report, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("bench: reading a JSON report: %w", err)
	}
	var in struct {
		Env     *Env         `json:"env"`
		Entries *[]jsonEntry `json:"entries"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("bench: reading a JSON report: %s", jsonError(data, err))
	}
	if in.Env == nil || in.Entries == nil {
		return nil, errors.New(`bench: reading a JSON report: no "env" and "entries": not a report of kittens bench -json`)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("bench: reading a JSON report: more after the report's object (one report a file)")
	}
	rep := &Report{Env: *in.Env, Entries: make([]Entry, len(*in.Entries))}
	for i, j := range *in.Entries {
		e := Entry{Family: j.Family, Op: j.Op, Case: j.Case, Bytes: j.Bytes, Flops: j.Flops, Err: j.Error,
			SameCopyGBs: j.SameCopyGBs, Samples: j.Samples,
			Result: Result{MedianUS: j.MedianUS, MinUS: j.MinUS, GBs: j.GBs, TFLOPs: j.TFLOPs, Sets: j.Sets, Runs: j.Runs}}
		if j.TorchEagerUS > 0 || j.TorchCompileUS > 0 || j.TorchError != "" {
			e.Torch = &TorchResult{EagerUS: j.TorchEagerUS, CompileUS: j.TorchCompileUS, Error: j.TorchError}
		}
		rep.Entries[i] = e
	}
	return rep, nil
}

// jsonError says where and why decoding data stopped, in the terms of the
// file rather than of Go's types.
func jsonError(data []byte, err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return at(data, syntax.Offset) + syntax.Error()
	case errors.As(err, &typ):
		want := map[reflect.Kind]string{reflect.String: "a string", reflect.Bool: "true or false", reflect.Slice: "an array",
			reflect.Struct: "an object", reflect.Map: "an object", reflect.Pointer: "an object"}[typ.Type.Kind()]
		if want == "" {
			want = "a number"
			if typ.Type.Kind() != reflect.Float64 {
				want = "a whole number"
			}
		}
		what := "the report"
		if typ.Field != "" {
			what = fmt.Sprintf("%q", typ.Field)
		}
		return at(data, typ.Offset) + fmt.Sprintf("%s is a JSON %s, want %s", what, typ.Value, want)
	case errors.Is(err, io.EOF):
		return "the file is empty"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends before the report does (a truncated file?)"
	}
	return err.Error()
}

// at is "line L, column C: " of the last byte read when decoding stopped
// after off bytes of data.
func at(data []byte, off int64) string {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n') - 1
	return fmt.Sprintf("line %d, column %d: ", line, col)
}

// Merge joins reports of runs on the same device into one: runs of
// different ops (a long benchmark split to fit a time limit), and runs that
// repeat a case, which become one entry whose times are the medians of the
// runs' (see mergeEntries). The copy ceiling is the highest measured, so no
// case's percentage of it is flattered by a slow run; the date is the last
// run's. Entries are listed by family and op, as a run lists them (the
// registry's order), whatever the order of the runs; an op's cases keep
// the order in which the runs first give them.
func Merge(reps ...*Report) (*Report, error) {
	if len(reps) == 0 {
		return nil, fmt.Errorf("bench: no reports to merge")
	}
	out := &Report{Env: reps[0].Env}
	out.Env.Floors = nil // each run's, appended below
	type key struct{ op, name string }
	groups := map[key][]Entry{}
	var order []key
	for _, r := range reps {
		if r.Env.Device != out.Env.Device || r.Env.Driver != out.Env.Driver {
			return nil, fmt.Errorf("bench: cannot merge runs on %q (driver %s) and %q (driver %s)",
				out.Env.Device, out.Env.Driver, r.Env.Device, r.Env.Driver)
		}
		if r.Env.DefaultStream != out.Env.DefaultStream {
			return nil, fmt.Errorf("bench: cannot merge runs that timed ours on the legacy default stream with runs that timed them on a stream of their own")
		}
		if r.Env.Graph != out.Env.Graph || r.Env.Dependent != out.Env.Dependent {
			return nil, fmt.Errorf("bench: cannot merge runs timed in CUDA graphs of %d and of %d launches (0: none), dependent launches %v and %v",
				out.Env.Graph, r.Env.Graph, out.Env.Dependent, r.Env.Dependent)
		}
		if r.Env.L2EvictLast != out.Env.L2EvictLast {
			return nil, fmt.Errorf("bench: cannot merge runs with L2 evict-last reads on and off")
		}
		if r.Env.CopyGBs > out.Env.CopyGBs {
			out.Env.CopyGBs = r.Env.CopyGBs
		}
		if r.Env.Date.After(out.Env.Date) {
			out.Env.Date = r.Env.Date
		}
		out.Env.L2Reset = out.Env.L2Reset && r.Env.L2Reset
		out.Env.Floors = append(out.Env.Floors, r.Env.Floors...)
		for _, e := range r.Entries {
			k := key{e.Op, e.Case}
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], e)
		}
	}
	for _, k := range order {
		out.Entries = append(out.Entries, mergeEntries(groups[k]))
	}
	slices.SortStableFunc(out.Entries, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(a.Family, b.Family), cmp.Compare(a.Op, b.Op))
	})
	return out, nil
}

// mergeEntries combines the runs of one case. One run stays as it is. Of
// several, the runs that measured it count: our time, PyTorch's eager and
// compiled times and the same-size copy are each the median of the runs
// that have them (see median), the fastest launch the fastest of all,
// bandwidth and FLOP rate follow the median, and Samples keeps every run's
// times. A case no run measured keeps the first run's error; so does
// PyTorch's side where no run has its eager or its torch.compile time (the
// first PyTorch error of the runs).
func mergeEntries(es []Entry) Entry {
	if len(es) == 1 {
		return es[0]
	}
	m := es[0]
	m.Err, m.Samples, m.Torch = "", nil, nil
	var copies []float64
	var torchErr string
	for _, e := range es {
		if e.Torch != nil && e.Torch.Error != "" && torchErr == "" {
			torchErr = e.Torch.Error
		}
		if e.Err != "" {
			continue
		}
		if m.Samples == nil || e.Result.MinUS < m.Result.MinUS {
			m.Result.MinUS = e.Result.MinUS
		}
		m.Samples = append(m.Samples, e.samples()...)
		if e.SameCopyGBs > 0 {
			copies = append(copies, e.SameCopyGBs)
		}
	}
	if m.Samples == nil {
		m.Err = es[0].Err
		return m
	}
	pick := func(f func(Sample) float64) float64 {
		var v []float64
		for _, s := range m.Samples {
			if x := f(s); x > 0 {
				v = append(v, x)
			}
		}
		return median(v)
	}
	m.Result.MedianUS = pick(func(s Sample) float64 { return s.OursUS })
	m.Result.GBs = float64(m.Bytes) / (m.Result.MedianUS * 1e3)
	m.Result.TFLOPs = float64(m.Flops) / (m.Result.MedianUS * 1e6)
	m.SameCopyGBs = median(copies)
	eager, compile := pick(func(s Sample) float64 { return s.EagerUS }), pick(func(s Sample) float64 { return s.CompileUS })
	if eager > 0 || compile > 0 || torchErr != "" {
		m.Torch = &TorchResult{EagerUS: eager, CompileUS: compile}
		if eager == 0 || compile == 0 {
			m.Torch.Error = torchErr
		}
	}
	return m
}
