package act

import (
	"math"

	"github.com/gokittens/kittens/tensor"
)

// sigmoid is σ(z) = 1/(1 + e^−z), evaluated through e^−|z| so that neither
// tail overflows or cancels: σ(−1000) is a tiny positive number, not 0/∞.
func sigmoid(z float64) float64 {
	e := math.Exp(-math.Abs(z))
	if z >= 0 {
		return 1 / (1 + e)
	}
	return e / (1 + e)
}

// activation evaluates kind at x in float64. alpha scales the argument of
// the sigmoid of SiLU (SwiGLU's α; 1 for plain SiLU) and is ignored by the
// other kinds.
func activation(kind Kind, x, alpha float64) float64 {
	switch kind {
	case KindSiLU:
		return x * sigmoid(alpha*x)
	case KindGELU:
		if math.IsInf(x, 1) {
			return math.NaN() // as the kernel does; see GELU
		}
		// ½·x·(1 + erf(x/√2)) = ½·x·erfc(−x/√2); erfc keeps the negative tail.
		return 0.5 * x * math.Erfc(-x/math.Sqrt2)
	case KindGELUTanh:
		// ½·(1 + tanh(z)) = σ(2z): the same function without cancellation.
		z := math.Sqrt(2/math.Pi) * (x + 0.044715*x*x*x)
		return x * sigmoid(2*z)
	case KindReLU:
		if x < 0 {
			return 0
		}
		return x // NaN stays NaN
	case KindTanh:
		return math.Tanh(x)
	}
	panic("act: unknown kind")
}

// unaryRef is the CPU reference of Unary; y may be x.
func unaryRef(y, x *tensor.Tensor, kind Kind) {
	v := x.Float64s()
	for i, xi := range v {
		v[i] = activation(kind, xi, 1)
	}
	y.SetFloat64s(v)
}

// clampHi returns min(v, hi), keeping NaN (math.Min would too, but the
// kernel's comparison form is spelled the same way here).
func clampHi(v, hi float64) float64 {
	if v > hi {
		return hi
	}
	return v
}

// gatedRef is the CPU reference of the gated ops.
func gatedRef(y, x *tensor.Tensor, p gatedParams) {
	in := x.Float64s()
	out := make([]float64, y.Numel())
	d := y.Dim(-1)
	for r := range len(out) / d {
		row := in[r*2*d : (r+1)*2*d]
		for i := range d {
			g, u := row[i], row[d+i]
			if p.Layout == Interleaved {
				g, u = row[2*i], row[2*i+1]
			}
			if p.GateSecond {
				g, u = u, g
			}
			if p.Limit > 0 {
				g = clampHi(g, p.Limit)
				u = -clampHi(-clampHi(u, p.Limit), p.Limit)
			}
			out[r*d+i] = activation(p.Kind, g, p.alpha) * (u + p.upAdd)
		}
	}
	y.SetFloat64s(out)
}
