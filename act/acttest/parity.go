package acttest

import (
	"math"
	"math/rand/v2"

	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/tensor"
)

// Filling says how an input is drawn (see Fill).
type Filling int

// The fillings of the parity cases.
const (
	FillNormal  Filling = iota // N(0, 3²): both tails of every activation
	FillWide                   // ±10^u, log-uniform magnitudes from 1e-3 up to 1e30 (6e4 for fp16)
	FillSpecial                // N(0, 3²) within ±8, with NaN, +inf and −inf among it
)

// Fill sets every element of the host tensor t as f says, drawing from
// rng.
func Fill(t *tensor.Tensor, rng *rand.Rand, f Filling) {
	v := make([]float64, t.Numel())
	for i := range v {
		switch f {
		case FillWide:
			v[i] = math.Pow(10, -3+rng.Float64()*(math.Log10(wideMax(t.DType()))+3))
			if rng.IntN(2) == 0 {
				v[i] = -v[i]
			}
		case FillSpecial:
			// Within ±8 no activation's fp32 value flushes to zero (the
			// GELU tail would near 13), so that a special up value meets
			// the same gate on both sides: inf·0 is NaN, inf·tiny is not.
			v[i] = max(-8, min(8, 3*rng.NormFloat64()))
			switch {
			case i%7 == 3:
				v[i] = math.NaN()
			case i%11 == 5:
				v[i] = math.Inf(1)
			case i%13 == 6:
				v[i] = math.Inf(-1)
			}
		default:
			v[i] = 3 * rng.NormFloat64()
		}
	}
	t.SetFloat64s(v)
}

// wideMax bounds the magnitudes of FillWide: far out in every format, yet
// small enough that an fp32 gate whose activation is subnormal (and so has
// few significant bits) times an up value stays under the fp32 tolerance.
func wideMax(dt tensor.DType) float64 {
	if dt == tensor.F16 {
		return 6e4
	}
	return 1e30
}

// tolerance: a bf16 result rounded once from fp32 against one rounded once
// from float64 is at most one unit apart, so bf16 takes atol = rtol =
// 1.6e-2; fp16 and fp32 take check.ForDType. The kernels' fp32 math (fast
// ex2 and rcp, tanhf, act.cu's fitted erfc) adds less than either.
func tolerance(dt tensor.DType) check.Tolerance {
	if dt == tensor.BF16 {
		return check.Tolerance{Atol: 1.6e-2, Rtol: 1.6e-2, RelNorm: 8e-3}
	}
	return check.ForDType(dt)
}

var dtypes = []tensor.DType{tensor.BF16, tensor.F16, tensor.F32}

// caseDef is one parity case: the input shape and, when not contiguous,
// the strides of x and y; the fill; in-place (unary only).
type caseDef struct {
	name    string
	shape   []int // of x
	xs, ys  []int // strides; nil: contiguous
	fill    Filling
	inplace bool
}

// hostTensor is a zeroed host tensor, contiguous when strides is nil.
func hostTensor(dt tensor.DType, shape, strides []int) (*tensor.Tensor, error) {
	if strides == nil {
		strides = tensor.ContiguousStrides(shape)
	}
	return tensor.NewStrided(dt, shape, strides)
}

// parity builds the check of one case: run calls the op on y and x, on the
// host (the reference) or on the device (the kernel). A gated op's y has
// half x's last dimension.
func parity(c caseDef, dt tensor.DType, gated bool, run call) check.Case {
	return check.Case{Name: c.name + " " + dt.String(), Spec: func(rng *rand.Rand) (check.Spec, error) {
		x, err := hostTensor(dt, c.shape, c.xs)
		if err != nil {
			return check.Spec{}, err
		}
		Fill(x, rng, c.fill)
		if c.inplace {
			return check.Spec{
				Tensors: []*tensor.Tensor{x}, Names: []string{"x"}, Outputs: []int{0},
				Tol: map[int]check.Tolerance{0: tolerance(dt)},
				Run: func(s *cuda.Stream, ts []*tensor.Tensor) error { return run(s, ts[0], ts[0]) },
			}, nil
		}
		yShape := append([]int(nil), c.shape...)
		if gated {
			yShape[len(yShape)-1] /= 2
		}
		y, err := hostTensor(dt, yShape, c.ys)
		if err != nil {
			return check.Spec{}, err
		}
		return check.Spec{
			Tensors: []*tensor.Tensor{x, y}, Names: []string{"x", "y"}, Outputs: []int{1}, Poison: []int{1},
			Tol: map[int]check.Tolerance{1: tolerance(dt)},
			Run: func(s *cuda.Stream, ts []*tensor.Tensor) error { return run(s, ts[1], ts[0]) },
		}, nil
	}}
}
