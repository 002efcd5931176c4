package act

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/tensor"
)

func TestRowsOf(t *testing.T) {
	for _, c := range []struct {
		shape, strides []int
		rows, stride   int
		ok             bool
	}{
		{[]int{7}, []int{1}, 1, 7, true},
		{[]int{3, 5}, []int{5, 1}, 3, 5, true},
		{[]int{3, 5}, []int{8, 1}, 3, 8, true},
		{[]int{2, 3, 5}, []int{24, 8, 1}, 6, 8, true},
		{[]int{2, 3, 5}, []int{30, 8, 1}, 0, 0, false},
		{[]int{2, 1, 5}, []int{40, 3, 1}, 2, 40, true}, // a size-1 dimension's stride is irrelevant
		{[]int{1, 1, 5}, []int{9, 9, 1}, 1, 5, true},
		{[]int{0, 4}, []int{4, 1}, 0, 4, true},
		{[]int{2, 0, 4}, []int{4, 4, 1}, 0, 4, true}, // no elements: strides do not matter
		{[]int{3, 0, 1, 4}, []int{4, 4, 4, 1}, 0, 4, true},
	} {
		x, err := tensor.NewStrided(tensor.F32, c.shape, c.strides)
		if err != nil {
			t.Fatal(err)
		}
		rows, stride, ok := rowsOf(x)
		if ok != c.ok || (ok && (rows != c.rows || stride != c.stride)) {
			t.Errorf("rowsOf(%v, %v) = %d, %d, %v; want %d, %d, %v", c.shape, c.strides, rows, stride, ok, c.rows, c.stride, c.ok)
		}
	}
}

// TestCheckSize checks the launch limits on problems too large to allocate:
// the input row (2d for gated ops, in either layout) must fit maxCols, and
// the items MaxInt32.
func TestCheckSize(t *testing.T) {
	for _, c := range []struct {
		name string
		p    problem
		vec  int
		ok   bool
	}{
		{"unary row of maxCols", problem{rows: 1, cols: maxCols}, 8, true},
		{"unary row past maxCols", problem{rows: 1, cols: maxCols + 1}, 8, false},
		{"interleaved d = 2^30: input columns past int32", problem{gated: true, layout: Interleaved, rows: 1, cols: 1 << 30}, 8, false},
		{"interleaved 2d = maxCols", problem{gated: true, layout: Interleaved, rows: 1, cols: maxCols / 2}, 8, true},
		{"interleaved 2d past maxCols", problem{gated: true, layout: Interleaved, rows: 1, cols: maxCols/2 + 1}, 8, false},
		{"halves d = 2^30", problem{gated: true, rows: 1, cols: 1 << 30}, 8, false},
		{"2^31 items", problem{rows: 1 << 19, cols: 1 << 12}, 1, false},
		{"2^28 items", problem{rows: 1 << 19, cols: 1 << 12}, 8, true},
	} {
		err := c.p.checkSize("act.Test", c.vec)
		var ae *tensor.ArgError
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case !c.ok && (!errors.As(err, &ae) || ae.Arg != "x"):
			t.Errorf("%s: err = %v, want an ArgError naming x", c.name, err)
		}
	}
}

// TestGatedKey checks the compile-time layout and SwiGLU flag of gated
// problems and the offsets the kernel's scalar tail reads gate and up at.
func TestGatedKey(t *testing.T) {
	for _, c := range []struct {
		name       string
		p          problem
		layout     gatedLayout
		full       bool
		gOff, uOff int
	}{
		{"silu_and_mul", problem{gated: true, cols: 100, alpha: 1}, layoutHalves, false, 0, 100},
		{"mul_and_silu", problem{gated: true, cols: 100, alpha: 1, gateSecond: true}, layoutHalves, false, 100, 0},
		{"limit", problem{gated: true, cols: 7, alpha: 1, limit: 2.5}, layoutHalves, true, 0, 7},
		{"swiglu", problem{gated: true, cols: 7, layout: Interleaved, alpha: SwiGLUAlpha, upAdd: 1, limit: SwiGLULimit},
			layoutInterGateFirst, true, 0, 1},
		{"interleaved gate second", problem{gated: true, cols: 7, layout: Interleaved, alpha: 1, gateSecond: true},
			layoutInterGateSecond, false, 1, 0},
		{"up + 1 only", problem{gated: true, cols: 7, alpha: 1, upAdd: 1}, layoutHalves, true, 0, 7},
	} {
		k := c.p.key(config{vec: 8, unroll: 1})
		gOff, uOff := c.p.offsets()
		if k.layout != c.layout || k.full != c.full || gOff != c.gOff || uOff != c.uOff {
			t.Errorf("%s: layout %d, full %v, offsets %d, %d; want %d, %v, %d, %d", c.name, k.layout, k.full, gOff, uOff,
				c.layout, c.full, c.gOff, c.uOff)
		}
	}
	if k := (problem{cols: 7}).key(config{vec: 8, unroll: 1}); k.layout != layoutHalves || k.full {
		t.Errorf("unary key has gated fields: %+v", k)
	}
}

// TestGridStride runs the kernels with a grid far smaller than the work, so
// every thread takes many passes of the grid-stride loop, with and without
// the L2 evict-last reads (which the picker keeps for calls larger than these),
// and compares with the CPU reference.
func TestGridStride(t *testing.T) {
	dev := gputest.Device(t)
	silu := gatedParams{GatedOptions: GatedOptions{Kind: KindSiLU}, alpha: 1}
	swiglu := gatedParams{GatedOptions: GatedOptions{Kind: KindSiLU, Layout: Interleaved, Limit: SwiGLULimit},
		alpha: SwiGLUAlpha, upAdd: 1}
	for _, c := range []struct {
		name   string
		dt     tensor.DType
		x, y   []int
		ys     []int // y strides; nil: contiguous
		gated  bool
		params gatedParams
	}{
		{"unary flat", tensor.BF16, []int{50001}, []int{50001}, nil, false, gatedParams{}},
		{"unary rows", tensor.F16, []int{300, 130}, []int{300, 130}, []int{136, 1}, false, gatedParams{}},
		{"gated halves", tensor.BF16, []int{200, 512}, []int{200, 256}, nil, true, silu},
		{"swiglu interleaved tail", tensor.F32, []int{300, 46}, []int{300, 23}, []int{24, 1}, true, swiglu},
	} {
		for _, evictLast := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/evictLast=%v", c.name, evictLast), func(t *testing.T) {
				rng, seed := tensor.NewRNG()
				x := tensor.Rand(rng, c.dt, 3, c.x...)
				ys := c.ys
				if ys == nil {
					ys = tensor.ContiguousStrides(c.y)
				}
				y, err := tensor.NewStrided(c.dt, c.y, ys)
				if err != nil {
					t.Fatal(err)
				}
				r, err := check.Run(dev, check.Spec{
					Tensors: []*tensor.Tensor{x, y}, Names: []string{"x", "y"}, Outputs: []int{1}, Poison: []int{1},
					Tol: map[int]check.Tolerance{1: check.ForDType(c.dt)},
					Run: func(s *cuda.Stream, ts []*tensor.Tensor) error {
						x, y := ts[0], ts[1]
						if !x.IsDevice() {
							if c.gated {
								return gated("test", nil, y, x, c.params)
							}
							return unary("test", nil, y, x, KindSiLU)
						}
						p := unaryProblem(y, x, KindSiLU)
						if c.gated {
							p = gatedProblem(y, x, c.params)
						}
						cfg := pickConfig(dev.Props(), p)
						cfg.evictLast = evictLast && cfg.vec*c.dt.Size() == 16
						cfg.single = false // the loop is what this tests
						fn, err := kernels.Get(dev, nil, p.key(cfg))
						if err != nil {
							return err
						}
						cfg.block, cfg.grid = 64, 3
						return p.launch(s, fn, cfg)
					},
				})
				if err != nil {
					t.Fatal(err)
				}
				if !r.Pass {
					t.Fatalf("seed %d: %v", seed, r)
				}
				t.Log(r)
			})
		}
	}
}

// TestDivider checks the kernel's division by multiplication against plain
// division, at the ends of the range and at random.
func TestDivider(t *testing.T) {
	rng, seed := tensor.NewRNG()
	div := func(n, d uint32) uint32 {
		if d == 1 {
			return n
		}
		mul, shr := divider(d)
		return uint32(uint64(n)*uint64(mul)>>32) >> shr
	}
	ds := []uint32{1, 2, 3, 5, 7, 32, 100, 360, 1 << 20, 1<<20 + 1, 3584, math.MaxInt32, math.MaxInt32 - 1, 1 << 30}
	for range 200 {
		ds = append(ds, 1+rng.Uint32N(math.MaxInt32))
	}
	for _, d := range ds {
		ns := []uint32{0, 1, d - 1, d, d + 1, 2*d - 1, math.MaxInt32, math.MaxInt32 - 1}
		for range 2000 {
			ns = append(ns, rng.Uint32N(math.MaxInt32))
		}
		for _, n := range ns {
			if n > math.MaxInt32 {
				continue
			}
			if got := div(n, d); got != n/d {
				t.Fatalf("seed %d: %d/%d = %d, want %d", seed, n, d, got, n/d)
			}
		}
	}
}
