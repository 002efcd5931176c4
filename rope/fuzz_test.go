package rope

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/gokittens/kittens/internal/fuzzargs"
	"github.com/gokittens/kittens/tensor"
)

// FuzzRotateQK calls RotateQK on the CPU path with fuzzed arguments: q and
// k fresh, with padded token and head strides, as head slices of one packed
// qkv buffer (disjoint or overlapping), as views into a buffer that the
// positions and the cache may share, or k nil or q itself; ranks and dtypes
// right or wrong; odd, zero and large head dims; positions int64, int32 or
// of a wrong dtype or length, with values in the cache, negative, past it
// or at the int64 extremes; caches of 0 to 64 rows, of the right or a
// wrong width and dtype; every style, rotary dims zero, partial, odd,
// negative or past the head dim; TrustPositions either way. Every call
// must return without panicking; an error must be a non-empty
// tensor.ArgError naming an argument (not o.RotaryDim when that was 0),
// with no byte of any tensor written, and none where q and k overlap no
// other argument and dense copies pass; a success must write only q's and
// k's elements, the values that dense copies of the arguments give, and
// leave the dims past the rotary ones bit for bit as they were.
func FuzzRotateQK(f *testing.F) {
	fuzzargs.AddRandomSeeds(f, 24)
	f.Fuzz(func(t *testing.T, data []byte) {
		a := newFuzzArena(data)
		o := Options{Style: a.style(), TrustPositions: a.In.One(2)}
		T, hq, hk, d, dt := a.In.Size(), a.In.Size(), a.In.Size(), a.headDim(), a.In.DType()
		o.RotaryDim = a.rotaryDim(d)
		var q, k *tensor.Tensor
		switch m := a.In.N(32); {
		case m == 0: // nil q
		case m == 1: // q of another rank
			q = a.tensor(dt, a.In.Shape(a.In.N(5)))
		case m <= 16: // a packed qkv: q, k, v heads of one buffer
			hv := a.In.Size()
			qkv := a.tensor(dt, fuzzargs.Capped([]int{T, hq + hk + hv, d}))
			if qkv.Dim(1) != hq+hk+hv {
				break
			}
			q = fuzzargs.Slice(qkv, 1, 0, hq)
			k0 := hq
			switch a.In.N(16) {
			case 0:
				k0 = max(0, hq-1-a.In.N(2)) // into q
			case 1, 2:
				k0 = hq + hv // after v
			}
			if k0+hk <= qkv.Dim(1) {
				k = fuzzargs.Slice(qkv, 1, k0, k0+hk)
			}
		default:
			q = a.tensor(dt, fuzzargs.Capped([]int{T, hq, d}))
		}
		if k == nil && q != nil {
			switch m := a.In.N(32); {
			case m <= 5: // nil k
			case m == 6: // k is q
				k = q
			case m == 7: // k of another rank, dtype or shape
				k = a.tensor(a.In.DTypeLike(q), a.In.Shape(a.In.N(5)))
			default:
				k = a.tensor(a.In.DTypeLike(q), fuzzargs.Capped([]int{T, hk, d}))
			}
		}
		var positions *tensor.Tensor
		maxPos := []int{0, 1, 2, 3, 5, 8, 9, 16, 64}[a.In.N(9)]
		if !a.In.One(32) {
			pdt, n := tensor.I64, T
			switch a.In.N(16) {
			case 0, 1, 2, 3:
				pdt = tensor.I32
			case 4:
				pdt = a.In.DType()
			case 5:
				n = a.In.Size()
			}
			positions = a.tensor(pdt, []int{n})
			p := make([]int64, n)
			for i := range p {
				if a.In.One(64) {
					p[i] = []int64{-1, int64(maxPos), math.MaxInt32 + 1, math.MinInt32, math.MaxInt64, math.MinInt64}[a.In.N(6)]
				} else {
					p[i] = int64(a.In.N(max(maxPos, 1)))
				}
			}
			positions.SetInt64s(p)
		}
		var cosSin *tensor.Tensor
		if !a.In.One(32) {
			r, cdt := o.rotaryDim(d), tensor.F32
			switch a.In.N(16) {
			case 0, 1, 2, 3:
				cdt = dt
			case 4:
				cdt = a.In.DType()
			case 5:
				r += 2*a.In.N(3) - 2
			}
			cosSin = a.table(cdt, maxPos, r, nil)
		}
		outs := []*tensor.Tensor{q, k}
		rot := o.rotaryDim(d)
		passBefore := [][]byte{passThrough(q, rot), passThrough(k, rot)}
		err := a.Check(t, fuzzargs.Call{
			Pkg: "rope", Args: []string{"q", "k", "positions", "cosSin", "o.Style", "o.RotaryDim"}, Outs: outs,
			Ref: func() ([][]byte, error) {
				qc, kc := fuzzargs.DenseCopy(q), fuzzargs.DenseCopy(k)
				if err := RotateQK(nil, qc, kc, fuzzargs.DenseCopy(positions), fuzzargs.DenseCopy(cosSin), o); err != nil {
					return nil, err
				}
				return [][]byte{bytesOf(qc), bytesOf(kc)}, nil
			},
			Run: func() error { return RotateQK(nil, q, k, positions, cosSin, o) },
			Accepted: func() bool { // strides are free; the written tensors overlap nothing
				return !overlapsAny(q, k, positions, cosSin) && !overlapsAny(k, positions, cosSin)
			},
		})
		checkDefaultRotaryDim(t, err, o)
		if err == nil {
			for i, x := range outs {
				if got := passThrough(x, rot); !bytes.Equal(got, passBefore[i]) {
					t.Fatalf("pass-through dims [%d, %d) of %s changed: %x, were %x", rot, d, []string{"q", "k"}[i], got, passBefore[i])
				}
			}
		}
	})
}

// FuzzRope calls Rope on the CPU path with fuzzed arguments: x [B, H, S, D]
// (or of another rank or dtype) with padded strides, y fresh, x itself, a
// view of x's storage with the same or another layout, or a view into a
// buffer that x and the tables may share; cos and sin tables with too few,
// enough or extra rows, the right or a wrong width and dtype, sin the same
// tensor as cos; every style and rotary dim as FuzzRotateQK fuzzes them.
// Every call must return without panicking; an error must be a non-empty
// tensor.ArgError naming an argument (not o.RotaryDim when that was 0),
// with no byte of any tensor written, and none where y is x or overlaps
// none of x, cos and sin and dense copies pass; a success must write only
// y's elements, the values that dense copies of the arguments give, with the
// dims past the rotary ones copied from x bit for bit.
func FuzzRope(f *testing.F) {
	fuzzargs.AddRandomSeeds(f, 24)
	f.Fuzz(func(t *testing.T, data []byte) {
		a := newFuzzArena(data)
		o := Options{Style: a.style(), TrustPositions: a.In.One(2)}
		var x, y *tensor.Tensor
		shape := fuzzargs.Capped([]int{a.In.Size(), a.In.Size(), a.In.Size(), a.headDim()})
		switch m := a.In.N(32); {
		case m == 0: // nil x
		case m == 1: // x of another rank
			x = a.tensor(a.In.DType(), a.In.Shape(a.In.N(5)))
		default:
			x = a.tensor(a.In.DType(), shape)
		}
		d := shape[3]
		if x != nil && x.Rank() > 0 {
			d = x.Dim(-1)
		}
		o.RotaryDim = a.rotaryDim(d)
		y, ok := a.Partner(x)
		switch {
		case ok:
		case a.In.One(16): // another shape
			y = a.tensor(a.In.DTypeLike(x), a.In.Shape(a.In.N(5)))
		default:
			y = a.tensor(a.In.DTypeLike(x), shape)
		}
		r, cdt := o.rotaryDim(d), tensor.F32
		switch a.In.N(16) {
		case 0, 1, 2, 3:
			if x != nil {
				cdt = x.DType()
			}
		case 4:
			cdt = a.In.DType()
		case 5:
			r += 2*a.In.N(3) - 2
		}
		rows := max(0, shape[2]+[]int{0, 0, 0, 0, 0, 1, 5, -1}[a.In.N(8)])
		var cos, sin *tensor.Tensor
		if !a.In.One(32) {
			cos, sin = a.tables(cdt, rows, r)
			switch a.In.N(32) {
			case 0:
				sin = nil
			case 1, 2:
				sin = cos
			case 3:
				sin = a.table(a.In.DType(), rows, r/2, nil)
			}
		}
		rot := o.rotaryDim(d)
		passBefore := passThrough(x, rot)
		err := a.Check(t, fuzzargs.Call{
			Pkg: "rope", Args: []string{"x", "y", "cos", "sin", "o.Style", "o.RotaryDim"}, Outs: []*tensor.Tensor{y},
			Ref: func() ([][]byte, error) {
				yc := fuzzargs.ZerosLike(y)
				if err := Rope(nil, yc, fuzzargs.DenseCopy(x), fuzzargs.DenseCopy(cos), fuzzargs.DenseCopy(sin), o); err != nil {
					return nil, err
				}
				return [][]byte{bytesOf(yc)}, nil
			},
			Run: func() error { return Rope(nil, y, x, cos, sin, o) },
			Accepted: func() bool { // strides are free; y is x or overlaps nothing
				return (tensor.Same(y, x) || !tensor.Overlap(y, x)) && !overlapsAny(y, cos, sin)
			},
		})
		checkDefaultRotaryDim(t, err, o)
		if err == nil {
			if got := passThrough(y, rot); !bytes.Equal(got, passBefore) {
				t.Fatalf("pass-through dims [%d, %d) of y: %x, x had %x", rot, d, got, passBefore)
			}
		}
	})
}

// overlapsAny reports whether out's storage span overlaps that of any of
// ts (nil tensors overlap nothing).
func overlapsAny(out *tensor.Tensor, ts ...*tensor.Tensor) bool {
	return slices.ContainsFunc(ts, func(t *tensor.Tensor) bool { return tensor.Overlap(out, t) })
}

// checkDefaultRotaryDim fails t when err blames o.RotaryDim although it
// was 0, which asks for nothing but the head dim: the error belongs to the
// tensor whose head dim is wrong.
func checkDefaultRotaryDim(t *testing.T, err error, o Options) {
	t.Helper()
	var ae *tensor.ArgError
	if o.RotaryDim == 0 && errors.As(err, &ae) && ae.Arg == "o.RotaryDim" {
		t.Fatalf("error %q names o.RotaryDim, which was 0 (the whole head dim)", err)
	}
}

// fuzzArena builds the tensors of one fuzzed call (fuzzargs.Arena) with
// rope's own choices.
type fuzzArena struct{ *fuzzargs.Arena }

func newFuzzArena(data []byte) fuzzArena { return fuzzArena{fuzzargs.NewSeededArena(data)} }

// fuzzMaxTableCols bounds the width of fuzzed cos/sin tables (rotary dims
// past any fuzzed head dim are refused before a table is read).
const fuzzMaxTableCols = 512

// tensor returns a tensor of dt and shape with fuzzed row padding, in
// storage of its own (random bits or uniform values) or a view into the
// arena.
func (a fuzzArena) tensor(dt tensor.DType, shape []int) *tensor.Tensor {
	x, own := a.Strided("a tensor", dt, shape)
	if own {
		if a.In.One(2) || dt == tensor.U8 {
			a.Scramble(x)
		} else {
			x.FillUniform(a.Rand, -2, 2)
		}
	}
	return x
}

// table returns a [rows, cols] table of dt: the cache CosSinCache builds
// (or, with src, src's values: the tables cosSinTables builds), copied
// into a fuzzed tensor, where those are valid; random otherwise.
func (a fuzzArena) table(dt tensor.DType, rows, cols int, src *tensor.Tensor) *tensor.Tensor {
	x := a.tensor(dt, fuzzargs.Capped([]int{max(rows, 0), min(max(cols, 0), fuzzMaxTableCols)}))
	if src == nil && cols > 0 && cols%2 == 0 && dt.IsFloat() {
		src = mustCache(dt, x.Dim(0), x.Dim(1))
	}
	if src != nil && slices.Equal(src.Shape(), x.Shape()) {
		x.SetFloat64s(src.Float64s())
	}
	return x
}

// tables returns Rope's cos and sin tables [rows, r/2] of dt, copied into
// fuzzed tensors.
func (a fuzzArena) tables(dt tensor.DType, rows, r int) (cos, sin *tensor.Tensor) {
	var c, s *tensor.Tensor
	if r > 0 && r%2 == 0 && r <= 2*fuzzMaxTableCols && dt.IsFloat() {
		c, s = cosSinTables(dt, rows, r)
	}
	return a.table(dt, rows, r/2, c), a.table(dt, rows, r/2, s)
}

// passThrough returns the bits of x's dims [r, D) (nil where x has no
// such dims).
func passThrough(x *tensor.Tensor, r int) []byte {
	if x == nil || x.Rank() == 0 || r < 0 || r > x.Dim(-1) {
		return nil
	}
	return fuzzargs.ElemBytes(fuzzargs.Slice(x, x.Rank()-1, r, x.Dim(-1)))
}

var (
	fuzzHeadDims = []int{2, 4, 6, 8, 10, 16, 32, 64, 128, 130}
	fuzzOddHeads = []int{0, 1, 3, 7, 9, 33}
)

// headDim returns a head dim, mostly even.
func (a fuzzArena) headDim() int {
	b := a.In.Byte()
	if b >= 240 {
		return fuzzOddHeads[b%len(fuzzOddHeads)]
	}
	return fuzzHeadDims[b%len(fuzzHeadDims)]
}

// rotaryDim returns Options.RotaryDim for head dim d: mostly 0 (all of d)
// or a partial one, now and then an invalid one.
func (a fuzzArena) rotaryDim(d int) int {
	switch b := a.In.Byte(); {
	case b < 96:
		return 0
	case b < 144:
		return d
	case b < 208:
		return max(2, d/2&^1)
	case b < 232:
		return 2
	default:
		return []int{d + 2, d - 1, -2, 3, 1 << 40}[b%5]
	}
}

// style returns NeoX or GPTJ, now and then an unknown style.
func (a fuzzArena) style() Style {
	b := a.In.Byte()
	if b >= 232 {
		return []Style{2, -1, 1 << 40}[b%3]
	}
	return Style(b % 2)
}

// bytesOf returns t's storage (nil for nil).
func bytesOf(t *tensor.Tensor) []byte {
	if t == nil {
		return nil
	}
	return t.Bytes()
}
