package norm

import (
	"github.com/gokittens/kittens/internal/intmath"

	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"testing"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/registry"
	"github.com/gokittens/kittens/tensor"
)

// BenchmarkSweep times launch shapes the picker might choose, on the shapes
// whose bandwidth or latency matters most, so the picker's constants come
// from one measured table. It runs only when KITTENS_NORM_SWEEP is set (a GPU
// and a few minutes): to a regexp, it sweeps the shapes whose "op MxN"
// matches it ("1" sweeps all). First it times an empty kernel, the floor of
// this timing method. Each line: op, shape, config, µs, GB/s; the first line
// of a shape is the picker's own choice, marked "(picker)".
func BenchmarkSweep(b *testing.B) {
	filter := os.Getenv("KITTENS_NORM_SWEEP")
	if filter == "" {
		b.Skip("set KITTENS_NORM_SWEEP=1, or to a regexp over \"op MxN\"")
	}
	if filter == "1" {
		filter = ""
	}
	match, err := regexp.Compile(filter)
	if err != nil {
		b.Fatal(err)
	}
	dev := gputest.Device(b)
	empty := jit.Kernel{File: "norm/empty.cu", Source: `extern "C" __global__ void empty() {}`, Entry: "empty"}
	fn, err := jit.Get(dev, empty)
	if err != nil {
		b.Fatal(err)
	}
	r, err := bench.Measure(dev, registry.Bench{Name: "empty", New: func(*cuda.Device, *rand.Rand) (registry.Instance, error) {
		return registry.Instance{Run: func(s *cuda.Stream) error {
			return fn.Launch(cuda.LaunchConfig{Grid: cuda.D1(1), Block: cuda.D1(32), Stream: s}, cuda.NewArgs())
		}}, nil
	}}, bench.Options{Runs: 200})
	if err != nil {
		b.Fatal(err)
	}
	fmt.Printf("SWEEP empty kernel %8.2f us\n", r.MedianUS)
	type shape struct {
		name    string
		op      opKind
		add     addMode
		weight  weightMode
		bias    bool
		m, n    int
		tensors int // row tensors read + written
	}
	shapes := []shape{
		{"rmsnorm", opRMS, addNone, weightPlain, false, 1, 2048, 2},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 32, 4096, 2},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 1, 8192, 2},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 4096, 8192, 2},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 16384, 8192, 2},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 16384, 4096, 2},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 16384, 128, 2},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 65536, 128, 2},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 32, 7168, 2},
		{"fused_add_rmsnorm", opRMS, addRounded, weightPlain, false, 16384, 8192, 4},
		{"fused_add_rmsnorm", opRMS, addRounded, weightPlain, false, 16384, 128, 4},
		{"fused_add_rmsnorm", opRMS, addRounded, weightPlain, false, 65536, 128, 4},
		{"layernorm", opLayer, addNone, weightPlain, true, 1, 8192, 2},
		{"layernorm", opLayer, addNone, weightPlain, true, 32, 4096, 2},
		{"layernorm", opLayer, addNone, weightPlain, true, 4096, 2048, 2},
		{"layernorm", opLayer, addNone, weightPlain, true, 16384, 2048, 2},
		{"layernorm", opLayer, addNone, weightPlain, true, 4096, 4096, 2},
		{"layernorm", opLayer, addNone, weightPlain, true, 16384, 4096, 2},
		{"layernorm", opLayer, addNone, weightPlain, true, 4096, 7168, 2},
		{"layernorm", opLayer, addNone, weightPlain, true, 16384, 7168, 2},
		{"layernorm", opLayer, addNone, weightPlain, true, 4096, 8192, 2},
		{"layernorm", opLayer, addNone, weightPlain, true, 16384, 8192, 2},
		{"layernorm", opLayer, addNone, weightPlain, true, 128, 128, 2},
		{"layernorm", opLayer, addNone, weightPlain, true, 16384, 128, 2},
		{"layernorm", opLayer, addNone, weightPlain, true, 65536, 128, 2},
		{"fused_add_layernorm", opLayer, addRounded, weightPlain, true, 4096, 4096, 4},
		{"fused_add_layernorm", opLayer, addRounded, weightPlain, true, 16384, 8192, 4},
		{"fused_add_layernorm", opLayer, addRounded, weightPlain, true, 16384, 128, 4},
		{"fused_add_layernorm", opLayer, addRounded, weightPlain, true, 65536, 128, 4},
		{"l2norm_fwd", opRMS, addNone, weightNone, false, 262144, 128, 2},
	}
	// The configs of every matched shape are collected first and their
	// kernels compiled in parallel; then each is timed.
	type sweepCase struct {
		sh     shape
		newJob func() (*job, func())
		cfgs   []config
	}
	var cases []sweepCase
	var kerns []jit.Kernel
	for _, sh := range shapes {
		if !match.MatchString(fmt.Sprintf("%s %dx%d", sh.name, sh.m, sh.n)) {
			continue
		}
		newJob := func() (*job, func()) {
			rng := rand.New(rand.NewPCG(1, 2))
			var frees []*tensor.Tensor
			dt := func(shape ...int) *tensor.Tensor {
				d, err := tensor.RandDevice(dev, rng, tensor.BF16, 0, 1, shape...)
				if err != nil {
					b.Fatal(err)
				}
				frees = append(frees, d)
				return d
			}
			j := &job{op: sh.op, add: sh.add, weight: sh.weight, x: dt(sh.m, sh.n), y: dt(sh.m, sh.n), eps: 1e-6, denom: float64(sh.n)}
			if sh.weight != weightNone {
				j.w = dt(sh.n)
			} else {
				j.denom = 1
			}
			if sh.bias {
				j.b = dt(sh.n)
			}
			if sh.add != addNone {
				j.x2, j.residualOut = dt(sh.m, sh.n), dt(sh.m, sh.n)
			}
			j.nOut = sh.n
			return j, func() {
				for _, t := range frees {
					t.Free()
				}
			}
		}
		probe, free := newJob()
		base := pickConfig(dev.Props(), probe.shape())
		accesses := intmath.CeilDiv(sh.n, base.vec)
		// The picker's own choice first, then the alternatives, each of those
		// that serve a row per group also with the L2 hint flipped.
		cfgs := []config{base}
		add := func(c config) {
			cfgs = append(cfgs, c)
			if c.waves && c.vec > 1 {
				c.hint = !c.hint
				cfgs = append(cfgs, c)
			}
		}
		if base.group > 0 {
			for _, pt := range []int{1, 2, 4} {
				group := intmath.NextPow2(intmath.CeilDiv(accesses, pt))
				if group > 32 {
					continue
				}
				for _, threads := range []int{64, 128, 256, 512} {
					for _, waves := range []bool{false, true} {
						c := base
						c.perThread, c.group, c.threads, c.bound, c.waves = pt, group, threads, threads, waves
						rowsPerBlock := threads / group
						c.grid = intmath.CeilDiv(sh.m, rowsPerBlock)
						if !waves {
							c.grid = min(c.grid, dev.Props().SMs*2048/threads)
						}
						c.prefetch = !waves && sh.m > c.grid*rowsPerBlock
						add(c)
					}
				}
			}
		} else {
			for _, pt := range []int{1, 2, 4} {
				threads := intmath.RoundUp(intmath.CeilDiv(accesses, pt), 32)
				if threads > 1024 || threads < 64 {
					continue
				}
				var bounds []int
				for _, bound := range []int{threads, 512, 768, 1024} {
					if bound >= threads && (len(bounds) == 0 || bound > bounds[len(bounds)-1]) {
						bounds = append(bounds, bound)
					}
				}
				for _, waves := range []bool{false, true} {
					for _, bound := range bounds {
						for _, reload := range []bool{false, true} {
							for _, prefetch := range []bool{false, true} {
								// The launcher lowers a striding grid to what is resident, so
								// both loops are timed wherever there are more rows than SMs.
								if prefetch && (waves || sh.m <= dev.Props().SMs) {
									continue
								}
								c := base
								c.perThread, c.threads, c.bound, c.waves, c.reload, c.prefetch = pt, threads, bound, waves, reload, prefetch
								c.grid = sh.m
								if !waves {
									c.grid = min(sh.m, dev.Props().SMs*max(1, 2048/threads))
								}
								add(c)
							}
						}
					}
				}
			}
		}
		for _, c := range cfgs {
			kerns = append(kerns, probe.key(c).kernel())
		}
		free()
		cases = append(cases, sweepCase{sh, newJob, cfgs})
	}
	if err := jit.Prepare(dev, kerns); err != nil {
		b.Fatal(err)
	}
	for _, sc := range cases {
		sh, newJob := sc.sh, sc.newJob
		bytes := int64(sh.tensors)*int64(sh.m)*int64(sh.n)*2 + int64(sh.n)*2
		for i, c := range sc.cfgs {
			cb := registry.Bench{Name: "sweep", Bytes: bytes, New: func(*cuda.Device, *rand.Rand) (registry.Instance, error) {
				j, free := newJob()
				return registry.Instance{Run: func(s *cuda.Stream) error { return j.launchWith(s, c) }, Free: free}, nil
			}}
			r, err := bench.Measure(dev, cb, bench.Options{Runs: 100})
			status := ""
			if i == 0 {
				status = "(picker)"
			}
			if err != nil {
				status = err.Error()
			}
			fmt.Printf("SWEEP %-18s %6dx%-5d pt=%d grp=%-2d thr=%-4d bound=%-4d waves=%-5v prefetch=%-5v reload=%-5v hint=%-5v %8.2f us %7.0f GB/s %s\n",
				sh.name, sh.m, sh.n, c.perThread, c.group, c.threads, c.bound, c.waves, c.prefetch, c.reload, c.hint, r.MedianUS, r.GBs, status)
		}
	}
}
