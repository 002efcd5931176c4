package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// fixedReport is a GPU run with one case compared with PyTorch, one whose
// PyTorch side failed, one where only torch.compile failed and one that
// failed to measure.
func fixedReport() *Report {
	return &Report{
		Env: Env{Device: "NVIDIA H200", Arch: "sm_90a", Driver: "13.0", NVRTC: "13.0",
			Date: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC), CopyGBs: 4000},
		Entries: []Entry{
			{Family: "norm", Op: "rmsnorm", Case: "4096x4096 bf16", Bytes: 64 << 20,
				Result: Result{MedianUS: 20, MinUS: 19.5, GBs: 3355.44, Sets: 8, Runs: 200}, SameCopyGBs: 3600,
				Torch: &TorchResult{EagerUS: 26.78, CompileUS: 39.62}},
			{Family: "norm", Op: "rmsnorm", Case: "128x128 bf16", Bytes: 65792,
				Result: Result{MedianUS: 4, MinUS: 3.9, GBs: 16.448, Sets: 16, Runs: 200},
				Torch:  &TorchResult{Error: "RuntimeError: boom"}},
			{Family: "norm", Op: "rmsnorm", Case: "64x128 bf16", Bytes: 32896,
				Result: Result{MedianUS: 3, MinUS: 2.9, GBs: 10.965, Sets: 16, Runs: 200},
				Torch:  &TorchResult{EagerUS: 9, Error: "BackendCompilerFailed: bang"}},
			{Family: "act", Op: "silu_and_mul", Case: "4096x256 bf16", Err: "jit: compile failed"},
		},
	}
}

// cpuReport is a run on the host path.
func cpuReport() *Report {
	return &Report{
		Env:     Env{Date: time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)},
		Entries: []Entry{{Family: "norm", Op: "rmsnorm", Case: "odd rows", Result: Result{MedianUS: 1234.5, Runs: 3}}},
	}
}

// TestCut: ratios and percentages are cut, not rounded, to the digits
// shown, so that a miss never prints as met.
func TestCut(t *testing.T) {
	for _, c := range []struct {
		f        string
		decimals int
		v        float64
		want     string
	}{
		{"%.2f×", 2, 0.998, "0.99×"}, {"%.2f×", 2, 0.9999999, "0.99×"}, {"%.2f×", 2, 1, "1.00×"},
		{"%.2f×", 2, 1.15, "1.15×"}, {"%.2f×", 2, 39.62 / 20, "1.98×"}, {"%.0f%%", 0, 94.98, "94%"},
		{"%.0f%%", 0, 95, "95%"}, {"%.0f%%", 0, 0.27, "0%"}, {"%.0f%%", 0, 0, dash}, {"%.2f×", 2, -1, dash},
	} {
		if got := cut(c.f, c.decimals, c.v); got != c.want {
			t.Errorf("cut(%q, %d, %v) = %q, want %q", c.f, c.decimals, c.v, got, c.want)
		}
	}
}

func TestReportText(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    *Report
		want string
	}{
		{"gpu", fixedReport(), `NVIDIA H200 (sm_90a) · driver CUDA 13.0 · NVRTC 13.0 · 2026-11-21 · copy 4000 GB/s
op            case            ours µs  GB/s  % of copy  % of same-size copy  torch eager µs  torch.compile µs  vs eager  vs compile
rmsnorm       4096x4096 bf16    20.00  3355        83%                  93%           26.78             39.62     1.33×       1.98×
rmsnorm       128x128 bf16       4.00    16         0%                    —          failed                 —         —           —
rmsnorm       64x128 bf16        3.00    11         0%                    —            9.00            failed     3.00×           —
silu_and_mul  4096x256 bf16    failed     —          —                    —               —                 —         —           —
FAILED rmsnorm 128x128 bf16: torch: RuntimeError: boom
FAILED rmsnorm 64x128 bf16: torch: BackendCompilerFailed: bang
FAILED silu_and_mul 4096x256 bf16: jit: compile failed
`},
		{"cpu", cpuReport(), `CPU path only (no GPU used) · no driver · no NVRTC · 2026-11-21
op       case      host µs
rmsnorm  odd rows  1234.50
`},
		{"empty", &Report{Env: cpuReport().Env}, `CPU path only (no GPU used) · no driver · no NVRTC · 2026-11-21
no cases
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.r.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestReportFailed checks that a failure on either side fails the report.
func TestReportFailed(t *testing.T) {
	torchOnly := fixedReport()
	torchOnly.Entries = torchOnly.Entries[2:3] // ours measured, torch.compile failed
	for _, tc := range []struct {
		name string
		r    *Report
		want bool
	}{
		{"ours and torch failed", fixedReport(), true},
		{"torch.compile failed", torchOnly, true},
		{"all measured", &Report{Env: fixedReport().Env, Entries: fixedReport().Entries[:1]}, false},
		{"cpu", cpuReport(), false},
	} {
		if got := tc.r.Failed(); got != tc.want {
			t.Errorf("%s: Failed() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestReportMarkdown(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    *Report
		want []string
	}{
		{"gpu", fixedReport(), []string{
			"# Benchmarks\n",
			"| device | NVIDIA H200 (sm_90a) |\n",
			"| driver | CUDA 13.0 |\n",
			"| NVRTC | 13.0 |\n",
			"| date | 2026-11-21 |\n",
			"| copy bandwidth | 4000 GB/s (device-to-device, bytes read + written) |\n",
			"| op | case | ours µs | GB/s | % of copy | % of same-size copy | torch eager µs | torch.compile µs | vs eager | vs compile |\n",
			"|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
			"| rmsnorm | 4096x4096 bf16 | 20.00 | 3355 | 83% | 93% | 26.78 | 39.62 | 1.33× | 1.98× |\n",
			"| rmsnorm | 64x128 bf16 | 3.00 | 11 | 0% | — | 9.00 | failed | 3.00× | — |\n",
			"- rmsnorm 64x128 bf16: torch: BackendCompilerFailed: bang\n",
			"- silu_and_mul 4096x256 bf16: jit: compile failed\n",
			"## Method\n",
			"torch.compile(dynamic=False)",
		}},
		{"cpu", cpuReport(), []string{
			"| device | CPU path only (no GPU used) |\n",
			"| driver | none |\n",
			"| op | case | host µs |\n",
			"| rmsnorm | odd rows | 1234.50 |\n",
			"No GPU was used",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.r.WriteMarkdown(&b); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("markdown lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}

func TestReportJSON(t *testing.T) {
	var b bytes.Buffer
	if err := fixedReport().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Env     Env              `json:"env"`
		CPUOnly bool             `json:"cpu_only"`
		Entries []map[string]any `json:"entries"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if got.CPUOnly || got.Env.Device != "NVIDIA H200" || got.Env.CopyGBs != 4000 || len(got.Entries) != 4 {
		t.Fatalf("env or entries wrong: %+v", got)
	}
	for _, tc := range []struct {
		entry int
		key   string
		want  any
	}{
		{0, "op", "rmsnorm"},
		{0, "bytes", float64(64 << 20)},
		{0, "median_us", 20.0},
		{0, "min_us", 19.5},
		{0, "gbs", 3355.44},
		{0, "pct_copy", 100 * 3355.44 / 4000},
		{0, "same_copy_gbs", 3600.0},
		{0, "sets", 8.0},
		{0, "torch_eager_us", 26.78},
		{0, "torch_compile_us", 39.62},
		{0, "speedup_eager", 26.78 / 20},
		{0, "speedup_compile", 39.62 / 20},
		{1, "torch_error", "RuntimeError: boom"},
		{1, "speedup_eager", nil},
		{2, "torch_eager_us", 9.0},
		{2, "torch_error", "BackendCompilerFailed: bang"},
		{2, "speedup_eager", 3.0},
		{3, "error", "jit: compile failed"},
	} {
		v := got.Entries[tc.entry][tc.key]
		if f, ok := v.(float64); ok {
			if w, ok := tc.want.(float64); ok && math.Abs(f-w) <= 1e-12*math.Abs(w) {
				continue
			}
		}
		if v != tc.want {
			t.Errorf("entry %d %s = %v, want %v", tc.entry, tc.key, v, tc.want)
		}
	}
}

func TestTable(t *testing.T) {
	tb := &Table{Header: []string{"name", "µs", "note"}, Align: "lrl"}
	tb.Add("a|b", "1.5", "x")
	tb.Add("long name", "12345.00")
	for _, tc := range []struct {
		name  string
		write func(*bytes.Buffer) error
		want  string
	}{
		{"text", func(b *bytes.Buffer) error { return tb.WriteText(b) }, "" +
			"name             µs  note\n" +
			"a|b             1.5  x\n" +
			"long name  12345.00\n"},
		{"markdown", func(b *bytes.Buffer) error { return tb.WriteMarkdown(b) }, "" +
			"| name | µs | note |\n" +
			"|---|---:|---|\n" +
			"| a\\|b | 1.5 | x |\n" +
			"| long name | 12345.00 |  |\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.write(&b); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestCUDAVersion(t *testing.T) {
	for _, tc := range []struct {
		v    int
		want string
	}{{13000, "13.0"}, {12080, "12.8"}, {12020, "12.2"}, {11040, "11.4"}} {
		if got := CUDAVersion(tc.v); got != tc.want {
			t.Errorf("CUDAVersion(%d) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// TestLaunchFloors: a run's launch floors, ours and PyTorch's, head its
// text and markdown with the method's note, survive JSON, and merged runs
// list each run's in run order.
func TestLaunchFloors(t *testing.T) {
	run := func(ours, torch FloorSpan) *Report {
		r := fixedReport()
		r.Env.Floors = []LaunchFloor{{Ours: ours, Torch: torch}}
		return r
	}
	one := roundTrip(t, run(FloorSpan{3.42, 3.44}, FloorSpan{3.61, 3.40}))
	var text, md bytes.Buffer
	if err := one.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := one.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if want := " · launch floor ours 3.42 → 3.44 µs, PyTorch's 3.61 → 3.40 µs\n"; !strings.Contains(text.String(), want) {
		t.Errorf("text lacks %q:\n%s", want, text.String())
	}
	for _, want := range []string{
		"| launch floor | ours 3.42 → 3.44 µs, PyTorch's 3.61 → 3.40 µs (an empty kernel timed as the cases, before the first and after the last) |",
		"each side times an empty kernel as it times the cases"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	m, err := Merge(one, run(FloorSpan{3.58, 3.6}, FloorSpan{}), run(FloorSpan{3.45, 0}, FloorSpan{3.5, 3.52}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Env.floorLine(), "ours 3.42 → 3.44, 3.58 → 3.60, 3.45 → — µs, PyTorch's 3.61 → 3.40, —, 3.50 → 3.52 µs"; got != want {
		t.Errorf("merged floors %q, want %q", got, want)
	}
	if got, want := run(FloorSpan{3.5, 3.51}, FloorSpan{}).Env.floorLine(), "ours 3.50 → 3.51 µs"; got != want {
		t.Errorf("without PyTorch: %q, want %q", got, want)
	}
	md.Reset()
	if err := fixedReport().WriteMarkdown(&md); err != nil || strings.Contains(md.String(), "launch floor") {
		t.Errorf("a run without floors speaks of them (%v):\n%s", err, md.String())
	}
}
