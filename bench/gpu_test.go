package bench_test

import (
	"strings"
	"testing"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/registry"
)

// TestCopyBandwidth checks that the copy ceiling is measured and plausible
// for any recent GPU (tens of GB/s to a few TB/s).
func TestCopyBandwidth(t *testing.T) {
	dev := gputest.Device(t)
	gbs, err := bench.CopyBandwidth(dev)
	if err != nil {
		t.Fatal(err)
	}
	if gbs < 50 || gbs > 20000 {
		t.Errorf("copy bandwidth %.0f GB/s is implausible", gbs)
	}
	t.Logf("%s: copy %.0f GB/s", dev.Props().Name, gbs)
}

// scaleSnippet is a torch builder for TestTorchOnGPU.
const scaleSnippet = `
@builder("kittens_test_scale")
def _kittens_test_scale(a):
    x = randn(a["rows"], a["cols"], dtype=a["dtype"])
    return (lambda t: t * 2.0), (x,)
`

func init() { registry.RegisterTorch("kittens-bench-gpu-test", scaleSnippet) }

// TestTorchOnGPU runs the real script (torch_base.py and a snippet) through
// Python with PyTorch: a case that times, and one that names no builder.
func TestTorchOnGPU(t *testing.T) {
	gputest.Device(t)
	res, err := bench.Torch([]bench.TorchRequest{
		{ID: "scale", Op: "kittens_test_scale", Args: map[string]any{"rows": 4096, "cols": 4096, "dtype": "bf16"}},
		{ID: "missing", Op: "kittens_test_no_such_builder", Args: map[string]any{}, NoCompile: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := res["scale"]; r.Error != "" || r.EagerUS <= 0 || r.CompileUS <= 0 {
		t.Errorf("scale: %+v", r)
	}
	if r := res["missing"]; !strings.Contains(r.Error, "no torch builder") {
		t.Errorf("missing: %+v, want an error naming the builder", r)
	}
	t.Logf("torch: %+v", res)
}

// TestCopyAt measures single copies from 16 MB to 2 GB moved and checks
// that each is plausible and that none beats the 1 GiB ceiling by more than
// noise; the log is the curve that "% of same-size copy" reads.
func TestCopyAt(t *testing.T) {
	dev := gputest.Device(t)
	ceiling, err := bench.CopyBandwidth(dev)
	if err != nil {
		t.Fatal(err)
	}
	for moved := int64(16 << 20); moved <= 2<<30; moved *= 2 {
		gbs, err := bench.CopyAt(dev, moved)
		if err != nil {
			t.Fatal(err)
		}
		if gbs < 10 || gbs > 1.1*ceiling {
			t.Errorf("copy moving %d MiB: %.0f GB/s against a %.0f GB/s ceiling", moved>>20, gbs, ceiling)
		}
		t.Logf("copy moving %5d MiB: %5.0f GB/s (%3.0f%% of the 1 GiB copy)", moved>>20, gbs, 100*gbs/ceiling)
	}
}
