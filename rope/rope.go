// Package rope applies rotary position embeddings (RoPE) to attention
// queries and keys.
//
// For a token at position p, rotary dim r (even, ≤ the head dim D) and pair
// i ∈ [0, r/2), the rotation uses c_i = cos(p·ω_i) and s_i = sin(p·ω_i),
// read from a table the caller builds (ω_i = θ^(−2i/r) before any frequency
// scaling; llama3, YaRN, NTK and linear scaling only change the table, see
// CosSinCache):
//
//	NeoX (rotate-half) pairs (i, i+r/2):  y_i = x_i·c_i − x_{i+r/2}·s_i,  y_{i+r/2} = x_{i+r/2}·c_i + x_i·s_i
//	GPT-J (interleaved) pairs (2i, 2i+1): y_2i = x_2i·c_i − x_{2i+1}·s_i, y_{2i+1} = x_{2i+1}·c_i + x_2i·s_i
//
// Only the first r dims of each head rotate (vLLM's convention for partial
// rotary, e.g. Qwen3-Next's r = 64 of D = 256); dims [r, D) pass through
// unchanged.
//
// Two layouts are served. RotateQK is the serving layout of vLLM and sglang:
// q [T, Hq, D] and k [T, Hk, D] rotated in place in one launch, positions [T]
// and a cos/sin cache [maxPos, r]. Rope is the original port's layout: x and a
// separate y, both [B, H, S, D], with cos and sin tables [S, r/2] indexed by
// the sequence index s.
//
// Activations are bf16, fp16 or fp32; the tables are fp32 or the activations'
// dtype. Arithmetic is fp32 on the GPU and float64 on the host. Host tensors
// run the CPU reference, device tensors the kernel; mixing them is an error.
// Arguments are validated before anything runs, and on an error nothing is
// written.
package rope

import (
	"fmt"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/tensor"
)

// Style selects which dims of a head form the rotation pairs.
type Style int

const (
	// NeoX pairs dim i with dim i + r/2 (rotate-half): Llama, Qwen, Mixtral.
	NeoX Style = iota
	// GPTJ pairs dim 2i with dim 2i + 1 (interleaved): DeepSeek's rope dims,
	// GLM, GPT-J.
	GPTJ
)

// String returns the style's name, "neox" or "gptj".
func (s Style) String() string {
	switch s {
	case NeoX:
		return "neox"
	case GPTJ:
		return "gptj"
	}
	return fmt.Sprintf("Style(%d)", int(s))
}

// Options select the rotation.
type Options struct {
	Style     Style // NeoX (the zero value) or GPTJ
	RotaryDim int   // r: the first r dims of each head rotate; 0 means all D

	// TrustPositions skips RotateQK's host-side range check of device
	// positions. The check copies positions back to the host, which costs a
	// synchronization of the stream (it waits for all work queued before) plus
	// a T×8-byte copy, about 10–20 µs, and it cannot be captured in a CUDA
	// graph. Serving loops whose positions are known good set it. Without the
	// check a position outside the cache is not an error: the kernel leaves
	// that token's q and k rows unchanged instead of reading outside the
	// cache. Host tensors are always checked (for free). Rope ignores it.
	TrustPositions bool
}

// rotaryDim resolves o.RotaryDim against the head dim d.
func (o Options) rotaryDim(d int) int {
	if o.RotaryDim == 0 {
		return d
	}
	return o.RotaryDim
}

// checkRotary validates the style and the head and rotary dims.
func checkRotary(v *tensor.Validator, arg string, d int, o Options) int {
	r := o.rotaryDim(d)
	v.Check(o.Style == NeoX || o.Style == GPTJ, "o.Style", "unknown style %v", o.Style)
	v.Check(d > 0, arg, "head dim %d must be positive", d)
	v.Check(d%2 == 0, arg, "head dim %d must be even", d)
	v.Check(r > 0 && r%2 == 0, "o.RotaryDim", "rotary dim %d must be positive and even", r)
	v.Check(r <= d, "o.RotaryDim", "rotary dim %d exceeds the head dim %d", r, d)
	v.Check(d <= maxHeadDim, arg, "head dim %d exceeds %d", d, maxHeadDim)
	return r
}

// maxHeadDim bounds the head dim (models use 64 to 512) far inside the
// kernels' int32 arithmetic on it (element offsets c·2·V within a head,
// 2·half plus a pass-through vector). Batches and heads need no bound: a
// launch whose grid they would take past CUDA's limits runs in parts
// (forParts), each of which keeps the kernel's head index in int32.
const maxHeadDim = 1 << 16

// RotateQK rotates q [T, Hq, D] and k [T, Hk, D] in place, token t by the
// cache row positions[t], in one launch. k may be nil; Hk is free (GQA and
// MQA have Hk < Hq). positions is [T] int64 or int32. cosSin is
// [maxPos, r]: cos in columns [0, r/2), sin in [r/2, r), fp32 or q's dtype
// (vLLM's cos_sin_cache). q and k may have any token and head strides (e.g.
// views into a fused qkv buffer) but must not share an element.
//
// Positions must lie in [0, maxPos): host positions are checked for free,
// device positions by copying them back unless o.TrustPositions is set (see
// Options for the cost and what happens without the check). T = 0 is a no-op.
// s == nil means the device's default stream.
func RotateQK(s *cuda.Stream, q, k, positions, cosSin *tensor.Tensor, o Options) error {
	v := tensor.Validate("rope.RotateQK")
	v.Tensor("q", q).Rank(3).DType(tensor.BF16, tensor.F16, tensor.F32)
	var r int
	if v.Err() == nil {
		T, d := q.Dim(0), q.Dim(2)
		r = checkRotary(v, "q", d, o)
		v.Optional("k", k).Rank(3).DTypeOf(q).Shape(T, -1, d)
		v.Tensor("positions", positions).Rank(1).DType(tensor.I64, tensor.I32).Shape(T)
		v.Tensor("cosSin", cosSin).Rank(2).DType(tensor.F32, q.DType()).Shape(-1, r)
		if v.Err() == nil {
			v.Check(cosSin.Dim(0) > 0 || T == 0, "cosSin", "has no rows")
		}
		v.SameLocation(s, []string{"q", "k", "positions", "cosSin"}, q, k, positions, cosSin)
	}
	if v.Err() == nil {
		if tensor.Overlap(q, k) { // exact for the heads of one qkv buffer
			v.Failf("k", "overlaps q; q and k must be disjoint (heads of one qkv buffer are fine)")
		}
		v.NoOverlap("q", q, "cosSin", cosSin)
		v.NoOverlap("q", q, "positions", positions)
		v.NoOverlap("k", k, "cosSin", cosSin)
		v.NoOverlap("k", k, "positions", positions)
	}
	if err := v.Err(); err != nil {
		return err
	}
	if q.Numel() == 0 && (k == nil || k.Numel() == 0) {
		return nil
	}
	maxPos := cosSin.Dim(0)
	if !q.IsDevice() || !o.TrustPositions {
		pos, err := tensor.ValuesForCheck(s, positions, "rope.RotateQK", "positions", "Options.TrustPositions")
		if err != nil {
			return err
		}
		if err := checkPositions(pos, maxPos); err != nil {
			return err
		}
	}
	if !q.IsDevice() {
		refQK(q, k, positions.Int64s(), r/2, o.Style, tableCosSin(cosSin))
		return nil
	}
	return launchQK(s, q, k, positions, cosSin, r, o.Style)
}

// checkPositions reports the first position outside [0, maxPos).
func checkPositions(pos []int64, maxPos int) error {
	for t, p := range pos {
		if p < 0 || p >= int64(maxPos) {
			return &tensor.ArgError{Op: "rope.RotateQK", Arg: "positions",
				Msg: fmt.Sprintf("positions[%d] = %d is outside the cos/sin cache [0, %d)", t, p, maxPos)}
		}
	}
	return nil
}

// Rope writes y = RoPE(x) for x, y [B, H, S, D]: row (b, h, s) rotates by
// cos[s, :] and sin[s, :], tables [≥ S, r/2] (row s is position s), fp32 or
// x's dtype. This is the original port's rope_fwd(x, out, cos_half,
// sin_half), generalized to GPT-J and partial rotary; its cos_half and
// sin_half are these tables with r = D, and its pairing was NeoX, the
// default. Dims [r, D) are copied from x. y may be x itself (in place) but
// must not otherwise overlap it. Strides are free. B = 0, H = 0 or S = 0 is a
// no-op. s == nil means the device's default stream.
func Rope(s *cuda.Stream, y, x, cos, sin *tensor.Tensor, o Options) error {
	v := tensor.Validate("rope.Rope")
	v.Tensor("x", x).Rank(4).DType(tensor.BF16, tensor.F16, tensor.F32)
	var r int
	if v.Err() == nil {
		S, d := x.Dim(2), x.Dim(3)
		r = checkRotary(v, "x", d, o)
		v.Tensor("y", y).ShapeOf(x).DTypeOf(x)
		v.Tensor("cos", cos).Rank(2).DType(tensor.F32, x.DType()).Shape(-1, r/2)
		v.Tensor("sin", sin).Rank(2).DTypeOf(cos).Shape(-1, r/2)
		if v.Err() == nil {
			v.Check(cos.Dim(0) >= S, "cos", "has %d rows for sequence length %d", cos.Dim(0), S)
			v.Check(sin.Dim(0) >= S, "sin", "has %d rows for sequence length %d", sin.Dim(0), S)
		}
		v.SameLocation(s, []string{"y", "x", "cos", "sin"}, y, x, cos, sin)
		v.NoOverlapUnlessSame("y", y, "x", x)
		v.NoOverlap("y", y, "cos", cos)
		v.NoOverlap("y", y, "sin", sin)
	}
	if err := v.Err(); err != nil {
		return err
	}
	if x.Numel() == 0 {
		return nil
	}
	if !x.IsDevice() {
		refBHSD(y, x, r/2, o.Style, splitCosSin(cos, sin))
		return nil
	}
	return launchBHSD(s, y, x, cos, sin, r, o.Style)
}
