// Package conv1d is the causal depthwise conv1d of Mamba-2 and of the
// Qwen3-Next Gated DeltaNet front end: varlen prefill with a pool of
// per-sequence conv states, the dense bias+SiLU form, the decode update,
// and the split-QKV variants.
//
// For channel c and step t of one sequence,
//
//	y[t, c] = act(bias[c] + Σ_{k<W} w[c, k] · x̃[t − (W−1) + k, c])
//
// where x̃[τ] = x[τ] for τ ≥ 0 and, for τ < 0, the sequence's conv state
// (its previous inputs, oldest first), or 0 without one. act is SiLU or the
// identity. Accumulation is in fp32 on the GPU (float64 in the reference);
// the output is rounded once to the input dtype.
//
// Layouts. Everything is token-major with channels contiguous:
//
//   - activations x, y, q, k, v: [T, dim] (varlen), [B, L, dim] (dense and
//     multi-token decode) or [B, dim] (single-token decode). Rows may be
//     strided (e.g. a slice of a wider projection output).
//   - w: [dim, W], contiguous, 2 ≤ W ≤ 4, oldest tap first; bias: [dim].
//   - conv states: [n_slots, state_len, dim] with state_len ≥ W−1: for each
//     slot and state column, the dim values are contiguous (the memory of
//     a channel-first [n_slots, dim, state_len] pool with stride 1 along
//     dim).
//
// A conv-state row is the history of the last state_len inputs of its
// sequence, oldest first. Every op reads its window from the newest W−1
// columns, and leaves the row as the last state_len entries of
// [old row ‖ new inputs]: shifted left by L with the L new inputs appended
// (when L < state_len the older part comes from the old row, or is zero when
// the sequence had no initial state). With state_len = W−1, the usual case,
// this is exactly AITER's, vLLM's and Dao-AILab's behaviour. With a longer
// row it is what vLLM's Triton causal_conv1d_fn does (its window from the
// row's last W−1 columns, keeping the last state_len entries) and
// Dao-AILab's causal_conv1d_update; AITER's prefill assumes state_len =
// W−1. A decode step may instead use the speculative-decoding or the
// circular-buffer rule (see Decode).
//
// All tensors share the input's dtype: bf16, f16 or f32. Host tensors run
// the CPU reference; device tensors run the kernel. Prepare compiles the
// common kernels ahead of the first calls.
package conv1d

import (
	"fmt"
	"math"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/tensor"
)

// MinWidth and MaxWidth bound the convolution width W (taps per channel).
const (
	MinWidth = 2
	MaxWidth = 4
)

// Options are the settings shared by every op of the package.
type Options struct {
	// SiLU applies x·sigmoid(x) to the output; false is the identity.
	SiLU bool

	// AssumeValidIndices skips the host check of device index tensors.
	//
	// By default (false), cu_seqlens, the state indices and a decode
	// step's NumAcceptedTokens or CacheSeqlens of device calls are copied
	// to the host and checked before anything is launched: cu_seqlens must
	// start at 0, never decrease and end at T, every non-negative slot
	// index must lie inside the pool and be used by one sequence only, and
	// the mode entries must be in range (see Decode). The copy is a few
	// hundred bytes but waits for the stream (typically 10–30 µs plus a
	// host synchronization) and cannot be captured in a CUDA graph. Hot
	// paths whose indices are known to be valid set this flag; the kernel
	// then still never touches memory outside its tensors, whatever the
	// indices hold, and reports bad indices through ErrorFlag (see there
	// for what is and is not detected). Host calls are always checked (it
	// costs nothing there).
	AssumeValidIndices bool

	// ErrorFlag, when set, is an int32 [1] tensor on the device where the
	// kernel ORs
	//   - 1 when a slot index is beyond the pool: that sequence is skipped
	//     (like a pad slot);
	//   - 2 when cu_seqlens does not start at 0, decreases or does not end
	//     at T. A sequence whose bounds fall outside [0, T] or end before
	//     they start is skipped, but blocks find their sequence by a binary
	//     search that assumes cu_seqlens never decreases, so with a
	//     decreasing entry other sequences may be skipped too, and rows of
	//     y may be left unwritten or written by more than one sequence's
	//     window: y and the states are then undefined;
	//   - 4 when a decode step's NumAcceptedTokens or CacheSeqlens entry is
	//     out of range: that sequence is skipped.
	// A slot used by more than one sequence is not reported: those
	// sequences' states race. The caller zeroes the flag and reads it when
	// convenient. It is never written by host calls.
	ErrorFlag *tensor.Tensor
}

// Varlen describes a batch of B sequences packed along the token axis, and
// their conv states.
type Varlen struct {
	// CuSeqlens [B+1] int32 holds the cumulative sequence starts (vLLM's
	// query_start_loc): sequence b is tokens [CuSeqlens[b], CuSeqlens[b+1]).
	// It must start at 0 and end at T. Required.
	CuSeqlens *tensor.Tensor
	// CacheIndices [B] int32 maps sequence b to its state slot. A negative
	// index is a pad slot: the sequence is skipped entirely, its output and
	// state untouched. nil maps sequence b to slot b.
	CacheIndices *tensor.Tensor
	// HasInitialState [B] u8 says which sequences start from their slot's
	// state (nonzero) rather than from zeros. nil: none does.
	HasInitialState *tensor.Tensor
	// ConvStates [n_slots, state_len, dim], state_len ≥ W−1, the pool of
	// conv states, read (initial) and written (final) in place. nil: no
	// state is read or written; CacheIndices and HasInitialState must then
	// be nil too.
	ConvStates *tensor.Tensor
}

// Forward is the varlen prefill conv1d (causal_conv1d_fwd): for each
// sequence of seqs it convolves x [T, dim] into y [T, dim], starting from
// the sequence's state slot when HasInitialState says so and leaving the
// final state in the slot. Sequences of length 0 and pad slots are
// skipped; their rows of y are left untouched (callers that need them
// defined zero y first). y must not overlap x.
func Forward(s *cuda.Stream, y, x, w, bias *tensor.Tensor, seqs Varlen, o Options) error {
	return forward("conv1d.Forward", s, []string{"y"}, []*tensor.Tensor{y}, x, w, bias, seqs, o)
}

// ForwardSplit is Forward for the Qwen3-Next GDN front end
// (causal_conv1d_fwd_split): the channels of x [T, dim] are [Q | K | V] with
// dim = 2·key_dim + value_dim, and the output comes back split into q
// [T, key_dim], k [T, key_dim] and v [T, value_dim]; key_dim is read from q.
// q, k and v may be separate tensors or column slices of one [T, dim]
// buffer (they must not share an element, nor overlap x).
func ForwardSplit(s *cuda.Stream, q, k, v, x, w, bias *tensor.Tensor, seqs Varlen, o Options) error {
	return forward("conv1d.ForwardSplit", s, []string{"q", "k", "v"}, []*tensor.Tensor{q, k, v}, x, w, bias, seqs, o)
}

// ForwardDense is the dense batch form (causal_conv1d_bias_silu_fwd, with
// bias and Options.SiLU set): B sequences of equal length L, x and y
// [B, L, dim] (token-major, unlike Dao-AILab's channel-first [B, dim, L]).
// initialStates [B, state_len, dim], optional, are the states the
// sequences start from (nil: zeros); finalStates, same shape, optional,
// receive the states after the call. The two may be the same tensor
// (updated in place) but must not otherwise overlap. With L = 0 nothing is
// written, finalStates included, as Forward skips sequences of length 0:
// pass the same tensor for both to keep states across such a call.
func ForwardDense(s *cuda.Stream, y, x, w, bias, initialStates, finalStates *tensor.Tensor, o Options) error {
	const op = "conv1d.ForwardDense"
	vd := tensor.Validate(op)
	vd.Tensor("x", x).Rank(3)
	p := &plan{op: op, silu: o.SiLU, errFlag: o.ErrorFlag}
	if vd.Err() == nil {
		p.nSeqs, p.seqLen = x.Dim(0), x.Dim(1)
	}
	p.setCore(vd, x, w, bias, 2)
	p.setOutputs(vd, []string{"y"}, []*tensor.Tensor{y}, false)
	if initialStates != nil || finalStates != nil {
		ref := initialStates
		if ref == nil {
			ref = finalStates
		}
		vd.Optional("initialStates", initialStates).Rank(3).DTypeOf(x)
		vd.Optional("finalStates", finalStates).Rank(3).DTypeOf(x)
		if vd.Err() == nil {
			vd.Check(ref.Dim(0) == p.nSeqs && ref.Dim(1) >= p.width-1 && ref.Dim(2) == p.dim,
				argName(initialStates, "initialStates", "finalStates"),
				"has shape %v, want [%d, state_len ≥ W−1 = %d, %d]", ref.Shape(), p.nSeqs, p.width-1, p.dim)
			vd.Optional("initialStates", initialStates).ShapeOf(ref)
			vd.Optional("finalStates", finalStates).ShapeOf(ref)
			vd.NoOverlapUnlessSame("finalStates", finalStates, "initialStates", initialStates)
		}
		p.stateIn, p.stateOut = initialStates, finalStates
		p.stateNames = [2]string{"initialStates", "finalStates"}
		p.nSlots = p.nSeqs
	}
	return p.finish(vd, s, o)
}

// Decode is the conv-state side of a decode step (Update, UpdateSplit): the
// pool of conv states, the slot each sequence uses, and the optional
// speculative-decoding and circular-buffer modes. At most one of
// NumAcceptedTokens and CacheSeqlens may be set; without either, the row
// is shifted (the default described in the package comment).
type Decode struct {
	// ConvStates [n_slots, state_len, dim], state_len ≥ W−1, the pool of
	// conv states, read and written in place. Required.
	ConvStates *tensor.Tensor
	// StateIndices [B] int32 maps sequence b to its slot. A negative index
	// is a pad slot: the sequence is skipped entirely (its output rows and
	// state untouched, its NumAcceptedTokens or CacheSeqlens entry never
	// read). nil maps sequence b to slot b.
	StateIndices *tensor.Tensor

	// NumAcceptedTokens [B] int32 selects the speculative-decoding mode of
	// vLLM's causal_conv1d_update: entry b (1 ≤ accepted ≤ L) is how many
	// of the previous step's tokens were accepted. The window of the first
	// new token is state columns [accepted−1, accepted−1+W−1), and the row
	// becomes its columns [accepted, accepted + state_len − L) followed by
	// the L new inputs. This needs state_len ≥ W−2+L; vLLM's layout is
	// state_len = W−2+L exactly (W−1 history columns plus L−1 drafts),
	// where the row keeps the newest W−2 accepted inputs and the L new ones,
	// so that the next step finds its window at accepted−1 again. With L =
	// 1 the only valid count is 1: the window is the oldest W−1 columns.
	//
	// The step after a Forward or ForwardDense: those leave a row's newest
	// inputs in its last columns (see the package comment; vLLM's prefill
	// does the same), so the window that ends at the newest input starts at
	// column state_len − (W−1), and the count that continues the sequence
	// is state_len − W + 2 (L in vLLM's layout). A count of 1 there reads
	// a window state_len − W + 1 inputs too old.
	NumAcceptedTokens *tensor.Tensor

	// CacheSeqlens [B] int32, each ≥ 0, selects the circular-buffer mode of
	// Dao-AILab's and AITER's HIP causal_conv1d_update: the row is a ring
	// whose next write position is p = CacheSeqlens[b] mod state_len. The
	// window is columns (p − (W−1) + m) mod state_len, m < W−1, and new
	// input i is written to column (p + i) mod state_len, in order (when L
	// > state_len the later inputs overwrite the earlier: the ring keeps
	// the last state_len). Columns not written keep their values. The
	// caller advances CacheSeqlens.
	CacheSeqlens *tensor.Tensor
}

// Update is the decode conv1d (causal_conv1d_update): x [B, dim] (one new
// token per sequence) or [B, L, dim] (L new tokens, e.g. for speculative
// verification) runs through the window [state ‖ x] of slot
// st.StateIndices[b] of st.ConvStates; the state row is then shifted left
// by L and the new inputs appended, or updated as st's optional mode says
// (see Decode). The window is the row's newest W−1 columns, its last, as
// in Dao-AILab's kernel; vLLM's update without accepted counts reads the
// first W−1, which is the same only at state_len = W−1 (vLLM uses longer
// rows with accepted counts alone). out has x's shape and may be x itself
// (in place, as AITER's Triton kernel does), but must not otherwise
// overlap it.
func Update(s *cuda.Stream, out, x, w, bias *tensor.Tensor, st Decode, o Options) error {
	return update("conv1d.Update", s, []string{"out"}, []*tensor.Tensor{out}, x, w, bias, st, o)
}

// UpdateSplit is Update for the Qwen3-Next GDN front end
// (causal_conv1d_update_split_qkv): x [B, dim] or [B, L, dim] with
// dim = 2·key_dim + value_dim, outputs q and k [B, key_dim] (or
// [B, L, key_dim]) and v [B, value_dim] (or [B, L, value_dim]).
func UpdateSplit(s *cuda.Stream, q, k, v, x, w, bias *tensor.Tensor, st Decode, o Options) error {
	return update("conv1d.UpdateSplit", s, []string{"q", "k", "v"}, []*tensor.Tensor{q, k, v}, x, w, bias, st, o)
}

func argName(t *tensor.Tensor, ifSet, otherwise string) string {
	if t != nil {
		return ifSet
	}
	return otherwise
}

func forward(op string, s *cuda.Stream, names []string, outs []*tensor.Tensor, x, w, bias *tensor.Tensor, seqs Varlen, o Options) error {
	vd := tensor.Validate(op)
	vd.Tensor("x", x).Rank(2)
	vd.Tensor("CuSeqlens", seqs.CuSeqlens).Rank(1).DType(tensor.I32)
	p := &plan{op: op, silu: o.SiLU, errFlag: o.ErrorFlag, cu: seqs.CuSeqlens}
	if vd.Err() == nil {
		p.nSeqs = seqs.CuSeqlens.Dim(0) - 1
		vd.Check(p.nSeqs >= 1, "CuSeqlens", "has %d entries, want B+1 ≥ 2", seqs.CuSeqlens.Dim(0))
		vd.Check(p.nSeqs <= maxSeqs, "CuSeqlens", "has %d sequences, past the kernel's limit of %d", p.nSeqs, maxSeqs)
	}
	p.setCore(vd, x, w, bias, 1)
	p.setOutputs(vd, names, outs, false)
	if seqs.ConvStates == nil {
		vd.Check(seqs.CacheIndices == nil, "CacheIndices", "is set but ConvStates is nil")
		vd.Check(seqs.HasInitialState == nil, "HasInitialState", "is set but ConvStates is nil")
	} else {
		p.setPool(vd, "ConvStates", seqs.ConvStates, "CacheIndices", seqs.CacheIndices)
		p.stateOut = seqs.ConvStates
		if seqs.HasInitialState != nil {
			vd.Tensor("HasInitialState", seqs.HasInitialState).Shape(p.nSeqs).DType(tensor.U8)
			p.stateIn, p.hasInit = seqs.ConvStates, seqs.HasInitialState
		}
	}
	return p.finish(vd, s, o)
}

func update(op string, s *cuda.Stream, names []string, outs []*tensor.Tensor, x, w, bias *tensor.Tensor, st Decode, o Options) error {
	vd := tensor.Validate(op)
	vd.Tensor("x", x).Rank(2, 3)
	p := &plan{op: op, silu: o.SiLU, errFlag: o.ErrorFlag}
	if vd.Err() == nil {
		p.nSeqs, p.seqLen = x.Dim(0), 1
		if x.Rank() == 3 {
			p.seqLen = x.Dim(1)
		}
	}
	lead := 1
	if x != nil && x.Rank() == 3 {
		lead = 2
	}
	p.setCore(vd, x, w, bias, lead)
	p.setOutputs(vd, names, outs, len(outs) == 1)
	p.setPool(vd, "ConvStates", st.ConvStates, "StateIndices", st.StateIndices)
	p.stateIn, p.stateOut = st.ConvStates, st.ConvStates
	p.setMode(vd, st)
	return p.finish(vd, s, o)
}

// Decode modes: how a decode step reads its window and updates its row.
const (
	modeShift    = iota // newest W−1 columns; shift left by L and append
	modeSpec            // NumAcceptedTokens
	modeCircular        // CacheSeqlens
)

// setMode checks the optional mode tensor of a decode step.
func (p *plan) setMode(vd *tensor.Validator, st Decode) {
	if vd.Err() != nil {
		return
	}
	switch {
	case st.NumAcceptedTokens != nil && st.CacheSeqlens != nil:
		vd.Failf("CacheSeqlens", "is set together with NumAcceptedTokens: the two modes are exclusive")
	case st.NumAcceptedTokens != nil:
		p.mode, p.modeIdx, p.modeName = modeSpec, st.NumAcceptedTokens, "NumAcceptedTokens"
		vd.Check(p.stateLen >= p.width-2+p.seqLen, "ConvStates",
			"has state_len %d; with NumAcceptedTokens it needs at least W−2+L = %d columns", p.stateLen, p.width-2+p.seqLen)
	case st.CacheSeqlens != nil:
		p.mode, p.modeIdx, p.modeName = modeCircular, st.CacheSeqlens, "CacheSeqlens"
	default:
		return
	}
	vd.Tensor(p.modeName, p.modeIdx).Shape(p.nSeqs).DType(tensor.I32)
}

// plan is one validated call, in the form both the kernel and the CPU
// reference consume: 2-D token views of the activations, the sequence
// structure, and the state source and destination.
type plan struct {
	op                string
	x                 *tensor.Tensor    // [tokens, dim] view
	w, bias           *tensor.Tensor    // [dim, W], [dim] or nil
	outs              [3]*tensor.Tensor // [tokens, part] views; one or three
	split             [2]int            // channel boundaries of outs[1] and outs[2]
	dim, width        int
	tokens            int
	nSeqs, seqLen     int            // seqLen > 0: uniform sequences, no cu_seqlens
	cu                *tensor.Tensor // [B+1] int32 or nil
	slots             *tensor.Tensor // [B] int32 or nil (slot b)
	hasInit           *tensor.Tensor // [B] u8 or nil (every sequence, when stateIn is set)
	stateIn, stateOut *tensor.Tensor // [n_slots, state_len, dim] or nil
	nSlots, stateLen  int
	outNames          []string
	slotsName         string
	stateNames        [2]string // of stateIn and stateOut
	lead              []int     // leading (token) shape of x: [T], [B] or [B, L]
	inPlace           bool      // outs[0] is x
	silu              bool
	errFlag           *tensor.Tensor
	mode              int            // modeShift, modeSpec or modeCircular (decode only)
	modeIdx           *tensor.Tensor // [B] int32: NumAcceptedTokens or CacheSeqlens; nil in modeShift
	modeName          string

	// Host copies of the index tensors, once checked.
	cuHost, slotHost, initHost, modeHost []int64
}

var floatTypes = []tensor.DType{tensor.BF16, tensor.F16, tensor.F32}

// setCore checks x, w and bias. lead is the number of leading (token)
// dimensions of x.
func (p *plan) setCore(vd *tensor.Validator, x, w, bias *tensor.Tensor, lead int) {
	vd.Tensor("x", x).DType(floatTypes...)
	vd.Tensor("w", w).Rank(2).DTypeOf(x).Contiguous()
	if vd.Err() != nil {
		return
	}
	p.dim, p.width = x.Dim(-1), w.Dim(1)
	vd.Check(p.width >= MinWidth && p.width <= MaxWidth, "w", "has width W = %d, want %d ≤ W ≤ %d", p.width, MinWidth, MaxWidth)
	vd.Tensor("w", w).Shape(p.dim, p.width)
	vd.Optional("bias", bias).Shape(p.dim).DTypeOf(x)
	vd.Check(p.dim >= 1 && p.dim <= maxDim, "x", "has %d channels, want 1 to %d", p.dim, maxDim)
	p.w, p.bias = w, bias
	p.lead = append([]int(nil), x.Shape()[:lead]...)
	if vd.Err() != nil {
		return
	}
	var err error
	if p.x, err = tokenView(x, lead); err != nil {
		vd.Failf("x", "%v", err)
		return
	}
	p.tokens = p.x.Dim(0)
	vd.Check(p.tokens <= math.MaxInt32 && p.x.Stride(0) <= math.MaxInt32, "x", "has %d rows of stride %d, beyond int32", p.tokens, p.x.Stride(0))
}

// maxSeqs bounds a varlen batch's sequence count and maxStateLen a conv-state
// row (W−1 plus a few draft tokens in models), far inside what the kernel's
// int32 arithmetic needs: it numbers its (sequence, chunk) slots, at most
// tokens/minChunk + B, and forms a ring column as the sum of two columns.
const (
	maxSeqs     = 1 << 22
	maxStateLen = 1 << 20
)

// maxDim bounds the channel count, far inside the kernel's int32 channel
// indices. (The channel blocks run along gridDim.x, whose limit is 2³¹ − 1,
// so it is not a launch limit.)
const maxDim = 1 << 20

// setOutputs checks the outputs against x: y [.., dim], or q, k [.., key_dim]
// and v [.., dim − 2·key_dim], each with x's leading shape. inPlaceOK allows
// a single output to be x itself.
func (p *plan) setOutputs(vd *tensor.Validator, names []string, outs []*tensor.Tensor, inPlaceOK bool) {
	if vd.Err() != nil {
		return
	}
	parts := []int{p.dim}
	p.split = [2]int{p.dim, p.dim}
	if len(outs) == 3 {
		vd.Tensor(names[0], outs[0]).Rank(len(p.lead) + 1)
		if vd.Err() != nil {
			return
		}
		kd := outs[0].Dim(-1)
		vd.Check(kd >= 1 && 2*kd < p.dim, names[0], "has key_dim %d, want key_dim ≥ 1 and 2·key_dim < dim = %d", kd, p.dim)
		parts = []int{kd, kd, p.dim - 2*kd}
		p.split = [2]int{kd, 2 * kd}
	}
	p.outNames = names
	for i, o := range outs {
		want := append(append([]int(nil), p.lead...), parts[i])
		vd.Tensor(names[i], o).Shape(want...).DType(p.x.DType())
		if vd.Err() != nil {
			return
		}
		view, err := tokenView(o, len(p.lead))
		if err != nil {
			vd.Failf(names[i], "%v", err)
			return
		}
		vd.Check(view.Stride(0) <= math.MaxInt32, names[i], "has row stride %d, beyond int32", view.Stride(0))
		p.outs[i] = view
		if inPlaceOK && tensor.Same(view, p.x) {
			p.inPlace = true
		}
	}
}

// setPool checks a conv-state pool [n_slots, state_len, dim] and its
// optional slot indices [B].
func (p *plan) setPool(vd *tensor.Validator, name string, pool *tensor.Tensor, idxName string, idx *tensor.Tensor) {
	vd.Tensor(name, pool).Rank(3).DTypeOf(p.x)
	if vd.Err() != nil {
		return
	}
	p.nSlots, p.stateLen = pool.Dim(0), pool.Dim(1)
	p.stateNames = [2]string{name, name}
	vd.Check(pool.Dim(2) == p.dim && p.stateLen >= p.width-1, name,
		"has shape %v, want [n_slots, state_len ≥ W−1 = %d, dim = %d]", pool.Shape(), p.width-1, p.dim)
	if idx == nil {
		vd.Check(p.nSlots >= p.nSeqs, name, "has %d slots for %d sequences and no %s to map them", p.nSlots, p.nSeqs, idxName)
		return
	}
	vd.Tensor(idxName, idx).Shape(p.nSeqs).DType(tensor.I32)
	p.slots, p.slotsName = idx, idxName
}

// finish runs the checks every op shares (locations, overlaps, the error
// flag, the index contents), then the reference or the kernel.
func (p *plan) finish(vd *tensor.Validator, s *cuda.Stream, o Options) error {
	if vd.Err() != nil {
		return vd.Err()
	}
	if p.stateLen == 0 && p.stateOut != nil {
		p.stateLen = p.stateOut.Dim(1)
	}
	if p.stateLen == 0 && p.stateIn != nil {
		p.stateLen = p.stateIn.Dim(1)
	}
	vd.Optional("ErrorFlag", o.ErrorFlag).Shape(1).DType(tensor.I32)
	// The kernel takes the slot count, the row length and the column
	// stride of a state tensor as int32.
	for i, st := range []*tensor.Tensor{p.stateIn, p.stateOut} {
		if st != nil {
			vd.Check(st.Dim(0) <= math.MaxInt32 && st.Stride(1) <= math.MaxInt32, p.stateNames[i],
				"has shape %v and strides %v, beyond int32 indexing", st.Shape(), st.Strides())
			vd.Check(st.Dim(1) <= maxStateLen, p.stateNames[i], "has state_len %d, past the kernel's limit of %d", st.Dim(1), maxStateLen)
		}
	}
	names := []string{"x", "w", "bias", "", "", "", p.stateNames[0], p.stateNames[1], "CuSeqlens", p.slotsName, "HasInitialState", "ErrorFlag", p.modeName}
	copy(names[3:6], p.outNames)
	all := []*tensor.Tensor{p.x, p.w, p.bias, p.outs[0], p.outs[1], p.outs[2], p.stateIn, p.stateOut, p.cu, p.slots, p.hasInit, o.ErrorFlag, p.modeIdx}
	vd.SameLocation(s, names, all...)
	// Written tensors must be disjoint from everything else, except the
	// in-place pairs we allow (out = x, state out = state in).
	written := []int{3, 4, 5, 7, 11}
	for _, wi := range written {
		for j, t := range all {
			if j == wi || t == nil || all[wi] == nil {
				continue
			}
			if (wi == 3 && j == 0 && p.inPlace) || (wi == 7 && j == 6 && tensor.Same(all[7], all[6])) {
				continue
			}
			if tensor.Overlap(all[wi], t) {
				vd.Failf(names[wi], "overlaps %s", names[j])
			}
		}
	}
	if vd.Err() != nil {
		return vd.Err()
	}
	if !p.x.IsDevice() || !o.AssumeValidIndices {
		if err := p.checkIndices(s); err != nil {
			return err
		}
	}
	if p.tokens == 0 || p.nSeqs == 0 {
		return nil
	}
	if !p.x.IsDevice() {
		p.reference()
		return nil
	}
	return p.launch(s)
}

// tokenView returns t, whose first lead dimensions index tokens, as a 2-D
// [tokens, channels] view. [B, L, C] merges when its batch stride is L times
// its token stride (always so for contiguous tensors).
func tokenView(t *tensor.Tensor, lead int) (*tensor.Tensor, error) {
	if lead == 1 {
		return t, nil
	}
	b, l, c := t.Dim(0), t.Dim(1), t.Dim(2)
	stride := t.Stride(1)
	switch {
	case l <= 1:
		stride = t.Stride(0)
	case b > 1 && t.Stride(0) != l*t.Stride(1):
		return nil, fmt.Errorf("has strides %v: the batch stride must be L × the token stride", t.Strides())
	}
	if b*l == 0 {
		stride = max(c, 1)
	}
	return t.View(t.DType(), []int{b * l, c}, []int{stride, 1})
}

// checkIndices reads the index tensors (copying device ones to the host,
// which waits for the stream) and checks their contents.
func (p *plan) checkIndices(s *cuda.Stream) error {
	vd := tensor.Validate(p.op)
	var err error
	if p.cu != nil {
		if p.cuHost, err = p.hostInts(s, p.cu, "CuSeqlens"); err != nil {
			return err
		}
		cu := p.cuHost
		vd.Check(cu[0] == 0, "CuSeqlens", "starts at %d, want 0", cu[0])
		for b := 0; b < p.nSeqs; b++ {
			vd.Check(cu[b+1] >= cu[b], "CuSeqlens", "decreases at entry %d (%d after %d)", b+1, cu[b+1], cu[b])
		}
		vd.Check(cu[p.nSeqs] == int64(p.tokens), "CuSeqlens", "ends at %d but x has T = %d tokens", cu[p.nSeqs], p.tokens)
	}
	if p.slots != nil {
		if p.slotHost, err = p.hostInts(s, p.slots, p.slotsName); err != nil {
			return err
		}
		owner := map[int64]int{}
		for b, sl := range p.slotHost {
			if sl < 0 {
				continue
			}
			vd.Check(sl < int64(p.nSlots), p.slotsName, "entry %d is slot %d, beyond the pool of %d slots", b, sl, p.nSlots)
			if prev, dup := owner[sl]; dup {
				vd.Failf(p.slotsName, "slot %d is used by sequences %d and %d", sl, prev, b)
			}
			owner[sl] = b
		}
	}
	if p.hasInit != nil && !p.x.IsDevice() {
		p.initHost = p.hasInit.Int64s()
	}
	if p.modeIdx != nil {
		if p.modeHost, err = p.hostInts(s, p.modeIdx, p.modeName); err != nil {
			return err
		}
		for b, v := range p.modeHost {
			if p.slotHost != nil && p.slotHost[b] < 0 {
				continue // a pad slot's entry is never read
			}
			if p.mode == modeSpec {
				vd.Check(v >= 1 && v <= int64(p.seqLen), p.modeName, "entry %d is %d, want 1 ≤ accepted ≤ L = %d", b, v, p.seqLen)
			} else {
				vd.Check(v >= 0, p.modeName, "entry %d is %d, want ≥ 0", b, v)
			}
		}
	}
	return vd.Err()
}

// hostInts returns the values of a rank-1 index tensor for checkIndices
// (tensor.ValuesForCheck: a device tensor waits for s).
func (p *plan) hostInts(s *cuda.Stream, t *tensor.Tensor, arg string) ([]int64, error) {
	return tensor.ValuesForCheck(s, t, p.op, arg, "Options.AssumeValidIndices")
}
