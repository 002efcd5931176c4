package conv1d_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gokittens/kittens/conv1d"
	"github.com/gokittens/kittens/conv1d/conv1dtest"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/tensor"
)

const bf16, f16, f32 = tensor.BF16, tensor.F16, tensor.F32

func i32s(v ...int64) *tensor.Tensor {
	t := tensor.New(tensor.I32, len(v))
	t.SetInt64s(v)
	return t
}

var (
	fwdBase  = conv1dtest.Case{Op: conv1dtest.OpForward, DType: bf16, Width: 4, Dim: 16, Lens: []int{3, 5}, NSlots: 4, InitShare: 0.5, SiLU: true}
	updBase  = conv1dtest.Case{Op: conv1dtest.OpUpdate, DType: bf16, Width: 4, Dim: 16, Batch: 3, NSlots: 4, SiLU: true}
	specBase = conv1dtest.Case{Op: conv1dtest.OpUpdate, DType: bf16, Width: 4, Dim: 16, Batch: 3, SeqLen: 2, NSlots: 4, StateLen: 4, SiLU: true}
	splBase  = conv1dtest.Case{Op: conv1dtest.OpForwardSplit, DType: bf16, Width: 3, KeyDim: 4, ValueDim: 8, Lens: []int{2, 6}, NSlots: 2}
)

// TestValidation feeds each op one bad argument at a time and checks that it
// is reported by name and that nothing was written.
func TestValidation(t *testing.T) {
	fwd := func(b *conv1dtest.Built, mod func(y, x, w, bias *tensor.Tensor, v *conv1d.Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor)) error {
		v := conv1d.Varlen{CuSeqlens: b.Named("cu_seqlens"), CacheIndices: b.Named("cache_indices"),
			HasInitialState: b.Named("has_initial_state"), ConvStates: b.Named("conv_states")}
		y, x, w, bias := mod(b.Named("y"), b.Named("x"), b.Named("w"), b.Named("bias"), &v)
		return conv1d.Forward(nil, y, x, w, bias, v, conv1d.Options{SiLU: true})
	}
	upd := func(b *conv1dtest.Built, out, x, w, states, idx *tensor.Tensor) error {
		pick := func(t *tensor.Tensor, name string) *tensor.Tensor {
			if t != nil {
				return t
			}
			return b.Named(name)
		}
		return conv1d.Update(nil, pick(out, "y"), pick(x, "x"), pick(w, "w"), b.Named("bias"),
			conv1d.Decode{ConvStates: pick(states, "conv_states"), StateIndices: pick(idx, "cache_indices")}, conv1d.Options{})
	}
	// mode runs Update on b with st's mode tensors and, if set, its pool.
	mode := func(b *conv1dtest.Built, st conv1d.Decode) error {
		if st.ConvStates == nil {
			st.ConvStates = b.Named("conv_states")
		}
		st.StateIndices = b.Named("cache_indices")
		return conv1d.Update(nil, b.Named("y"), b.Named("x"), b.Named("w"), b.Named("bias"), st, conv1d.Options{})
	}
	for _, tc := range []struct {
		name string
		base conv1dtest.Case
		call func(b *conv1dtest.Built) error
		want string
	}{
		{"x rank", fwdBase, func(b *conv1dtest.Built) error {
			return fwd(b, func(y, x, w, bias *tensor.Tensor, _ *conv1d.Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				return y, tensor.New(bf16, 1, 8, 16), w, bias
			})
		}, "argument x: has rank 3"},
		{"y shape", fwdBase, func(b *conv1dtest.Built) error {
			return fwd(b, func(_, x, w, bias *tensor.Tensor, _ *conv1d.Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				return tensor.New(bf16, 8, 15), x, w, bias
			})
		}, "argument y: has shape [8 15]"},
		{"w channels", fwdBase, func(b *conv1dtest.Built) error {
			return fwd(b, func(y, x, _, bias *tensor.Tensor, _ *conv1d.Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				return y, x, tensor.New(bf16, 15, 4), bias
			})
		}, "argument w: has shape [15 4]"},
		{"w dtype", fwdBase, func(b *conv1dtest.Built) error {
			return fwd(b, func(y, x, _, bias *tensor.Tensor, _ *conv1d.Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				return y, x, tensor.New(f16, 16, 4), bias
			})
		}, "argument w: has dtype f16"},
		{"x dtype", fwdBase, func(b *conv1dtest.Built) error {
			return fwd(b, func(y, _, w, bias *tensor.Tensor, _ *conv1d.Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				return y, tensor.New(tensor.I32, 8, 16), w, bias
			})
		}, "argument x: has dtype i32"},
		{"width 1", fwdBase, func(b *conv1dtest.Built) error {
			return fwd(b, func(y, x, _, bias *tensor.Tensor, _ *conv1d.Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				return y, x, tensor.New(bf16, 16, 1), bias
			})
		}, "width W = 1"},
		{"width 5", fwdBase, func(b *conv1dtest.Built) error {
			return fwd(b, func(y, x, _, bias *tensor.Tensor, _ *conv1d.Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				return y, x, tensor.New(bf16, 16, 5), bias
			})
		}, "width W = 5"},
		{"bias shape", fwdBase, func(b *conv1dtest.Built) error {
			return fwd(b, func(y, x, w, _ *tensor.Tensor, _ *conv1d.Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				return y, x, w, tensor.New(bf16, 17)
			})
		}, "argument bias: has shape [17]"},
		{"state_len below W-1", fwdBase, func(b *conv1dtest.Built) error {
			return fwd(b, func(y, x, w, bias *tensor.Tensor, v *conv1d.Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				v.ConvStates = tensor.New(bf16, 4, 2, 16)
				return y, x, w, bias
			})
		}, "argument ConvStates: has shape [4 2 16]"},
		{"cu_seqlens dtype", fwdBase, func(b *conv1dtest.Built) error {
			return fwd(b, func(y, x, w, bias *tensor.Tensor, v *conv1d.Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				v.CuSeqlens = tensor.New(tensor.I64, 3)
				return y, x, w, bias
			})
		}, "argument CuSeqlens: has dtype i64"},
		{"cu_seqlens end != T", fwdBase, func(b *conv1dtest.Built) error {
			return fwd(b, func(y, x, w, bias *tensor.Tensor, v *conv1d.Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				v.CuSeqlens = i32s(0, 3, 7)
				return y, x, w, bias
			})
		}, "ends at 7 but x has T = 8"},
		{"cu_seqlens decreasing", fwdBase, func(b *conv1dtest.Built) error {
			return fwd(b, func(y, x, w, bias *tensor.Tensor, v *conv1d.Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				v.CuSeqlens = i32s(0, 9, 8)
				return y, x, w, bias
			})
		}, "decreases at entry 2"},
		{"cu_seqlens start", fwdBase, func(b *conv1dtest.Built) error {
			return fwd(b, func(y, x, w, bias *tensor.Tensor, v *conv1d.Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				v.CuSeqlens = i32s(1, 3, 8)
				return y, x, w, bias
			})
		}, "starts at 1"},
		{"cache index beyond pool", fwdBase, func(b *conv1dtest.Built) error {
			return fwd(b, func(y, x, w, bias *tensor.Tensor, v *conv1d.Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				v.CacheIndices = i32s(1, 4)
				return y, x, w, bias
			})
		}, "argument CacheIndices: entry 1 is slot 4, beyond the pool of 4 slots"},
		{"cache index shared", fwdBase, func(b *conv1dtest.Built) error {
			return fwd(b, func(y, x, w, bias *tensor.Tensor, v *conv1d.Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				v.CacheIndices = i32s(2, 2)
				return y, x, w, bias
			})
		}, "slot 2 is used by sequences 0 and 1"},
		{"initial state without pool", fwdBase, func(b *conv1dtest.Built) error {
			return fwd(b, func(y, x, w, bias *tensor.Tensor, v *conv1d.Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				v.ConvStates, v.CacheIndices = nil, nil
				return y, x, w, bias
			})
		}, "argument HasInitialState: is set but ConvStates is nil"},
		{"y overlaps x", fwdBase, func(b *conv1dtest.Built) error {
			return fwd(b, func(_, x, w, bias *tensor.Tensor, _ *conv1d.Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				return x, x, w, bias
			})
		}, "argument y: overlaps x"},
		{"error flag dtype", fwdBase, func(b *conv1dtest.Built) error {
			v := conv1d.Varlen{CuSeqlens: b.Named("cu_seqlens")}
			return conv1d.Forward(nil, b.Named("y"), b.Named("x"), b.Named("w"), nil, v, conv1d.Options{ErrorFlag: tensor.New(f32, 1)})
		}, "argument ErrorFlag: has dtype f32"},
		{"update state index beyond pool", updBase, func(b *conv1dtest.Built) error {
			return upd(b, nil, nil, nil, nil, i32s(0, -1, 7))
		}, "argument StateIndices: entry 2 is slot 7"},
		{"update pool dim", updBase, func(b *conv1dtest.Built) error {
			return upd(b, nil, nil, nil, tensor.New(bf16, 4, 3, 8), nil)
		}, "argument ConvStates: has shape [4 3 8]"},
		{"update out rank", updBase, func(b *conv1dtest.Built) error {
			return upd(b, tensor.New(bf16, 3, 1, 16), nil, nil, nil, nil)
		}, "argument out: has shape [3 1 16], want [3 16]"},
		{"update pool too small without indices", updBase, func(b *conv1dtest.Built) error {
			return conv1d.Update(nil, b.Named("y"), b.Named("x"), b.Named("w"), nil, conv1d.Decode{ConvStates: tensor.New(bf16, 2, 3, 16)}, conv1d.Options{})
		}, "has 2 slots for 3 sequences"},
		{"accepted dtype", specBase, func(b *conv1dtest.Built) error {
			return mode(b, conv1d.Decode{NumAcceptedTokens: tensor.New(tensor.I64, 3)})
		}, "argument NumAcceptedTokens: has dtype i64"},
		{"accepted shape", specBase, func(b *conv1dtest.Built) error {
			return mode(b, conv1d.Decode{NumAcceptedTokens: i32s(1, 1)})
		}, "argument NumAcceptedTokens: has shape [2], want [3]"},
		{"accepted 0", specBase, func(b *conv1dtest.Built) error {
			return mode(b, conv1d.Decode{NumAcceptedTokens: i32s(1, 0, 2)})
		}, "argument NumAcceptedTokens: entry 1 is 0, want 1 ≤ accepted ≤ L = 2"},
		{"accepted beyond L", specBase, func(b *conv1dtest.Built) error {
			return mode(b, conv1d.Decode{NumAcceptedTokens: i32s(1, 2, 3)})
		}, "argument NumAcceptedTokens: entry 2 is 3, want 1 ≤ accepted ≤ L = 2"},
		{"spec state_len too small", specBase, func(b *conv1dtest.Built) error {
			return mode(b, conv1d.Decode{ConvStates: tensor.New(bf16, 4, 3, 16), NumAcceptedTokens: i32s(1, 1, 1)})
		}, "has state_len 3; with NumAcceptedTokens it needs at least W−2+L = 4 columns"},
		{"cache seqlens dtype", specBase, func(b *conv1dtest.Built) error {
			return mode(b, conv1d.Decode{CacheSeqlens: tensor.New(f32, 3)})
		}, "argument CacheSeqlens: has dtype f32"},
		{"cache seqlens shape", specBase, func(b *conv1dtest.Built) error {
			return mode(b, conv1d.Decode{CacheSeqlens: tensor.New(tensor.I32, 3, 1)})
		}, "argument CacheSeqlens: has shape [3 1], want [3]"},
		{"cache seqlens negative", specBase, func(b *conv1dtest.Built) error {
			return mode(b, conv1d.Decode{CacheSeqlens: i32s(0, 7, -1)})
		}, "argument CacheSeqlens: entry 2 is -1, want ≥ 0"},
		{"both modes", specBase, func(b *conv1dtest.Built) error {
			return mode(b, conv1d.Decode{NumAcceptedTokens: i32s(1, 1, 1), CacheSeqlens: i32s(0, 0, 0)})
		}, "argument CacheSeqlens: is set together with NumAcceptedTokens"},
		{"update batch stride", conv1dtest.Case{Op: conv1dtest.OpUpdate, DType: bf16, Width: 2, Dim: 8, Batch: 2, SeqLen: 2, NSlots: 2}, func(b *conv1dtest.Built) error {
			x, _ := tensor.NewStrided(bf16, []int{2, 2, 8}, []int{20, 8, 1})
			return upd(b, nil, x, nil, nil, nil)
		}, "the batch stride must be L × the token stride"},
		{"split key_dim", splBase, func(b *conv1dtest.Built) error {
			v := conv1d.Varlen{CuSeqlens: b.Named("cu_seqlens")}
			return conv1d.ForwardSplit(nil, tensor.New(bf16, 8, 8), b.Named("k"), b.Named("v"), b.Named("x"), b.Named("w"), nil, v, conv1d.Options{})
		}, "has key_dim 8"},
		{"split q rank 0", splBase, func(b *conv1dtest.Built) error {
			v := conv1d.Varlen{CuSeqlens: b.Named("cu_seqlens")}
			return conv1d.ForwardSplit(nil, tensor.New(bf16), b.Named("k"), b.Named("v"), b.Named("x"), b.Named("w"), nil, v, conv1d.Options{})
		}, "argument q: has rank 0"},
		{"update split q rank 0", conv1dtest.Case{Op: conv1dtest.OpUpdateSplit, DType: bf16, Width: 3, KeyDim: 4, ValueDim: 8, Batch: 2, NSlots: 2}, func(b *conv1dtest.Built) error {
			return conv1d.UpdateSplit(nil, tensor.New(bf16), b.Named("k"), b.Named("v"), b.Named("x"), b.Named("w"), nil,
				conv1d.Decode{ConvStates: b.Named("conv_states")}, conv1d.Options{})
		}, "argument q: has rank 0"},
		{"split v shape", splBase, func(b *conv1dtest.Built) error {
			v := conv1d.Varlen{CuSeqlens: b.Named("cu_seqlens")}
			return conv1d.ForwardSplit(nil, b.Named("q"), b.Named("k"), tensor.New(bf16, 8, 7), b.Named("x"), b.Named("w"), nil, v, conv1d.Options{})
		}, "argument v: has shape [8 7], want [8 8]"},
		{"dense final states shape", conv1dtest.Case{Op: conv1dtest.OpDense, DType: bf16, Width: 4, Dim: 8, Batch: 2, SeqLen: 3}, func(b *conv1dtest.Built) error {
			return conv1d.ForwardDense(nil, b.Named("y"), b.Named("x"), b.Named("w"), nil, tensor.New(bf16, 2, 3, 8), tensor.New(bf16, 2, 4, 8), conv1d.Options{})
		}, "argument finalStates: has shape [2 4 8], want [2 3 8]"},
		{"dense states shorter than W-1", conv1dtest.Case{Op: conv1dtest.OpDense, DType: bf16, Width: 4, Dim: 8, Batch: 2, SeqLen: 3}, func(b *conv1dtest.Built) error {
			return conv1d.ForwardDense(nil, b.Named("y"), b.Named("x"), b.Named("w"), nil, tensor.New(bf16, 2, 2, 8), nil, conv1d.Options{})
		}, "argument initialStates: has shape [2 2 8], want [2, state_len ≥ W−1 = 3, 8]"},
		// A single state column leaves its stride free: no storage is needed
		// for one beyond int32.
		{"dense initial states column stride", conv1dtest.Case{Op: conv1dtest.OpDense, DType: bf16, Width: 2, Dim: 8, Batch: 1, SeqLen: 3}, func(b *conv1dtest.Built) error {
			st, err := tensor.NewStrided(bf16, []int{1, 1, 8}, []int{1 << 31, 1 << 31, 1})
			if err != nil {
				return err
			}
			return conv1d.ForwardDense(nil, b.Named("y"), b.Named("x"), b.Named("w"), nil, st, nil, conv1d.Options{})
		}, "argument initialStates: has shape [1 1 8] and strides [2147483648 2147483648 1], beyond int32"},
		{"dense final states column stride", conv1dtest.Case{Op: conv1dtest.OpDense, DType: bf16, Width: 2, Dim: 8, Batch: 1, SeqLen: 3}, func(b *conv1dtest.Built) error {
			st, err := tensor.NewStrided(bf16, []int{1, 1, 8}, []int{1 << 31, 1 << 31, 1})
			if err != nil {
				return err
			}
			return conv1d.ForwardDense(nil, b.Named("y"), b.Named("x"), b.Named("w"), nil, nil, st, conv1d.Options{})
		}, "argument finalStates: has shape [1 1 8] and strides [2147483648 2147483648 1], beyond int32"},
		{"update pool past the row limit", conv1dtest.Case{Op: conv1dtest.OpUpdate, DType: bf16, Width: 2, Dim: 1, Batch: 1, NSlots: 1}, func(b *conv1dtest.Built) error {
			return upd(b, nil, nil, nil, tensor.New(bf16, 1, conv1d.MaxStateLen+1, 1), nil)
		}, fmt.Sprintf("argument ConvStates: has state_len %d, past the kernel's limit of %d", conv1d.MaxStateLen+1, conv1d.MaxStateLen)},
		{"varlen past the sequence limit", fwdBase, func(b *conv1dtest.Built) error {
			return fwd(b, func(y, x, w, bias *tensor.Tensor, v *conv1d.Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				v.CuSeqlens = tensor.New(tensor.I32, conv1d.MaxSeqs+2)
				return y, x, w, bias
			})
		}, fmt.Sprintf("argument CuSeqlens: has %d sequences, past the kernel's limit of %d", conv1d.MaxSeqs+1, conv1d.MaxSeqs)},
		{"update pool column stride", conv1dtest.Case{Op: conv1dtest.OpUpdate, DType: bf16, Width: 2, Dim: 8, Batch: 1, NSlots: 1}, func(b *conv1dtest.Built) error {
			st, err := tensor.NewStrided(bf16, []int{1, 1, 8}, []int{1 << 31, 1 << 31, 1})
			if err != nil {
				return err
			}
			return upd(b, nil, nil, nil, st, nil)
		}, "argument ConvStates: has shape [1 1 8] and strides [2147483648 2147483648 1], beyond int32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.base.Build(rand.New(rand.NewPCG(1, 2)), conv1dtest.NormalFill(rand.New(rand.NewPCG(3, 4))))
			before := make([][]byte, len(b.Tensors))
			for i, x := range b.Tensors {
				before[i] = bytes.Clone(x.Bytes())
			}
			err := tc.call(b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
			t.Log(err)
			for i, x := range b.Tensors {
				if !bytes.Equal(before[i], x.Bytes()) {
					t.Errorf("%s was written", b.Names[i])
				}
			}
		})
	}
}

// TestMixedLocations needs a device: host y with device x must fail.
func TestMixedLocations(t *testing.T) {
	dev := gputest.Device(t)
	b := fwdBase.Build(rand.New(rand.NewPCG(1, 2)), conv1dtest.NormalFill(rand.New(rand.NewPCG(3, 4))))
	x, err := b.Named("x").ToDevice(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Free()
	v := conv1d.Varlen{CuSeqlens: b.Named("cu_seqlens")}
	err = conv1d.Forward(nil, b.Named("y"), x, b.Named("w"), nil, v, conv1d.Options{})
	if err == nil || !strings.Contains(err.Error(), "is on the host but x is on device") {
		t.Fatalf("got %v, want a location error", err)
	}
}

// TestStreamOfAnotherDevice needs a device: a stream of a device other than
// the tensors' is an error naming s, before anything is written.
func TestStreamOfAnotherDevice(t *testing.T) {
	dev := gputest.Device(t)
	b := fwdBase.Build(rand.New(rand.NewPCG(1, 2)), conv1dtest.NormalFill(rand.New(rand.NewPCG(3, 4))))
	ts := make([]*tensor.Tensor, len(b.Tensors))
	for i, h := range b.Tensors {
		d, err := h.ToDevice(dev)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Free()
		ts[i] = d
	}
	other := &cuda.Device{Ordinal: dev.Ordinal + 1}
	err := b.Call(other.DefaultStream(), ts, conv1d.Options{})
	if err == nil || !strings.Contains(err.Error(), "argument s:") {
		t.Fatalf("got %v, want an error naming argument s", err)
	}
	for i, d := range ts {
		if h, err := d.ToHost(); err != nil || !bytes.Equal(h.Bytes(), b.Tensors[i].Bytes()) {
			t.Errorf("%s was written (%v)", b.Names[i], err)
		}
	}
}

// flagAfter runs call with a function that copies host tensors to dev (all
// freed when the test ends) and Options that assume valid indices and carry
// an error flag, and returns the flag the kernel left.
func flagAfter(t *testing.T, dev *cuda.Device, call func(toDev func(*tensor.Tensor) *tensor.Tensor, o conv1d.Options) error) int64 {
	t.Helper()
	toDev := func(h *tensor.Tensor) *tensor.Tensor {
		d, err := h.ToDevice(dev)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Free() })
		return d
	}
	flag := toDev(tensor.New(tensor.I32, 1))
	if err := call(toDev, conv1d.Options{AssumeValidIndices: true, ErrorFlag: flag}); err != nil {
		t.Fatal(err)
	}
	h, err := flag.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	return h.Int64s()[0]
}

// TestErrorFlag: with AssumeValidIndices the kernel skips what it cannot
// process safely and reports it in ErrorFlag.
func TestErrorFlag(t *testing.T) {
	dev := gputest.Device(t)
	for _, tc := range []struct {
		name      string
		cu, slots *tensor.Tensor
		want      int64
	}{
		{"slot beyond pool", i32s(0, 3, 8), i32s(1, 9), 1},
		{"cu_seqlens short of T", i32s(0, 3, 7), i32s(1, 2), 2},
		{"cu_seqlens beyond T", i32s(0, 3, 9), i32s(1, 2), 2},
		// The slot search never lands on sequence 1; sequence 2 rewrites rows
		// of sequence 0.
		{"cu_seqlens decreasing", i32s(0, 8, 3, 8), i32s(1, 2, 3), 2},
		{"valid", i32s(0, 3, 8), i32s(1, 2), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := fwdBase.Build(rand.New(rand.NewPCG(1, 2)), conv1dtest.NormalFill(rand.New(rand.NewPCG(3, 4))))
			call := func(toDev func(*tensor.Tensor) *tensor.Tensor, o conv1d.Options) error {
				v := conv1d.Varlen{CuSeqlens: toDev(tc.cu), CacheIndices: toDev(tc.slots), ConvStates: toDev(b.Named("conv_states"))}
				return conv1d.Forward(nil, toDev(b.Named("y")), toDev(b.Named("x")), toDev(b.Named("w")), nil, v, o)
			}
			if got := flagAfter(t, dev, call); got != tc.want {
				t.Errorf("flag %d, want %d", got, tc.want)
			}
		})
	}
}

// TestErrorFlagModes: with AssumeValidIndices, an accepted count outside
// [1, L] or a negative cache seqlen skips the sequence and sets bit 4.
func TestErrorFlagModes(t *testing.T) {
	dev := gputest.Device(t)
	for _, tc := range []struct {
		name     string
		accepted bool
		vals     *tensor.Tensor
		want     int64
	}{
		{"accepted 0", true, i32s(1, 0, 2), 4},
		{"accepted beyond L", true, i32s(1, 3, 2), 4},
		{"accepted valid", true, i32s(1, 2, 2), 0},
		{"seqlen negative", false, i32s(5, -3, 0), 4},
		{"seqlen valid", false, i32s(5, 1<<30, 0), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := specBase.Build(rand.New(rand.NewPCG(1, 2)), conv1dtest.NormalFill(rand.New(rand.NewPCG(3, 4))))
			call := func(toDev func(*tensor.Tensor) *tensor.Tensor, o conv1d.Options) error {
				st := conv1d.Decode{ConvStates: toDev(b.Named("conv_states")), StateIndices: toDev(b.Named("cache_indices"))}
				if tc.accepted {
					st.NumAcceptedTokens = toDev(tc.vals)
				} else {
					st.CacheSeqlens = toDev(tc.vals)
				}
				return conv1d.Update(nil, toDev(b.Named("y")), toDev(b.Named("x")), toDev(b.Named("w")), nil, st, o)
			}
			if got := flagAfter(t, dev, call); got != tc.want {
				t.Errorf("flag %d, want %d", got, tc.want)
			}
		})
	}
}

// TestCaptureNeedsAssumedIndices: the host check of device index tensors
// cannot be captured in a CUDA graph, so capturing Forward or Update
// without AssumeValidIndices is an error on the first index tensor it
// would read; with it, both capture, and capturing writes nothing.
func TestCaptureNeedsAssumedIndices(t *testing.T) {
	dev := gputest.Device(t)
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	for _, tc := range []struct {
		op   string
		base conv1dtest.Case
		arg  string
		call func(d func(string) *tensor.Tensor, o conv1d.Options) error
	}{
		{"Forward", fwdBase, "CuSeqlens", func(d func(string) *tensor.Tensor, o conv1d.Options) error {
			v := conv1d.Varlen{CuSeqlens: d("cu_seqlens"), CacheIndices: d("cache_indices"), ConvStates: d("conv_states")}
			return conv1d.Forward(s, d("y"), d("x"), d("w"), nil, v, o)
		}},
		{"Update", specBase, "StateIndices", func(d func(string) *tensor.Tensor, o conv1d.Options) error {
			st := conv1d.Decode{ConvStates: d("conv_states"), StateIndices: d("cache_indices")}
			return conv1d.Update(s, d("y"), d("x"), d("w"), nil, st, o)
		}},
	} {
		b := tc.base.Build(rand.New(rand.NewPCG(1, 2)), conv1dtest.NormalFill(rand.New(rand.NewPCG(3, 4))))
		devs := map[string]*tensor.Tensor{} // made before capturing, which cannot allocate
		for i, name := range b.Names {
			h, err := b.Tensors[i].ToDevice(dev)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Free() })
			devs[name] = h
		}
		d := func(name string) *tensor.Tensor { return devs[name] }
		for _, assume := range []bool{false, true} {
			g, err := s.Capture(cuda.CaptureGlobal, func() error { return tc.call(d, conv1d.Options{AssumeValidIndices: assume}) })
			if !assume {
				var ae *tensor.ArgError
				if !errors.As(err, &ae) || ae.Arg != tc.arg || !strings.Contains(ae.Msg, "AssumeValidIndices") {
					t.Errorf("%v without AssumeValidIndices: got %v, want an error on %s", tc.op, err, tc.arg)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%v with AssumeValidIndices: %v", tc.op, err)
			}
			g.Destroy()
		}
		for name, h := range devs {
			if back, _ := h.ToHost(); !bytes.Equal(back.Bytes(), b.Named(name).Bytes()) {
				t.Errorf("%v: capturing changed %s", tc.op, name)
			}
		}
	}
}
