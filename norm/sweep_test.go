package norm

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

// BenchmarkSweep times the launch shapes the picker might choose on the
// shapes whose bandwidth or latency matters most, each first checked
// against the CPU reference on its first rows (a mismatch is printed, not
// timed). It runs only with KITTENS_NORM_SWEEP set: "1" sweeps every shape,
// otherwise it is a regexp over "op MxN"; KITTENS_NORM_SWEEP_CONFIG, a
// regexp over a config as the lines print it, narrows the alternatives (see
// sweepConfigs). Output: the launch floor (bench.Floor), then a line per
// config (op, shape, config, µs, GB/s), the picker's own first, twice,
// marked "(picker)".
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
	only, err := regexp.Compile(os.Getenv("KITTENS_NORM_SWEEP_CONFIG"))
	if err != nil {
		b.Fatal(err)
	}
	dev := gputest.Device(b)
	r, err := bench.Floor(dev, bench.Options{Runs: 200})
	if err != nil {
		b.Fatal(err)
	}
	fmt.Printf("SWEEP empty kernel %8.2f us\n", r.MedianUS)
	shapes := []sweepShape{
		{"rmsnorm", opRMS, addNone, weightPlain, false, 1, 2048, 2, false},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 32, 4096, 2, false},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 1, 8192, 2, false},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 4096, 8192, 2, false},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 16384, 8192, 2, false},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 4096, 7168, 2, false},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 16384, 7168, 2, false},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 16384, 4096, 2, false},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 4096, 2048, 2, false},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 16384, 2048, 2, false},
		{"fused_add_rmsnorm", opRMS, addRounded, weightPlain, false, 4096, 2048, 4, false},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 16384, 128, 2, false},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 65536, 128, 2, false},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 32, 7168, 2, false},
		{"fused_add_rmsnorm", opRMS, addRounded, weightPlain, false, 16384, 8192, 4, false},
		{"fused_add_rmsnorm", opRMS, addRounded, weightPlain, false, 16384, 7168, 4, false},
		{"fused_add_rmsnorm", opRMS, addRounded, weightPlain, false, 16384, 128, 4, false},
		{"fused_add_rmsnorm", opRMS, addRounded, weightPlain, false, 65536, 128, 4, false},
		{"layernorm", opLayer, addNone, weightPlain, true, 1, 8192, 2, false},
		{"layernorm", opLayer, addNone, weightPlain, true, 32, 4096, 2, false},
		{"layernorm", opLayer, addNone, weightPlain, true, 4096, 2048, 2, false},
		{"layernorm", opLayer, addNone, weightPlain, true, 16384, 2048, 2, false},
		{"layernorm", opLayer, addNone, weightPlain, true, 4096, 4096, 2, false},
		{"layernorm", opLayer, addNone, weightPlain, true, 16384, 4096, 2, false},
		{"layernorm", opLayer, addNone, weightPlain, true, 4096, 7168, 2, false},
		{"layernorm", opLayer, addNone, weightPlain, true, 16384, 7168, 2, false},
		{"layernorm", opLayer, addNone, weightPlain, true, 4096, 8192, 2, false},
		{"layernorm", opLayer, addNone, weightPlain, true, 16384, 8192, 2, false},
		{"layernorm", opLayer, addNone, weightPlain, true, 128, 128, 2, false},
		{"layernorm", opLayer, addNone, weightPlain, true, 16384, 128, 2, false},
		{"layernorm", opLayer, addNone, weightPlain, true, 65536, 128, 2, false},
		{"fused_add_layernorm", opLayer, addRounded, weightPlain, true, 4096, 4096, 4, false},
		{"fused_add_layernorm", opLayer, addRounded, weightPlain, true, 16384, 8192, 4, false},
		{"fused_add_layernorm", opLayer, addRounded, weightPlain, true, 16384, 128, 4, false},
		{"fused_add_layernorm", opLayer, addRounded, weightPlain, true, 65536, 128, 4, false},
		{"l2norm_fwd", opRMS, addNone, weightNone, false, 262144, 128, 2, false},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 4096, 4096, 2, false},
		{"fused_add_rmsnorm", opRMS, addRounded, weightPlain, false, 4096, 4096, 4, false},
		{"l2norm_bwd", opL2Backward, addNone, weightNone, false, 65536, 256, 3, false},
		{"l2norm_bwd", opL2Backward, addNone, weightNone, false, 65536, 64, 3, false},
		{"l2norm_bwd", opL2Backward, addNone, weightNone, false, 65536, 128, 3, false},
		{"l2norm_fwd", opRMS, addNone, weightNone, false, 65536, 128, 2, false},
		{"l2norm_fwd", opRMS, addNone, weightNone, false, 65536, 256, 2, false},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 4096, 128, 2, false},
		{"rmsnorm", opRMS, addNone, weightPlain, false, 128, 128, 2, false},
		{"layernorm", opLayer, addNone, weightPlain, true, 4096, 128, 2, false},
		{"fused_add_rmsnorm", opRMS, addRounded, weightPlain, false, 4096, 128, 4, false},
		{"fused_add_layernorm", opLayer, addRounded, weightPlain, true, 4096, 128, 4, false},
		{"l2norm_fwd", opRMS, addNone, weightNone, false, 262144, 64, 2, false},
		{"l2norm_fwd", opRMS, addNone, weightNone, false, 262144, 256, 2, false},
		{"l2norm_bwd", opL2Backward, addNone, weightNone, false, 262144, 64, 3, false},
		{"l2norm_bwd", opL2Backward, addNone, weightNone, false, 262144, 128, 3, false},
		{"l2norm_bwd", opL2Backward, addNone, weightNone, false, 262144, 256, 3, false},
		{"fused_add_rmsnorm", opRMS, addRounded, weightPlain, false, 1, 2048, 4, false},
		{"fused_add_rmsnorm", opRMS, addRounded, weightPlain, false, 1, 7168, 4, false},
		{"fused_add_rmsnorm", opRMS, addRounded, weightPlain, false, 32, 7168, 4, false},
		{"fused_add_rmsnorm", opRMS, addRounded, weightPlain, false, 128, 128, 4, false},
		{"layernorm", opLayer, addNone, weightPlain, true, 1, 2048, 2, false},
	}
	for _, sh := range []sweepShape{{m: 16384, n: 7168}, {m: 16384, n: 8192}, {m: 4096, n: 7168}, {m: 16384, n: 4096}, {m: 32, n: 7168}} {
		sh.name, sh.op, sh.add, sh.weight, sh.tensors, sh.inPlace = "fused_add_rmsnorm_inplace", opRMS, addRounded, weightPlain, 4, true
		shapes = append(shapes, sh)
	}
	// The configs of every matched shape are collected first and their
	// kernels compiled in parallel; then each is timed.
	type sweepCase struct {
		sh     sweepShape
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
			j := sh.job(sh.m, func(dt tensor.DType, std float64, shape ...int) *tensor.Tensor {
				d, err := tensor.RandDevice(dev, rng, dt, 0, std, shape...)
				if err != nil {
					b.Fatal(err)
				}
				frees = append(frees, d)
				return d
			})
			return j, func() {
				for _, t := range frees {
					t.Free()
				}
			}
		}
		probe, free := newJob()
		cfgs := sweepConfigs(dev.Props(), probe.shape(), only)
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
			rep, err := sh.check(dev, c)
			if err != nil {
				b.Fatal(err)
			}
			if !rep.Pass {
				fmt.Printf("SWEEP %-18s %6dx%-5d %s MISMATCH %v\n", sh.name, sh.m, sh.n, describe(c), rep)
				continue
			}
			cb := bench.Case{Name: "sweep", Bytes: bytes, New: func(*cuda.Device, *rand.Rand) (bench.Instance, error) {
				j, free := newJob()
				return bench.Instance{Run: func(s *cuda.Stream) error { return j.launchWith(s, c) }, Free: free}, nil
			}}
			r, err := bench.Measure(dev, cb, bench.Options{Runs: 100})
			status := ""
			if i < 2 {
				status = "(picker)"
			}
			if err != nil {
				status = err.Error()
			}
			fmt.Printf("SWEEP %-18s %6dx%-5d %s %8.2f us %7.0f GB/s %s\n", sh.name, sh.m, sh.n, describe(c), r.MedianUS, r.GBs, status)
		}
	}
}

// describe is a config as the sweep prints it and KITTENS_NORM_SWEEP_CONFIG
// selects it.
func describe(c config) string {
	return fmt.Sprintf("pt=%-2d grp=%-2d thr=%-4d bound=%-4d waves=%-5v prefetch=%-5v reload=%-5v hint=%-5v onepass=%-5v",
		c.perThread, c.group, c.threads, c.bound, c.waves, c.prefetch, c.reload, c.hint, c.onePass)
}

// sweepConfigs lists the launch shapes BenchmarkSweep times for a row shape:
// the picker's own twice (the first config timed of a shape reads high),
// then the alternatives whose description matches only: groups of lanes
// that share a warp (rows of up to 128 accesses), a warp per row (rows of up
// to 512 accesses, up to 16 a lane), and blocks per row of 1 to 16 accesses a
// thread; each in waves or as a striding grid (with and without prefetch),
// with weights held or reloaded, with the L2 hint on and off and, for 16-bit
// LayerNorm, with one- and two-pass statistics.
func sweepConfigs(p cuda.Props, s rowShape, only *regexp.Regexp) []config {
	base := pickConfig(p, s)
	accesses := intmath.CeilDiv(s.n, base.vec)
	cfgs := []config{base, base}
	seen := map[config]bool{base: true}
	add := func(c config) {
		for _, hint := range []bool{false, true} {
			for _, onePass := range []bool{false, true} {
				c.hint, c.onePass = hint, onePass
				if seen[c] || (hint && c.vec == 1) || (onePass && !(s.twoPass && s.elemSize == 2)) || !only.MatchString(describe(c)) {
					continue
				}
				seen[c] = true
				cfgs = append(cfgs, c)
			}
		}
	}
	// rowLoops adds c with each row loop: waves, or a striding grid of up to
	// what the SMs hold (the launcher lowers it to the occupancy), with and
	// without prefetch where a group meets a second row; each with weights
	// held and reloaded.
	rowLoops := func(c config, rowsPerBlock int) {
		for _, waves := range []bool{false, true} {
			for _, prefetch := range []bool{false, true} {
				for _, reload := range []bool{false, true} {
					c.waves, c.prefetch, c.reload = waves, prefetch, reload
					c.grid = intmath.CeilDiv(s.rows, rowsPerBlock)
					if !waves {
						c.grid = min(c.grid, p.SMs*residentThreads/c.threads)
					}
					if prefetch && (waves || s.rows <= c.grid*rowsPerBlock) {
						continue
					}
					add(c)
				}
			}
		}
	}
	c := base
	c.looped, c.cache, c.shared = false, false, 0
	if accesses <= subWarpAccesses {
		for _, pt := range []int{1, 2, 4} {
			c.perThread, c.group = pt, intmath.NextPow2(intmath.CeilDiv(accesses, pt))
			if c.group > 32 {
				continue
			}
			for _, threads := range []int{64, 128, 256, 512} {
				c.threads, c.bound = threads, threads
				rowLoops(c, threads/c.group)
			}
		}
		return cfgs
	}
	if pt := intmath.CeilDiv(accesses, 32); pt <= 16 {
		c.perThread, c.group = pt, 32
		for _, threads := range []int{64, 128, 256, 512} {
			c.threads, c.bound = threads, threads
			rowLoops(c, threads/32)
		}
	}
	c.group = 0
	for _, pt := range []int{1, 2, 4, 8, 16} {
		threads := max(intmath.RoundUp(intmath.CeilDiv(accesses, pt), 32), 64)
		if threads > 1024 || (threads-32)*pt >= accesses {
			continue
		}
		c.perThread, c.threads = pt, threads
		for _, bound := range []int{threads, 512, 1024} {
			if bound >= threads { // a repeat is dropped by add
				c.bound = bound
				rowLoops(c, 1)
			}
		}
	}
	return cfgs
}

// sweepShape is one shape BenchmarkSweep times: the op, its options and
// the size.
type sweepShape struct {
	name    string
	op      opKind
	add     addMode
	weight  weightMode
	bias    bool
	m, n    int
	tensors int  // row tensors read + written
	inPlace bool // y is x and the residual's output the residual (timed so; checked out of place)
}

// job is a job of the shape's op on rows of its rows, over bf16 tensors
// (and fp32 statistics) that mk makes of a given standard deviation.
func (sh sweepShape) job(rows int, mk func(dt tensor.DType, std float64, shape ...int) *tensor.Tensor) *job {
	j := &job{op: sh.op, add: sh.add, weight: sh.weight, x: mk(tensor.BF16, 1, rows, sh.n), eps: 1e-6, denom: float64(sh.n), nOut: sh.n}
	j.y = j.x
	if !sh.inPlace {
		j.y = mk(tensor.BF16, 1, rows, sh.n)
	}
	if sh.weight != weightNone {
		j.w = mk(tensor.BF16, 1, sh.n)
	} else {
		j.denom = 1
	}
	if sh.bias {
		j.b = mk(tensor.BF16, 1, sh.n)
	}
	if sh.add != addNone {
		j.x2 = mk(tensor.BF16, 1, rows, sh.n)
		j.residualOut = j.x2
		if !sh.inPlace {
			j.residualOut = mk(tensor.BF16, 1, rows, sh.n)
		}
	}
	if sh.op == opL2Backward {
		j.x2, j.rstdIn = mk(tensor.BF16, 1/float64(sh.n), rows, sh.n), mk(tensor.F32, 1, rows)
	}
	return j
}

// check runs config c on the first rows of the shape (at most 300) against
// the CPU reference, so that no launch shape is timed that computes
// something else.
func (sh sweepShape) check(dev *cuda.Device, c config) (check.Report, error) {
	rng := rand.New(rand.NewPCG(5, 6))
	var spec check.Spec
	sh.inPlace = false
	j := sh.job(min(sh.m, 300), func(dt tensor.DType, std float64, shape ...int) *tensor.Tensor {
		t := tensor.New(dt, shape...)
		t.FillNormal(rng, 0.5*std, std)
		spec.Tensors = append(spec.Tensors, t)
		spec.Names = append(spec.Names, fmt.Sprint(len(spec.Names)))
		return t
	})
	fields := func(j *job) []**tensor.Tensor {
		return []**tensor.Tensor{&j.x, &j.y, &j.w, &j.b, &j.x2, &j.residualOut, &j.rstdIn}
	}
	spec.Outputs, spec.Poison = []int{1}, []int{1}
	spec.Tol = map[int]check.Tolerance{1: {Atol: 2e-2, Rtol: 2e-2, RelNorm: 8e-3}} // the parity cases' bf16 bound on normalized outputs
	if j.residualOut != nil {
		ro := slices.Index(spec.Tensors, j.residualOut)
		spec.Outputs, spec.Poison = append(spec.Outputs, ro), append(spec.Poison, ro)
	}
	if !c.waves {
		c.grid = min(c.grid, 32) // each block of a striding grid meets several rows (and prefetches)
	}
	spec.Run = func(s *cuda.Stream, ts []*tensor.Tensor) error {
		k := *j // the job on ts
		for _, f := range fields(&k) {
			if *f != nil {
				*f = ts[slices.Index(spec.Tensors, *f)]
			}
		}
		if !k.x.IsDevice() {
			k.reference()
			return nil
		}
		return k.launchWith(s, c)
	}
	return check.Run(dev, spec)
}
