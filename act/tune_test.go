package act

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

// sweepCase is one shape of the sweep, bf16.
type sweepCase struct {
	name   string
	x, y   []int
	gated  bool
	kind   Kind
	params gatedParams
}

// variant is one launch configuration of the sweep.
type variant struct {
	vec, unroll, block, waves int
	single                    bool
}

func (v variant) String() string {
	return fmt.Sprintf("v%d u%d b%d w%d single %v", v.vec, v.unroll, v.block, v.waves, v.single)
}

// TestSweep is the tuning tool behind pick.go; it runs only with
// KITTENS_ACT_SWEEP=1. It times every launch configuration (elements per
// access, items per thread, block size, grid cap in waves of resident
// blocks, SINGLE) on the shapes whose name matches KITTENS_ACT_SWEEP_CASES
// (all when unset), in two passes, and prints one line per configuration
// with its share of the copy bandwidth, then the best.
func TestSweep(t *testing.T) {
	if os.Getenv("KITTENS_ACT_SWEEP") != "1" {
		t.Skip("set KITTENS_ACT_SWEEP=1 to run")
	}
	dev := gputest.Device(t)
	copyGBs, err := bench.CopyBandwidth(dev)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("copy %.0f GB/s\n", copyGBs)
	silu := gatedParams{GatedOptions: GatedOptions{Kind: KindSiLU}, alpha: 1}
	gelu := gatedParams{GatedOptions: GatedOptions{Kind: KindGELU}, alpha: 1}
	swiglu := gatedParams{GatedOptions: GatedOptions{Kind: KindSiLU, Layout: Interleaved, Limit: SwiGLULimit},
		alpha: SwiGLUAlpha, upAdd: 1}
	gatedCase := func(name string, m, d int, p gatedParams) sweepCase {
		return sweepCase{fmt.Sprintf("%s/%dx%d", name, m, d), []int{m, 2 * d}, []int{m, d}, true, p.Kind, p}
	}
	unaryCase := func(k Kind, m, n int) sweepCase {
		return sweepCase{fmt.Sprintf("%s/%dx%d", k, m, n), []int{m, n}, []int{m, n}, false, k, gatedParams{}}
	}
	cases := []sweepCase{
		gatedCase("gelu_and_mul", 4096, 256, gelu), gatedCase("gelu_and_mul", 16384, 256, gelu),
		gatedCase("gelu_and_mul", 65536, 256, gelu),
		gatedCase("gelu_and_mul", 131072, 256, gelu), gatedCase("gelu_and_mul", 4096, 8192, gelu),
		gatedCase("gelu_and_mul", 4096, 28672, gelu),
		gatedCase("silu_and_mul", 4096, 256, silu), gatedCase("silu_and_mul", 16384, 256, silu),
		gatedCase("silu_and_mul", 65536, 256, silu),
		gatedCase("silu_and_mul", 131072, 256, silu), gatedCase("silu_and_mul", 4096, 16384, silu),
		gatedCase("silu_and_mul", 4096, 28672, silu),
		unaryCase(KindSiLU, 16384, 8192), unaryCase(KindSiLU, 4096, 14336), unaryCase(KindGELUTanh, 4096, 14336),
		unaryCase(KindTanh, 16384, 8192), unaryCase(KindTanh, 4096, 14336),
		gatedCase("swiglu", 4096, 2880, swiglu),
	}
	if re := os.Getenv("KITTENS_ACT_SWEEP_CASES"); re != "" {
		keep := regexp.MustCompile(re)
		cases = slices.DeleteFunc(cases, func(c sweepCase) bool { return !keep.MatchString(c.name) })
	}
	var variants []variant
	for _, vec := range []int{8, 4, 2} {
		for _, unroll := range []int{1, 2} {
			for _, block := range []int{128, 256, 512} {
				for _, waves := range []int{0, 16} {
					variants = append(variants, variant{vec: vec, unroll: unroll, block: block, waves: waves})
					if unroll == 1 && waves == 0 {
						variants = append(variants, variant{vec: vec, unroll: unroll, block: block, waves: waves, single: true})
					}
				}
			}
		}
	}
	// Compile every kernel up front, in parallel.
	var ks []jit.Kernel
	for _, c := range cases {
		for _, v := range variants {
			pr := problem{gated: c.gated, kind: c.kind, dtype: tensor.BF16, layout: c.params.Layout,
				gateSecond: c.params.GateSecond, limit: c.params.Limit, alpha: c.params.alpha, upAdd: c.params.upAdd}
			ks = append(ks, pr.key(config{vec: v.vec, unroll: v.unroll, single: v.single}).kernel())
		}
	}
	if err := jit.Prepare(dev, ks); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range cases {
		bytes := 2 * int64(numel(c.x)+numel(c.y))
		sets := int(max(1, min(16, (3*int64(dev.Props().L2Bytes)+bytes-1)/bytes)))
		type pair struct{ x, y *tensor.Tensor }
		var pool []pair
		for range sets {
			x, err := tensor.RandDevice(dev, rng, tensor.BF16, 0, 1, c.x...)
			if err != nil {
				t.Fatal(err)
			}
			y, err := tensor.Empty(dev, tensor.BF16, c.y...)
			if err != nil {
				t.Fatal(err)
			}
			pool = append(pool, pair{x, y})
		}
		problemOf := func(pr pair) problem {
			if c.gated {
				return gatedProblem(pr.y, pr.x, c.params)
			}
			return unaryProblem(pr.y, pr.x, c.kind)
		}
		measure := func(v variant) (float64, int) {
			p := problemOf(pool[0])
			cfg := config{vec: min(v.vec, pickVec(p)), unroll: v.unroll, block: v.block}
			cfg.single = v.single && p.cols%cfg.vec == 0
			fn, err := kernels.Get(dev, nil, p.key(cfg))
			if err != nil {
				t.Fatal(err)
			}
			cfg.grid = intmath.CeilDiv(p.items(cfg.vec), v.block*v.unroll)
			if v.waves > 0 {
				cfg.grid = min(cfg.grid, v.waves*dev.Props().SMs*blocksPerSM(fn, v.block))
			}
			next := 0
			bc := bench.Case{Bytes: bytes, New: func(*cuda.Device, *rand.Rand) (bench.Instance, error) {
				q := problemOf(pool[next%len(pool)])
				next++
				return bench.Instance{Run: func(s *cuda.Stream) error { return q.launch(s, fn, cfg) }}, nil
			}}
			r, err := bench.Measure(dev, bc, bench.Options{Runs: 100, MaxSets: sets})
			if err != nil {
				t.Fatal(err)
			}
			return r.MedianUS, cfg.grid
		}
		// Two passes, the second in reverse order, so that a drift during
		// the case does not favour the variants timed first.
		us := make([][2]float64, len(variants))
		grids := make([]int, len(variants))
		for i, v := range variants {
			us[i][0], grids[i] = measure(v)
		}
		for i := len(variants) - 1; i >= 0; i-- {
			us[i][1], _ = measure(variants[i])
		}
		best := 0
		for i, v := range variants {
			mean := (us[i][0] + us[i][1]) / 2
			if mean < (us[best][0]+us[best][1])/2 {
				best = i
			}
			gbs := float64(bytes) / (mean * 1e3)
			fmt.Printf("%-26s %-16s grid %7d  %8.2f %8.2f µs %6.0f GB/s %5.1f%%\n", c.name, v, grids[i], us[i][0], us[i][1],
				gbs, 100*gbs/copyGBs)
		}
		fmt.Printf("BEST %-26s %-16s %8.2f µs\n", c.name, variants[best], (us[best][0]+us[best][1])/2)
		for _, pr := range pool {
			pr.x.Free()
			pr.y.Free()
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
