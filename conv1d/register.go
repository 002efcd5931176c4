package conv1d

import (
	_ "embed"
	"fmt"
	"strconv"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/suite"
	"github.com/gokittens/kittens/tensor"
)

//go:embed torch_conv1d.py
var torchSrc string

const (
	bf16, f16, f32 = tensor.BF16, tensor.F16, tensor.F32
	qwenDim        = 8192 // Qwen3-Next conv dim at TP1: 2·2048 + 4096
	qwenKey        = 2048
	qwenValue      = 4096
)

// Parity cases: odd channel counts (the single-channel path), odd lengths,
// sequences shorter than W−1 and of length 0, pad slots, permuted slots,
// with and without initial state, wider state buffers, strided rows, every
// width and dtype, and the decode modes (random accepted counts and ring
// positions; in place; several chunks per sequence).
var (
	forwardChecks = []testCase{
		{name: "bf16 w4 dim40 mixed lengths", op: opForward, dt: bf16, width: 4, dim: 40,
			lens: []int{0, 1, 2, 3, 5, 17, 64, 100, 2}, nSlots: 16, pads: []int{3}, initShare: 0.5, silu: true},
		{name: "bf16 w2 dim1000 identity no bias", op: opForward, dt: bf16, width: 2, dim: 1000,
			lens: []int{7, 1, 300}, nSlots: 5, initShare: 0.67, noBias: true},
		{name: "f16 w3 dim37 strided rows", op: opForward, dt: f16, width: 3, dim: 37,
			lens: []int{1, 2, 4, 129}, nSlots: 4, initShare: 0.5, silu: true, rowPad: 3},
		{name: "f32 w4 dim1000 state_len 6", op: opForward, dt: f32, width: 4, dim: 1000,
			lens: []int{2, 5, 40, 1}, nSlots: 9, stateLen: 6, pads: []int{2}, initShare: 0.75, silu: true},
		{name: "bf16 w4 dim256 one long sequence", op: opForward, dt: bf16, width: 4, dim: 256,
			lens: []int{3001}, nSlots: 3, initShare: 1, silu: true},
		{name: "bf16 w3 dim64 no states", op: opForward, dt: bf16, width: 3, dim: 64,
			lens: []int{70, 2, 9}, noStates: true, silu: true},
		{name: "bf16 w4 dim64 no initial states", op: opForward, dt: bf16, width: 4, dim: 64,
			lens: []int{1, 2, 33}, nSlots: 6, silu: true},
		{name: "f16 w4 dim48 zero tokens", op: opForward, dt: f16, width: 4, dim: 48,
			lens: []int{0, 0}, nSlots: 2, initShare: 0.5},
		// The bulk-copied ring: strided rows, a block with one live thread.
		{name: "bf16 w4 dim136 strided rows pads", op: opForward, dt: bf16, width: 4, dim: 136,
			lens: []int{1, 9, 40, 3, 30}, nSlots: 6, pads: []int{2}, initShare: 0.5, silu: true, rowPad: 8},
		{name: "f16 w2 dim2056 partial block", op: opForward, dt: f16, width: 2, dim: 2056,
			lens: []int{50, 7}, nSlots: 2, initShare: 0.5, silu: true},
	}
	denseChecks = []testCase{
		{name: "bf16 w4 B3 L77 dim96", op: opDense, dt: bf16, width: 4, dim: 96, batch: 3, seqLen: 77,
			denseInit: true, denseFinal: true, silu: true},
		{name: "f16 w3 B2 L2 dim40 final only", op: opDense, dt: f16, width: 3, dim: 40, batch: 2, seqLen: 2,
			denseFinal: true, silu: true},
		{name: "f32 w2 B4 L33 dim1000 stateless", op: opDense, dt: f32, width: 2, dim: 1000, batch: 4, seqLen: 33, silu: true},
		{name: "bf16 w4 B2 L5 dim33 states in place", op: opDense, dt: bf16, width: 4, dim: 33, batch: 2, seqLen: 5,
			denseInit: true, inPlace: true, silu: true},
	}
	updateChecks = []testCase{
		{name: "bf16 w4 B5 dim1000 permuted pads", op: opUpdate, dt: bf16, width: 4, dim: 1000, batch: 5,
			nSlots: 10, pads: []int{2}, silu: true},
		{name: "bf16 w4 B4 L3 dim256 state_len 5", op: opUpdate, dt: bf16, width: 4, dim: 256, batch: 4, seqLen: 3,
			nSlots: 8, stateLen: 5, silu: true},
		{name: "f16 w2 B3 dim37 in place", op: opUpdate, dt: f16, width: 2, dim: 37, batch: 3, nSlots: 7,
			pads: []int{0}, inPlace: true},
		{name: "f32 w3 B6 L2 dim64 no indices", op: opUpdate, dt: f32, width: 3, dim: 64, batch: 6, seqLen: 2,
			noIndices: true, silu: true},
		{name: "bf16 w4 B3 L200 dim64 multi-chunk", op: opUpdate, dt: bf16, width: 4, dim: 64, batch: 3, seqLen: 200,
			nSlots: 3, silu: true, noBias: true},
		// Speculative decoding (NumAcceptedTokens, random in [1, L]).
		{name: "bf16 w4 B7 L3 dim1000 spec pads", op: opUpdate, dt: bf16, width: 4, dim: 1000, batch: 7, seqLen: 3,
			nSlots: 12, stateLen: 5, pads: []int{2, 5}, accepted: true, silu: true},
		{name: "f16 w3 B5 dim37 spec L1 state_len 4", op: opUpdate, dt: f16, width: 3, dim: 37, batch: 5, nSlots: 6,
			stateLen: 4, accepted: true},
		{name: "f32 w2 B4 L4 dim64 spec state_len 7 in place", op: opUpdate, dt: f32, width: 2, dim: 64, batch: 4, seqLen: 4,
			stateLen: 7, noIndices: true, accepted: true, inPlace: true, silu: true},
		{name: "bf16 w4 B3 L40 dim64 spec multi-chunk", op: opUpdate, dt: bf16, width: 4, dim: 64, batch: 3, seqLen: 40,
			nSlots: 5, stateLen: 42, accepted: true, silu: true},
		// Circular buffer (CacheSeqlens, random, one near 2^30).
		{name: "bf16 w4 B6 dim1000 circular pads", op: opUpdate, dt: bf16, width: 4, dim: 1000, batch: 6, nSlots: 9,
			stateLen: 5, pads: []int{1}, circular: true, silu: true},
		{name: "f16 w3 B4 L9 dim40 circular wraps", op: opUpdate, dt: f16, width: 3, dim: 40, batch: 4, seqLen: 9, nSlots: 4,
			stateLen: 4, circular: true, silu: true},
		{name: "bf16 w4 B3 L2 dim33 circular state_len 3 in place", op: opUpdate, dt: bf16, width: 4, dim: 33, batch: 3, seqLen: 2,
			nSlots: 5, stateLen: 3, circular: true, inPlace: true, silu: true},
		{name: "bf16 w4 B2 L50 dim64 circular multi-chunk", op: opUpdate, dt: bf16, width: 4, dim: 64, batch: 2, seqLen: 50,
			nSlots: 3, stateLen: 7, circular: true, noBias: true},
	}
	forwardSplitChecks = []testCase{
		{name: "bf16 w4 key64 value128", op: opForwardSplit, dt: bf16, width: 4, keyDim: 64, valueDim: 128,
			lens: []int{5, 2, 70, 0}, nSlots: 8, pads: []int{1}, initShare: 0.5, silu: true, noBias: true},
		{name: "f16 w3 key13 value7", op: opForwardSplit, dt: f16, width: 3, keyDim: 13, valueDim: 7,
			lens: []int{4, 1, 20}, nSlots: 3, initShare: 0.34, silu: true},
	}
	updateSplitChecks = []testCase{
		{name: "bf16 w4 B6 key128 value256", op: opUpdateSplit, dt: bf16, width: 4, keyDim: 128, valueDim: 256,
			batch: 6, nSlots: 12, pads: []int{4}, silu: true, noBias: true},
		{name: "f32 w2 B2 L3 key16 value40", op: opUpdateSplit, dt: f32, width: 2, keyDim: 16, valueDim: 40,
			batch: 2, seqLen: 3, nSlots: 4, silu: true},
		{name: "bf16 w4 B6 L4 key128 value256 spec", op: opUpdateSplit, dt: bf16, width: 4, keyDim: 128, valueDim: 256,
			batch: 6, seqLen: 4, nSlots: 12, stateLen: 6, pads: []int{0}, accepted: true, silu: true, noBias: true},
		{name: "f32 w2 B3 L3 key16 value40 circular", op: opUpdateSplit, dt: f32, width: 2, keyDim: 16, valueDim: 40,
			batch: 3, seqLen: 3, nSlots: 3, stateLen: 3, circular: true, silu: true},
	}
)

// Benchmark cases (spec §4.5 and the issue): bf16, Qwen3-Next dim 8192, W = 4,
// SiLU.
var mixedLens = []int{512, 3072, 1024, 2560, 4096, 768, 1536, 2816} // 8 sequences, 16384 tokens

// specTokens is L, the tokens a sequence verifies, in the
// speculative-decoding benchmarks.
const specTokens = 4

func benchCases() map[opKind][]bench.Case {
	fwd := func(name string, lens []int, init float64) bench.Case {
		c := testCase{name: name, op: opForward, dt: bf16, width: 4, dim: qwenDim, lens: lens,
			nSlots: 2 * len(lens), initShare: init, silu: true}
		return c.bench(&bench.TorchCase{Op: "conv1d_fwd", Args: map[string]any{
			"lens": lens, "dim": qwenDim, "width": 4, "init_share": init, "bias": true, "silu": true, "dtype": "bf16"}})
	}
	// upd is a decode case under one of the state rules of spec §4.3
	// (testCase.inMode).
	upd := func(b, mode int) bench.Case {
		c := testCase{op: opUpdate, dt: bf16, width: 4, dim: qwenDim, batch: b, nSlots: 2 * b, silu: true, noBias: true}.inMode(mode)
		args := map[string]any{"batch": b, "n_slots": 2 * b, "dim": qwenDim, "width": 4, "silu": true, "dtype": "bf16"}
		tag, torchOp := "", "conv1d_update"
		switch mode {
		case modeSpec:
			args["seq_len"], args["state_len"] = c.seqLen, c.stateLen
			tag, torchOp = " spec"+strconv.Itoa(specTokens), "conv1d_update_spec"
		case modeCircular:
			tag, torchOp = " circular", "conv1d_update_circular"
		}
		c.name = "B" + strconv.Itoa(b) + "x8192" + tag + " bf16 w4"
		return c.bench(&bench.TorchCase{Op: torchOp, Args: args})
	}
	// dense is a batch of four 4096-token prompts, stateless or starting
	// from given states and writing the final ones.
	dense := func(states bool) bench.Case {
		c := testCase{op: opDense, dt: bf16, width: 4, dim: qwenDim, batch: 4, seqLen: 4096,
			denseInit: states, denseFinal: states, silu: true}
		c.name = fmt.Sprintf("B%dx%dx%d bf16 w%d", c.batch, c.seqLen, c.dim, c.width)
		if states {
			c.name += " states"
		}
		return c.bench(&bench.TorchCase{Op: "conv1d_dense", Args: map[string]any{
			"batch": c.batch, "seq_len": c.seqLen, "dim": c.dim, "width": c.width, "states": states, "dtype": "bf16"}})
	}
	split := map[string]any{"key_dim": qwenKey, "value_dim": qwenValue, "width": 4, "silu": true, "dtype": "bf16"}
	withArgs := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range split {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	return map[opKind][]bench.Case{
		opForward: {
			fwd("1x4096x8192 bf16 w4", []int{4096}, 0),
			fwd("1x32768x8192 bf16 w4", []int{32768}, 0),
			fwd("8 seqs 16384x8192 bf16 w4 25% init", mixedLens, 0.25),
		},
		opDense: {dense(false), dense(true)},
		opUpdate: {upd(1, modeShift), upd(32, modeShift), upd(256, modeShift),
			upd(32, modeSpec), upd(256, modeSpec), upd(32, modeCircular), upd(256, modeCircular)},
		opForwardSplit: {testCase{name: "T4096 key2048 value4096 bf16 w4", op: opForwardSplit, dt: bf16, width: 4,
			keyDim: qwenKey, valueDim: qwenValue, lens: []int{4096}, nSlots: 2, silu: true, noBias: true}.
			bench(&bench.TorchCase{Op: "conv1d_fwd_split", Args: withArgs(map[string]any{"lens": []int{4096}})})},
		opUpdateSplit: {testCase{name: "B32 key2048 value4096 bf16 w4", op: opUpdateSplit, dt: bf16, width: 4,
			keyDim: qwenKey, valueDim: qwenValue, batch: 32, nSlots: 64, silu: true, noBias: true}.
			bench(&bench.TorchCase{Op: "conv1d_update_split", Args: withArgs(map[string]any{"batch": 32, "n_slots": 64})})},
	}
}

func checksOf(cases []testCase) []check.Case {
	out := make([]check.Case, len(cases))
	for i, c := range cases {
		out[i] = check.Case{Name: c.name, Spec: c.spec}
	}
	return out
}

// Suite returns the family's parity and benchmark cases.
func Suite() (f suite.Family) {
	f.Name = "conv1d"
	benches := benchCases()
	for _, op := range []struct {
		kind      opKind
		name, doc string
		checks    []testCase
	}{
		{opForward, "causal_conv1d_fwd", "varlen causal depthwise conv1d with a conv-state pool (prefill)", forwardChecks},
		{opDense, "causal_conv1d_bias_silu_fwd", "dense-batch causal depthwise conv1d, bias + SiLU, optional initial/final states", denseChecks},
		{opUpdate, "causal_conv1d_update", "causal depthwise conv1d decode step: window [state ‖ x], state shifted and appended (or spec-decoding / circular modes)", updateChecks},
		{opForwardSplit, "causal_conv1d_fwd_split", "varlen causal conv1d with the output split into q, k, v (Qwen3-Next GDN)", forwardSplitChecks},
		{opUpdateSplit, "causal_conv1d_update_split_qkv", "causal conv1d decode step with the output split into q, k, v (Qwen3-Next GDN)", updateSplitChecks},
	} {
		f.Ops = append(f.Ops, &suite.Op{Name: op.name, Family: "conv1d", Doc: op.doc,
			Checks: checksOf(op.checks), Benches: benches[op.kind]})
	}
	f.Torch = torchSrc
	return f
}
