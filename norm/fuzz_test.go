package norm

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gokittens/kittens/internal/fuzzargs"
	"github.com/gokittens/kittens/tensor"
)

// fuzzArg is an argument of a call, for the overlap rules: an output may
// be the very tensor of its partner, and overlaps nothing else.
type fuzzArg struct {
	name    string
	t       *tensor.Tensor
	out     bool
	partner string
}

// overlapErr is the first overlap the rules forbid, or "".
func overlapErr(args []fuzzArg) string {
	for i, o := range args {
		if !o.out || o.t == nil {
			continue
		}
		for k, other := range args {
			if k == i || other.t == nil || !tensor.Overlap(o.t, other.t) {
				continue
			}
			if other.name == o.partner && tensor.Same(o.t, other.t) {
				continue
			}
			return o.name + " overlaps " + other.name
		}
	}
	return ""
}

// The ops FuzzNorm calls.
const (
	fzRMS = iota
	fzFusedRMS
	fzLayer
	fzFusedLayer
	fzL2
	fzL2Bwd
	fzOps
)

var fzNames = [fzOps]string{"RMSNorm", "FusedAddRMSNorm", "LayerNorm", "FusedAddLayerNorm", "L2Norm", "L2NormBackward"}

// normCall is one call of an op of the family. x2 is the residual, or y for
// L2NormBackward (whose dx is y here, and dy x); o.RStd and o.Mean are
// rstd and mean.
type normCall struct {
	op                         int
	x, x2, w, b, rstdIn        *tensor.Tensor
	y, residualOut, rstd, mean *tensor.Tensor
	o                          Options
}

func (c *normCall) rms() bool   { return c.op == fzRMS || c.op == fzFusedRMS }
func (c *normCall) layer() bool { return c.op == fzLayer || c.op == fzFusedLayer }
func (c *normCall) fused() bool { return c.op == fzFusedRMS || c.op == fzFusedLayer }

func (c *normCall) run() error {
	o := c.o
	o.RStd, o.Mean = c.rstd, c.mean
	switch c.op {
	case fzRMS:
		return RMSNorm(nil, c.y, c.x, c.w, o)
	case fzFusedRMS:
		return FusedAddRMSNorm(nil, c.y, c.residualOut, c.x, c.x2, c.w, o)
	case fzLayer:
		return LayerNorm(nil, c.y, c.x, c.w, c.b, o)
	case fzFusedLayer:
		return FusedAddLayerNorm(nil, c.y, c.residualOut, c.x, c.x2, c.w, c.b, o)
	case fzL2:
		return L2Norm(nil, c.y, c.x, o)
	}
	return L2NormBackward(nil, c.y, c.x2, c.x, c.rstdIn)
}

// args are the call's arguments under the names its errors use.
func (c *normCall) args() []fuzzArg {
	if c.op == fzL2Bwd {
		return []fuzzArg{{"dx", c.y, true, "dy"}, {"y", c.x2, false, ""}, {"dy", c.x, false, ""}, {"rstd", c.rstdIn, false, ""}}
	}
	return []fuzzArg{{"y", c.y, true, "x"}, {"residualOut", c.residualOut, true, "residual"},
		{"Options.RStd", c.rstd, true, ""}, {"Options.Mean", c.mean, true, ""},
		{"x", c.x, false, ""}, {"residual", c.x2, false, ""}, {"w", c.w, false, ""}, {"b", c.b, false, ""}}
}

// nOut is y's row length (n, or n padded to Options.PadTo).
func (c *normCall) nOut(n int) int {
	if p := c.o.PadTo; p > 0 && p <= maxCols && n <= maxCols {
		return (n + p - 1) / p * p
	}
	return n
}

// invalid says why the package doc rejects the call, or "" if it takes it;
// it is written from the docs, not from validate.
func (c *normCall) invalid() string {
	is := func(t *tensor.Tensor, dt tensor.DType, shape ...int) bool {
		return t != nil && t.DType() == dt && slices.Equal(t.Shape(), shape)
	}
	x := c.x
	if x == nil || x.Rank() != 2 || !slices.Contains(activationDTypes, x.DType()) {
		return "x is no bf16, f16 or f32 matrix"
	}
	dt, m, n := x.DType(), x.Dim(0), x.Dim(1)
	nOut := c.nOut(n)
	switch {
	case m > math.MaxInt32 || n > maxCols || nOut > maxCols:
		return "too large for the kernel"
	case m > 0 && n == 0:
		return "empty rows"
	case c.o.PadTo < 0 || c.o.PadTo > maxCols:
		return "PadTo out of range"
	case (c.fused() || c.op == fzL2Bwd) && !is(c.x2, dt, m, n):
		return "bad residual (y)"
	case c.op <= fzFusedLayer && !is(c.w, dt, n):
		return "bad w"
	case c.b != nil && !is(c.b, dt, n):
		return "bad b"
	case !is(c.y, dt, m, nOut):
		return "bad y"
	case c.fused() && !is(c.residualOut, dt, m, n):
		return "bad residualOut"
	case c.rstd != nil && !is(c.rstd, tensor.F32, m), c.mean != nil && !is(c.mean, tensor.F32, m):
		return "bad statistics"
	case c.op == fzL2Bwd && !is(c.rstdIn, tensor.F32, m):
		return "bad rstd"
	case !(c.o.Eps >= 0 && c.o.Eps <= math.MaxFloat32):
		return "Eps out of range"
	case (c.o.ZeroCentered || c.o.PadTo != 0) && !c.rms():
		return "RMSNorm option on another op"
	case c.mean != nil && !c.layer():
		return "Mean on another op"
	}
	return overlapErr(c.args())
}

// noNaN says whether the documented formulas give outputs without NaN:
// finite inputs, an Eps that stays above 0 in fp32 (with 0, an all-zero row
// divides by zero) and a residual sum that stays finite as the op keeps it
// (rounded to the dtype, or in fp32 with PadTo; an Inf in a row makes NaN).
// Outputs may still overflow to ±Inf.
func (c *normCall) noNaN(in [][]float64) bool {
	for _, vs := range in {
		for _, v := range vs {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return false
			}
		}
	}
	if c.op != fzL2Bwd && float32(c.o.Eps) <= 0 {
		return false
	}
	if c.fused() {
		for i, v := range in[0] {
			s := tensor.Round(c.x.DType(), v+in[1][i])
			if c.o.PadTo > 0 {
				s = float64(float32(v + in[1][i]))
			}
			if math.IsInf(s, 0) {
				return false
			}
		}
	}
	return true
}

// FuzzNorm calls every op of the family (RMSNorm, FusedAddRMSNorm,
// LayerNorm, FusedAddLayerNorm, L2Norm, L2NormBackward) on host tensors made
// from the input: dtypes (some no float), ranks and sizes (some past the
// kernels' bounds), padded rows, views overlapping in a shared arena, the
// same tensor in two places (in place, or not allowed), nil arguments, and
// Options (Eps, PadTo, ZeroCentered, RStd, Mean) in and out of range. It
// checks that the call never panics; that it fails exactly where the package
// doc says it must, with a tensor.ArgError naming an argument and every
// byte as it was; that on success only the outputs' elements changed, pad
// columns are +0, no output is NaN where the formulas give none, and the
// outputs are those of the same call on fresh contiguous copies.
func FuzzNorm(f *testing.F) {
	// The plain call of each op (RMSNorm of bf16 [3, 3] and so on).
	for op := range fzOps {
		f.Add([]byte{byte(op)}, uint64(op), 1e-6, 0)
	}
	// FusedAddRMSNorm of [3, 8] in place (y = x, residualOut = residual)
	// with Options.RStd; f32 [7, 7] with PadTo 16 and ZeroCentered;
	// LayerNorm of f16 [9, 70] with padded rows, Mean and RStd;
	// FusedAddLayerNorm in place in the arena, x with padded rows;
	// L2NormBackward with dx = dy in the arena; an f32 residual add with
	// PadTo on values near fp32's largest.
	f.Add([]byte{fzFusedRMS, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 13, 0, 13, 1, 1}, uint64(7), 1e-6, 0)
	f.Add([]byte{fzFusedRMS, 2, 4, 4, 1, 4, 1}, uint64(8), 1e-5, 0)
	f.Add([]byte{fzLayer, 1, 6, 250, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1}, uint64(9), 1e-5, 0)
	f.Add([]byte{fzFusedLayer, 0, 0, 0, 0, 0, 0, 0, 10, 0, 3, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 13, 0, 13, 1}, uint64(10), 1e-5, 0)
	f.Add([]byte{fzL2Bwd, 0, 2, 6, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 14, 0}, uint64(11), 0.0, 0)
	f.Add([]byte{fzFusedRMS, 2, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4}, uint64(12), 1e-6, 0)
	f.Fuzz(func(t *testing.T, prog []byte, seed uint64, eps float64, padTo int) {
		a := fuzzargs.NewArena(fuzzargs.NewIn(prog), 1<<15, seed)
		in := a.In
		c := &normCall{op: in.N(fzOps)}
		dt := fuzzargs.Pick(in, activationDTypes...)
		m := in.Dim(70, 1025, math.MaxInt32, math.MaxInt32+1)
		n := in.Dim(70, 1025, 4097, maxCols, maxCols+1, math.MaxInt)
		if c.rms() {
			c.o.ZeroCentered = in.N(2) == 1
			c.o.PadTo = fuzzargs.Pick(in, 0, 8, 1, 3, 16, 128, padTo)
		} else {
			c.o.ZeroCentered = in.Rare(1) == 1
			c.o.PadTo = fuzzargs.Pick(in, 0, 8, padTo)
			if in.Rare(1) == 0 {
				c.o.PadTo = 0
			}
		}
		c.o.Eps = fuzzargs.Pick(in, 1e-6, 1e-5, 0, eps, math.Copysign(0, -1), 1e-50, math.SmallestNonzeroFloat32,
			math.MaxFloat32, math.Nextafter(math.MaxFloat32, math.Inf(1)), -1e-6, math.NaN(), math.Inf(1),
			math.Inf(-1), 1e39, 1, 1e30)
		if c.op == fzL2Bwd {
			c.o = Options{}
		}
		nOut := c.nOut(n)
		c.x = a.Arg("x", dt, m, n)
		if c.fused() || c.op == fzL2Bwd {
			c.x2 = a.Arg("residual", dt, m, n)
		}
		if c.op <= fzFusedLayer {
			c.w = a.Arg("w", dt, n)
		}
		if c.layer() && in.N(3) != 2 {
			c.b = a.Arg("b", dt, n)
		}
		if c.op == fzL2Bwd {
			c.rstdIn = a.Arg("rstd", tensor.F32, m)
		}
		c.y = a.Arg("y", dt, m, nOut)
		if c.fused() {
			c.residualOut = a.Arg("residualOut", dt, m, n)
		}
		if c.op != fzL2Bwd {
			if in.N(3) == 1 {
				c.rstd = a.Arg("Options.RStd", tensor.F32, m)
			}
			if (c.layer() && in.N(3) == 1) || in.Rare(1) == 1 {
				c.mean = a.Arg("Options.Mean", tensor.F32, m)
			}
		}
		a.Fill()
		before := [][]float64{fuzzargs.Values(c.x), fuzzargs.Values(c.x2), fuzzargs.Values(c.w), fuzzargs.Values(c.b), fuzzargs.Values(c.rstdIn)}
		err := c.run()
		what := fmt.Sprintf("%s(y %s, residualOut %s, x %s, x2 %s, w %s, b %s, rstd %s, rstd in %s, mean %s, %+v)",
			fzNames[c.op], a.Desc(c.y), a.Desc(c.residualOut), a.Desc(c.x), a.Desc(c.x2), a.Desc(c.w), a.Desc(c.b),
			a.Desc(c.rstd), a.Desc(c.rstdIn), a.Desc(c.mean), c.o)
		why := c.invalid()
		if err != nil {
			if why == "" {
				t.Fatalf("%s: error %v, but the docs take the call", what, err)
			}
			a.CheckError(t, what, err, "norm", "x", "residual", "w", "b", "y", "residualOut", "Options.RStd", "Options.Mean",
				"Options.Eps", "Options.PadTo", "Options.ZeroCentered", "dx", "dy", "rstd")
			return
		}
		if why != "" {
			t.Fatalf("%s: no error, but the docs reject it (%s)", what, why)
		}
		outs := []*tensor.Tensor{c.y, c.residualOut, c.rstd, c.mean}
		a.CheckWrites(t, what, outs...)
		m, n, nOut = c.x.Dim(0), c.x.Dim(1), c.y.Dim(1) // as built, not as meant
		if m == 0 {
			return
		}
		got := make([][]float64, len(outs))
		for i, o := range outs {
			got[i] = fuzzargs.Values(o)
		}
		if c.noNaN(before) {
			for i, vs := range got {
				if k := slices.IndexFunc(vs, math.IsNaN); k >= 0 {
					t.Fatalf("%s: output %d element %d is NaN from finite inputs", what, i, k)
				}
			}
		}
		for i := range m {
			for k := n; k < nOut; k++ {
				if v := got[0][i*nOut+k]; v != 0 || math.Signbit(v) {
					t.Fatalf("%s: pad element [%d, %d] is %v, want +0", what, i, k, v)
				}
			}
		}
		// The same call on fresh contiguous copies of the inputs' values.
		fresh := func(t *tensor.Tensor, vals []float64) *tensor.Tensor {
			if t == nil {
				return nil
			}
			if vals == nil {
				return tensor.New(t.DType(), t.Shape()...)
			}
			return host(t.DType(), vals, t.Shape()...)
		}
		d := &normCall{op: c.op, o: c.o, x: fresh(c.x, before[0]), x2: fresh(c.x2, before[1]), w: fresh(c.w, before[2]),
			b: fresh(c.b, before[3]), rstdIn: fresh(c.rstdIn, before[4]), y: fresh(c.y, nil),
			residualOut: fresh(c.residualOut, nil), rstd: fresh(c.rstd, nil), mean: fresh(c.mean, nil)}
		if err := d.run(); err != nil {
			t.Fatalf("%s on contiguous copies: %v", what, err)
		}
		for i, o := range []*tensor.Tensor{d.y, d.residualOut, d.rstd, d.mean} {
			if want := fuzzargs.Values(o); !fuzzargs.SameValues(got[i], want) {
				t.Fatalf("%s: output %d is %v, but %v on contiguous copies", what, i, got[i], want)
			}
		}
	})
}
