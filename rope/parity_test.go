package rope_test

import (
	"errors"
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/rope"
	"github.com/gokittens/kittens/rope/ropetest"
	"github.com/gokittens/kittens/tensor"
)

func TestParity(t *testing.T) {
	if dev := gputest.Maybe(t); dev != nil {
		if err := rope.Prepare(dev); err != nil {
			t.Fatal(err)
		}
	}
	gputest.RunChecks(t, ropetest.Suite())
}

func BenchmarkRope(b *testing.B) { gputest.RunBenches(b, ropetest.Suite()) }

// TestPrepare: a nil device is an ArgError on dev; with a GPU, Prepare
// compiles its kernels.
func TestPrepare(t *testing.T) {
	var ae *tensor.ArgError
	if err := rope.Prepare(nil); !errors.As(err, &ae) || ae.Arg != "dev" {
		t.Errorf("Prepare(nil): %v, want an ArgError on dev", err)
	}
	if dev := gputest.Maybe(t); dev != nil {
		if err := rope.Prepare(dev); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStreamOfAnotherDevice: a stream of another device than the tensors'
// is an ArgError on s, for both ops, before anything runs (GPU).
func TestStreamOfAnotherDevice(t *testing.T) {
	dev := gputest.Device(t)
	other := (&cuda.Device{Ordinal: dev.Ordinal + 1}).DefaultStream()
	var ts []*tensor.Tensor
	for _, shape := range [][]int{{2, 4, 8}, {2}, {16, 8}, {1, 4, 2, 8}, {1, 4, 2, 8}, {2, 4}} {
		dt := tensor.F32
		if len(shape) == 1 {
			dt = tensor.I64
		}
		x, err := tensor.Empty(dev, dt, shape...)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Free()
		ts = append(ts, x)
	}
	o := rope.Options{TrustPositions: true}
	for name, err := range map[string]error{
		"RotateQK": rope.RotateQK(other, ts[0], nil, ts[1], ts[2], o),
		"Rope":     rope.Rope(other, ts[3], ts[4], ts[5], ts[5], o),
	} {
		var ae *tensor.ArgError
		if !errors.As(err, &ae) || ae.Arg != "s" {
			t.Errorf("%s on a stream of device %d: %v, want an ArgError on s", name, dev.Ordinal+1, err)
		}
	}
}
