// Package act holds the activation functions of LLM inference: elementwise
// SiLU, GELU (exact and tanh forms), ReLU and tanh, and the gated
// activations that follow a merged gate/up projection (silu_and_mul,
// gelu_and_mul, gelu_tanh_and_mul, vLLM's mul_and_silu, and the clamped
// SwiGLU of gpt-oss).
//
// Every op takes bf16, fp16 or fp32 tensors; output and input share the
// dtype. Arithmetic is fp32 on the GPU (float64 in the CPU reference) and the
// result is rounded once to the output dtype. As everywhere in kittens, host
// tensors run the CPU reference and device tensors the kernel, after the
// same validation; a nil stream means the device's default stream.
//
// Layouts. The last dimension is contiguous; the leading dimensions may have
// any strides that collapse into one row stride (a row-major tensor, or rows
// with padding between them). Unary ops accept any such shape, and in-place
// calls (y the same tensor as x). Gated ops read x of shape [..., 2d] and
// write y of shape [..., d]; y must not overlap x.
//
// Accuracy. The kernels use the hardware's fast exp2 and reciprocal and a
// fitted erfc with no 1 − erf cancellation in the negative tail, whose
// degree suits the output: relative error ~1e-7 for fp32 outputs (a few
// fp32 ulps where the values are of ordinary size, within the fp32
// tolerance of the tests), 7.6e-5 for bf16 and fp16 outputs (under a third
// of an fp16 rounding error, far below a bf16 one).
// Finite inputs give finite, correctly signed results; the far negative
// tails (σ(z) below about e^−87) flush to ±0. NaN in gives NaN out, also
// through the clamps. The CPU reference evaluates the same functions in
// float64 in cancellation-free forms.
package act

import (
	"fmt"
	"math"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/tensor"
)

// Kind names an activation function.
type Kind int

// The activation functions.
const (
	KindSiLU     Kind = iota // silu(x) = x·σ(x)
	KindGELU                 // gelu(x) = ½·x·(1 + erf(x/√2)), PyTorch approximate="none"
	KindGELUTanh             // ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), PyTorch approximate="tanh"
	KindReLU                 // max(0, x)
	KindTanh                 // tanh(x)
	numKinds
)

var kindNames = [numKinds]string{"silu", "gelu", "gelu_tanh", "relu", "tanh"}

// String returns the activation's name ("silu", "gelu_tanh").
func (k Kind) String() string {
	if k < 0 || k >= numKinds {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindNames[k]
}

// Layout says where a gated op finds the gate and the up (linear) values
// within a row of its input.
type Layout int

const (
	// Halves: the gate is the first half x[..., :d], up the second x[..., d:]
	// (vLLM's merged gate_up_proj, AITER's silu_and_mul).
	Halves Layout = iota
	// Interleaved: the gate is the even columns x[..., 0::2], up the odd ones
	// x[..., 1::2] (the gpt-oss checkpoints and triton_kernels' swiglu).
	Interleaved
)

// String returns "halves" or "interleaved".
func (l Layout) String() string {
	switch l {
	case Halves:
		return "halves"
	case Interleaved:
		return "interleaved"
	}
	return fmt.Sprintf("Layout(%d)", int(l))
}

// GatedOptions configure a gated activation.
type GatedOptions struct {
	Kind   Kind   // activation applied to the gate
	Layout Layout // where gate and up are in a row; default Halves
	// GateSecond puts the gate in the second half (the odd columns when
	// Interleaved): y = x[..., :d]·act(x[..., d:]), vLLM's mul_and_silu.
	GateSecond bool
	// Limit > 0 clamps before the activation, as gpt-oss and AITER's
	// silu_and_mul(out, in, limit) do: gate = min(gate, Limit),
	// up = clamp(up, −Limit, Limit). Zero means no clamp.
	Limit float64
}

// The gpt-oss SwiGLU constants.
const (
	SwiGLUAlpha = 1.702 // slope inside the sigmoid
	SwiGLULimit = 7.0   // clamp of gate (above) and up (both sides)
)

// gatedParams is a gated call in full: the options plus the two SwiGLU
// terms, out = act(α·gate)·(up + upAdd) for silu, where act is x·σ(α·x).
type gatedParams struct {
	GatedOptions
	alpha, upAdd float64
}

// Unary computes y = f(x) elementwise for the activation kind. x has any
// shape whose leading dimensions collapse into rows (see the package doc);
// y has x's shape and dtype and may be x itself.
func Unary(s *cuda.Stream, y, x *tensor.Tensor, kind Kind) error {
	return unary("act.Unary", s, y, x, kind)
}

// SiLU computes y = x·σ(x) = x / (1 + e^−x) elementwise; see Unary.
func SiLU(s *cuda.Stream, y, x *tensor.Tensor) error { return unary("act.SiLU", s, y, x, KindSiLU) }

// GELU computes the exact GELU y = ½·x·(1 + erf(x/√2)) elementwise; see Unary.
// Every finite x gives a finite y; x = +inf gives NaN (torch gives +inf),
// which spares every element the check (see act.cu), and −inf gives NaN as in
// torch. GELUAndMul's gate behaves the same.
func GELU(s *cuda.Stream, y, x *tensor.Tensor) error { return unary("act.GELU", s, y, x, KindGELU) }

// GELUTanh computes the tanh approximation of GELU,
// y = ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), elementwise; see Unary.
func GELUTanh(s *cuda.Stream, y, x *tensor.Tensor) error {
	return unary("act.GELUTanh", s, y, x, KindGELUTanh)
}

// ReLU computes y = max(0, x) elementwise (NaN stays NaN); see Unary.
func ReLU(s *cuda.Stream, y, x *tensor.Tensor) error { return unary("act.ReLU", s, y, x, KindReLU) }

// Tanh computes y = tanh(x) elementwise; see Unary.
func Tanh(s *cuda.Stream, y, x *tensor.Tensor) error { return unary("act.Tanh", s, y, x, KindTanh) }

// Gated computes y[..., i] = act(gate_i)·up_i from x of shape [..., 2d]
// into y of shape [..., d], with gate and up placed as o says. The product
// is formed in fp32 and rounded once (as AITER's CK kernels do; vLLM and
// PyTorch's F.silu(a)*b round act(gate) to the dtype first, within one unit
// in the last place of this). d may be any positive size.
func Gated(s *cuda.Stream, y, x *tensor.Tensor, o GatedOptions) error {
	return gated("act.Gated", s, y, x, gatedParams{GatedOptions: o, alpha: 1})
}

// SiLUAndMul computes y = silu(x[..., :d])·x[..., d:]; see Gated.
func SiLUAndMul(s *cuda.Stream, y, x *tensor.Tensor) error {
	return gated("act.SiLUAndMul", s, y, x, gatedParams{GatedOptions: GatedOptions{Kind: KindSiLU}, alpha: 1})
}

// MulAndSiLU computes y = x[..., :d]·silu(x[..., d:]) (vLLM's
// mul_and_silu); see Gated.
func MulAndSiLU(s *cuda.Stream, y, x *tensor.Tensor) error {
	return gated("act.MulAndSiLU", s, y, x,
		gatedParams{GatedOptions: GatedOptions{Kind: KindSiLU, GateSecond: true}, alpha: 1})
}

// GELUAndMul computes y = gelu(x[..., :d])·x[..., d:] with the exact GELU;
// see Gated.
func GELUAndMul(s *cuda.Stream, y, x *tensor.Tensor) error {
	return gated("act.GELUAndMul", s, y, x, gatedParams{GatedOptions: GatedOptions{Kind: KindGELU}, alpha: 1})
}

// GELUTanhAndMul computes y = gelu_tanh(x[..., :d])·x[..., d:]; see Gated.
func GELUTanhAndMul(s *cuda.Stream, y, x *tensor.Tensor) error {
	return gated("act.GELUTanhAndMul", s, y, x,
		gatedParams{GatedOptions: GatedOptions{Kind: KindGELUTanh}, alpha: 1})
}

// SwiGLU computes the gpt-oss activation y = g·σ(α·g)·(u + 1) with
// α = SwiGLUAlpha, g = min(gate, SwiGLULimit) and u = clamp(up, ±SwiGLULimit),
// from x of shape [..., 2d] into y of shape [..., d]. The layout is explicit
// because the two conventions are both in use: Interleaved for the gpt-oss
// checkpoints and triton_kernels, Halves for AITER's swiglu_and_mul.
func SwiGLU(s *cuda.Stream, y, x *tensor.Tensor, layout Layout) error {
	return gated("act.SwiGLU", s, y, x, gatedParams{
		GatedOptions: GatedOptions{Kind: KindSiLU, Layout: layout, Limit: SwiGLULimit},
		alpha:        SwiGLUAlpha, upAdd: 1,
	})
}

var floatTypes = []tensor.DType{tensor.BF16, tensor.F16, tensor.F32}

// rowsOf describes t as rows of its last dimension: how many rows, and the
// stride between consecutive rows. ok is false when the leading dimensions
// do not collapse into one stride. A single row reports its own length as
// the stride, a tensor without elements no rows (its strides do not matter).
func rowsOf(t *tensor.Tensor) (rows, stride int, ok bool) {
	shape, strides := t.Shape(), t.Strides()
	r := len(shape)
	rows, stride = 1, shape[r-1]
	if t.Numel() == 0 {
		return 0, stride, true
	}
	inner := -1 // innermost leading dimension longer than 1 seen so far
	for i := r - 2; i >= 0; i-- {
		if shape[i] == 1 {
			continue
		}
		if inner < 0 {
			stride = strides[i]
		} else if strides[i] != strides[inner]*shape[inner] {
			return 0, 0, false
		}
		inner = i
		rows *= shape[i]
	}
	return rows, stride, true
}

// checkRows records an error unless t's leading dimensions collapse into
// rows.
func checkRows(v *tensor.Validator, name string, t *tensor.Tensor) {
	if v.Err() != nil {
		return
	}
	_, _, ok := rowsOf(t)
	v.Check(ok, name, "has strides %v for shape %v: its leading dimensions must collapse into one row stride",
		t.Strides(), t.Shape())
}

func checkKind(v *tensor.Validator, k Kind) {
	v.Check(k >= 0 && k < numKinds, "kind", "unknown activation %v", k)
}

func unary(op string, s *cuda.Stream, y, x *tensor.Tensor, kind Kind) error {
	v := tensor.Validate(op)
	checkKind(v, kind)
	v.Tensor("x", x).DType(floatTypes...)
	v.Check(x == nil || x.Rank() >= 1, "x", "must have rank ≥ 1")
	v.Tensor("y", y).ShapeOf(x).DTypeOf(x)
	v.SameLocation(s, []string{"x", "y"}, x, y)
	v.NoOverlapUnlessSame("y", y, "x", x)
	checkRows(v, "x", x)
	checkRows(v, "y", y)
	if err := v.Err(); err != nil {
		return err
	}
	if x.Numel() == 0 {
		return nil
	}
	if !x.IsDevice() {
		unaryRef(y, x, kind)
		return nil
	}
	return run(op, s, x.Device(), unaryProblem(y, x, kind))
}

// unaryProblem describes a validated unary call on the device: one flat row
// when both tensors are dense, rows of the last dimension otherwise.
func unaryProblem(y, x *tensor.Tensor, kind Kind) problem {
	rows, sx, _ := rowsOf(x)
	_, sy, _ := rowsOf(y)
	p := problem{kind: kind, dtype: x.DType(), rows: rows, cols: x.Dim(-1), sx: sx, sy: sy,
		x: x.Ptr(), y: y.Ptr(), inplace: tensor.Same(x, y)}
	if x.Contiguous() && y.Contiguous() && x.Numel() <= maxCols {
		p.rows, p.cols, p.sx, p.sy = 1, x.Numel(), x.Numel(), x.Numel()
	}
	return p
}

func gated(op string, s *cuda.Stream, y, x *tensor.Tensor, gp gatedParams) error {
	v := tensor.Validate(op)
	checkKind(v, gp.Kind)
	v.Check(gp.Layout == Halves || gp.Layout == Interleaved, "layout", "unknown layout %v", gp.Layout)
	v.Check(gp.Limit >= 0 && !math.IsInf(gp.Limit, 0), "limit", "is %v; it must be finite and ≥ 0 (0: no clamp)", gp.Limit)
	v.Tensor("x", x).DType(floatTypes...)
	v.Check(x == nil || x.Rank() >= 1, "x", "must have rank ≥ 1")
	v.Check(x == nil || x.Rank() == 0 || x.Dim(-1)%2 == 0, "x", "has last dimension %d; a gated op needs an even one (2d)",
		lastDim(x))
	if v.Err() == nil {
		want := append([]int(nil), x.Shape()...)
		want[len(want)-1] /= 2
		v.Tensor("y", y).Shape(want...).DTypeOf(x)
	}
	v.SameLocation(s, []string{"x", "y"}, x, y)
	v.NoOverlap("y", y, "x", x)
	checkRows(v, "x", x)
	checkRows(v, "y", y)
	if err := v.Err(); err != nil {
		return err
	}
	if y.Numel() == 0 {
		return nil
	}
	if !x.IsDevice() {
		gatedRef(y, x, gp)
		return nil
	}
	return run(op, s, x.Device(), gatedProblem(y, x, gp))
}

// gatedProblem describes a validated gated call on the device.
func gatedProblem(y, x *tensor.Tensor, gp gatedParams) problem {
	rows, sx, _ := rowsOf(x)
	_, sy, _ := rowsOf(y)
	return problem{kind: gp.Kind, dtype: x.DType(), rows: rows, cols: y.Dim(-1), sx: sx, sy: sy,
		x: x.Ptr(), y: y.Ptr(), gated: true, layout: gp.Layout, gateSecond: gp.GateSecond,
		limit: gp.Limit, alpha: gp.alpha, upAdd: gp.upAdd}
}

func lastDim(t *tensor.Tensor) int {
	if t == nil || t.Rank() == 0 {
		return 0
	}
	return t.Dim(-1)
}
