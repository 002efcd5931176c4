package moetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/moe"
	"github.com/gokittens/kittens/suite"
	"github.com/gokittens/kittens/tensor"
)

// routerOps is moe.TopK's op: its parity and benchmark cases.
func routerOps() []*suite.Op {
	op := &suite.Op{
		Name:   "moe_topk",
		Family: "moe",
		Doc: "router top-k: logits [T, E] to expert ids (i32) and weights (f32) [T, k]; softmax or sigmoid scores, " +
			"correction bias, grouped selection, renormalization, scaling, shared expert; ties to the lower id, NaN last",
	}
	for _, c := range routerCases {
		op.Checks = append(op.Checks, check.Case{Name: c.name(), Spec: c.spec})
	}
	for _, b := range routerBenches {
		op.Benches = append(op.Benches, b.bench())
	}
	return []*suite.Op{op}
}

// routerFill is how a parity case's logits are drawn.
type routerFill int

const (
	// routerPlain: N(0, 1), one hot expert raised by 6 on about half the
	// tokens (skewed routing) and an eighth of the experts lowered by 12
	// (experts that get no tokens).
	routerPlain routerFill = iota
	// routerTies: integers 0 to 3, so most selections break ties; biases
	// drawn from {−1/8, 0, 1/8}.
	routerTies
	// routerSpecial: rows cycling through routerSpecialRows.
	routerSpecial
)

// routerCase is one parity case of moe.TopK: T tokens of E logits of
// dtype dt (row stride Stride, 0 for E), options o, a random bias where
// Bias is set.
type routerCase struct {
	T, E   int
	DT     tensor.DType
	O      moe.RouterOptions
	Bias   bool
	Stride int
	Fill   routerFill
	What   string
}

// routerCases cover the models' shapes and the parity sizes (T of 1, 7,
// 4096 and 65536; E from 8 to 512; K from 1 to 10, and 22), every logits
// dtype, aligned and unaligned rows (vector and scalar loads), odd E, both
// scorings, bias, groups, renormalization, scaling, the shared expert,
// ties, special values and zero tokens. Each stays within about 2M logits.
var routerCases = []routerCase{
	{T: 4096, E: 8, DT: tensor.BF16, O: moe.RouterOptions{K: 2, Renormalize: true}, What: "Mixtral"},
	{T: 65536, E: 8, DT: tensor.BF16, O: moe.RouterOptions{K: 2, Renormalize: true}, What: "Mixtral, many tokens"},
	{T: 1, E: 8, DT: tensor.F32, O: moe.RouterOptions{K: 2}, What: "one token"},
	{T: 7, E: 64, DT: tensor.F16, O: moe.RouterOptions{K: 6}, What: "seven tokens"},
	{T: 4096, E: 128, DT: tensor.BF16, O: moe.RouterOptions{K: 8, Renormalize: true}, What: "Qwen3-30B-A3B"},
	{T: 4096, E: 128, DT: tensor.F32, O: moe.RouterOptions{K: 4, Scale: 0.5}, Fill: routerTies, What: "ties, scaled"},
	{T: 4096, E: 512, DT: tensor.BF16, O: moe.RouterOptions{K: 10, Renormalize: true}, What: "Qwen3-Next"},
	{T: 7, E: 384, DT: tensor.F32, O: moe.RouterOptions{K: 8, Renormalize: true}, What: "384 experts"},
	{T: 1000, E: 384, DT: tensor.BF16, O: moe.RouterOptions{K: 22}, What: "k = 22"},
	{T: 2048, E: 256, DT: tensor.F16, O: moe.RouterOptions{K: 4}, Stride: 260, What: "unaligned rows"},
	{T: 300, E: 100, DT: tensor.BF16, O: moe.RouterOptions{K: 10, Renormalize: true}, Stride: 104, What: "odd E, strided"},
	{T: 65536, E: 16, DT: tensor.F32, O: moe.RouterOptions{K: 4, Renormalize: true}, What: "16 experts, many tokens"},
	{T: 96, E: 64, DT: tensor.BF16, O: moe.RouterOptions{K: 8, Renormalize: true}, Fill: routerSpecial, What: "special values"},
	{T: 96, E: 8, DT: tensor.F32, O: moe.RouterOptions{K: 8}, Fill: routerSpecial, What: "special values, k = E"},
	{T: 96, E: 5, DT: tensor.F16, O: moe.RouterOptions{K: 3}, Stride: 7, Fill: routerSpecial, What: "special values, tiny E"},
	{T: 0, E: 128, DT: tensor.BF16, O: moe.RouterOptions{K: 8}, What: "zero tokens"},

	{T: 4096, E: 256, DT: tensor.BF16, Bias: true, O: moe.RouterOptions{K: 8, Scoring: moe.Sigmoid, Groups: 8, TopKGroups: 4, Renormalize: true, Scale: 2.5}, What: "DeepSeek-V3"},
	{T: 7, E: 256, DT: tensor.F32, Bias: true, O: moe.RouterOptions{K: 8, Scoring: moe.Sigmoid, Groups: 8, TopKGroups: 4, Renormalize: true, Scale: 2.5}, What: "DeepSeek-V3, seven tokens"},
	{T: 4096, E: 256, DT: tensor.F32, Bias: true, O: moe.RouterOptions{K: 8, Scoring: moe.Sigmoid, Groups: 8, TopKGroups: 4, Renormalize: true}, Fill: routerTies, What: "DeepSeek-V3, ties"},
	{T: 96, E: 256, DT: tensor.BF16, Bias: true, O: moe.RouterOptions{K: 8, Scoring: moe.Sigmoid, Groups: 8, TopKGroups: 4, Renormalize: true}, Fill: routerSpecial, What: "DeepSeek-V3, special values"},
	{T: 4096, E: 64, DT: tensor.F16, Bias: true, O: moe.RouterOptions{K: 6, Scoring: moe.Sigmoid, Groups: 4, TopKGroups: 2}, What: "groups of 16"},
	{T: 2000, E: 384, DT: tensor.BF16, Bias: true, O: moe.RouterOptions{K: 8, Scoring: moe.Sigmoid, Groups: 12, TopKGroups: 3, Renormalize: true}, What: "groups of 32, 384 experts"},
	{T: 1000, E: 512, DT: tensor.F32, Bias: true, O: moe.RouterOptions{K: 10, Scoring: moe.Sigmoid, Groups: 16, TopKGroups: 5, Renormalize: true}, Stride: 516, What: "groups of 32, 512 experts, strided"},
	{T: 1000, E: 128, DT: tensor.BF16, Bias: true, O: moe.RouterOptions{K: 22, Scoring: moe.Sigmoid, Groups: 64, TopKGroups: 20}, Fill: routerTies, What: "groups of 2, k = 22"},
	{T: 96, E: 12, DT: tensor.F32, O: moe.RouterOptions{K: 3, Scoring: moe.Sigmoid, Groups: 6, TopKGroups: 2}, Fill: routerSpecial, What: "groups of 2, special values"},
	{T: 4096, E: 128, DT: tensor.BF16, Bias: true, O: moe.RouterOptions{K: 8, Scoring: moe.Sigmoid, Renormalize: true}, What: "sigmoid with bias"},
	{T: 4096, E: 64, DT: tensor.F32, O: moe.RouterOptions{K: 4, Scoring: moe.Sigmoid}, Fill: routerTies, What: "sigmoid, ties"},
	{T: 96, E: 100, DT: tensor.F16, Bias: true, O: moe.RouterOptions{K: 6, Scoring: moe.Sigmoid}, Stride: 101, Fill: routerSpecial, What: "sigmoid, special values"},

	{T: 4096, E: 16, DT: tensor.BF16, O: moe.RouterOptions{K: 1, Scoring: moe.Sigmoid, SharedExpert: true}, What: "Llama-4 Scout"},
	{T: 65536, E: 16, DT: tensor.BF16, O: moe.RouterOptions{K: 1, Scoring: moe.Sigmoid, SharedExpert: true}, What: "Llama-4 Scout, many tokens"},
	{T: 4096, E: 128, DT: tensor.BF16, O: moe.RouterOptions{K: 1, Scoring: moe.Sigmoid, SharedExpert: true}, What: "Llama-4 Maverick"},
	{T: 1, E: 128, DT: tensor.F32, O: moe.RouterOptions{K: 1, Scoring: moe.Sigmoid}, What: "sigmoid top-1, one token"},
	{T: 96, E: 16, DT: tensor.BF16, O: moe.RouterOptions{K: 1, Scoring: moe.Sigmoid, SharedExpert: true}, Fill: routerSpecial, What: "sigmoid top-1, special values"},
	{T: 4096, E: 128, DT: tensor.F16, O: moe.RouterOptions{K: 2, SharedExpert: true, Renormalize: true}, What: "softmax with a shared expert"},
}

func (c routerCase) name() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %dx%d k=%d %v %v", c.What, c.T, c.E, c.O.K, c.O.Scoring, c.DT)
	if c.Bias {
		b.WriteString(" bias")
	}
	if c.O.Groups > 0 {
		fmt.Fprintf(&b, " groups %d of %d", c.O.TopKGroups, c.O.Groups)
	}
	if c.O.Renormalize {
		b.WriteString(" renorm")
	}
	if c.O.Scale != 0 {
		fmt.Fprintf(&b, " scale %g", c.O.Scale)
	}
	if c.O.SharedExpert {
		b.WriteString(" shared")
	}
	if c.Stride > 0 {
		fmt.Fprintf(&b, " stride %d", c.Stride)
	}
	return b.String()
}

// spec draws the case's logits (and bias) and compares ids exactly and
// weights within check.ForDType(F32): selection is exact by construction,
// and the weights are fp32 computations of a few roundings.
func (c routerCase) spec(rng *rand.Rand) (check.Spec, error) {
	stride := c.Stride
	if stride == 0 {
		stride = c.E
	}
	logits, err := tensor.NewStrided(c.DT, []int{c.T, c.E}, []int{stride, 1})
	if err != nil {
		return check.Spec{}, err
	}
	routerFillLogits(rng, logits, c.Fill)
	cols := c.O.K
	if c.O.SharedExpert {
		cols++
	}
	ts := []*tensor.Tensor{logits, tensor.New(tensor.F32, c.T, cols), tensor.New(tensor.I32, c.T, cols)}
	names := []string{"logits", "weights", "ids"}
	if c.Bias {
		ts = append(ts, routerBias(rng, c.E, c.Fill))
		names = append(names, "bias")
	}
	return check.Spec{
		Tensors: ts,
		Names:   names,
		Outputs: []int{1, 2},
		Poison:  []int{1, 2},
		Run: func(s *cuda.Stream, ts []*tensor.Tensor) error {
			o := c.O
			if c.Bias {
				o.Bias = ts[3]
			}
			return moe.TopK(s, ts[1], ts[2], ts[0], o)
		},
	}, nil
}

// routerBias is a correction bias of e experts: N(0, 0.1²), or for
// routerTies one of −1/8, 0 and 1/8.
func routerBias(rng *rand.Rand, e int, fill routerFill) *tensor.Tensor {
	b := tensor.New(tensor.F32, e)
	v := make([]float64, e)
	for i := range v {
		if fill == routerTies {
			v[i] = float64(rng.IntN(3)-1) / 8
		} else {
			v[i] = 0.1 * rng.NormFloat64()
		}
	}
	b.SetFloat64s(v)
	return b
}

// routerSpecialRows is the number of row kinds routerSpecial cycles
// through; row r is of kind r mod routerSpecialRows:
//
//	0: N(0, 1)
//	1: integers 0 to 3 (ties)
//	2: N(0, 1) with NaN, ±inf and ±0 sprinkled in
//	3: one value throughout (finite, or NaN on every other such row)
//	4: −inf except a few NaN and finite values
//	5: N(0, 30²) (softmax underflows, sigmoid saturates to 0 and 1)
const routerSpecialRows = 6

// routerFillLogits fills x (T rows of E) as fill says.
func routerFillLogits(rng *rand.Rand, x *tensor.Tensor, fill routerFill) {
	t, e := x.Dim(0), x.Dim(1)
	v := make([]float64, t*e)
	hot, cold := rng.IntN(e), rng.Perm(e)[:e/8]
	for r := range t {
		row := v[r*e : (r+1)*e]
		kind := 0
		switch fill {
		case routerTies:
			kind = 1
		case routerSpecial:
			kind = r % routerSpecialRows
		}
		switch kind {
		case 0, 2, 5:
			std := 1.0
			if kind == 5 {
				std = 30
			}
			for j := range row {
				row[j] = std * rng.NormFloat64()
			}
			if kind == 2 {
				specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), math.NaN()}
				for range max(1, e/8) {
					row[rng.IntN(e)] = specials[rng.IntN(len(specials))]
				}
			}
		case 1:
			for j := range row {
				row[j] = float64(rng.IntN(4))
			}
		case 3:
			c := math.Round(rng.NormFloat64()*8) / 4
			if r%2 == 1 {
				c = math.NaN()
			}
			for j := range row {
				row[j] = c
			}
		case 4:
			for j := range row {
				switch rng.IntN(8) {
				case 0:
					row[j] = math.NaN()
				case 1, 2:
					row[j] = rng.NormFloat64()
				default:
					row[j] = math.Inf(-1)
				}
			}
		}
		if fill == routerPlain {
			if rng.IntN(2) == 0 {
				row[hot] += 6
			}
			for _, j := range cold {
				if j != hot {
					row[j] -= 12
				}
			}
		}
	}
	x.SetFloat64s(v)
}

// routerBench is one benchmark shape: T tokens, E experts of dtype DT,
// options O (Bias: a random f32 bias).
type routerBench struct {
	Model string
	T, E  int
	DT    tensor.DType
	O     moe.RouterOptions
	Bias  bool
}

// routerBenches: the models' routers at decode and prefill token counts.
var routerBenches = []routerBench{
	{"Mixtral", 16, 8, tensor.BF16, moe.RouterOptions{K: 2, Renormalize: true}, false},
	{"Mixtral", 4096, 8, tensor.BF16, moe.RouterOptions{K: 2, Renormalize: true}, false},
	{"Mixtral", 65536, 8, tensor.BF16, moe.RouterOptions{K: 2, Renormalize: true}, false},
	{"Qwen3-30B-A3B", 64, 128, tensor.BF16, moe.RouterOptions{K: 8, Renormalize: true}, false},
	{"Qwen3-30B-A3B", 16384, 128, tensor.BF16, moe.RouterOptions{K: 8, Renormalize: true}, false},
	{"DeepSeek-V3", 1, 256, tensor.F32, routerDeepSeek, true},
	{"DeepSeek-V3", 512, 256, tensor.F32, routerDeepSeek, true},
	{"DeepSeek-V3", 16384, 256, tensor.F32, routerDeepSeek, true},
	{"DeepSeek-V3", 65536, 256, tensor.F32, routerDeepSeek, true},
	{"Qwen3-Next", 4096, 512, tensor.BF16, moe.RouterOptions{K: 10, Renormalize: true}, false},
	{"Qwen3-Next", 65536, 512, tensor.BF16, moe.RouterOptions{K: 10, Renormalize: true}, false},
	{"Llama-4 Scout", 16384, 16, tensor.BF16, moe.RouterOptions{K: 1, Scoring: moe.Sigmoid, SharedExpert: true}, false},
	{"Llama-4 Maverick", 64, 128, tensor.BF16, moe.RouterOptions{K: 1, Scoring: moe.Sigmoid, SharedExpert: true}, false},
}

// routerDeepSeek is DeepSeek-V3's routing (its gate computes the logits in
// fp32).
var routerDeepSeek = moe.RouterOptions{K: 8, Scoring: moe.Sigmoid, Groups: 8, TopKGroups: 4, Renormalize: true, Scale: 2.5}

// bench times TopK on N(0, 1) logits. Its goal: 3× the eager PyTorch
// composition (scores, top-k, renormalization) from 16384 tokens, where the
// composition's several kernels each read the scores once more; at least
// its speed below.
func (b routerBench) bench() bench.Case {
	cols := b.O.K
	if b.O.SharedExpert {
		cols++
	}
	goal := bench.Goal{VsEager: 1}
	if b.T >= 16384 {
		goal = bench.Goal{VsEager: 3}
	}
	bytes := int64(b.T*b.E*b.DT.Size() + b.T*cols*8)
	if b.Bias {
		bytes += int64(4 * b.E)
	}
	return bench.Case{
		Name:  fmt.Sprintf("%s %dx%d k=%d %v", b.Model, b.T, b.E, b.O.K, b.DT),
		Bytes: bytes,
		Goal:  goal,
		New: func(dev *cuda.Device, rng *rand.Rand) (bench.Instance, error) {
			var ts []*tensor.Tensor
			free := func() {
				for _, t := range ts {
					t.Free()
				}
			}
			add := func(t *tensor.Tensor, err error) error {
				if err == nil {
					ts = append(ts, t)
				}
				return err
			}
			err := add(tensor.RandDevice(dev, rng, b.DT, 0, 1, b.T, b.E))
			if err == nil {
				err = add(tensor.Empty(dev, tensor.F32, b.T, cols))
			}
			if err == nil {
				err = add(tensor.Empty(dev, tensor.I32, b.T, cols))
			}
			o := b.O
			if err == nil && b.Bias {
				err = add(tensor.RandDevice(dev, rng, tensor.F32, 0, 0.1, b.E))
				if err == nil {
					o.Bias = ts[3]
				}
			}
			if err != nil {
				free()
				return bench.Instance{}, err
			}
			return bench.Instance{Run: func(s *cuda.Stream) error { return moe.TopK(s, ts[1], ts[2], ts[0], o) }, Free: free}, nil
		},
		Torch: &bench.TorchCase{Op: "moe_topk", Args: map[string]any{
			"T": b.T, "E": b.E, "k": b.O.K, "dtype": b.DT.String(), "sigmoid": b.O.Scoring == moe.Sigmoid, "bias": b.Bias,
			"groups": b.O.Groups, "topk_groups": b.O.TopKGroups, "renormalize": b.O.Renormalize,
			"scale": float64(b.O.Scale), "shared": b.O.SharedExpert,
		}},
	}
}
