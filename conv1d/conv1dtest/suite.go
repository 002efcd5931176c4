// Package conv1dtest holds conv1d's parity and benchmark cases for the
// harness (check, bench, the kittens command), with the PyTorch snippet
// its benchmarks are compared with, and the case builder conv1d's tests
// share. Programs that call conv1d do not need it.
package conv1dtest

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
	forwardChecks = []Case{
		{Name: "bf16 w4 dim40 mixed lengths", Op: OpForward, DType: bf16, Width: 4, Dim: 40,
			Lens: []int{0, 1, 2, 3, 5, 17, 64, 100, 2}, NSlots: 16, Pads: []int{3}, InitShare: 0.5, SiLU: true},
		{Name: "bf16 w2 dim1000 identity no bias", Op: OpForward, DType: bf16, Width: 2, Dim: 1000,
			Lens: []int{7, 1, 300}, NSlots: 5, InitShare: 0.67, NoBias: true},
		{Name: "f16 w3 dim37 strided rows", Op: OpForward, DType: f16, Width: 3, Dim: 37,
			Lens: []int{1, 2, 4, 129}, NSlots: 4, InitShare: 0.5, SiLU: true, RowPad: 3},
		{Name: "f32 w4 dim1000 state_len 6", Op: OpForward, DType: f32, Width: 4, Dim: 1000,
			Lens: []int{2, 5, 40, 1}, NSlots: 9, StateLen: 6, Pads: []int{2}, InitShare: 0.75, SiLU: true},
		{Name: "bf16 w4 dim256 one long sequence", Op: OpForward, DType: bf16, Width: 4, Dim: 256,
			Lens: []int{3001}, NSlots: 3, InitShare: 1, SiLU: true},
		{Name: "bf16 w3 dim64 no states", Op: OpForward, DType: bf16, Width: 3, Dim: 64,
			Lens: []int{70, 2, 9}, NoStates: true, SiLU: true},
		{Name: "bf16 w4 dim64 no initial states", Op: OpForward, DType: bf16, Width: 4, Dim: 64,
			Lens: []int{1, 2, 33}, NSlots: 6, SiLU: true},
		{Name: "f16 w4 dim48 zero tokens", Op: OpForward, DType: f16, Width: 4, Dim: 48,
			Lens: []int{0, 0}, NSlots: 2, InitShare: 0.5},
		// The bulk-copied ring: strided rows, a block with one live thread.
		{Name: "bf16 w4 dim136 strided rows pads", Op: OpForward, DType: bf16, Width: 4, Dim: 136,
			Lens: []int{1, 9, 40, 3, 30}, NSlots: 6, Pads: []int{2}, InitShare: 0.5, SiLU: true, RowPad: 8},
		{Name: "f16 w2 dim2056 partial block", Op: OpForward, DType: f16, Width: 2, Dim: 2056,
			Lens: []int{50, 7}, NSlots: 2, InitShare: 0.5, SiLU: true},
	}
	denseChecks = []Case{
		{Name: "bf16 w4 B3 L77 dim96", Op: OpDense, DType: bf16, Width: 4, Dim: 96, Batch: 3, SeqLen: 77,
			DenseInit: true, DenseFinal: true, SiLU: true},
		{Name: "f16 w3 B2 L2 dim40 final only", Op: OpDense, DType: f16, Width: 3, Dim: 40, Batch: 2, SeqLen: 2,
			DenseFinal: true, SiLU: true},
		{Name: "f32 w2 B4 L33 dim1000 stateless", Op: OpDense, DType: f32, Width: 2, Dim: 1000, Batch: 4, SeqLen: 33, SiLU: true},
		{Name: "bf16 w4 B2 L5 dim33 states in place", Op: OpDense, DType: bf16, Width: 4, Dim: 33, Batch: 2, SeqLen: 5,
			DenseInit: true, InPlace: true, SiLU: true},
	}
	updateChecks = []Case{
		{Name: "bf16 w4 B5 dim1000 permuted pads", Op: OpUpdate, DType: bf16, Width: 4, Dim: 1000, Batch: 5,
			NSlots: 10, Pads: []int{2}, SiLU: true},
		{Name: "bf16 w4 B4 L3 dim256 state_len 5", Op: OpUpdate, DType: bf16, Width: 4, Dim: 256, Batch: 4, SeqLen: 3,
			NSlots: 8, StateLen: 5, SiLU: true},
		{Name: "f16 w2 B3 dim37 in place", Op: OpUpdate, DType: f16, Width: 2, Dim: 37, Batch: 3, NSlots: 7,
			Pads: []int{0}, InPlace: true},
		{Name: "f32 w3 B6 L2 dim64 no indices", Op: OpUpdate, DType: f32, Width: 3, Dim: 64, Batch: 6, SeqLen: 2,
			NoIndices: true, SiLU: true},
		{Name: "bf16 w4 B3 L200 dim64 multi-chunk", Op: OpUpdate, DType: bf16, Width: 4, Dim: 64, Batch: 3, SeqLen: 200,
			NSlots: 3, SiLU: true, NoBias: true},
		// Speculative decoding (NumAcceptedTokens, random in [1, L]).
		{Name: "bf16 w4 B7 L3 dim1000 spec pads", Op: OpUpdate, DType: bf16, Width: 4, Dim: 1000, Batch: 7, SeqLen: 3,
			NSlots: 12, StateLen: 5, Pads: []int{2, 5}, Accepted: true, SiLU: true},
		{Name: "f16 w3 B5 dim37 spec L1 state_len 4", Op: OpUpdate, DType: f16, Width: 3, Dim: 37, Batch: 5, NSlots: 6,
			StateLen: 4, Accepted: true},
		{Name: "f32 w2 B4 L4 dim64 spec state_len 7 in place", Op: OpUpdate, DType: f32, Width: 2, Dim: 64, Batch: 4, SeqLen: 4,
			StateLen: 7, NoIndices: true, Accepted: true, InPlace: true, SiLU: true},
		{Name: "bf16 w4 B3 L40 dim64 spec multi-chunk", Op: OpUpdate, DType: bf16, Width: 4, Dim: 64, Batch: 3, SeqLen: 40,
			NSlots: 5, StateLen: 42, Accepted: true, SiLU: true},
		// Circular buffer (CacheSeqlens, random, one near 2^30).
		{Name: "bf16 w4 B6 dim1000 circular pads", Op: OpUpdate, DType: bf16, Width: 4, Dim: 1000, Batch: 6, NSlots: 9,
			StateLen: 5, Pads: []int{1}, Circular: true, SiLU: true},
		{Name: "f16 w3 B4 L9 dim40 circular wraps", Op: OpUpdate, DType: f16, Width: 3, Dim: 40, Batch: 4, SeqLen: 9, NSlots: 4,
			StateLen: 4, Circular: true, SiLU: true},
		{Name: "bf16 w4 B3 L2 dim33 circular state_len 3 in place", Op: OpUpdate, DType: bf16, Width: 4, Dim: 33, Batch: 3, SeqLen: 2,
			NSlots: 5, StateLen: 3, Circular: true, InPlace: true, SiLU: true},
		{Name: "bf16 w4 B2 L50 dim64 circular multi-chunk", Op: OpUpdate, DType: bf16, Width: 4, Dim: 64, Batch: 2, SeqLen: 50,
			NSlots: 3, StateLen: 7, Circular: true, NoBias: true},
	}
	forwardSplitChecks = []Case{
		{Name: "bf16 w4 key64 value128", Op: OpForwardSplit, DType: bf16, Width: 4, KeyDim: 64, ValueDim: 128,
			Lens: []int{5, 2, 70, 0}, NSlots: 8, Pads: []int{1}, InitShare: 0.5, SiLU: true, NoBias: true},
		{Name: "f16 w3 key13 value7", Op: OpForwardSplit, DType: f16, Width: 3, KeyDim: 13, ValueDim: 7,
			Lens: []int{4, 1, 20}, NSlots: 3, InitShare: 0.34, SiLU: true},
	}
	updateSplitChecks = []Case{
		{Name: "bf16 w4 B6 key128 value256", Op: OpUpdateSplit, DType: bf16, Width: 4, KeyDim: 128, ValueDim: 256,
			Batch: 6, NSlots: 12, Pads: []int{4}, SiLU: true, NoBias: true},
		{Name: "f32 w2 B2 L3 key16 value40", Op: OpUpdateSplit, DType: f32, Width: 2, KeyDim: 16, ValueDim: 40,
			Batch: 2, SeqLen: 3, NSlots: 4, SiLU: true},
		{Name: "bf16 w4 B6 L4 key128 value256 spec", Op: OpUpdateSplit, DType: bf16, Width: 4, KeyDim: 128, ValueDim: 256,
			Batch: 6, SeqLen: 4, NSlots: 12, StateLen: 6, Pads: []int{0}, Accepted: true, SiLU: true, NoBias: true},
		{Name: "f32 w2 B3 L3 key16 value40 circular", Op: OpUpdateSplit, DType: f32, Width: 2, KeyDim: 16, ValueDim: 40,
			Batch: 3, SeqLen: 3, NSlots: 3, StateLen: 3, Circular: true, SiLU: true},
	}
)

// mixedLens are the lengths of the mixed varlen benchmark: 8 sequences,
// 16384 tokens.
var mixedLens = []int{512, 3072, 1024, 2560, 4096, 768, 1536, 2816}

// benchmark is a benchmark case and its PyTorch counterpart.
type benchmark struct {
	c     Case
	torch *bench.TorchCase
}

// benchmarks are the benchmark cases: bf16, the Qwen3-Next conv dim 8192,
// W = 4, SiLU; prefill of one long and of mixed sequences, dense batches,
// decode of 1 to 256 sequences under each state rule, and the split forms.
func benchmarks() []benchmark {
	fwd := func(name string, lens []int, init float64) benchmark {
		c := Case{Name: name, Op: OpForward, DType: bf16, Width: 4, Dim: qwenDim, Lens: lens,
			NSlots: 2 * len(lens), InitShare: init, SiLU: true}
		return benchmark{c, &bench.TorchCase{Op: "conv1d_fwd", Args: map[string]any{
			"lens": lens, "dim": qwenDim, "width": 4, "init_share": init, "bias": true, "silu": true, "dtype": "bf16"}}}
	}
	// upd is a decode case under one of the state rules (Case.inMode).
	upd := func(b, mode int) benchmark {
		c := Case{Op: OpUpdate, DType: bf16, Width: 4, Dim: qwenDim, Batch: b, NSlots: 2 * b, SiLU: true, NoBias: true}.inMode(mode)
		args := map[string]any{"batch": b, "n_slots": 2 * b, "dim": qwenDim, "width": 4, "silu": true, "dtype": "bf16"}
		tag, torchOp := "", "conv1d_update"
		switch mode {
		case modeSpec:
			args["seq_len"], args["state_len"] = c.SeqLen, c.StateLen
			tag, torchOp = " spec"+strconv.Itoa(specTokens), "conv1d_update_spec"
		case modeCircular:
			tag, torchOp = " circular", "conv1d_update_circular"
		}
		c.Name = "B" + strconv.Itoa(b) + "x8192" + tag + " bf16 w4"
		return benchmark{c, &bench.TorchCase{Op: torchOp, Args: args}}
	}
	// dense is a batch of four 4096-token prompts, stateless or starting
	// from given states and writing the final ones.
	dense := func(states bool) benchmark {
		c := Case{Op: OpDense, DType: bf16, Width: 4, Dim: qwenDim, Batch: 4, SeqLen: 4096,
			DenseInit: states, DenseFinal: states, SiLU: true}
		c.Name = fmt.Sprintf("B%dx%dx%d bf16 w%d", c.Batch, c.SeqLen, c.Dim, c.Width)
		if states {
			c.Name += " states"
		}
		return benchmark{c, &bench.TorchCase{Op: "conv1d_dense", Args: map[string]any{
			"batch": c.Batch, "seq_len": c.SeqLen, "dim": c.Dim, "width": c.Width, "states": states, "dtype": "bf16"}}}
	}
	split := func(extra map[string]any) map[string]any {
		m := map[string]any{"key_dim": qwenKey, "value_dim": qwenValue, "width": 4, "silu": true, "dtype": "bf16"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	return []benchmark{
		fwd("1x4096x8192 bf16 w4", []int{4096}, 0),
		fwd("1x32768x8192 bf16 w4", []int{32768}, 0),
		fwd("8 seqs 16384x8192 bf16 w4 25% init", mixedLens, 0.25),
		dense(false), dense(true),
		upd(1, modeShift), upd(32, modeShift), upd(256, modeShift),
		upd(32, modeSpec), upd(256, modeSpec), upd(32, modeCircular), upd(256, modeCircular),
		{Case{Name: "T4096 key2048 value4096 bf16 w4", Op: OpForwardSplit, DType: bf16, Width: 4,
			KeyDim: qwenKey, ValueDim: qwenValue, Lens: []int{4096}, NSlots: 2, SiLU: true, NoBias: true},
			&bench.TorchCase{Op: "conv1d_fwd_split", Args: split(map[string]any{"lens": []int{4096}})}},
		{Case{Name: "B32 key2048 value4096 bf16 w4", Op: OpUpdateSplit, DType: bf16, Width: 4,
			KeyDim: qwenKey, ValueDim: qwenValue, Batch: 32, NSlots: 64, SiLU: true, NoBias: true},
			&bench.TorchCase{Op: "conv1d_update_split", Args: split(map[string]any{"batch": 32, "n_slots": 64})}},
	}
}

// Benchmarks returns the cases of the family's benchmarks, for tools that
// time them otherwise (conv1d's tuning sweep).
func Benchmarks() []Case {
	var cs []Case
	for _, b := range benchmarks() {
		cs = append(cs, b.c)
	}
	return cs
}

// Suite returns the family's parity and benchmark cases, by op.
func Suite() suite.Family {
	f := suite.Family{Name: "conv1d", Torch: torchSrc}
	bs := benchmarks()
	for _, op := range []struct {
		kind      Op
		name, doc string
		checks    []Case
	}{
		{OpForward, "causal_conv1d_fwd", "varlen causal depthwise conv1d with a conv-state pool (prefill)", forwardChecks},
		{OpDense, "causal_conv1d_bias_silu_fwd", "dense-batch causal depthwise conv1d, bias + SiLU, optional initial/final states", denseChecks},
		{OpUpdate, "causal_conv1d_update", "causal depthwise conv1d decode step: window [state ‖ x], state shifted and appended (or spec-decoding / circular modes)", updateChecks},
		{OpForwardSplit, "causal_conv1d_fwd_split", "varlen causal conv1d with the output split into q, k, v (Qwen3-Next GDN)", forwardSplitChecks},
		{OpUpdateSplit, "causal_conv1d_update_split_qkv", "causal conv1d decode step with the output split into q, k, v (Qwen3-Next GDN)", updateSplitChecks},
	} {
		o := &suite.Op{Name: op.name, Family: f.Name, Doc: op.doc}
		for _, c := range op.checks {
			o.Checks = append(o.Checks, check.Case{Name: c.Name, Spec: c.spec})
		}
		for _, b := range bs {
			if b.c.Op == op.kind {
				o.Benches = append(o.Benches, b.c.bench(b.torch))
			}
		}
		f.Ops = append(f.Ops, o)
	}
	return f
}
