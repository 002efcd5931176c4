package act_test

import (
	"math"
	"slices"
	"testing"

	"github.com/gokittens/kittens/act"
	"github.com/gokittens/kittens/act/acttest"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/fuzzargs"
	"github.com/gokittens/kittens/tensor"
)

// FuzzUnary calls Unary (with fuzzed, also unknown, kinds) and SiLU, GELU,
// GELUTanh, ReLU and Tanh on the CPU path with fuzzed host tensors: nil,
// rank 0 to 4, any float or non-float dtype, padded rows (collapsible or
// not), y as x itself, as a view of x's storage or as a view into a buffer
// that x may overlap. Every call must return without panicking; an error
// must be a non-empty tensor.ArgError naming one of the op's arguments,
// with no byte of any tensor written, and none where the call's layouts
// and aliasing are valid (rows of one stride, y disjoint from x or x
// itself) and dense copies of x and y pass; a success must write only y's
// elements, and write there what the op gives for the dense copies.
func FuzzUnary(f *testing.F) {
	fuzzargs.AddRandomSeeds(f, 24)
	ops := []func(s *cuda.Stream, y, x *tensor.Tensor) error{act.SiLU, act.GELU, act.GELUTanh, act.ReLU, act.Tanh}
	f.Fuzz(func(t *testing.T, data []byte) {
		a := newFuzzArena(data)
		var op func(y, x *tensor.Tensor) error
		if i := a.In.N(len(ops) + 1); i < len(ops) {
			fn := ops[i]
			op = func(y, x *tensor.Tensor) error { return fn(nil, y, x) }
		} else {
			kind := a.kind()
			op = func(y, x *tensor.Tensor) error { return act.Unary(nil, y, x, kind) }
		}
		var x, y *tensor.Tensor
		if !a.In.One(32) {
			x = a.tensor(a.In.DType(), a.In.Shape(a.In.N(5)))
		}
		y, ok := a.Partner(x)
		if !ok {
			y = a.tensor(a.In.DTypeLike(x), a.likeShape(x, false))
		}
		a.Check(t, fuzzargs.Call{
			Pkg: "act", Args: []string{"x", "y", "kind"}, Outs: []*tensor.Tensor{y},
			Ref: denseRef(op, y, x),
			Run: func() error { return op(y, x) },
			Accepted: func() bool {
				return collapses(x) && collapses(y) && (!tensor.Overlap(y, x) || tensor.Same(y, x))
			},
		})
	})
}

// FuzzGated calls Gated (with fuzzed options: unknown kinds and layouts,
// limits negative, -0, NaN, ±inf or huge, the gate in either half),
// SiLUAndMul, MulAndSiLU, GELUAndMul, GELUTanhAndMul and SwiGLU (fuzzed
// layout) on the CPU path with fuzzed host tensors as FuzzUnary builds
// them, plus x and y as column slices of one buffer and y inside x. The
// promises checked are FuzzUnary's: no panic; an error is a non-empty
// ArgError naming an argument, with nothing written, and none where the
// layouts are valid, y does not overlap x and dense copies pass; a success
// writes only y's elements, with the values dense copies give.
func FuzzGated(f *testing.F) {
	fuzzargs.AddRandomSeeds(f, 24)
	named := []func(s *cuda.Stream, y, x *tensor.Tensor) error{act.SiLUAndMul, act.MulAndSiLU, act.GELUAndMul, act.GELUTanhAndMul}
	f.Fuzz(func(t *testing.T, data []byte) {
		a := newFuzzArena(data)
		var op func(y, x *tensor.Tensor) error
		switch i := a.In.N(len(named) + 2); {
		case i < len(named):
			fn := named[i]
			op = func(y, x *tensor.Tensor) error { return fn(nil, y, x) }
		case i == len(named):
			layout := a.layout()
			op = func(y, x *tensor.Tensor) error { return act.SwiGLU(nil, y, x, layout) }
		default:
			o := act.GatedOptions{Kind: a.kind(), Layout: a.layout(), GateSecond: a.In.One(2), Limit: a.limit()}
			op = func(y, x *tensor.Tensor) error { return act.Gated(nil, y, x, o) }
		}
		var x, y *tensor.Tensor
		if a.In.One(8) {
			// x and y as columns [0, 2d) and [2d, 3d) of one [..., 3d]
			// buffer: no element shared, yet their spans overlap.
			shape := a.In.Shape(1 + a.In.N(4))
			d := shape[len(shape)-1]
			shape[len(shape)-1] = 3 * d
			buf := a.tensor(a.In.DType(), shape)
			x = fuzzargs.Slice(buf, len(shape)-1, 0, 2*d)
			y = fuzzargs.Slice(buf, len(shape)-1, 2*d, 3*d)
		} else {
			if !a.In.One(32) {
				shape := a.In.Shape(a.In.N(5))
				if len(shape) > 0 && !a.In.One(8) {
					shape[len(shape)-1] *= 2 // an even last dimension, mostly
				}
				x = a.tensor(a.In.DType(), shape)
			}
			switch m := a.In.N(16); {
			case m == 0: // nil
			case m == 1 && x != nil: // y is x
				y = x
			case m <= 3 && x != nil: // y inside x's storage
				shape := a.likeShape(x, true)
				y = fuzzargs.View(x, x.DType(), shape, a.In.GapStrides(shape))
			default:
				y = a.tensor(a.In.DTypeLike(x), a.likeShape(x, true))
			}
		}
		a.Check(t, fuzzargs.Call{
			Pkg: "act", Args: []string{"x", "y", "kind", "layout", "limit"}, Outs: []*tensor.Tensor{y},
			Ref:      denseRef(op, y, x),
			Run:      func() error { return op(y, x) },
			Accepted: func() bool { return collapses(x) && collapses(y) && !tensor.Overlap(y, x) },
		})
	})
}

// denseRef returns the fuzzargs.Call.Ref of op(y, x): op on a dense copy of x
// into a dense y.
func denseRef(op func(y, x *tensor.Tensor) error, y, x *tensor.Tensor) func() ([][]byte, error) {
	return func() ([][]byte, error) {
		yc := fuzzargs.ZerosLike(y)
		if err := op(yc, fuzzargs.DenseCopy(x)); err != nil {
			return nil, err
		}
		return [][]byte{yc.Bytes()}, nil
	}
}

// collapses reports whether t (of rank ≥ 1) is rows of one stride, the
// layouts the package doc accepts.
func collapses(t *tensor.Tensor) bool {
	_, _, ok := act.RowsOf(t)
	return ok
}

// fuzzArena builds the tensors of one fuzzed call (fuzzargs.Arena) with
// act's own choices.
type fuzzArena struct{ *fuzzargs.Arena }

func newFuzzArena(data []byte) fuzzArena { return fuzzArena{fuzzargs.NewSeededArena(data)} }

// tensor returns a tensor of dt and shape with fuzzed row padding, in
// storage of its own (random bits, or values of a parity case's filling)
// or a view into the arena.
func (a fuzzArena) tensor(dt tensor.DType, shape []int) *tensor.Tensor {
	x, own := a.Strided("a tensor", dt, shape)
	if own {
		if m := a.In.N(4); m == 0 || dt == tensor.U8 {
			a.Scramble(x)
		} else {
			acttest.Fill(x, a.Rand, acttest.Filling(m-1))
		}
	}
	return x
}

var (
	fuzzBadKinds = []act.Kind{act.NumKinds, -1, 1 << 40, math.MinInt}
	fuzzLimits   = []float64{0, 0, 0.5, 1, 2.5, act.SwiGLULimit, 1e30, math.MaxFloat64, math.SmallestNonzeroFloat64,
		math.Copysign(0, -1), -1, -math.SmallestNonzeroFloat64, math.NaN(), math.Inf(1), math.Inf(-1)}
)

// likeShape is mostly x's shape (with the last dim halved when gated).
func (a fuzzArena) likeShape(x *tensor.Tensor, gated bool) []int {
	if x == nil || a.In.One(8) {
		return a.In.Shape(a.In.N(5))
	}
	s := slices.Clone(x.Shape())
	if gated && len(s) > 0 {
		s[len(s)-1] /= 2
	}
	return s
}

// kind returns an activation, now and then an unknown one.
func (a fuzzArena) kind() act.Kind {
	b := a.In.Byte()
	if b >= 224 {
		return fuzzBadKinds[b%len(fuzzBadKinds)]
	}
	return act.Kind(b % int(act.NumKinds))
}

// layout returns Halves or Interleaved, now and then an unknown layout.
func (a fuzzArena) layout() act.Layout {
	b := a.In.Byte()
	if b >= 224 {
		return []act.Layout{2, -1, 1 << 40}[b%3]
	}
	return act.Layout(b % 2)
}

// limit returns a clamp limit, valid or not.
func (a fuzzArena) limit() float64 { return fuzzargs.Pick(a.In, fuzzLimits...) }
