package conv1d

import (
	"bytes"
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/tensor"
)

func TestParity(t *testing.T) { gputest.RunChecks(t, "conv1d") }

// TestParityEvictLast runs the parity cases with the L2 evict-last bulk
// copies on every ring, which the picker keeps for calls larger than L2.
func TestParityEvictLast(t *testing.T) {
	gputest.Device(t)
	defer func() { tune = nil }()
	tune = func(_ shape, c config) config {
		c.evictLast = c.ring > 0
		return c
	}
	gputest.RunChecks(t, "conv1d")
}

// TestParityWide runs the parity cases of the register path (decode among
// them, in every state mode and in place) with 16 bytes a thread under the
// register cap the picker gives them, which it picks only for single-token
// decode over a deep grid, larger than any parity case.
func TestParityWide(t *testing.T) {
	gputest.Device(t)
	defer func() { tune = nil }()
	tune = func(sh shape, c config) config {
		if c.ring == 0 {
			c.vec, c.minBlocks = min(sh.maxVec, maxVecBytes/sh.elemSize), wideDecodeMinBlocks
		}
		return c
	}
	gputest.RunChecks(t, "conv1d")
}

func BenchmarkConv1d(b *testing.B) { gputest.RunBenches(b, "conv1d") }

// TestSplitIntoOneBuffer runs ForwardSplit with q, k and v as column slices
// of one [tokens, dim] buffer, the packed layout a caller may keep (the
// slices interleave row by row without sharing an element), on the host and,
// where there is a GPU, on the device. The buffer must hold exactly what
// Forward writes to a plain output there, and the two leave the same states.
// The slices start 12 and 24 bytes into a row, which keeps the kernel to
// narrow accesses.
func TestSplitIntoOneBuffer(t *testing.T) {
	c := testCase{op: opForward, dt: bf16, width: 4, dim: 20, lens: []int{3, 9}, nSlots: 2, initShare: 0.5, silu: true}
	rng := tensor.SeededRNG(8)
	b := c.build(rng, normalFill(rng))
	devs := []*cuda.Device{nil}
	if d := gputest.Maybe(t); d != nil {
		devs = append(devs, d)
	}
	for _, dev := range devs {
		// at returns a copy of host tensor h where this pass runs.
		at := func(h *tensor.Tensor) *tensor.Tensor {
			var r *tensor.Tensor
			var err error
			if dev == nil {
				if r, err = tensor.NewStrided(h.DType(), h.Shape(), h.Strides()); err == nil {
					err = r.CopyFrom(h)
				}
			} else if r, err = h.ToDevice(dev); err == nil {
				t.Cleanup(func() { r.Free() })
			}
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		x, w, bias := at(b.named("x")), at(b.named("w")), at(b.named("bias"))
		seqs := Varlen{CuSeqlens: at(b.named("cu_seqlens")), HasInitialState: at(b.named("has_initial_state"))}
		outs := make([]*tensor.Tensor, 2)
		pools := make([]*tensor.Tensor, 2)
		for i := range outs {
			outs[i], pools[i] = at(tensor.New(bf16, 12, 20)), at(b.named("conv_states"))
			if err := outs[i].Poison(); err != nil {
				t.Fatal(err)
			}
		}
		seqs.ConvStates = pools[0]
		if err := Forward(nil, outs[0], x, w, bias, seqs, Options{SiLU: true}); err != nil {
			t.Fatal(err)
		}
		q, _ := outs[1].Slice(1, 0, 6)
		k, _ := outs[1].Slice(1, 6, 12)
		v, _ := outs[1].Slice(1, 12, 20)
		seqs.ConvStates = pools[1]
		if err := ForwardSplit(nil, q, k, v, x, w, bias, seqs, Options{SiLU: true}); err != nil {
			t.Fatalf("device %v: %v", dev != nil, err)
		}
		var got [4][]byte
		for i, r := range []*tensor.Tensor{outs[0], outs[1], pools[0], pools[1]} {
			if dev != nil {
				var err error
				if r, err = r.ToHost(); err != nil {
					t.Fatal(err)
				}
			}
			got[i] = r.Bytes()
		}
		if !bytes.Equal(got[0], got[1]) || !bytes.Equal(got[2], got[3]) {
			t.Errorf("device %v: the split into one buffer differs from the plain form (outputs equal %v, states equal %v)",
				dev != nil, bytes.Equal(got[0], got[1]), bytes.Equal(got[2], got[3]))
		}
	}
}
