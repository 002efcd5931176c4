// Package acttest holds the act family's parity and benchmark cases and its
// PyTorch builders, for the kittens harness (the registry, the kittens
// command and the tests). Users of package act do not need it.
package acttest

import (
	_ "embed"
	"fmt"
	"maps"
	"math/rand/v2"

	"github.com/gokittens/kittens/act"
	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/suite"
	"github.com/gokittens/kittens/tensor"
)

//go:embed torch_act.py
var torchSrc string

// call is an op on y and x: host tensors run the CPU reference, device
// tensors the kernel.
type call = func(s *cuda.Stream, y, x *tensor.Tensor) error

// caseSet is parity cases with the call they run.
type caseSet struct {
	cases []caseDef
	run   call
}

var unaryCases = []caseDef{
	{name: "1001", shape: []int{1001}},
	{name: "37x129", shape: []int{37, 129}},
	{name: "3x5x4099", shape: []int{3, 5, 4099}},
	{name: "33x100 strides 128,112", shape: []int{33, 100}, xs: []int{128, 1}, ys: []int{112, 1}},
	{name: "20x30 strides 36,30", shape: []int{20, 30}, xs: []int{36, 1}},
	{name: "in-place 4x1000", shape: []int{4, 1000}, inplace: true},
	{name: "wide 64x513", shape: []int{64, 513}, fill: FillWide},
	{name: "nan, ±inf 16x257", shape: []int{16, 257}, fill: FillSpecial},
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
	{name: "wide 32x1024", shape: []int{32, 1024}, fill: FillWide},
	{name: "nan, ±inf 8x512", shape: []int{8, 512}, fill: FillSpecial},
	{name: "0x64", shape: []int{0, 64}},
}

// limited is the clamp case of silu_and_mul and gelu_and_mul: a limit that
// N(0, 3²) inputs cross often.
func limited(kind act.Kind) caseSet {
	return caseSet{[]caseDef{{name: "limit=2.5 16x600", shape: []int{16, 600}}},
		func(s *cuda.Stream, y, x *tensor.Tensor) error {
			return act.Gated(s, y, x, act.GatedOptions{Kind: kind, Limit: 2.5})
		}}
}

// swiglu is act.SwiGLU in layout l.
func swiglu(l act.Layout) call {
	return func(s *cuda.Stream, y, x *tensor.Tensor) error { return act.SwiGLU(s, y, x, l) }
}

// prefixed returns copies of cases whose names start with prefix.
func prefixed(prefix string, cs []caseDef) []caseDef {
	out := make([]caseDef, len(cs))
	for i, c := range cs {
		c.name = prefix + c.name
		out[i] = c
	}
	return out
}

// Benchmark shapes, M×D, bf16. A gated op's D is its output width d: the
// input is M×2D, as the torch builders take it.
var (
	unaryBenchShapes = [][2]int{{4096, 14336}, {16384, 8192}}
	gatedBenchShapes = [][2]int{{4096, 256}, {16384, 256}, {65536, 256}, {131072, 256}, {4096, 8192},
		{4096, 16384}, {4096, 28672}}
	// The variants (gelu_tanh_and_mul, mul_and_silu) run silu_and_mul's
	// kernel with another activation or order: its narrowest and a wide
	// FFN's shape are enough.
	variantBenchShapes = [][2]int{{4096, 256}, {4096, 16384}}
)

// Suite returns the family's ops with their parity and benchmark cases and
// the PyTorch builders of the benchmarks.
func Suite() suite.Family {
	f := suite.Family{Name: "act", Torch: torchSrc}
	for _, u := range []struct {
		kind act.Kind
		doc  string
	}{
		{act.KindSiLU, "y = x·σ(x)"},
		{act.KindGELU, "y = ½·x·(1 + erf(x/√2)) (exact GELU)"},
		{act.KindGELUTanh, "y = ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))"},
		{act.KindReLU, "y = max(0, x)"},
		{act.KindTanh, "y = tanh(x)"},
	} {
		f.Ops = append(f.Ops, unaryOp(u.kind, u.doc))
	}
	f.Ops = append(f.Ops,
		gatedOp("silu_and_mul", "y = silu(x[..., :d])·x[..., d:]", act.SiLUAndMul, gatedBenchShapes, nil,
			limited(act.KindSiLU)),
		gatedOp("gelu_and_mul", "y = gelu(x[..., :d])·x[..., d:] (exact GELU)", act.GELUAndMul, gatedBenchShapes, nil,
			limited(act.KindGELU)),
		gatedOp("gelu_tanh_and_mul", "y = gelu_tanh(x[..., :d])·x[..., d:]", act.GELUTanhAndMul, variantBenchShapes, nil),
		gatedOp("mul_and_silu", "y = x[..., :d]·silu(x[..., d:]) (vLLM)", act.MulAndSiLU, variantBenchShapes, nil),
		gatedOp("swiglu", "gpt-oss: g·σ(1.702·g)·(u + 1), g ≤ 7, |u| ≤ 7; interleaved (or halves)",
			swiglu(act.Interleaved), [][2]int{{4096, 2880}}, map[string]any{"layout": "interleaved"},
			caseSet{prefixed("halves ", gatedCases), swiglu(act.Halves)}),
	)
	return f
}

func unaryOp(kind act.Kind, doc string) *suite.Op {
	op := &suite.Op{Name: kind.String(), Family: "act", Doc: doc}
	run := func(s *cuda.Stream, y, x *tensor.Tensor) error { return act.Unary(s, y, x, kind) }
	for _, dt := range dtypes {
		for _, c := range unaryCases {
			op.Checks = append(op.Checks, parity(c, dt, false, run))
		}
	}
	for _, sh := range unaryBenchShapes {
		op.Benches = append(op.Benches, benchCase(fmt.Sprintf("%dx%d", sh[0], sh[1]), sh[:], sh[:], run,
			&bench.TorchCase{Op: kind.String(), Args: map[string]any{"shape": sh[:], "dtype": "bf16"}}))
	}
	return op
}

// gatedOp builds a gated op: gatedCases and the benchmarks run the op,
// each extra set its own call. torchArgs are added to every benchmark's.
func gatedOp(name, doc string, run call, benchShapes [][2]int, torchArgs map[string]any, extra ...caseSet) *suite.Op {
	op := &suite.Op{Name: name, Family: "act", Doc: doc}
	sets := append([]caseSet{{gatedCases, run}}, extra...)
	for _, dt := range dtypes {
		for _, set := range sets {
			for _, c := range set.cases {
				op.Checks = append(op.Checks, parity(c, dt, true, set.run))
			}
		}
	}
	for _, sh := range benchShapes {
		args := map[string]any{"m": sh[0], "d": sh[1], "dtype": "bf16"}
		maps.Copy(args, torchArgs)
		op.Benches = append(op.Benches, benchCase(fmt.Sprintf("%dx%d", sh[0], sh[1]), []int{sh[0], 2 * sh[1]}, sh[:],
			run, &bench.TorchCase{Op: name, Args: args}))
	}
	return op
}

// benchCase is one bf16 benchmark: x and y shapes, and the op on a stream.
func benchCase(name string, xShape, yShape []int, run call, torch *bench.TorchCase) bench.Case {
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
