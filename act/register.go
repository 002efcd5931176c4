package act

import (
	_ "embed"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/suite"
	"github.com/gokittens/kittens/tensor"
)

//go:embed torch_act.py
var torchSrc string

// tolerance is spec §0's for bf16 elementwise kernels (atol = rtol =
// 1.6e-2: a result rounded once from fp32 versus once from float64 is at
// most one unit apart). fp16 and fp32 use check.ForDType: for fp16 two
// units in the last place relative plus a small floor, for fp32 1e-5
// relative and absolute. The kernel's fp32 math adds less than that: ex2
// and rcp approximations (≤ 2 and ≤ 1 ulp), tanhf, and the fitted erfc of
// act.cu (relative 7.6e-5 for 16-bit outputs, under a third of an fp16
// unit; for fp32 1.2e-7, and up to 8e-6 where the exponent passes 100,
// which only the GELU tail reaches, at values under 1e-28).
func tolerance(dt tensor.DType) check.Tolerance {
	if dt == tensor.BF16 {
		return check.Tolerance{Atol: 1.6e-2, Rtol: 1.6e-2, RelNorm: 8e-3}
	}
	return check.ForDType(dt)
}

// filling says how a parity case draws its input.
type filling int

const (
	fillNormal  filling = iota // N(0, 3²): both tails of every activation
	fillWide                   // ±10^u, log-uniform magnitudes up to wideMax
	fillSpecial                // N(0, 3²) within ±8, with NaN, +inf and −inf among it
)

// wideMax bounds the magnitudes of fillWide: far out in every format, yet
// small enough that an fp32 gate whose activation is subnormal (and so has
// few significant bits) times an up value stays under the fp32 tolerance.
func wideMax(dt tensor.DType) float64 {
	if dt == tensor.F16 {
		return 6e4
	}
	return 1e30
}

func fill(t *tensor.Tensor, rng *rand.Rand, f filling) {
	v := make([]float64, t.Numel())
	for i := range v {
		switch f {
		case fillWide:
			v[i] = math.Pow(10, -3+rng.Float64()*(math.Log10(wideMax(t.DType()))+3))
			if rng.IntN(2) == 0 {
				v[i] = -v[i]
			}
		case fillSpecial:
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

// hostTensor is a zeroed host tensor, contiguous when strides is nil.
func hostTensor(dt tensor.DType, shape, strides []int) (*tensor.Tensor, error) {
	if strides == nil {
		strides = tensor.ContiguousStrides(shape)
	}
	return tensor.NewStrided(dt, shape, strides)
}

// caseDef is one parity case: the input shape and, when not contiguous,
// the strides of x and y; the fill; in-place (unary only).
type caseDef struct {
	name       string
	shape      []int // of x
	xs, ys     []int // strides; nil: contiguous
	fill       filling
	inplace    bool
	limit      float64 // gated: overrides the op's Limit when > 0
	flipLayout bool    // gated: the other layout than the op's own
}

var unaryCases = []caseDef{
	{name: "1001", shape: []int{1001}},
	{name: "37x129", shape: []int{37, 129}},
	{name: "3x5x4099", shape: []int{3, 5, 4099}},
	{name: "33x100 strides 128,112", shape: []int{33, 100}, xs: []int{128, 1}, ys: []int{112, 1}},
	{name: "20x30 strides 36,30", shape: []int{20, 30}, xs: []int{36, 1}},
	{name: "in-place 4x1000", shape: []int{4, 1000}, inplace: true},
	{name: "wide 64x513", shape: []int{64, 513}, fill: fillWide},
	{name: "nan, ±inf 16x257", shape: []int{16, 257}, fill: fillSpecial},
	{name: "0x64", shape: []int{0, 64}},
}

var gatedCases = []caseDef{
	{name: "d=7 5x14", shape: []int{5, 14}},
	{name: "d=1001 3x2002", shape: []int{3, 2002}},
	{name: "d=2880 4x5760", shape: []int{4, 5760}},
	{name: "d=256 64x512", shape: []int{64, 512}},
	{name: "d=100 2x3x200", shape: []int{2, 3, 200}},
	{name: "d=40 9x80 strides 96,48", shape: []int{9, 80}, xs: []int{96, 1}, ys: []int{48, 1}},
	{name: "d=20 6x40 strides 48,24", shape: []int{6, 40}, xs: []int{48, 1}, ys: []int{24, 1}},
	{name: "wide 32x1024", shape: []int{32, 1024}, fill: fillWide},
	{name: "nan, ±inf 8x512", shape: []int{8, 512}, fill: fillSpecial},
	{name: "0x64", shape: []int{0, 64}},
}

// limitCase is added to silu_and_mul and gelu_and_mul: a clamp that
// N(0, 3²) inputs cross often.
var limitCase = caseDef{name: "limit=2.5 16x600", shape: []int{16, 600}, limit: 2.5}

var dtypes = []tensor.DType{tensor.BF16, tensor.F16, tensor.F32}

// parity builds the Check of one case: run calls the op on y and x, on the
// host (a nil stream) or on the device (check.Spec.Run).
func parity(c caseDef, dt tensor.DType, gated bool, run func(s *cuda.Stream, y, x *tensor.Tensor) error) check.Case {
	return check.Case{Name: c.name + " " + dt.String(), Spec: func(rng *rand.Rand) (check.Spec, error) {
		x, err := hostTensor(dt, c.shape, c.xs)
		if err != nil {
			return check.Spec{}, err
		}
		fill(x, rng, c.fill)
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

// benchCase is one benchmark: x and y shapes, and the op on a stream.
func benchCase(name string, xShape, yShape []int, run func(s *cuda.Stream, y, x *tensor.Tensor) error,
	torch *bench.TorchCase) bench.Case {
	numel := func(s []int) int64 {
		n := int64(1)
		for _, d := range s {
			n *= int64(d)
		}
		return n
	}
	return bench.Case{
		Name:  name + " bf16",
		Bytes: 2 * (numel(xShape) + numel(yShape)),
		Torch: torch,
		Goal:  bench.RowwiseGoal,
		New: func(dev *cuda.Device, rng *rand.Rand) (bench.Instance, error) {
			x, err := tensor.RandDevice(dev, rng, tensor.BF16, 0, 1, xShape...)
			if err != nil {
				return bench.Instance{}, err
			}
			y, err := tensor.Empty(dev, tensor.BF16, yShape...)
			if err != nil {
				x.Free()
				return bench.Instance{}, err
			}
			return bench.Instance{
				Run:  func(s *cuda.Stream) error { return run(s, y, x) },
				Free: func() { x.Free(); y.Free() },
			}, nil
		},
	}
}

// Gated benchmark shapes, M×D. D is the OUTPUT width d (the input is
// M×2D), the convention of h200-baseline.md: its silu_and_mul_pt 4096x256
// row, 13.5 µs at 465.9 GB/s, moved 6.29 MB = 4096·(512 + 256)·2 bytes.
var gatedBenchShapes = [][2]int{{4096, 256}, {16384, 256}, {65536, 256}, {131072, 256}, {4096, 8192}, {4096, 16384}, {4096, 28672}}

var unaryBenchShapes = [][2]int{{4096, 14336}, {16384, 8192}}

// variantBenchShapes are the gated variants' shapes (gelu_tanh_and_mul,
// mul_and_silu), whose kernel is silu_and_mul's with another activation or
// order: the original port's narrowest rows and a wide FFN's.
var variantBenchShapes = [][2]int{{4096, 256}, {4096, 16384}}

func unaryOp(kind Kind, doc string) *suite.Op {
	op := &suite.Op{Name: kind.String(), Family: "act", Doc: doc}
	call := func(s *cuda.Stream, y, x *tensor.Tensor) error { return unary("act.Unary", s, y, x, kind) }
	for _, dt := range dtypes {
		for _, c := range unaryCases {
			op.Checks = append(op.Checks, parity(c, dt, false, call))
		}
	}
	for _, sh := range unaryBenchShapes {
		op.Benches = append(op.Benches, benchCase(fmt.Sprintf("%dx%d", sh[0], sh[1]), sh[:], sh[:], call,
			&bench.TorchCase{Op: kind.String(), Args: map[string]any{"shape": sh[:], "dtype": "bf16"}}))
	}
	return op
}

func gatedOp(name, doc string, p gatedParams, extra []caseDef, benchShapes [][2]int) *suite.Op {
	op := &suite.Op{Name: name, Family: "act", Doc: doc}
	for _, dt := range dtypes {
		for _, c := range slices.Concat(gatedCases, extra) {
			q := p
			if c.limit > 0 {
				q.Limit = c.limit
			}
			if c.flipLayout {
				q.Layout = other(q.Layout)
			}
			op.Checks = append(op.Checks, parity(c, dt, true, func(s *cuda.Stream, y, x *tensor.Tensor) error {
				return gated("act."+name, s, y, x, q)
			}))
		}
	}
	args := map[string]any{}
	if p.Layout == Interleaved {
		args["layout"] = "interleaved"
	}
	for _, sh := range benchShapes {
		a := map[string]any{"m": sh[0], "d": sh[1], "dtype": "bf16"}
		for k, v := range args {
			a[k] = v
		}
		op.Benches = append(op.Benches, benchCase(fmt.Sprintf("%dx%d", sh[0], sh[1]), []int{sh[0], 2 * sh[1]}, sh[:],
			func(s *cuda.Stream, y, x *tensor.Tensor) error { return gated("act."+name, s, y, x, p) },
			&bench.TorchCase{Op: name, Args: a}))
	}
	return op
}

// flipped returns copies of cases that run with the other layout.
func flipped(prefix string, cs []caseDef) []caseDef {
	out := make([]caseDef, len(cs))
	for i, c := range cs {
		c.name, c.flipLayout = prefix+c.name, true
		out[i] = c
	}
	return out
}

// Suite returns the family's parity and benchmark cases.
func Suite() (f suite.Family) {
	f.Name = "act"
	f.Torch = torchSrc
	f.Ops = append(f.Ops, unaryOp(KindSiLU, "y = x·σ(x)"))
	f.Ops = append(f.Ops, unaryOp(KindGELU, "y = ½·x·(1 + erf(x/√2)) (exact GELU)"))
	f.Ops = append(f.Ops, unaryOp(KindGELUTanh, "y = ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))"))
	f.Ops = append(f.Ops, unaryOp(KindReLU, "y = max(0, x)"))
	f.Ops = append(f.Ops, unaryOp(KindTanh, "y = tanh(x)"))

	plain := func(k Kind) gatedParams { return gatedParams{GatedOptions: GatedOptions{Kind: k}, alpha: 1} }
	limited := []caseDef{limitCase}
	f.Ops = append(f.Ops, gatedOp("silu_and_mul", "y = silu(x[..., :d])·x[..., d:]", plain(KindSiLU), limited, gatedBenchShapes))
	f.Ops = append(f.Ops, gatedOp("gelu_and_mul", "y = gelu(x[..., :d])·x[..., d:] (exact GELU)", plain(KindGELU), limited, gatedBenchShapes))
	f.Ops = append(f.Ops, gatedOp("gelu_tanh_and_mul", "y = gelu_tanh(x[..., :d])·x[..., d:]", plain(KindGELUTanh), nil, variantBenchShapes))
	mul := plain(KindSiLU)
	mul.GateSecond = true
	f.Ops = append(f.Ops, gatedOp("mul_and_silu", "y = x[..., :d]·silu(x[..., d:]) (vLLM)", mul, nil, variantBenchShapes))
	swiglu := gatedParams{GatedOptions: GatedOptions{Kind: KindSiLU, Limit: SwiGLULimit, Layout: Interleaved},
		alpha: SwiGLUAlpha, upAdd: 1}
	f.Ops = append(f.Ops, gatedOp("swiglu", "gpt-oss: g·σ(1.702·g)·(u + 1), g ≤ 7, |u| ≤ 7; interleaved (or halves)",
		swiglu, flipped("halves ", gatedCases), [][2]int{{4096, 2880}}))
	return f
}

// other returns the layout that l is not.
func other(l Layout) Layout {
	if l == Halves {
		return Interleaved
	}
	return Halves
}
