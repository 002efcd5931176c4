package act

import (
	"github.com/gokittens/kittens/internal/intmath"

	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/registry"
	"github.com/gokittens/kittens/tensor"
)

// BenchmarkSweep is for tuning and runs only with KITTENS_ACT_SWEEP=1: it
// measures the copy bandwidth, then times launch configurations around the
// picked one (items per thread, block size, grid cap) on a few shapes.
//
// What the sweeps on an H200 (copy 4.25 TB/s) showed, bf16:
//   - With accurate expf/erfcf and IEEE division the kernels were compute
//     bound (silu_and_mul 4096x28672: 2.7 TB/s; gelu_and_mul 1.7-2.2);
//     ex2/rcp approximations and a Chebyshev erfc lifted them to 4.0 and 3.6.
//   - More items per thread was slower (silu 16384x8192: 1 item 129 µs,
//     2 items 145, 4 items 157), except gated GELU (2 items: 174 µs vs 188).
//   - Evict-first (.cs) stores gained 3-6% (silu_and_mul 4096x28672 171 →
//     165 µs); an L2::256B prefetch hint on the loads lost 1%.
//   - Block 128 ≥ 256 everywhere; an uncapped grid helped SiLU by 2-3%, a
//     16-wave cap helped the GELUs by 3-6%.
func BenchmarkSweep(b *testing.B) {
	if os.Getenv("KITTENS_ACT_SWEEP") != "1" {
		b.Skip("set KITTENS_ACT_SWEEP=1 to run")
	}
	dev := gputest.Device(b)
	b.Run("copy", func(b *testing.B) {
		gbs, err := bench.CopyBandwidth(dev)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(gbs, "GB/s")
	})
	silu := gatedParams{GatedOptions: GatedOptions{Kind: KindSiLU}, alpha: 1}
	swiglu := gatedParams{GatedOptions: GatedOptions{Kind: KindSiLU, Layout: Interleaved, Limit: SwiGLULimit},
		alpha: SwiGLUAlpha, upAdd: 1}
	for _, c := range []struct {
		name   string
		x, y   []int
		gated  bool
		kind   Kind
		params gatedParams
	}{
		{"silu_and_mul/4096x256", []int{4096, 512}, []int{4096, 256}, true, KindSiLU, silu},
		{"silu_and_mul/131072x256", []int{131072, 512}, []int{131072, 256}, true, KindSiLU, silu},
		{"silu_and_mul/4096x28672", []int{4096, 57344}, []int{4096, 28672}, true, KindSiLU, silu},
		{"gelu_and_mul/4096x28672", []int{4096, 57344}, []int{4096, 28672}, true, KindGELU,
			gatedParams{GatedOptions: GatedOptions{Kind: KindGELU}, alpha: 1}},
		{"swiglu/4096x2880", []int{4096, 5760}, []int{4096, 2880}, true, KindSiLU, swiglu},
		{"silu/16384x8192", []int{16384, 8192}, []int{16384, 8192}, false, KindSiLU, gatedParams{}},
		{"gelu_tanh/16384x8192", []int{16384, 8192}, []int{16384, 8192}, false, KindGELUTanh, gatedParams{}},
	} {
		for _, unroll := range []int{1, 2, 4} {
			for _, block := range []int{128, 256} {
				for _, waves := range []int{1, 4, 16, 0} { // grid cap in waves of resident blocks; 0: no cap
					name := fmt.Sprintf("%s/u%d/b%d/w%d", c.name, unroll, block, waves)
					bc := registry.Bench{Bytes: 2 * int64(numel(c.x)+numel(c.y)),
						New: func(dev *cuda.Device, rng *rand.Rand) (registry.Instance, error) {
							x, err := tensor.RandDevice(dev, rng, tensor.BF16, 0, 1, c.x...)
							if err != nil {
								return registry.Instance{}, err
							}
							y, err := tensor.Empty(dev, tensor.BF16, c.y...)
							if err != nil {
								return registry.Instance{}, err
							}
							p := unaryProblem(y, x, c.kind)
							if c.gated {
								p = gatedProblem(y, x, c.params)
							}
							cfg := config{vec: pickVec(p), unroll: unroll, block: block}
							fn, err := kernels.Get(dev, p.spec(cfg))
							if err != nil {
								return registry.Instance{}, err
							}
							cfg.grid = intmath.CeilDiv(p.items(cfg.vec), block*unroll)
							if waves > 0 {
								cfg.grid = min(cfg.grid, waves*dev.Props().SMs*blocksPerSM(fn, block))
							}
							return registry.Instance{
								Run:  func(s *cuda.Stream) error { return p.launch(s, fn, cfg) },
								Free: func() { x.Free(); y.Free() },
							}, nil
						}}
					b.Run(name, func(b *testing.B) {
						r, err := bench.Measure(dev, bc, bench.Options{})
						if err != nil {
							b.Fatal(err)
						}
						b.ReportMetric(0, "ns/op")
						b.ReportMetric(r.MedianUS, "µs")
						b.ReportMetric(r.GBs, "GB/s")
					})
				}
			}
		}
	}
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}
