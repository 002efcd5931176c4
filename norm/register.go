package norm

import (
	_ "embed"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/suite"
	"github.com/gokittens/kittens/tensor"
)

//go:embed torch_norm.py
var torchSource string

// opDef is one registered op: how to call it and which cases check and time it.
type opDef struct {
	name, doc string
	kind      opKind
	fused     bool // takes a residual
	weighted  bool // takes w
	bias      bool // takes b
	padTo     int  // Options.PadTo for the _pad ops
	eps       float64
	cases     []caseSpec
	benches   []benchShape
}

// operands are one call's tensors; an op uses those it takes.
type operands struct {
	y, residualOut, x, residual, w, b *tensor.Tensor
	rstd, mean                        *tensor.Tensor // optional outputs
	savedY, savedRStd                 *tensor.Tensor // L2 backward inputs (y, rstd)
}

// call runs the op on one set of operands.
func (d *opDef) call(s *cuda.Stream, t operands, zeroCentered bool) error {
	o := Options{Eps: d.eps, PadTo: d.padTo, RStd: t.rstd, Mean: t.mean, ZeroCentered: zeroCentered}
	switch {
	case d.kind == opL2Backward:
		return L2NormBackward(s, t.y, t.savedY, t.x, t.savedRStd)
	case d.kind == opLayer && d.fused:
		return FusedAddLayerNorm(s, t.y, t.residualOut, t.x, t.residual, t.w, t.b, o)
	case d.kind == opLayer:
		return LayerNorm(s, t.y, t.x, t.w, t.b, o)
	case !d.weighted:
		return L2Norm(s, t.y, t.x, o)
	case d.fused:
		return FusedAddRMSNorm(s, t.y, t.residualOut, t.x, t.residual, t.w, o)
	}
	return RMSNorm(s, t.y, t.x, t.w, o)
}

// nOut is the output row length for rows of n.
func (d *opDef) nOut(n int) int {
	if d.padTo > 0 {
		return intmath.CeilDiv(n, d.padTo) * d.padTo
	}
	return n
}

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

// normTol is the spec's tolerance for normalized bf16 outputs (§0: atol =
// rtol = 2e-2 for norms: the statistic's fp32 rounding can move a value that
// sits near a rounding boundary by one bf16 ulp more than an elementwise op).
// f16 and f32 outputs keep check.ForDType: one rounding from fp32 at most.
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
// whose means happen to lie near zero made it 1.13e-5 against ForDType's
// 1e-5 (f16 rows of 1000, std 1, half of them NaN or ±inf, on an H200), with
// every element inside its bound.
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
// bound's largest value over the rows. Simulated in fp32 with the kernel's
// order (threads of 1 to 8 accesses, xor butterflies) against float64, on
// 600 draws of the 17x4096 "large" case (dy of std 1e15): the default
// failed 3 in 600 with y of std 1/N (worst element 3e-5 off relatively;
// seen once on the GPU, 1.5e-5) and 592 in 600 with unit rows; with the
// floor none did, the worst error over Rtol·|dx_k| being 2e-8·std against a
// floor of 2.5e-5·std. A dot product off by 1% still fails it.
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

// rowTensor is a host [rows, n] tensor with the case's row stride plus extra.
func rowTensor(dt tensor.DType, rows, n, stride int) *tensor.Tensor {
	if stride == 0 {
		return tensor.New(dt, rows, n)
	}
	t, err := tensor.NewStrided(dt, []int{rows, n}, []int{stride, 1})
	if err != nil {
		panic(err) // case tables are static
	}
	return t
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
func (d *opDef) spec(c caseSpec, dt tensor.DType, rng *rand.Rand) check.Spec {
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
	x := rowTensor(dt, c.rows, c.n, c.stride)
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
	case d.kind == opL2Backward:
		// y as the forward pass leaves it: rows of unit norm, so that the
		// dot product's term dot·y is a few per cent of dx, not 1/N^1.5 of it
		// (with y of std 1/N it hid under f32's tolerance at N = 4096).
		y := rowTensor(dt, c.rows, c.n, c.stride)
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
		res := rowTensor(dt, c.rows, c.n, c.stride)
		res.FillNormal(rng, c.mean, std)
		if c.zeroRow {
			rv := res.Float64s()
			setRow(x, 0, func(k int) float64 { return -rv[k] })
		}
		if c.inPlace {
			idx.res = b.add("residual", res, true, false, nil)
		} else {
			idx.res = b.add("residual", res, false, false, nil)
			idx.ro = b.add("residualOut", rowTensor(dt, c.rows, c.n, c.stride), true, true, nil)
		}
	case c.zeroRow:
		setRow(x, 0, func(int) float64 { return 0 })
	}
	xName, yName := "x", "y"
	if d.kind == opL2Backward {
		xName, yName = "dy", "dx"
	}
	if c.inPlace {
		idx.x = b.add(xName, x, true, false, yTol)
		idx.y = idx.x
	} else {
		idx.x = b.add(xName, x, false, false, nil)
		idx.y = b.add(yName, rowTensor(dt, c.rows, d.nOut(c.n), yStride), true, true, yTol)
	}
	if d.weighted {
		w := tensor.New(dt, c.n)
		wMean := 1.0 // weights near 1, or near 0 when the op adds the 1
		if c.zeroCentered {
			wMean = 0
		}
		w.FillNormal(rng, wMean, 0.3)
		idx.w = b.add("w", w, false, false, nil)
	}
	if d.bias {
		bt := tensor.New(dt, c.n)
		bt.FillNormal(rng, 0, 0.3)
		idx.b = b.add("b", bt, false, false, nil)
	}
	if c.stats && d.kind != opL2Backward {
		idx.rstd = b.add("rstd", tensor.New(tensor.F32, c.rows), true, true, nil)
		if d.kind == opLayer {
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
	return b.Spec
}

// checks expands the op's cases over the dtypes.
func (d *opDef) checks() []check.Case {
	var out []check.Case
	for _, c := range d.cases {
		for _, dt := range activationDTypes {
			if c.only != tensor.Invalid && c.only != dt {
				continue
			}
			if c.zeroCentered && !d.weighted {
				continue
			}
			out = append(out, check.Case{Name: c.label(dt), Spec: func(rng *rand.Rand) (check.Spec, error) {
				return d.spec(c, dt, rng), nil
			}})
		}
	}
	return out
}

// benchShape is one benchmark case, bf16.
type benchShape struct{ rows, n int }

// goal is what the normalization issue asks of a shape: the row-wise goal,
// and 1.5× PyTorch eager, except on the original port's 128×128 shape,
// where it asks no slower than eager.
func goal(sh benchShape) bench.Goal {
	g := bench.RowwiseGoal
	g.VsEager = 1.5
	if sh == (benchShape{128, 128}) {
		g.VsEager = 1
	}
	return g
}

// bench builds one benchmark case. Fused ops run out of place, as the
// PyTorch snippet they are compared with does. In place, as serving runs
// them, they now take the same time: on an H200 in the sixth session
// (BenchmarkSweep's in-place shapes, the picker's config), fused_add_rmsnorm
// 16384x7168 took 223.8 µs against 222.6 out of place and 16384x8192 255.5
// against 254.8, where the fourth session had measured 244 against 229 at
// 7168. The bytes count each input read once and each output written once.
func (d *opDef) bench(sh benchShape) bench.Case {
	const dt = tensor.BF16
	m, n, nOut := sh.rows, sh.n, d.nOut(sh.n)
	es := int64(dt.Size())
	var bytes int64
	switch {
	case d.kind == opL2Backward:
		bytes = 3*int64(m)*int64(n)*es + 4*int64(m)
	case d.fused:
		bytes = (3*int64(m)*int64(n) + int64(m)*int64(nOut)) * es
	default:
		bytes = (int64(m)*int64(n) + int64(m)*int64(nOut)) * es
	}
	if d.weighted {
		bytes += int64(n) * es
	}
	if d.bias {
		bytes += int64(n) * es
	}
	name := fmt.Sprintf("%dx%d %v", m, n, dt)
	if nOut != n {
		name = fmt.Sprintf("%dx%d pad%d %v", m, n, nOut, dt)
	}
	args := map[string]any{"M": m, "N": n, "dtype": dt.String(), "eps": d.eps}
	if d.padTo > 0 {
		args["pad_to"] = d.padTo
	}
	return bench.Case{
		Name:  name,
		Bytes: bytes,
		Torch: &bench.TorchCase{Op: d.name, Args: args},
		Goal:  goal(sh),
		New: func(dev *cuda.Device, rng *rand.Rand) (bench.Instance, error) {
			a := &allocator{dev: dev, rng: rng}
			t := operands{x: a.random(dt, 0, 1, m, n)}
			switch {
			case d.kind == opL2Backward:
				t.y = a.random(dt, 0, 1, m, n) // dx
				t.savedY = a.random(dt, 0, 1/float64(n), m, n)
				t.savedRStd = a.random(tensor.F32, 1, 0.2, m)
			case d.fused:
				t.residual = a.random(dt, 0, 1, m, n)
				t.residualOut = a.random(dt, 0, 1, m, n)
				t.y = a.random(dt, 0, 1, m, nOut)
			default:
				t.y = a.random(dt, 0, 1, m, nOut)
			}
			if d.weighted {
				t.w = a.random(dt, 1, 0.3, n)
			}
			if d.bias {
				t.b = a.random(dt, 0, 0.3, n)
			}
			if a.err != nil {
				a.free()
				return bench.Instance{}, fmt.Errorf("norm: bench %s: %w", name, a.err)
			}
			return bench.Instance{Run: func(s *cuda.Stream) error { return d.call(s, t, false) }, Free: a.free}, nil
		},
	}
}

// allocator makes a bench instance's device tensors and keeps the first error.
type allocator struct {
	dev *cuda.Device
	rng *rand.Rand
	all []*tensor.Tensor
	err error
}

func (a *allocator) random(dt tensor.DType, mean, std float64, shape ...int) *tensor.Tensor {
	if a.err != nil {
		return nil
	}
	t, err := tensor.RandDevice(a.dev, a.rng, dt, mean, std, shape...)
	if err != nil {
		a.err = err
		return nil
	}
	a.all = append(a.all, t)
	return t
}

func (a *allocator) free() {
	for _, t := range a.all {
		t.Free()
	}
}

// Cases shared by every op: odd and power-of-two N, strided rows (aligned
// and not), N = 1, rows longer than registers hold (4097 scalar, 65536),
// large values with an all-zero row, rows holding a NaN or an inf (sub-warp
// groups and whole blocks), optional outputs, in place, and no rows at all
// (M = 0, a no-op that must launch nothing and fail nowhere).
var commonCases = []caseSpec{
	{rows: 0, n: 64, stats: true},
	{rows: 128, n: 128, stats: true},
	{rows: 37, n: 1},
	{rows: 129, n: 7, stride: 10},
	{rows: 65, n: 127},
	{rows: 33, n: 1000, stride: 1024, stats: true},
	{rows: 16, n: 2880},
	{rows: 9, n: 4097, stats: true},
	{rows: 17, n: 4096, large: true, zeroRow: true, stats: true},
	{rows: 3, n: 65536, stats: true},
	{rows: 64, n: 2048, inPlace: true},
	{rows: 6, n: 1000, special: true, stats: true},
	{rows: 6, n: 8192, special: true, stats: true},
}

// gridStrideCases have enough rows that the grid strides over them on a
// 132-SM device (sub-warp, block and looped paths). The row loop is common
// to every op, so two ops carry them, and LayerNorm, whose block statistics
// alternate between two buffers from row to row.
var gridStrideCases = []caseSpec{
	{rows: 270_001, n: 1, only: tensor.BF16},
	{rows: 1600, n: 1040, only: tensor.BF16},
	{rows: 530, n: 4097, only: tensor.BF16, stats: true},
}

// narrowRowCases have enough narrow rows that one-read rows take groups of 4
// lanes on a 132-SM device (pickConfig): 4 accesses a thread at 128 wide, 2
// at 64 wide, and at 120 wide 8 lanes of 2 where the last lane holds one.
var narrowRowCases = []caseSpec{
	{rows: 8500, n: 128, only: tensor.BF16},
	{rows: 8500, n: 120, only: tensor.BF16},
	{rows: 8500, n: 64, only: tensor.BF16, stats: true},
}

// with returns commonCases followed by each group of an op's own cases.
func with(groups ...[]caseSpec) []caseSpec {
	return slices.Concat(append([][]caseSpec{commonCases}, groups...)...)
}

// Benchmark shapes (spec §1 and the issue).
var (
	qkNormShapes = []benchShape{{128, 128}, {4096, 128}, {16384, 128}, {65536, 128}}
	hiddenShapes = func() []benchShape {
		var out []benchShape
		for _, n := range []int{2048, 4096, 7168, 8192} {
			for _, m := range []int{1, 32, 4096, 16384} {
				out = append(out, benchShape{m, n})
			}
		}
		return out
	}()
	normShapes   = append(append([]benchShape(nil), qkNormShapes...), hiddenShapes...)
	gptOSSShapes = []benchShape{{1, 2880}, {4096, 2880}, {16384, 2880}}
	l2Shapes     = []benchShape{{4096 * 16, 64}, {16384 * 16, 64}, {4096 * 16, 128}, {16384 * 16, 128},
		{4096 * 16, 256}, {16384 * 16, 256}}
)

var ops = []*opDef{
	{name: "rmsnorm", doc: "y = x·r·w (or ·(1+w)), r = 1/sqrt(mean(x²)+eps); optional rsigma",
		kind: opRMS, weighted: true, eps: 1e-6, benches: normShapes,
		cases: with([]caseSpec{{rows: 64, n: 2880, zeroCentered: true, stats: true},
			{rows: 5, n: 4097, zeroCentered: true}}, gridStrideCases, narrowRowCases)},
	{name: "fused_add_rmsnorm", doc: "s = x + residual (rounded); residual_out = s; y = RMSNorm(s); in place as vLLM",
		kind: opRMS, fused: true, weighted: true, eps: 1e-6, benches: normShapes,
		cases: with([]caseSpec{{rows: 64, n: 2880, zeroCentered: true, inPlace: true}}, gridStrideCases)},
	{name: "layernorm", doc: "y = (x−μ)·rstd·w + b, centred statistics (never E[x²]−μ²); optional mean, rstd",
		kind: opLayer, weighted: true, bias: true, eps: 1e-5, benches: normShapes,
		cases: with([]caseSpec{{rows: 33, n: 1000, mean: 1e3, stats: true}, {rows: 3, n: 65536, mean: 1e3},
			// A block of the striding grid meets three rows or more, so that
			// each of its two statistics buffers is written again.
			{rows: 3500, n: 520, only: tensor.F32, stats: true}}, gridStrideCases)},
	{name: "fused_add_layernorm", doc: "s = x + residual (rounded); residual_out = s; y = LayerNorm(s)",
		kind: opLayer, fused: true, weighted: true, bias: true, eps: 1e-5,
		benches: []benchShape{{16384, 128}, {65536, 128}, {4096, 4096}, {16384, 8192}},
		cases:   with([]caseSpec{{rows: 33, n: 1000, mean: 1e3, stats: true}})},
	{name: "rmsnorm_pad", doc: "RMSNorm with y padded with +0.0 to a multiple of 128 columns (256 for gpt-oss)",
		kind: opRMS, weighted: true, padTo: 128, eps: 1e-5, cases: with([]caseSpec{{rows: 64, n: 2880, zeroCentered: true}})},
	{name: "fused_add_rmsnorm_pad", doc: "fp32 s = x + residual; residual_out = s rounded; y = RMSNorm(s) padded",
		kind: opRMS, fused: true, weighted: true, padTo: 128, eps: 1e-5, cases: commonCases},
	{name: "l2norm_fwd", doc: "y = x·rstd, rstd = 1/sqrt(Σx²+eps) (Gated DeltaNet q/k); optional rstd",
		kind: opRMS, eps: 1e-6, benches: l2Shapes, cases: with(narrowRowCases)},
	{name: "l2norm_bwd", doc: "dx = rstd·(dy − (Σ dy·y)·y)",
		kind: opL2Backward, benches: l2Shapes, cases: commonCases},
}

// gptOSSPad is the pad multiple of the gpt-oss benchmark cases (MI300 MoE GEMMs).
const gptOSSPad = 256

// Suite returns the family's parity and benchmark cases.
func Suite() (f suite.Family) {
	f.Name = "norm"
	f.Torch = torchSource
	for _, d := range ops {
		op := &suite.Op{Name: d.name, Family: "norm", Doc: d.doc, Checks: d.checks()}
		for _, sh := range d.benches {
			op.Benches = append(op.Benches, d.bench(sh))
		}
		if strings.HasSuffix(d.name, "_pad") {
			gpt := *d
			gpt.padTo = gptOSSPad
			for _, sh := range gptOSSShapes {
				op.Benches = append(op.Benches, gpt.bench(sh))
			}
		}
		f.Ops = append(f.Ops, op)
	}
	return f
}
