// Package normtest holds the norm family's parity and benchmark cases for the
// kittens harness (the tests, the kittens command and the generated tables).
// Users of package norm do not need it.
//
// Every case calls norm's public ops: on host tensors they run the CPU
// reference, on device tensors the kernel, and the harness compares the two.
package normtest

import (
	_ "embed"
	"slices"
	"strings"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/norm"
	"github.com/gokittens/kittens/suite"
	"github.com/gokittens/kittens/tensor"
)

//go:embed torch_norm.py
var torchSource string

// Suite returns the norm family's ops with their parity and benchmark cases
// and the PyTorch snippet the benchmark cases are compared with.
func Suite() suite.Family {
	f := suite.Family{Name: "norm", Torch: torchSource}
	for _, d := range ops {
		op := &suite.Op{Name: d.name, Family: f.Name, Doc: d.doc, Checks: d.checks()}
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

// kind is the norm function an op calls.
type kind uint8

const (
	kindRMS        kind = iota // RMSNorm, FusedAddRMSNorm
	kindLayer                  // LayerNorm, FusedAddLayerNorm
	kindL2                     // L2Norm
	kindL2Backward             // L2NormBackward
)

// op is one op of the suite: how to call it and which cases check and time it.
type op struct {
	name, doc string
	kind      kind
	fused     bool // takes a residual
	padTo     int  // Options.PadTo of the _pad ops
	eps       float64
	cases     []caseSpec
	benches   []shape
}

func (d *op) weighted() bool { return d.kind == kindRMS || d.kind == kindLayer }
func (d *op) bias() bool     { return d.kind == kindLayer }

// operands are one call's tensors; an op uses those it takes.
type operands struct {
	y, residualOut, x, residual, w, b *tensor.Tensor
	rstd, mean                        *tensor.Tensor // optional outputs
	savedY, savedRStd                 *tensor.Tensor // L2 backward inputs (y, rstd)
}

// call runs the op on one set of operands.
func (d *op) call(s *cuda.Stream, t operands, zeroCentered bool) error {
	o := norm.Options{Eps: d.eps, PadTo: d.padTo, RStd: t.rstd, Mean: t.mean, ZeroCentered: zeroCentered}
	switch {
	case d.kind == kindL2Backward:
		return norm.L2NormBackward(s, t.y, t.savedY, t.x, t.savedRStd)
	case d.kind == kindL2:
		return norm.L2Norm(s, t.y, t.x, o)
	case d.kind == kindLayer && d.fused:
		return norm.FusedAddLayerNorm(s, t.y, t.residualOut, t.x, t.residual, t.w, t.b, o)
	case d.kind == kindLayer:
		return norm.LayerNorm(s, t.y, t.x, t.w, t.b, o)
	case d.fused:
		return norm.FusedAddRMSNorm(s, t.y, t.residualOut, t.x, t.residual, t.w, o)
	}
	return norm.RMSNorm(s, t.y, t.x, t.w, o)
}

// nOut is the output row length for rows of n.
func (d *op) nOut(n int) int {
	if d.padTo > 0 {
		return intmath.RoundUp(n, d.padTo)
	}
	return n
}

// dtypes are the activation dtypes every parity case runs in.
var dtypes = []tensor.DType{tensor.BF16, tensor.F16, tensor.F32}

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
// lanes on a 132-SM device: 4 accesses a thread at 128 wide, 2 at 64 wide,
// and at 120 wide 8 lanes of 2 where the last lane holds one.
var narrowRowCases = []caseSpec{
	{rows: 8500, n: 128, only: tensor.BF16},
	{rows: 8500, n: 120, only: tensor.BF16},
	{rows: 8500, n: 64, only: tensor.BF16, stats: true},
}

// with returns commonCases followed by each group of an op's own cases.
func with(groups ...[]caseSpec) []caseSpec {
	return slices.Concat(append([][]caseSpec{commonCases}, groups...)...)
}

// Benchmark shapes: q/k normalization over 128-wide heads, the hidden sizes
// of current models at decode (1 and 32 tokens) and prefill (4096 and 16384
// tokens), gpt-oss's 2880 padded for the MoE GEMMs, and Gated DeltaNet's
// q/k heads (16 a token).
var (
	qkNormShapes = []shape{{128, 128}, {4096, 128}, {16384, 128}, {65536, 128}}
	hiddenShapes = func() []shape {
		var out []shape
		for _, n := range []int{2048, 4096, 7168, 8192} {
			for _, m := range []int{1, 32, 4096, 16384} {
				out = append(out, shape{m, n})
			}
		}
		return out
	}()
	normShapes   = slices.Concat(qkNormShapes, hiddenShapes)
	gptOSSShapes = []shape{{1, 2880}, {4096, 2880}, {16384, 2880}}
	l2Shapes     = []shape{{4096 * 16, 64}, {16384 * 16, 64}, {4096 * 16, 128}, {16384 * 16, 128},
		{4096 * 16, 256}, {16384 * 16, 256}}
)

// gptOSSPad is the pad multiple of the gpt-oss benchmark cases (MI300 MoE GEMMs).
const gptOSSPad = 256

var ops = []*op{
	{name: "rmsnorm", doc: "y = x·r·w (or ·(1+w)), r = 1/sqrt(mean(x²)+eps); optional rsigma",
		kind: kindRMS, eps: 1e-6, benches: normShapes,
		cases: with([]caseSpec{{rows: 64, n: 2880, zeroCentered: true, stats: true},
			{rows: 5, n: 4097, zeroCentered: true}}, gridStrideCases, narrowRowCases)},
	{name: "fused_add_rmsnorm", doc: "s = x + residual (rounded); residual_out = s; y = RMSNorm(s); in place as vLLM",
		kind: kindRMS, fused: true, eps: 1e-6, benches: normShapes,
		cases: with([]caseSpec{{rows: 64, n: 2880, zeroCentered: true, inPlace: true}}, gridStrideCases)},
	{name: "layernorm", doc: "y = (x−μ)·rstd·w + b, centred statistics (never E[x²]−μ²); optional mean, rstd",
		kind: kindLayer, eps: 1e-5, benches: normShapes,
		cases: with([]caseSpec{{rows: 33, n: 1000, mean: 1e3, stats: true}, {rows: 3, n: 65536, mean: 1e3},
			// A block of the striding grid meets three rows or more, so that
			// each of its two statistics buffers is written again.
			{rows: 3500, n: 520, only: tensor.F32, stats: true}}, gridStrideCases)},
	{name: "fused_add_layernorm", doc: "s = x + residual (rounded); residual_out = s; y = LayerNorm(s)",
		kind: kindLayer, fused: true, eps: 1e-5,
		benches: []shape{{16384, 128}, {65536, 128}, {4096, 4096}, {16384, 8192}},
		cases:   with([]caseSpec{{rows: 33, n: 1000, mean: 1e3, stats: true}})},
	{name: "rmsnorm_pad", doc: "RMSNorm with y padded with +0.0 to a multiple of 128 columns (256 for gpt-oss)",
		kind: kindRMS, padTo: 128, eps: 1e-5, cases: with([]caseSpec{{rows: 64, n: 2880, zeroCentered: true}})},
	{name: "fused_add_rmsnorm_pad", doc: "fp32 s = x + residual; residual_out = s rounded; y = RMSNorm(s) padded",
		kind: kindRMS, fused: true, padTo: 128, eps: 1e-5, cases: commonCases},
	{name: "l2norm_fwd", doc: "y = x·rstd, rstd = 1/sqrt(Σx²+eps) (Gated DeltaNet q/k); optional rstd",
		kind: kindL2, eps: 1e-6, benches: l2Shapes, cases: with(narrowRowCases)},
	{name: "l2norm_bwd", doc: "dx = rstd·(dy − (Σ dy·y)·y)",
		kind: kindL2Backward, benches: l2Shapes, cases: commonCases},
}
