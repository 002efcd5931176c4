package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestStatus: the status page names every family with its standing (the
// summary's counts, its targets, every miss with its figures, its failed
// cases) and links the picture; runs in CUDA graphs count no goal.
func TestStatus(t *testing.T) {
	var b bytes.Buffer
	if err := goalReport().WriteStatus(&b, "roofline.svg"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# Status: NVIDIA H200\n",
		"copy ceiling 4000 GB/s; fastest launch floor 3.40 µs.",
		"| family | cases | goals met | missed | out of reach | failed |",
		"| norm | 7 | 13/20 | 5 | 2 | 0 |",
		"| act | 4 | 2/4 | 2 | 0 | 1 |",
		"| topk | 4 | 2/3 | 1 | 0 | 0 |",
		"](roofline.svg)",
		"## norm\n\n| goal | cases | met | out of reach | missed |",
		"| median ≥ 1.00× torch.compile | 7 | 1.02× | — | — |",
		"- rmsnorm slow kernel: 92% of a same-size copy\n",
		"## act\n",
		"- median 0.91× torch.compile over 3 cases (goal 0.97×)\n",
		"Failed to measure:\n\n- silu failed: boom\n",
		"## topk\n",
		"## How the goals are counted",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
	graph := goalReport()
	graph.Env.Graph = 16
	b.Reset()
	if err := graph.WriteStatus(&b, ""); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"timed in CUDA graphs", "## norm\n\nNot counted (CUDA graphs).", "## topk\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("graph status lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "](") {
		t.Errorf("a picture linked though none was named:\n%s", b.String())
	}
}
