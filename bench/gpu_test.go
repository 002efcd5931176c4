package bench_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/jit"
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

// TestTorchOnGPU runs the real script (torch_base.py and a snippet) through
// Python with PyTorch: a case that times, and one that names no builder.
func TestTorchOnGPU(t *testing.T) {
	gputest.Device(t)
	res, err := bench.Torch([]string{scaleSnippet}, []bench.TorchRequest{
		{ID: "scale", Op: "kittens_test_scale", Args: map[string]any{"rows": 4096, "cols": 4096, "dtype": "bf16"}},
		{ID: "missing", Op: "kittens_test_no_such_builder", Args: map[string]any{}, NoCompile: true},
		{ID: "scale in graphs", Op: "kittens_test_scale", Args: map[string]any{"rows": 256, "cols": 256, "dtype": "bf16"}, Sets: 2, Graph: 4},
		{ID: "scale in PDL graphs", Op: "kittens_test_scale", Args: map[string]any{"rows": 256, "cols": 256, "dtype": "bf16"}, Sets: 2, Graph: 4, PDL: true},
		bench.FloorRequest("floor", bench.Options{Runs: 50}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := res["scale"]; r.Error != "" || r.EagerUS <= 0 || r.CompileUS <= 0 {
		t.Errorf("scale: %+v", r)
	}
	for _, id := range []string{"scale in graphs", "scale in PDL graphs"} {
		if r := res[id]; r.Error != "" || r.EagerUS <= 0 || r.CompileUS <= 0 {
			t.Errorf("%s: %+v", id, r)
		}
	}
	if r := res["floor"]; r.Error != "" || r.EagerUS <= 0 || r.EagerUS > 50 || r.CompileUS != 0 {
		t.Errorf("floor: %+v, want an eager time of a few µs", r)
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

// TestFloor times the launch floor alone and in graphs: a few µs alone,
// less in graphs, where a replay pays the launch once.
func TestFloor(t *testing.T) {
	dev := gputest.Device(t)
	alone, err := bench.Floor(dev, bench.Options{Runs: 50})
	if err != nil {
		t.Fatal(err)
	}
	inGraphs, err := bench.Floor(dev, bench.Options{Runs: 50, Graph: 16})
	if err != nil {
		t.Fatal(err)
	}
	if alone.MedianUS <= 0 || alone.MedianUS > 50 || alone.Sets != 1 || inGraphs.MedianUS <= 0 || inGraphs.MedianUS >= alone.MedianUS {
		t.Errorf("launch floor %+v alone, %+v in graphs", alone, inGraphs)
	}
	t.Logf("launch floor: %.3f µs alone, %.3f in graphs of %d", alone.MedianUS, inGraphs.MedianUS, inGraphs.Graph)
}

// TestMeasureInGraphs times a memset inside CUDA graphs: the launches per
// graph round up to whole rotations over the input sets, and the time per
// launch is positive and below one launch timed alone (whose floor is the
// launch latency, which a graph replay pays once).
func TestMeasureInGraphs(t *testing.T) {
	dev := gputest.Device(t)
	const n = 1 << 16
	b := bench.Case{Name: "memset 64 KiB", Bytes: n, New: func(dev *cuda.Device, _ *rand.Rand) (bench.Instance, error) {
		p, err := dev.Alloc(n)
		if err != nil {
			return bench.Instance{}, err
		}
		return bench.Instance{Run: func(s *cuda.Stream) error { return s.Memset8(p, 7, n) }, Free: func() { dev.Free(p) }}, nil
	}}
	alone, err := bench.Measure(dev, b, bench.Options{Runs: 50, MaxSets: 3})
	if err != nil {
		t.Fatal(err)
	}
	inGraphs, err := bench.Measure(dev, b, bench.Options{Runs: 50, MaxSets: 3, Graph: 7})
	if err != nil {
		t.Fatal(err)
	}
	if alone.Graph != 0 || inGraphs.Sets != 3 || inGraphs.Graph != 9 {
		t.Errorf("launches per graph: %d alone, %d in graphs of %d sets; want 0 and 9", alone.Graph, inGraphs.Graph, inGraphs.Sets)
	}
	if inGraphs.MedianUS <= 0 || inGraphs.MedianUS >= alone.MedianUS {
		t.Errorf("a memset takes %.2f µs in graphs, %.2f alone", inGraphs.MedianUS, alone.MedianUS)
	}
	t.Logf("memset of 64 KiB: %.2f µs alone, %.2f in graphs of %d", alone.MedianUS, inGraphs.MedianUS, inGraphs.Graph)
}

// TestMeasureDependentLaunches times a one-block kernel that waits for the
// grids before it (wait_prior_grids) inside CUDA graphs, with and without
// dependent launches: with them each launch overlaps the one before, so the
// time per launch must fall.
func TestMeasureDependentLaunches(t *testing.T) {
	dev := gputest.Device(t)
	if !dev.Props().DependentLaunch() {
		t.Skip("dependent launches need compute capability 9.0")
	}
	touch := jit.Funcs[int]{Kernel: func(int) jit.Kernel {
		return jit.Kernel{File: "bench/touch.cu", Entry: "touch", Source: `#include "kittens.cuh"
extern "C" __global__ void touch(float* p) { wait_prior_grids(); p[threadIdx.x] += 1.f; }`}
	}}
	b := bench.Case{Name: "touch", Bytes: 256, New: func(dev *cuda.Device, _ *rand.Rand) (bench.Instance, error) {
		p, err := dev.Alloc(128)
		if err != nil {
			return bench.Instance{}, err
		}
		return bench.Instance{Run: func(s *cuda.Stream) error {
			fn, err := touch.Get(dev, s, 0)
			if err != nil {
				return err
			}
			return fn.Launch(cuda.LaunchConfig{Grid: cuda.D1(1), Block: cuda.D1(32), Stream: s}, cuda.NewArgs().Ptr(p))
		}, Free: func() { dev.Free(p) }}, nil
	}}
	var us [2]float64
	for i, dependent := range []bool{false, true} {
		r, err := bench.Measure(dev, b, bench.Options{Runs: 50, MaxSets: 2, Graph: 16, Dependent: dependent})
		if err != nil {
			t.Fatal(err)
		}
		if r.Dependent != dependent {
			t.Errorf("Result.Dependent %v, want %v", r.Dependent, dependent)
		}
		us[i] = r.MedianUS
	}
	if us[1] >= us[0] {
		t.Errorf("in graphs of 16: %.2f µs per launch with dependent launches, %.2f without", us[1], us[0])
	}
	t.Logf("one-block kernel in graphs of 16: %.2f µs per launch, %.2f as dependent launches", us[0], us[1])
}
