package fuzzargs

import (
	"math"
	"slices"

	"github.com/gokittens/kittens/tensor"
)

// MaxArgBytes bounds the storage of a tensor Arg makes: a larger layout
// loses its rows (dimension 0 becomes 0).
const MaxArgBytes = 1 << 16

// argDTypes are the dtypes Arg swaps in.
var argDTypes = []tensor.DType{tensor.I32, tensor.F8E4M3, tensor.U8, tensor.F16, tensor.F32, tensor.BF16}

// Arg returns the argument name, meant to be a dt tensor of shape, as the
// input makes it: often just that, else with another dtype, rank or size,
// padded rows, odd strides on dimensions of 1, a view into the arena
// (Somewhere), an earlier tensor itself, or nil.
func (a *Arena) Arg(name string, dt tensor.DType, shape ...int) *tensor.Tensor {
	in := a.In
	place := in.N(16)
	switch {
	case place == 15:
		return nil
	case place >= 13 && len(a.Made) > 0:
		return a.Made[in.N(len(a.Made))]
	}
	shape = slices.Clone(shape)
	mutation := in.Rare(7)
	switch mutation {
	case 1:
		dt = Pick(in, argDTypes...)
	case 2:
		shape = make([]int, in.N(4))
		for i := range shape {
			shape[i] = in.Dim(70)
		}
	case 3:
		if i := in.N(max(len(shape), 1)); len(shape) > 0 && shape[i] < math.MaxInt {
			shape[i]++
		}
	case 4:
		if len(shape) > 0 {
			i := in.N(len(shape))
			shape[i] = max(shape[i]-1, 0)
		}
	case 5:
		shape = append(shape, 1)
	case 6:
		if len(shape) > 0 {
			shape = shape[1:]
		}
	}
	strides := PaddedStrides(shape, Pick(in, 0, 0, 0, 1, 2, 7))
	if mutation == 7 { // a dimension of 1 steps by anything
		for i := range len(shape) - 1 {
			if shape[i] == 1 {
				strides[i] = 1 + in.Byte()
			}
		}
	}
	if !fits(dt, shape, strides) {
		shape[0] = 0
	}
	if place >= 10 {
		if t := a.Somewhere(dt, shape, strides); t != nil {
			return t
		}
	}
	return a.Own(name, dt, shape, strides)
}

// fits reports whether a layout spans at most MaxArgBytes.
func fits(dt tensor.DType, shape, strides []int) bool {
	if slices.Contains(shape, 0) {
		return true
	}
	n := 1
	for i, d := range shape {
		if strides[i] > MaxArgBytes || d > MaxArgBytes {
			return false
		}
		n += (d - 1) * strides[i]
	}
	return n*dt.Size() <= MaxArgBytes
}

// Specials are the values the odd tensors Fill makes hold now and then.
var Specials = []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 65504, -65504,
	math.MaxFloat32, -math.MaxFloat32, 3.3e38, 0x1p-140, 5e-324, 1e19, 0x1p-24}

// Fill poisons every root (gaps read as NaN), then gives each tensor of
// Made values of a fuzzed kind (normal; small integers, for exact sums and
// rows of zeros; zeros; mixed magnitudes with Specials; near the top of
// fp32's range), in the order they were made, so that views that overlap
// overwrite each other, and takes the Snapshot.
func (a *Arena) Fill() {
	for _, r := range a.roots {
		r.t.Poison()
	}
	rng := a.Rand
	for _, t := range a.Made {
		vals := make([]float64, t.Numel())
		kind := a.In.N(5)
		for i := range vals {
			switch kind {
			case 0:
				vals[i] = rng.NormFloat64()
			case 1:
				vals[i] = float64(rng.IntN(5) - 2)
			case 2:
				vals[i] = 0
			case 3:
				if rng.IntN(4) == 0 {
					vals[i] = Specials[rng.IntN(len(Specials))]
				} else {
					vals[i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(9)-4))
				}
			default:
				vals[i] = (2*rng.Float64() - 1) * math.Ldexp(1, 60+rng.IntN(68))
			}
		}
		t.SetFloat64s(vals)
	}
	a.Snapshot()
}

// SameValues reports whether got and want agree bit for bit, but that any
// NaN matches any NaN.
func SameValues(got, want []float64) bool {
	return slices.EqualFunc(got, want, func(g, w float64) bool {
		return math.Float64bits(g) == math.Float64bits(w) || (math.IsNaN(g) && math.IsNaN(w))
	})
}

// Values are the elements of t, nil for nil.
func Values(t *tensor.Tensor) []float64 {
	if t == nil {
		return nil
	}
	return t.Float64s()
}
