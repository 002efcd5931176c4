package topk_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/tensor"
	"github.com/gokittens/kittens/topk"
	"github.com/gokittens/kittens/topk/topktest"
)

func TestParity(t *testing.T) {
	if dev := gputest.Maybe(t); dev != nil {
		if err := topk.Prepare(dev); err != nil {
			t.Fatal(err)
		}
	}
	gputest.RunChecks(t, topktest.Suite())
}

func BenchmarkTopK(b *testing.B) { gputest.RunBenches(b, topktest.Suite()) }

// TestPrepare: a nil device is an ArgError on dev; with a GPU, Prepare
// compiles its kernels, or before compute capability 9.0 returns the error
// TopK gives for rows that need clusters.
func TestPrepare(t *testing.T) {
	var ae *tensor.ArgError
	if err := topk.Prepare(nil); !errors.As(err, &ae) || ae.Arg != "dev" {
		t.Errorf("Prepare(nil): %v, want an ArgError on dev", err)
	}
	dev := gputest.Maybe(t)
	if dev == nil {
		return
	}
	err := topk.Prepare(dev)
	if dev.Props().Major >= 9 {
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), "compute capability 9.0 or later") {
		t.Fatalf("Prepare on compute capability %d.%d: %v", dev.Props().Major, dev.Props().Minor, err)
	}
	x, err1 := tensor.Empty(dev, tensor.F32, 1, 2048)
	values, err2 := tensor.Empty(dev, tensor.F32, 1, 50)
	indices, err3 := tensor.Empty(dev, tensor.I64, 1, 50)
	defer x.Free()
	defer values.Free()
	defer indices.Free()
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	if opErr := topk.TopK(nil, values, indices, x, 50); opErr == nil || opErr.Error() != err.Error() {
		t.Errorf("TopK on a radix row: %v; Prepare: %v", opErr, err)
	}
}

// TestStreamOfAnotherDevice: a stream of another device than the tensors'
// is an ArgError on s, before anything runs (GPU).
func TestStreamOfAnotherDevice(t *testing.T) {
	dev := gputest.Device(t)
	other := (&cuda.Device{Ordinal: dev.Ordinal + 1}).DefaultStream()
	x, err1 := tensor.Empty(dev, tensor.F32, 4, 16)
	values, err2 := tensor.Empty(dev, tensor.F32, 4, 3)
	indices, err3 := tensor.Empty(dev, tensor.I32, 4, 3)
	defer x.Free()
	defer values.Free()
	defer indices.Free()
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	var ae *tensor.ArgError
	if err := topk.TopK(other, values, indices, x, 3); !errors.As(err, &ae) || ae.Arg != "s" {
		t.Errorf("TopK on a stream of device %d: %v, want an ArgError on s", dev.Ordinal+1, err)
	}
}
