package normtest

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/tensor"
)

// caseSpec is one parity case; its dtype comes from the loop over dtypes.
type caseSpec struct {
	rows, n      int
	stride       int     // row stride of the row tensors (0: contiguous)
	mean         float64 // input mean (LayerNorm's large-offset case)
	large        bool    // inputs of std largeStd[dtype] instead of 1
	zeroRow      bool    // row 0 normalizes zeros (x = −residual when fused)
	special      bool    // rows 1, 2 and 3 of x hold a NaN, a +inf and a −inf, row 4 a −inf in its first column (NaN rows and statistics)
	stats        bool    // ask for the optional fp32 outputs
	inPlace      bool    // outputs are their input partners
	zeroCentered bool
	only         tensor.DType // run for this dtype alone (big grid-stride cases)
}

// largeStd is the "large values" input scale per dtype: near f16's max/16,
// and far out in bf16/f32's range while Σx² stays finite in fp32 (values near
// bf16's max/16 would overflow any fp32 sum of squares, as in every fp32
// reference implementation).
var largeStd = map[tensor.DType]float64{tensor.BF16: 1e15, tensor.F16: 4096, tensor.F32: 1e15}

func (c caseSpec) label(dt tensor.DType) string {
	s := fmt.Sprintf("%dx%d", c.rows, c.n)
	for _, f := range []struct {
		on   bool
		text string
	}{
		{c.stride > 0, fmt.Sprintf("stride%d", c.stride)}, {c.mean != 0, fmt.Sprintf("mean%g", c.mean)},
		{c.large, "large"}, {c.zeroRow, "zero-row"}, {c.special, "nan-inf"}, {c.stats, "stats"}, {c.inPlace, "in-place"},
		{c.zeroCentered, "zero-centred"},
	} {
		if f.on {
			s += "_" + f.text
		}
	}
	return s + "_" + dt.String()
}

// normTol bounds normalized bf16 outputs: atol = rtol = 2e-2, since the
// statistic's fp32 rounding can move a value that sits near a rounding
// boundary by one bf16 ulp more than an elementwise op. f16 and f32
// outputs keep check.ForDType: one rounding from fp32 at most.
var normTol = check.Tolerance{Atol: 2e-2, Rtol: 2e-2, RelNorm: 8e-3}

// meanOffsetF32Tol covers f32 LayerNorm rows around 1e3: the fp32 mean of such
// a row is off by a few ulps of 1e3 (~1e-4), which y carries absolutely.
var meanOffsetF32Tol = check.Tolerance{Atol: 5e-4, Rtol: 1e-5, RelNorm: 5e-4}

// meanTol is the tolerance of LayerNorm's mean output for inputs of scale
// std. An fp32 mean carries rounding errors of the values' scale, not of the
// mean's own, which cancellation can make orders of magnitude smaller (rows
// of std 1e15 whose mean is 1e10): besides check.ForDType's relative bound,
// an absolute 1e-7·std, above the worst case of a mean computed in fp32
// from values of scale std (about 2^-24·std) and far below any real error.
// For the same reason there is no bound on the relative norm: a few rows
// whose means lie near zero can push it past ForDType's 1e-5 (1.13e-5 seen)
// with every element inside its bound.
func meanTol(std float64) *check.Tolerance {
	t := check.ForDType(tensor.F32)
	t.Atol, t.RelNorm = max(t.Atol, 1e-7*std), 0
	return &t
}

// dotDepth bounds the additions any product dy_k·y_k of L2 backward's dot
// product goes through in the kernel: at most VEC fmas in an access, one
// addition for each further access of a thread (32 at most: 65536 f32
// columns over 512 threads), five shuffle levels in a warp and five across
// the warps, and the rounding of dot·y_k where it is not fused: under 64.
const dotDepth = 64

// l2BackwardTol is the tolerance of L2 backward's dx (base, or
// check.ForDType where nil), with an absolute floor for its cancellation.
// dx_k = r·(dy_k − dot·y_k) cancels where dy_k ≈ dot·y_k, so the fp32 dot's
// rounding error, carried by y_k, is not bounded relative to dx_k, as the
// default (one rounding, relative) assumes: summed over a tree of depth d,
// |δdot| ≤ γ_d·Σ_j |dy_j·y_j| with γ_d ≈ d·2⁻²⁴ (Higham, ch. 4), whatever
// the order, so |δdx_k| ≤ r·|y_k|·γ_d·Σ_j |dy_j·y_j|; the floor is that
// bound's largest value over the rows. Simulated in the kernel's order, the
// worst error stays far below the floor (2e-8·std against 2.5e-5·std on
// the 17x4096 "large" case) where the default alone fails most draws; a
// dot product off by 1% still fails it.
func l2BackwardTol(base *check.Tolerance, dt tensor.DType, dy, y, rstd *tensor.Tensor) *check.Tolerance {
	t := check.ForDType(dt)
	if base != nil {
		t = *base
	}
	n := dy.Dim(1)
	dys, ys, rs := dy.Float64s(), y.Float64s(), rstd.Float64s()
	for i, r := range rs {
		var maxY, sum float64
		for k := range n {
			maxY = max(maxY, math.Abs(ys[i*n+k]))
			sum += math.Abs(dys[i*n+k] * ys[i*n+k])
		}
		t.Atol = max(t.Atol, math.Abs(r)*maxY*dotDepth*0x1p-24*sum)
	}
	return &t
}

// specBuilder collects the tensors of a check.Spec.
type specBuilder struct{ check.Spec }

func (b *specBuilder) add(name string, t *tensor.Tensor, compared, poisoned bool, tol *check.Tolerance) int {
	i := len(b.Tensors)
	b.Tensors = append(b.Tensors, t)
	b.Names = append(b.Names, name)
	if compared {
		b.Outputs = append(b.Outputs, i)
		if tol != nil {
			if b.Tol == nil {
				b.Tol = map[int]check.Tolerance{}
			}
			b.Tol[i] = *tol
		}
	}
	if poisoned {
		b.Poison = append(b.Poison, i)
	}
	return i
}

// rowTensor is a host [rows, n] tensor of row stride stride (0: contiguous).
func rowTensor(dt tensor.DType, rows, n, stride int) (*tensor.Tensor, error) {
	if stride == 0 {
		return tensor.New(dt, rows, n), nil
	}
	return tensor.NewStrided(dt, []int{rows, n}, []int{stride, 1})
}

// setRow overwrites row i of a host tensor.
func setRow(t *tensor.Tensor, i int, row func(k int) float64) {
	v := t.Float64s()
	n := t.Dim(1)
	for k := range n {
		v[i*n+k] = row(k)
	}
	t.SetFloat64s(v)
}

// spec builds the check.Spec of one case.
func (d *op) spec(c caseSpec, dt tensor.DType, rng *rand.Rand) (check.Spec, error) {
	var err error
	rows := func(n, stride int) *tensor.Tensor {
		t, e := rowTensor(dt, c.rows, n, stride)
		if err == nil {
			err = e
		}
		return t
	}
	b := &specBuilder{}
	std := 1.0
	if c.large {
		std = largeStd[dt]
	}
	yTol := (*check.Tolerance)(nil)
	if dt == tensor.BF16 {
		yTol = &normTol
	} else if dt == tensor.F32 && c.mean != 0 {
		yTol = &meanOffsetF32Tol
	}
	x := rows(c.n, c.stride)
	if err != nil {
		return check.Spec{}, err
	}
	x.FillNormal(rng, c.mean, std)
	if c.special {
		xv := x.Float64s()
		for i, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			xv[(i+1)*c.n+rng.IntN(c.n)] = v
		}
		if c.rows > 4 {
			xv[4*c.n] = math.Inf(-1) // where one-pass LayerNorm takes its shift
		}
		x.SetFloat64s(xv)
	}
	var idx struct{ y, ro, x, res, w, b, rstd, mean, savedY, savedRStd int }
	idx.ro, idx.res, idx.w, idx.b, idx.rstd, idx.mean, idx.savedY, idx.savedRStd = -1, -1, -1, -1, -1, -1, -1, -1
	yStride := 0
	if c.stride > 0 {
		yStride = c.stride + d.nOut(c.n) - c.n
	}

	switch {
	case d.kind == kindL2Backward:
		// y as the forward pass leaves it: rows of unit norm, so that the
		// dot product's term dot·y is a few per cent of dx, not 1/N^1.5 of it
		// (with y of std 1/N it hid under f32's tolerance at N = 4096).
		y := rows(c.n, c.stride)
		if err != nil {
			return check.Spec{}, err
		}
		y.FillNormal(rng, 0, 1/math.Sqrt(float64(c.n)))
		rstd := tensor.New(tensor.F32, c.rows)
		rstd.FillUniform(rng, 0.5, 2)
		if c.zeroRow {
			setRow(x, 0, func(int) float64 { return 0 })
		}
		yTol = l2BackwardTol(yTol, dt, x, y, rstd)
		idx.savedY = b.add("y", y, false, false, nil)
		idx.savedRStd = b.add("rstd", rstd, false, false, nil)
	case d.fused:
		res := rows(c.n, c.stride)
		if err != nil {
			return check.Spec{}, err
		}
		res.FillNormal(rng, c.mean, std)
		if c.zeroRow {
			rv := res.Float64s()
			setRow(x, 0, func(k int) float64 { return -rv[k] })
		}
		if c.inPlace {
			idx.res = b.add("residual", res, true, false, nil)
		} else {
			idx.res = b.add("residual", res, false, false, nil)
			idx.ro = b.add("residualOut", rows(c.n, c.stride), true, true, nil)
		}
	case c.zeroRow:
		setRow(x, 0, func(int) float64 { return 0 })
	}
	xName, yName := "x", "y"
	if d.kind == kindL2Backward {
		xName, yName = "dy", "dx"
	}
	if c.inPlace {
		idx.x = b.add(xName, x, true, false, yTol)
		idx.y = idx.x
	} else {
		idx.x = b.add(xName, x, false, false, nil)
		idx.y = b.add(yName, rows(d.nOut(c.n), yStride), true, true, yTol)
	}
	if err != nil {
		return check.Spec{}, err
	}
	if d.weighted() {
		w := tensor.New(dt, c.n)
		wMean := 1.0 // weights near 1, or near 0 when the op adds the 1
		if c.zeroCentered {
			wMean = 0
		}
		w.FillNormal(rng, wMean, 0.3)
		idx.w = b.add("w", w, false, false, nil)
	}
	if d.bias() {
		bt := tensor.New(dt, c.n)
		bt.FillNormal(rng, 0, 0.3)
		idx.b = b.add("b", bt, false, false, nil)
	}
	if c.stats && d.kind != kindL2Backward {
		idx.rstd = b.add("rstd", tensor.New(tensor.F32, c.rows), true, true, nil)
		if d.kind == kindLayer {
			idx.mean = b.add("mean", tensor.New(tensor.F32, c.rows), true, true, meanTol(std))
		}
	}
	pick := func(ts []*tensor.Tensor, i int) *tensor.Tensor {
		if i < 0 {
			return nil
		}
		return ts[i]
	}
	b.Run = func(s *cuda.Stream, ts []*tensor.Tensor) error {
		t := operands{y: ts[idx.y], x: ts[idx.x], residual: pick(ts, idx.res), w: pick(ts, idx.w), b: pick(ts, idx.b),
			rstd: pick(ts, idx.rstd), mean: pick(ts, idx.mean), savedY: pick(ts, idx.savedY),
			savedRStd: pick(ts, idx.savedRStd), residualOut: pick(ts, idx.ro)}
		if c.inPlace && d.fused {
			t.residualOut = t.residual
		}
		return d.call(s, t, c.zeroCentered)
	}
	return b.Spec, nil
}

// checks expands the op's cases over the dtypes (ZeroCentered cases for
// RMSNorm alone, which is the op that takes it).
func (d *op) checks() []check.Case {
	var out []check.Case
	for _, c := range d.cases {
		for _, dt := range dtypes {
			if (c.only != tensor.Invalid && c.only != dt) || (c.zeroCentered && d.kind != kindRMS) {
				continue
			}
			out = append(out, check.Case{Name: c.label(dt), Spec: func(rng *rand.Rand) (check.Spec, error) {
				return d.spec(c, dt, rng)
			}})
		}
	}
	return out
}
