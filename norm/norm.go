// Package norm is the normalization family: RMSNorm, LayerNorm, their fused
// residual-add forms, RMSNorm with a zero-padded output (gpt-oss), and the L2
// normalization of Gated DeltaNet with its backward.
//
// Every op normalizes the rows of a matrix x [M, N] independently. Rows may
// be strided (a row stride larger than N) but each row is contiguous. The
// activations (x, residual, y, weights) are bf16, f16 or f32, all of one
// dtype; statistics (rstd, mean) are fp32 vectors of M. Arithmetic is fp32 on
// the GPU and float64 in the CPU reference; each output is rounded once.
//
// Destination arguments come first. Host tensors run the CPU reference and
// device tensors the kernel; mixing them is an error. Arguments are checked
// before anything is written or launched. M = 0 is a no-op.
//
// Aliasing: an output may be exactly the same tensor as its input partner
// (tensor.Same) — y with x, residualOut with residual, dx with dy — which is
// how vLLM runs fused_add_rmsnorm in place. Any other overlap between an
// output and another argument is an error.
//
// Kernels are compiled by NVRTC on first use, each specialized for its
// call's shape; Prepare compiles the most used ones ahead.
package norm

import (
	"fmt"
	"math"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/tensor"
)

// Options are the settings shared by the family. Each op documents which of
// them it reads; setting one an op does not read is an error, so that a
// caller's intent is never silently dropped.
type Options struct {
	// Eps is added under the square root: to the mean square (RMSNorm), to
	// the variance (LayerNorm) or to the sum of squares (L2Norm). Models use
	// 1e-5 or 1e-6. It must be ≥ 0 and within fp32's range, and is used
	// rounded to fp32 as the kernels take it, by the CPU path too, so that
	// both agree (a value below fp32's smallest subnormal acts as 0). With
	// 0 an all-zero row divides by zero.
	Eps float64
	// ZeroCentered makes RMSNorm scale by (1 + w) instead of w (Qwen3-Next,
	// Gemma), with the 1 added in fp32.
	ZeroCentered bool
	// PadTo > 0 pads the RMSNorm output on the right with +0.0 up to a
	// multiple of PadTo: y is [M, ceil(N/PadTo)·PadTo] (AITER rmsnorm_pad,
	// for gpt-oss 2880 → 3072). With a residual it also selects that
	// kernel's arithmetic: the add stays in fp32 and the statistics come from
	// the unrounded sum; residualOut is rounded and never padded.
	PadTo int
	// RStd, when set, receives one fp32 value per row [M]: the reciprocal r
	// the row was scaled by (AITER's rsigma for RMSNorm, rstd for LayerNorm
	// and L2Norm).
	RStd *tensor.Tensor
	// Mean, when set, receives LayerNorm's per-row fp32 mean [M].
	Mean *tensor.Tensor
}

// opKind is the statistic an op reduces a row to.
type opKind uint8

const (
	opRMS        opKind = iota // sum of squares: RMSNorm, and L2Norm (divided by 1, not N)
	opLayer                    // mean, then centred squares
	opL2Backward               // dot product dy·y with a given rstd
)

// addMode says how a fused residual add forms the normalized value.
type addMode uint8

const (
	addNone    addMode = iota
	addRounded         // s = x + residual rounded to the dtype; stats from the rounded s
	addFP32            // s kept in fp32 for the stats; residualOut rounded (rmsnorm_pad)
)

// weightMode says how the weight scales the normalized value.
type weightMode uint8

const (
	weightNone    weightMode = iota
	weightPlain              // · w
	weightPlusOne            // · (1 + w)
)

// job is one validated call, the same for the host and the device path.
type job struct {
	op     opKind
	add    addMode
	weight weightMode

	// x is the normalized input (dy for L2 backward); x2 the second row
	// input (residual, or y for L2 backward); y the main output.
	y, residualOut, x, x2, w, b *tensor.Tensor
	rstd, mean, rstdIn          *tensor.Tensor

	eps   float64
	denom float64 // what the sums are divided by: N for the means, 1 for L2Norm's plain sum
	nOut  int     // output row length (N unless padded)
}

func (j *job) rows() int { return j.x.Dim(0) }
func (j *job) n() int    { return j.x.Dim(1) }

// run validates nothing: callers validate first. It dispatches to the CPU
// reference or to the kernel.
func (j *job) run(s *cuda.Stream) error {
	if j.rows() == 0 {
		return nil
	}
	if !j.x.IsDevice() {
		j.reference()
		return nil
	}
	return j.launch(s)
}

var activationDTypes = []tensor.DType{tensor.BF16, tensor.F16, tensor.F32}

// maxCols bounds N and the padded output width. norm.cu indexes a row with
// int and steps past its end before a loop ends: a column index of the last
// pass plus one more pass of the block, up to 16 bytes an access times 512
// threads (the picker's largest block), which is 4096 elements of 16 bits,
// must not overflow.
const maxCols = math.MaxInt32 - 4096

// role is how an argument takes part in a call, for validation.
type role uint8

const (
	roleInput role = iota
	roleOutput
)

// arg is one tensor argument with its name and role; partner is the name
// of the input argument an output may be exactly the same tensor as (in
// place). The exception is for that argument only: another argument that
// happens to be the same tensor as the partner (residual passed as x too,
// or the other output) must not overlap the output.
type arg struct {
	name    string
	t       *tensor.Tensor
	role    role
	partner string
}

// validate checks a job's arguments and options. opName is "norm.RMSNorm"
// and so on; the job's y, x, ... are the caller's (possibly nil) tensors.
func (j *job) validate(s *cuda.Stream, opName string, names jobNames, o Options) error {
	v := tensor.Validate(opName)
	v.Tensor(names.x, j.x).Rank(2).DType(activationDTypes...)
	if v.Err() != nil {
		return v.Err()
	}
	m, n := j.x.Dim(0), j.x.Dim(1)
	v.Check(m <= math.MaxInt32 && n <= maxCols, names.x, "has shape %v; the kernel takes at most %d rows of at most %d columns",
		j.x.Shape(), math.MaxInt32, maxCols)
	v.Check(m == 0 || n > 0, names.x, "has empty rows (shape %v)", j.x.Shape())
	padOK := o.PadTo >= 0 && o.PadTo <= maxCols
	v.Check(padOK, "Options.PadTo", "is %d; it must be in [0, %d]", o.PadTo, maxCols)
	j.nOut = n
	if o.PadTo > 0 && padOK && n <= maxCols {
		j.nOut = intmath.RoundUp(n, o.PadTo)
	}
	v.Check(j.nOut <= maxCols, "Options.PadTo", "is %d: rows of %d padded to %d columns, more than the kernel's %d",
		o.PadTo, n, j.nOut, maxCols)
	if j.x2 != nil || names.x2Required {
		v.Tensor(names.x2, j.x2).Rank(2).DTypeOf(j.x).ShapeOf(j.x)
	}
	if j.weight != weightNone {
		v.Tensor("w", j.w).Rank(1).DTypeOf(j.x).Shape(n)
	}
	if names.hasBias {
		v.Optional("b", j.b).Rank(1).DTypeOf(j.x).Shape(n)
	}
	v.Tensor(names.y, j.y).Rank(2).DTypeOf(j.x).Shape(m, j.nOut)
	if j.add != addNone {
		v.Tensor("residualOut", j.residualOut).Rank(2).DTypeOf(j.x).Shape(m, n)
	}
	for _, st := range []struct {
		name string
		t    *tensor.Tensor
	}{{"Options.RStd", j.rstd}, {"Options.Mean", j.mean}, {"rstd", j.rstdIn}} {
		v.Optional(st.name, st.t).Rank(1).DType(tensor.F32).Shape(m)
	}
	if names.rstdInRequired {
		v.Tensor("rstd", j.rstdIn)
	}
	v.Check(o.Eps >= 0 && o.Eps <= math.MaxFloat32, "Options.Eps", "is %v; it must be ≥ 0 and at most fp32's largest finite value", o.Eps)
	v.Check(!o.ZeroCentered || names.rms, "Options.ZeroCentered", "applies to RMSNorm only")
	v.Check(o.PadTo == 0 || names.rms, "Options.PadTo", "applies to RMSNorm only")
	v.Check(o.Mean == nil || j.op == opLayer, "Options.Mean", "applies to LayerNorm only")
	v.Check(o.RStd == nil || j.op != opL2Backward, "Options.RStd", "is not an output of L2NormBackward")
	if v.Err() != nil {
		return v.Err()
	}

	args := []arg{
		{names.y, j.y, roleOutput, names.x},
		{"residualOut", j.residualOut, roleOutput, names.x2},
		{"Options.RStd", j.rstd, roleOutput, ""},
		{"Options.Mean", j.mean, roleOutput, ""},
		{names.x, j.x, roleInput, ""},
		{names.x2, j.x2, roleInput, ""},
		{"w", j.w, roleInput, ""},
		{"b", j.b, roleInput, ""},
		{"rstd", j.rstdIn, roleInput, ""},
	}
	var locNames []string
	var locTensors []*tensor.Tensor
	for _, a := range args {
		if a.t != nil {
			locNames = append(locNames, a.name)
			locTensors = append(locTensors, a.t)
		}
	}
	v.SameLocation(s, locNames, locTensors...)
	for i, out := range args {
		if out.t == nil || out.role != roleOutput {
			continue
		}
		for k, other := range args {
			if k == i || other.t == nil || (other.role == roleOutput && k < i) {
				continue
			}
			if other.role == roleInput && other.name == out.partner {
				v.NoOverlapUnlessSame(out.name, out.t, other.name, other.t)
			} else {
				v.NoOverlap(out.name, out.t, other.name, other.t)
			}
		}
	}
	return v.Err()
}

// jobNames are the argument names an op's errors use, and which optional
// arguments it has.
type jobNames struct {
	y, x, x2       string
	x2Required     bool
	hasBias        bool
	rstdInRequired bool
	rms            bool // the RMSNorm options (ZeroCentered, PadTo) apply
}

var (
	rmsNames      = jobNames{y: "y", x: "x", rms: true}
	fusedRMSNames = jobNames{y: "y", x: "x", x2: "residual", x2Required: true, rms: true}
	layerNames    = jobNames{y: "y", x: "x", hasBias: true}
	fusedLNNames  = jobNames{y: "y", x: "x", x2: "residual", x2Required: true, hasBias: true}
	l2Names       = jobNames{y: "y", x: "x"}
	l2BwdNames    = jobNames{y: "dx", x: "dy", x2: "y", x2Required: true, rstdInRequired: true}
)

// rmsAdd is FusedAddRMSNorm's add: rounded, or fp32 for the pad kernel.
func rmsAdd(o Options) addMode {
	if o.PadTo > 0 {
		return addFP32
	}
	return addRounded
}

// eps is Options.Eps rounded to fp32, the value the kernels add: the CPU
// reference adds the same one, so that host and device agree.
func (o Options) eps() float64 { return float64(float32(o.Eps)) }

func weightOf(o Options) weightMode {
	if o.ZeroCentered {
		return weightPlusOne
	}
	return weightPlain
}

func stream(s *cuda.Stream, t *tensor.Tensor) *cuda.Stream {
	if s == nil && t.IsDevice() {
		return t.Device().DefaultStream()
	}
	return s
}

// RMSNorm computes, for each row of x [M, N],
//
//	r = 1/sqrt(Σ_j x_j²/N + eps),   y_j = x_j · r · w_j
//
// (with o.ZeroCentered, · (1 + w_j)) into y [M, N], rounded once from fp32.
// x, w [N] and y share a dtype (bf16, f16, f32). o.RStd optionally receives
// r. With o.PadTo > 0, y is [M, ceil(N/PadTo)·PadTo] and its extra columns
// are +0.0 (rmsnorm_pad). y may be x itself (in place).
//
// The sum of squares is accumulated in fp32: a row whose sum passes fp32's
// range (|x| above about 1.8e19) gets r = 0, and an Inf in a row makes that
// element NaN and its finite elements 0, as torch's x·rsqrt(mean(x²) + eps)
// does. The same holds for L2Norm.
func RMSNorm(s *cuda.Stream, y, x, w *tensor.Tensor, o Options) error {
	j := &job{op: opRMS, weight: weightOf(o), y: y, x: x, w: w, rstd: o.RStd, eps: o.eps()}
	if err := j.validate(s, "norm.RMSNorm", rmsNames, o); err != nil {
		return err
	}
	j.denom = float64(j.n())
	return j.run(stream(s, x))
}

// FusedAddRMSNorm computes s = x + residual, stores s into residualOut and
// y = RMSNorm(s) (see RMSNorm) into y. The sum is rounded to the dtype and
// the statistics are taken from the rounded sum, so that y is RMSNorm of
// exactly what residualOut holds; with o.PadTo > 0 it follows AITER's pad
// kernel instead: the sum stays in fp32 for y and is rounded only into
// residualOut, which is [M, N] while y is padded.
//
// In place, as vLLM runs it, is passing y = x and residualOut = residual.
func FusedAddRMSNorm(s *cuda.Stream, y, residualOut, x, residual, w *tensor.Tensor, o Options) error {
	j := &job{op: opRMS, add: rmsAdd(o), weight: weightOf(o), y: y, residualOut: residualOut, x: x, x2: residual, w: w,
		rstd: o.RStd, eps: o.eps()}
	if err := j.validate(s, "norm.FusedAddRMSNorm", fusedRMSNames, o); err != nil {
		return err
	}
	j.denom = float64(j.n())
	return j.run(stream(s, x))
}

// LayerNorm computes, for each row of x [M, N],
//
//	μ = Σ_j x_j/N,  σ² = Σ_j (x_j−μ)²/N,  r = 1/sqrt(σ² + eps),  y_j = (x_j−μ)·r·w_j + b_j
//
// into y [M, N]. The variance is never formed as E[x²]−μ². The CPU
// reference, f32 rows and rows too long for registers take two passes over
// the row (the mean, then the centred squares); bf16 and f16 rows held in
// registers take one pass around a shift, the first element of each warp's
// (or sub-warp group's) share of the row, which keeps the cancellation
// below the output's rounding (ONEPASS in norm.cu). The bias b may be nil
// (no bias). o.Mean and o.RStd optionally receive μ and r. y may be x
// itself.
func LayerNorm(s *cuda.Stream, y, x, w, b *tensor.Tensor, o Options) error {
	j := &job{op: opLayer, weight: weightPlain, y: y, x: x, w: w, b: b, rstd: o.RStd, mean: o.Mean, eps: o.eps()}
	if err := j.validate(s, "norm.LayerNorm", layerNames, o); err != nil {
		return err
	}
	j.denom = float64(j.n())
	return j.run(stream(s, x))
}

// FusedAddLayerNorm computes s = x + residual rounded to the dtype, stores
// it into residualOut, and y = LayerNorm(s) (see LayerNorm) with the
// statistics of the rounded s. In place is y = x and residualOut = residual.
func FusedAddLayerNorm(s *cuda.Stream, y, residualOut, x, residual, w, b *tensor.Tensor, o Options) error {
	j := &job{op: opLayer, add: addRounded, weight: weightPlain, y: y, residualOut: residualOut, x: x, x2: residual,
		w: w, b: b, rstd: o.RStd, mean: o.Mean, eps: o.eps()}
	if err := j.validate(s, "norm.FusedAddLayerNorm", fusedLNNames, o); err != nil {
		return err
	}
	j.denom = float64(j.n())
	return j.run(stream(s, x))
}

// L2Norm computes, for each row of x [M, D] (Gated DeltaNet's q/k
// normalization; flatten leading dimensions into M),
//
//	r = 1/sqrt(Σ_j x_j² + eps),   y_j = x_j · r
//
// with eps added to the sum, not to a mean (this is not F.normalize). y has
// x's dtype and may be x itself. o.RStd optionally receives r for the
// backward pass.
func L2Norm(s *cuda.Stream, y, x *tensor.Tensor, o Options) error {
	j := &job{op: opRMS, y: y, x: x, rstd: o.RStd, eps: o.eps(), denom: 1}
	if err := j.validate(s, "norm.L2Norm", l2Names, o); err != nil {
		return err
	}
	return j.run(stream(s, x))
}

// L2NormBackward computes the gradient of L2Norm from its saved output y
// [M, D], its saved rstd [M] (fp32) and the incoming gradient dy [M, D]:
//
//	dx_j = rstd · (dy_j − (Σ_k dy_k·y_k) · y_j)
//
// in fp32, rounded once into dx, which has y's dtype. dx may be dy itself.
func L2NormBackward(s *cuda.Stream, dx, y, dy, rstd *tensor.Tensor) error {
	j := &job{op: opL2Backward, y: dx, x: dy, x2: y, rstdIn: rstd, denom: 1}
	if err := j.validate(s, "norm.L2NormBackward", l2BwdNames, Options{}); err != nil {
		return err
	}
	return j.run(stream(s, dy))
}

func (k opKind) String() string {
	switch k {
	case opRMS:
		return "rms"
	case opLayer:
		return "layer"
	case opL2Backward:
		return "l2bwd"
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}
