package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestJSONRoundTripAndMerge(t *testing.T) {
	day := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	a := &Report{Env: Env{Device: "NVIDIA H200", Driver: "13.0", NVRTC: "13.0", Date: day, CopyGBs: 4250},
		Entries: []Entry{{Family: "norm", Op: "rmsnorm", Case: "4096x4096 bf16", Bytes: 67117056,
			Result: Result{MedianUS: 20, GBs: 3355.85, Runs: 200, Sets: 3}, Torch: &TorchResult{EagerUS: 26, CompileUS: 39}}}}
	b := &Report{Env: Env{Device: "NVIDIA H200", Driver: "13.0", NVRTC: "13.0", Date: day.Add(time.Hour), CopyGBs: 4200},
		Entries: []Entry{{Family: "act", Op: "silu", Case: "x", Err: "boom"}}}
	var reps []*Report
	for _, r := range []*Report{a, b} {
		var buf bytes.Buffer
		if err := r.WriteJSON(&buf); err != nil {
			t.Fatal(err)
		}
		back, err := ReadJSON(&buf)
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, back)
	}
	m, err := Merge(reps...)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Entries) != 2 || m.Env.CopyGBs != 4200 || !m.Env.Date.Equal(day.Add(time.Hour)) {
		t.Fatalf("merged %+v", m.Env)
	}
	e := m.Entries[0]
	if e.Result.MedianUS != 20 || e.Torch == nil || e.SpeedupCompile() != 39.0/20 || m.Entries[1].Err != "boom" {
		t.Fatalf("entries lost numbers: %+v %+v", e, m.Entries[1])
	}
	var md bytes.Buffer
	if err := m.WriteMarkdown(&md); err != nil || !strings.Contains(md.String(), "rmsnorm") {
		t.Fatalf("markdown: %v\n%s", err, md.String())
	}
	other := &Report{Env: Env{Device: "NVIDIA H100 80GB HBM3", Driver: "13.0"}}
	if _, err := Merge(a, other); err == nil {
		t.Fatal("merged runs from different devices")
	}
	if _, err := ReadJSON(strings.NewReader("{")); err == nil {
		t.Fatal("read a broken report")
	}
}
