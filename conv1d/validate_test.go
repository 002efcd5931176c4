package conv1d

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/tensor"
)

// named returns the built tensor called name, or nil.
func (b *built) named(name string) *tensor.Tensor {
	for i, n := range b.names {
		if n == name {
			return b.ts[i]
		}
	}
	return nil
}

func i32s(v ...int64) *tensor.Tensor {
	t := tensor.New(tensor.I32, len(v))
	t.SetInt64s(v)
	return t
}

var (
	fwdBase  = testCase{op: opForward, dt: bf16, width: 4, dim: 16, lens: []int{3, 5}, nSlots: 4, initShare: 0.5, silu: true}
	updBase  = testCase{op: opUpdate, dt: bf16, width: 4, dim: 16, batch: 3, nSlots: 4, silu: true}
	specBase = testCase{op: opUpdate, dt: bf16, width: 4, dim: 16, batch: 3, seqLen: 2, nSlots: 4, stateLen: 4, silu: true}
	splBase  = testCase{op: opForwardSplit, dt: bf16, width: 3, keyDim: 4, valueDim: 8, lens: []int{2, 6}, nSlots: 2}
)

// TestValidation feeds each op one bad argument at a time and checks that it
// is reported by name and that nothing was written.
func TestValidation(t *testing.T) {
	fwd := func(b *built, mod func(y, x, w, bias *tensor.Tensor, v *Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor)) error {
		v := Varlen{CuSeqlens: b.named("cu_seqlens"), CacheIndices: b.named("cache_indices"),
			HasInitialState: b.named("has_initial_state"), ConvStates: b.named("conv_states")}
		y, x, w, bias := mod(b.named("y"), b.named("x"), b.named("w"), b.named("bias"), &v)
		return Forward(nil, y, x, w, bias, v, Options{SiLU: true})
	}
	upd := func(b *built, out, x, w, states, idx *tensor.Tensor) error {
		pick := func(t *tensor.Tensor, name string) *tensor.Tensor {
			if t != nil {
				return t
			}
			return b.named(name)
		}
		return Update(nil, pick(out, "y"), pick(x, "x"), pick(w, "w"), b.named("bias"),
			Decode{ConvStates: pick(states, "conv_states"), StateIndices: pick(idx, "cache_indices")}, Options{})
	}
	// mode runs Update on b with st's mode tensors and, if set, its pool.
	mode := func(b *built, st Decode) error {
		if st.ConvStates == nil {
			st.ConvStates = b.named("conv_states")
		}
		st.StateIndices = b.named("cache_indices")
		return Update(nil, b.named("y"), b.named("x"), b.named("w"), b.named("bias"), st, Options{})
	}
	for _, tc := range []struct {
		name string
		base testCase
		call func(b *built) error
		want string
	}{
		{"x rank", fwdBase, func(b *built) error {
			return fwd(b, func(y, x, w, bias *tensor.Tensor, _ *Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				return y, tensor.New(bf16, 1, 8, 16), w, bias
			})
		}, "argument x: has rank 3"},
		{"y shape", fwdBase, func(b *built) error {
			return fwd(b, func(_, x, w, bias *tensor.Tensor, _ *Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				return tensor.New(bf16, 8, 15), x, w, bias
			})
		}, "argument y: has shape [8 15]"},
		{"w channels", fwdBase, func(b *built) error {
			return fwd(b, func(y, x, _, bias *tensor.Tensor, _ *Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				return y, x, tensor.New(bf16, 15, 4), bias
			})
		}, "argument w: has shape [15 4]"},
		{"w dtype", fwdBase, func(b *built) error {
			return fwd(b, func(y, x, _, bias *tensor.Tensor, _ *Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				return y, x, tensor.New(f16, 16, 4), bias
			})
		}, "argument w: has dtype f16"},
		{"x dtype", fwdBase, func(b *built) error {
			return fwd(b, func(y, _, w, bias *tensor.Tensor, _ *Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				return y, tensor.New(tensor.I32, 8, 16), w, bias
			})
		}, "argument x: has dtype i32"},
		{"width 1", fwdBase, func(b *built) error {
			return fwd(b, func(y, x, _, bias *tensor.Tensor, _ *Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				return y, x, tensor.New(bf16, 16, 1), bias
			})
		}, "width W = 1"},
		{"width 5", fwdBase, func(b *built) error {
			return fwd(b, func(y, x, _, bias *tensor.Tensor, _ *Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				return y, x, tensor.New(bf16, 16, 5), bias
			})
		}, "width W = 5"},
		{"bias shape", fwdBase, func(b *built) error {
			return fwd(b, func(y, x, w, _ *tensor.Tensor, _ *Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				return y, x, w, tensor.New(bf16, 17)
			})
		}, "argument bias: has shape [17]"},
		{"state_len below W-1", fwdBase, func(b *built) error {
			return fwd(b, func(y, x, w, bias *tensor.Tensor, v *Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				v.ConvStates = tensor.New(bf16, 4, 2, 16)
				return y, x, w, bias
			})
		}, "argument ConvStates: has shape [4 2 16]"},
		{"cu_seqlens dtype", fwdBase, func(b *built) error {
			return fwd(b, func(y, x, w, bias *tensor.Tensor, v *Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				v.CuSeqlens = tensor.New(tensor.I64, 3)
				return y, x, w, bias
			})
		}, "argument CuSeqlens: has dtype i64"},
		{"cu_seqlens end != T", fwdBase, func(b *built) error {
			return fwd(b, func(y, x, w, bias *tensor.Tensor, v *Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				v.CuSeqlens = i32s(0, 3, 7)
				return y, x, w, bias
			})
		}, "ends at 7 but x has T = 8"},
		{"cu_seqlens decreasing", fwdBase, func(b *built) error {
			return fwd(b, func(y, x, w, bias *tensor.Tensor, v *Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				v.CuSeqlens = i32s(0, 9, 8)
				return y, x, w, bias
			})
		}, "decreases at entry 2"},
		{"cu_seqlens start", fwdBase, func(b *built) error {
			return fwd(b, func(y, x, w, bias *tensor.Tensor, v *Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				v.CuSeqlens = i32s(1, 3, 8)
				return y, x, w, bias
			})
		}, "starts at 1"},
		{"cache index beyond pool", fwdBase, func(b *built) error {
			return fwd(b, func(y, x, w, bias *tensor.Tensor, v *Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				v.CacheIndices = i32s(1, 4)
				return y, x, w, bias
			})
		}, "argument CacheIndices: entry 1 is slot 4, beyond the pool of 4 slots"},
		{"cache index shared", fwdBase, func(b *built) error {
			return fwd(b, func(y, x, w, bias *tensor.Tensor, v *Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				v.CacheIndices = i32s(2, 2)
				return y, x, w, bias
			})
		}, "slot 2 is used by sequences 0 and 1"},
		{"initial state without pool", fwdBase, func(b *built) error {
			return fwd(b, func(y, x, w, bias *tensor.Tensor, v *Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				v.ConvStates, v.CacheIndices = nil, nil
				return y, x, w, bias
			})
		}, "argument HasInitialState: is set but ConvStates is nil"},
		{"y overlaps x", fwdBase, func(b *built) error {
			return fwd(b, func(_, x, w, bias *tensor.Tensor, _ *Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				return x, x, w, bias
			})
		}, "argument y: overlaps x"},
		{"error flag dtype", fwdBase, func(b *built) error {
			v := Varlen{CuSeqlens: b.named("cu_seqlens")}
			return Forward(nil, b.named("y"), b.named("x"), b.named("w"), nil, v, Options{ErrorFlag: tensor.New(f32, 1)})
		}, "argument ErrorFlag: has dtype f32"},
		{"update state index beyond pool", updBase, func(b *built) error {
			return upd(b, nil, nil, nil, nil, i32s(0, -1, 7))
		}, "argument StateIndices: entry 2 is slot 7"},
		{"update pool dim", updBase, func(b *built) error {
			return upd(b, nil, nil, nil, tensor.New(bf16, 4, 3, 8), nil)
		}, "argument ConvStates: has shape [4 3 8]"},
		{"update out rank", updBase, func(b *built) error {
			return upd(b, tensor.New(bf16, 3, 1, 16), nil, nil, nil, nil)
		}, "argument out: has shape [3 1 16], want [3 16]"},
		{"update pool too small without indices", updBase, func(b *built) error {
			return Update(nil, b.named("y"), b.named("x"), b.named("w"), nil, Decode{ConvStates: tensor.New(bf16, 2, 3, 16)}, Options{})
		}, "has 2 slots for 3 sequences"},
		{"accepted dtype", specBase, func(b *built) error {
			return mode(b, Decode{NumAcceptedTokens: tensor.New(tensor.I64, 3)})
		}, "argument NumAcceptedTokens: has dtype i64"},
		{"accepted shape", specBase, func(b *built) error {
			return mode(b, Decode{NumAcceptedTokens: i32s(1, 1)})
		}, "argument NumAcceptedTokens: has shape [2], want [3]"},
		{"accepted 0", specBase, func(b *built) error {
			return mode(b, Decode{NumAcceptedTokens: i32s(1, 0, 2)})
		}, "argument NumAcceptedTokens: entry 1 is 0, want 1 ≤ accepted ≤ L = 2"},
		{"accepted beyond L", specBase, func(b *built) error {
			return mode(b, Decode{NumAcceptedTokens: i32s(1, 2, 3)})
		}, "argument NumAcceptedTokens: entry 2 is 3, want 1 ≤ accepted ≤ L = 2"},
		{"spec state_len too small", specBase, func(b *built) error {
			return mode(b, Decode{ConvStates: tensor.New(bf16, 4, 3, 16), NumAcceptedTokens: i32s(1, 1, 1)})
		}, "has state_len 3; with NumAcceptedTokens it needs at least W−2+L = 4 columns"},
		{"cache seqlens dtype", specBase, func(b *built) error {
			return mode(b, Decode{CacheSeqlens: tensor.New(f32, 3)})
		}, "argument CacheSeqlens: has dtype f32"},
		{"cache seqlens shape", specBase, func(b *built) error {
			return mode(b, Decode{CacheSeqlens: tensor.New(tensor.I32, 3, 1)})
		}, "argument CacheSeqlens: has shape [3 1], want [3]"},
		{"cache seqlens negative", specBase, func(b *built) error {
			return mode(b, Decode{CacheSeqlens: i32s(0, 7, -1)})
		}, "argument CacheSeqlens: entry 2 is -1, want ≥ 0"},
		{"both modes", specBase, func(b *built) error {
			return mode(b, Decode{NumAcceptedTokens: i32s(1, 1, 1), CacheSeqlens: i32s(0, 0, 0)})
		}, "argument CacheSeqlens: is set together with NumAcceptedTokens"},
		{"update batch stride", testCase{op: opUpdate, dt: bf16, width: 2, dim: 8, batch: 2, seqLen: 2, nSlots: 2}, func(b *built) error {
			x, _ := tensor.NewStrided(bf16, []int{2, 2, 8}, []int{20, 8, 1})
			return upd(b, nil, x, nil, nil, nil)
		}, "the batch stride must be L × the token stride"},
		{"split key_dim", splBase, func(b *built) error {
			v := Varlen{CuSeqlens: b.named("cu_seqlens")}
			return ForwardSplit(nil, tensor.New(bf16, 8, 8), b.named("k"), b.named("v"), b.named("x"), b.named("w"), nil, v, Options{})
		}, "has key_dim 8"},
		{"split q rank 0", splBase, func(b *built) error {
			v := Varlen{CuSeqlens: b.named("cu_seqlens")}
			return ForwardSplit(nil, tensor.New(bf16), b.named("k"), b.named("v"), b.named("x"), b.named("w"), nil, v, Options{})
		}, "argument q: has rank 0"},
		{"update split q rank 0", testCase{op: opUpdateSplit, dt: bf16, width: 3, keyDim: 4, valueDim: 8, batch: 2, nSlots: 2}, func(b *built) error {
			return UpdateSplit(nil, tensor.New(bf16), b.named("k"), b.named("v"), b.named("x"), b.named("w"), nil,
				Decode{ConvStates: b.named("conv_states")}, Options{})
		}, "argument q: has rank 0"},
		{"split v shape", splBase, func(b *built) error {
			v := Varlen{CuSeqlens: b.named("cu_seqlens")}
			return ForwardSplit(nil, b.named("q"), b.named("k"), tensor.New(bf16, 8, 7), b.named("x"), b.named("w"), nil, v, Options{})
		}, "argument v: has shape [8 7], want [8 8]"},
		{"dense final states shape", testCase{op: opDense, dt: bf16, width: 4, dim: 8, batch: 2, seqLen: 3}, func(b *built) error {
			return ForwardDense(nil, b.named("y"), b.named("x"), b.named("w"), nil, tensor.New(bf16, 2, 3, 8), tensor.New(bf16, 2, 4, 8), Options{})
		}, "argument finalStates: has shape [2 4 8], want [2 3 8]"},
		{"dense states shorter than W-1", testCase{op: opDense, dt: bf16, width: 4, dim: 8, batch: 2, seqLen: 3}, func(b *built) error {
			return ForwardDense(nil, b.named("y"), b.named("x"), b.named("w"), nil, tensor.New(bf16, 2, 2, 8), nil, Options{})
		}, "argument initialStates: has shape [2 2 8], want [2, state_len ≥ W−1 = 3, 8]"},
		// A single state column leaves its stride free: no storage is needed
		// for one beyond int32.
		{"dense initial states column stride", testCase{op: opDense, dt: bf16, width: 2, dim: 8, batch: 1, seqLen: 3}, func(b *built) error {
			st, err := tensor.NewStrided(bf16, []int{1, 1, 8}, []int{1 << 31, 1 << 31, 1})
			if err != nil {
				return err
			}
			return ForwardDense(nil, b.named("y"), b.named("x"), b.named("w"), nil, st, nil, Options{})
		}, "argument initialStates: has shape [1 1 8] and strides [2147483648 2147483648 1], beyond int32"},
		{"dense final states column stride", testCase{op: opDense, dt: bf16, width: 2, dim: 8, batch: 1, seqLen: 3}, func(b *built) error {
			st, err := tensor.NewStrided(bf16, []int{1, 1, 8}, []int{1 << 31, 1 << 31, 1})
			if err != nil {
				return err
			}
			return ForwardDense(nil, b.named("y"), b.named("x"), b.named("w"), nil, nil, st, Options{})
		}, "argument finalStates: has shape [1 1 8] and strides [2147483648 2147483648 1], beyond int32"},
		{"update pool past the row limit", testCase{op: opUpdate, dt: bf16, width: 2, dim: 1, batch: 1, nSlots: 1}, func(b *built) error {
			return upd(b, nil, nil, nil, tensor.New(bf16, 1, maxStateLen+1, 1), nil)
		}, fmt.Sprintf("argument ConvStates: has state_len %d, past the kernel's limit of %d", maxStateLen+1, maxStateLen)},
		{"varlen past the sequence limit", fwdBase, func(b *built) error {
			return fwd(b, func(y, x, w, bias *tensor.Tensor, v *Varlen) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
				v.CuSeqlens = tensor.New(tensor.I32, maxSeqs+2)
				return y, x, w, bias
			})
		}, fmt.Sprintf("argument CuSeqlens: has %d sequences, past the kernel's limit of %d", maxSeqs+1, maxSeqs)},
		{"update pool column stride", testCase{op: opUpdate, dt: bf16, width: 2, dim: 8, batch: 1, nSlots: 1}, func(b *built) error {
			st, err := tensor.NewStrided(bf16, []int{1, 1, 8}, []int{1 << 31, 1 << 31, 1})
			if err != nil {
				return err
			}
			return upd(b, nil, nil, nil, st, nil)
		}, "argument ConvStates: has shape [1 1 8] and strides [2147483648 2147483648 1], beyond int32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.base.build(rand.New(rand.NewPCG(1, 2)), normalFill(rand.New(rand.NewPCG(3, 4))))
			before := make([][]byte, len(b.ts))
			for i, x := range b.ts {
				before[i] = bytes.Clone(x.Bytes())
			}
			err := tc.call(b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
			t.Log(err)
			for i, x := range b.ts {
				if !bytes.Equal(before[i], x.Bytes()) {
					t.Errorf("%s was written", b.names[i])
				}
			}
		})
	}
}

// TestMixedLocations needs a device: host y with device x must fail.
func TestMixedLocations(t *testing.T) {
	dev := gputest.Device(t)
	b := fwdBase.build(rand.New(rand.NewPCG(1, 2)), normalFill(rand.New(rand.NewPCG(3, 4))))
	x, err := b.named("x").ToDevice(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Free()
	v := Varlen{CuSeqlens: b.named("cu_seqlens")}
	err = Forward(nil, b.named("y"), x, b.named("w"), nil, v, Options{})
	if err == nil || !strings.Contains(err.Error(), "is on the host but x is on device") {
		t.Fatalf("got %v, want a location error", err)
	}
}

// flagAfter runs call with a function that copies host tensors to dev (all
// freed when the test ends) and Options that assume valid indices and carry
// an error flag, and returns the flag the kernel left.
func flagAfter(t *testing.T, dev *cuda.Device, call func(toDev func(*tensor.Tensor) *tensor.Tensor, o Options) error) int64 {
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
	if err := call(toDev, Options{AssumeValidIndices: true, ErrorFlag: flag}); err != nil {
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
			b := fwdBase.build(rand.New(rand.NewPCG(1, 2)), normalFill(rand.New(rand.NewPCG(3, 4))))
			call := func(toDev func(*tensor.Tensor) *tensor.Tensor, o Options) error {
				v := Varlen{CuSeqlens: toDev(tc.cu), CacheIndices: toDev(tc.slots), ConvStates: toDev(b.named("conv_states"))}
				return Forward(nil, toDev(b.named("y")), toDev(b.named("x")), toDev(b.named("w")), nil, v, o)
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
			b := specBase.build(rand.New(rand.NewPCG(1, 2)), normalFill(rand.New(rand.NewPCG(3, 4))))
			call := func(toDev func(*tensor.Tensor) *tensor.Tensor, o Options) error {
				st := Decode{ConvStates: toDev(b.named("conv_states")), StateIndices: toDev(b.named("cache_indices"))}
				if tc.accepted {
					st.NumAcceptedTokens = toDev(tc.vals)
				} else {
					st.CacheSeqlens = toDev(tc.vals)
				}
				return Update(nil, toDev(b.named("y")), toDev(b.named("x")), toDev(b.named("w")), nil, st, o)
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
		base testCase
		arg  string
		call func(d func(string) *tensor.Tensor, o Options) error
	}{
		{fwdBase, "CuSeqlens", func(d func(string) *tensor.Tensor, o Options) error {
			v := Varlen{CuSeqlens: d("cu_seqlens"), CacheIndices: d("cache_indices"), ConvStates: d("conv_states")}
			return Forward(s, d("y"), d("x"), d("w"), nil, v, o)
		}},
		{specBase, "StateIndices", func(d func(string) *tensor.Tensor, o Options) error {
			st := Decode{ConvStates: d("conv_states"), StateIndices: d("cache_indices")}
			return Update(s, d("y"), d("x"), d("w"), nil, st, o)
		}},
	} {
		b := tc.base.build(rand.New(rand.NewPCG(1, 2)), normalFill(rand.New(rand.NewPCG(3, 4))))
		devs := map[string]*tensor.Tensor{} // made before capturing, which cannot allocate
		for i, name := range b.names {
			h, err := b.ts[i].ToDevice(dev)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Free() })
			devs[name] = h
		}
		d := func(name string) *tensor.Tensor { return devs[name] }
		for _, assume := range []bool{false, true} {
			g, err := s.Capture(cuda.CaptureGlobal, func() error { return tc.call(d, Options{AssumeValidIndices: assume}) })
			if !assume {
				var ae *tensor.ArgError
				if !errors.As(err, &ae) || ae.Arg != tc.arg || !strings.Contains(ae.Msg, "AssumeValidIndices") {
					t.Errorf("%v without AssumeValidIndices: got %v, want an error on %s", tc.base.op, err, tc.arg)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%v with AssumeValidIndices: %v", tc.base.op, err)
			}
			g.Destroy()
		}
		for name, h := range devs {
			if back, _ := h.ToHost(); !bytes.Equal(back.Bytes(), b.named(name).Bytes()) {
				t.Errorf("%v: capturing changed %s", tc.base.op, name)
			}
		}
	}
}
