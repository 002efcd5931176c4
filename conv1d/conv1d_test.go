package conv1d_test

import (
	"bytes"
	"testing"

	"github.com/gokittens/kittens/conv1d"
	"github.com/gokittens/kittens/conv1d/conv1dtest"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/tensor"
)

func TestParity(t *testing.T) { gputest.RunChecks(t, conv1dtest.Suite()) }

// TestParityEvictLast runs the parity cases with the L2 evict-last bulk
// copies on every ring, which the picker keeps for calls larger than L2.
func TestParityEvictLast(t *testing.T) {
	gputest.Device(t)
	defer conv1d.ForceEvictLast()()
	gputest.RunChecks(t, conv1dtest.Suite())
}

// TestParityWide runs the parity cases of the register path (decode among
// them, in every state mode and in place) with 16 bytes a thread under the
// register cap the picker gives them, which it picks only for single-token
// decode over a deep grid, larger than any parity case.
func TestParityWide(t *testing.T) {
	gputest.Device(t)
	defer conv1d.ForceWide()()
	gputest.RunChecks(t, conv1dtest.Suite())
}

func BenchmarkConv1d(b *testing.B) { gputest.RunBenches(b, conv1dtest.Suite()) }

// TestSplitIntoOneBuffer runs ForwardSplit with q, k and v as column slices
// of one [tokens, dim] buffer, the packed layout a caller may keep (the
// slices interleave row by row without sharing an element), on the host and,
// where there is a GPU, on the device. The buffer must hold exactly what
// Forward writes to a plain output there, and the two leave the same states.
// The slices start 12 and 24 bytes into a row, which keeps the kernel to
// narrow accesses.
func TestSplitIntoOneBuffer(t *testing.T) {
	c := conv1dtest.Case{Op: conv1dtest.OpForward, DType: bf16, Width: 4, Dim: 20, Lens: []int{3, 9}, NSlots: 2, InitShare: 0.5, SiLU: true}
	rng := tensor.SeededRNG(8)
	b := c.Build(rng, conv1dtest.NormalFill(rng))
	plain, packed := tensor.New(bf16, 12, 20), tensor.New(bf16, 12, 20)
	for _, o := range []*tensor.Tensor{plain, packed} {
		if err := o.Poison(); err != nil {
			t.Fatal(err)
		}
	}
	// x, w, bias, cu_seqlens, has_initial_state, two pools, two outputs.
	ts := []*tensor.Tensor{b.Named("x"), b.Named("w"), b.Named("bias"), b.Named("cu_seqlens"), b.Named("has_initial_state"),
		b.Named("conv_states"), b.Named("conv_states"), plain, packed}
	gputest.OnHostAndDevice(t, ts, func(ts []*tensor.Tensor) error {
		seqs := conv1d.Varlen{CuSeqlens: ts[3], HasInitialState: ts[4], ConvStates: ts[5]}
		if err := conv1d.Forward(nil, ts[7], ts[0], ts[1], ts[2], seqs, conv1d.Options{SiLU: true}); err != nil {
			return err
		}
		q, _ := ts[8].Slice(1, 0, 6)
		k, _ := ts[8].Slice(1, 6, 12)
		v, _ := ts[8].Slice(1, 12, 20)
		seqs.ConvStates = ts[6]
		return conv1d.ForwardSplit(nil, q, k, v, ts[0], ts[1], ts[2], seqs, conv1d.Options{SiLU: true})
	}, func(where string, ts []*tensor.Tensor) {
		outs, states := bytes.Equal(ts[7].Bytes(), ts[8].Bytes()), bytes.Equal(ts[5].Bytes(), ts[6].Bytes())
		if !outs || !states {
			t.Errorf("%s: the split into one buffer differs from the plain form (outputs equal %v, states equal %v)",
				where, outs, states)
		}
	})
}
