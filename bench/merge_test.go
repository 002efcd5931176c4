package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// roundTrip is r written as JSON and read back.
func roundTrip(t *testing.T, r *Report) *Report {
	t.Helper()
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// refusesToMerge checks that run, timed another way than base, does not
// merge with it, and that run's markdown says each of wants.
func refusesToMerge(t *testing.T, base, run *Report, what string, wants ...string) {
	t.Helper()
	if _, err := Merge(base, run); err == nil {
		t.Fatalf("merged %s", what)
	}
	var md bytes.Buffer
	if err := run.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range wants {
		if !strings.Contains(md.String(), want) {
			t.Fatalf("markdown of %s lacks %q:\n%s", what, want, md.String())
		}
	}
}

func TestJSONRoundTripAndMerge(t *testing.T) {
	day := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	a := &Report{Env: Env{Device: "NVIDIA H200", Driver: "13.0", NVRTC: "13.0", Date: day, CopyGBs: 4250},
		Entries: []Entry{{Family: "norm", Op: "rmsnorm", Case: "4096x4096 bf16", Bytes: 67117056,
			Result: Result{MedianUS: 20, GBs: 3355.85, Runs: 200, Sets: 3}, Torch: &TorchResult{EagerUS: 26, CompileUS: 39}}}}
	b := &Report{Env: Env{Device: "NVIDIA H200", Driver: "13.0", NVRTC: "13.0", Date: day.Add(time.Hour), CopyGBs: 4200},
		Entries: []Entry{{Family: "act", Op: "silu", Case: "x", Err: "boom"}}}
	m, err := Merge(roundTrip(t, a), roundTrip(t, b))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Entries) != 2 || m.Env.CopyGBs != 4250 || !m.Env.Date.Equal(day.Add(time.Hour)) {
		t.Fatalf("merged %+v", m.Env)
	}
	// act sorts before norm, whatever the order of the runs.
	e := m.Entries[1]
	if e.Result.MedianUS != 20 || e.Torch == nil || e.SpeedupCompile() != 39.0/20 || m.Entries[0].Err != "boom" {
		t.Fatalf("entries lost numbers or order: %+v %+v", m.Entries[0], e)
	}
	var md bytes.Buffer
	if err := m.WriteMarkdown(&md); err != nil || !strings.Contains(md.String(), "rmsnorm") {
		t.Fatalf("markdown: %v\n%s", err, md.String())
	}
	other := &Report{Env: Env{Device: "NVIDIA H100 80GB HBM3", Driver: "13.0"}}
	if _, err := Merge(a, other); err == nil {
		t.Fatal("merged runs from different devices")
	}
	inGraphs := roundTrip(t, &Report{Env: Env{Device: "NVIDIA H200", Driver: "13.0", Graph: 16}})
	refusesToMerge(t, a, inGraphs, "a run in CUDA graphs with one outside",
		"in CUDA graphs of ≥ 16 launches", "ran inside a CUDA graph: at least 16 launches")
	dependent := roundTrip(t, &Report{Env: Env{Device: "NVIDIA H200", Driver: "13.0", Graph: 16, Dependent: true}})
	refusesToMerge(t, inGraphs, dependent, "a run of dependent launches with one without",
		"ours as dependent launches", "triton.enable_pdl")
	if _, err := ReadJSON(strings.NewReader("{")); err == nil {
		t.Fatal("read a broken report")
	}
}

// TestMergeRepeatedRuns merges three runs of one case (one of them failed
// on our side), then a fourth into that: every time is the
// median of the runs that have it, the table gives each run's ratio, and
// the samples survive a JSON round trip.
func TestMergeRepeatedRuns(t *testing.T) {
	env := Env{Device: "NVIDIA H200", Driver: "13.0", NVRTC: "13.0", CopyGBs: 4250, L2Reset: true, DefaultStream: true}
	run := func(ours, minUS, eager, compile, same float64, err string) *Report {
		e := Entry{Family: "norm", Op: "rmsnorm", Case: "1x2048 bf16", Bytes: 8192, SameCopyGBs: same, Err: err,
			Result: Result{MedianUS: ours, MinUS: minUS, GBs: 8192 / (ours * 1e3), Runs: 200, Sets: 16}}
		if eager > 0 {
			e.Torch = &TorchResult{EagerUS: eager, CompileUS: compile}
		}
		return &Report{Env: env, Entries: []Entry{e}}
	}
	reps := []*Report{run(4.3, 4.1, 8, 4.0, 0, ""), run(4.2, 4.0, 9, 4.4, 0, ""), run(0, 0, 7, 4.1, 0, "boom"),
		run(4.5, 4.2, 10, 4.6, 0, "")}
	reps[0].Entries = append(reps[0].Entries, Entry{Family: "topk", Op: "topk", Case: "once", Result: Result{MedianUS: 7}})
	m, err := Merge(reps[0], reps[1], reps[2])
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Entries) != 2 {
		t.Fatalf("want one entry a case, got %d", len(m.Entries))
	}
	e := m.Entries[0]
	// Runs 1 and 2 measured ours: a median of two is the upper one, as a
	// median of launches is on both sides.
	if len(e.Samples) != 2 || e.Result.MedianUS != 4.3 || e.Result.MinUS != 4.0 || e.Err != "" {
		t.Fatalf("ours: %+v", e)
	}
	if e.Torch == nil || e.Torch.EagerUS != 9 || e.Torch.CompileUS != 4.4 {
		t.Fatalf("torch: %+v", e.Torch)
	}
	if lo, hi := e.compileRange(); lo != 4.0/4.3 || hi != 4.4/4.2 {
		t.Fatalf("compile range %v-%v", lo, hi)
	}
	if m.Entries[1].Samples != nil || m.Entries[1].Result.MedianUS != 7 {
		t.Fatalf("a case of one run changed: %+v", m.Entries[1])
	}
	// Merging the merged report with a third measured run: three samples.
	m3, err := Merge(roundTrip(t, m), reps[3])
	if err != nil {
		t.Fatal(err)
	}
	e = m3.Entries[0]
	if len(e.Samples) != 3 || e.Result.MedianUS != 4.3 || e.Torch.CompileUS != 4.4 || e.Torch.EagerUS != 9 {
		t.Fatalf("three runs: %+v %+v", e, e.Torch)
	}
	var md bytes.Buffer
	if err := m3.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"vs compile, each run", "0.93–1.04× (3)", "median", "lines are reset to normal priority",
		"timed on the legacy default stream"} {
		if !strings.Contains(md.String(), want) {
			t.Fatalf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	// With a run from before the L2 reset, the method says it was not reset.
	old := run(4.4, 4.2, 9, 4.3, 0, "")
	old.Env.L2Reset = false
	mixed, err := Merge(roundTrip(t, m3), old)
	if err != nil {
		t.Fatal(err)
	}
	md.Reset()
	if err := mixed.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "did not reset L2's persisting lines") || strings.Contains(md.String(), "are reset to normal") {
		t.Fatalf("mixed runs: %s", md.String())
	}
	// A run that timed ours on a stream of its own does not merge with
	// these, and its method says so.
	own := run(4.4, 4.2, 9, 4.3, 0, "")
	own.Env.DefaultStream = false
	refusesToMerge(t, roundTrip(t, m3), roundTrip(t, own), "runs timed on different streams",
		"timed ours on a stream of their own")
	// A case that failed in every run keeps the error.
	f, err := Merge(run(0, 0, 0, 0, 0, "boom"), run(0, 0, 0, 0, 0, "bang"))
	if err != nil || f.Entries[0].Err != "boom" {
		t.Fatalf("failed runs: %v %+v", err, f.Entries[0])
	}
	// A torch.compile that failed in every run keeps its error: the report
	// lists it, and the compile cell says so.
	cf := func(eager float64) *Report {
		r := run(4.2, 4.0, eager, 0, 0, "")
		r.Entries[0].Torch.Error = "BackendCompilerFailed: bang"
		return r
	}
	f, err = Merge(cf(8), cf(9), cf(10))
	if err != nil {
		t.Fatal(err)
	}
	if e := f.Entries[0]; e.Torch == nil || e.Torch.EagerUS != 9 || e.Torch.Error != "BackendCompilerFailed: bang" || !f.Failed() {
		t.Fatalf("compile failures: %+v %+v", e, e.Torch)
	}
	var text bytes.Buffer
	if err := f.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"9.00 failed 2.14× —", "FAILED rmsnorm 1x2048 bf16: torch: BackendCompilerFailed: bang"} {
		if !strings.Contains(strings.Join(strings.Fields(text.String()), " "), want) {
			t.Fatalf("text lacks %q:\n%s", want, text.String())
		}
	}
	// One that failed in one run and was timed in another has its time,
	// as our own side has.
	f, err = Merge(cf(8), run(4.2, 4.0, 9, 4.4, 0, ""))
	if err != nil {
		t.Fatal(err)
	}
	if e := f.Entries[0]; e.Torch == nil || e.Torch.CompileUS != 4.4 || e.Torch.Error != "" || f.Failed() {
		t.Fatalf("a compile failure in one run of two: %+v %+v", e, e.Torch)
	}
}
