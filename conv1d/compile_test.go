package conv1d

import (
	"strings"
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/jit"
)

// TestKernelsCompile compiles, with NVRTC alone, the specializations the
// picker yields on an H200 for prefill (larger and smaller than L2), single-
// and multi-token decode and in-place decode (decode in each state mode),
// in every dtype, width and activation, with the evict-last copies that
// L2EvictLast allows: Prepare's among them (see
// gputest.CompileAll). The prefill ring's bulk copies need an NVRTC of
// version 12 or newer (sm_90a).
func TestKernelsCompile(t *testing.T) {
	gputest.CompileAll(t, pickedKernels(cuda.Props{Major: 9, SMs: 132, L2Bytes: 60 << 20, L2EvictLast: true}))
}

// TestKernelsCompilePreHopper compiles what the picker yields on an A100
// (no bulk-copy ring there) for sm_80.
func TestKernelsCompilePreHopper(t *testing.T) {
	gputest.CompileAllFor(t, "sm_80", pickedKernels(cuda.Props{Major: 8, SMs: 108, L2Bytes: 40 << 20}))
}

// pickedKernels lists the specializations the picker yields on props for
// Prepare's shapes and a few more: in-place decode, two- and six-token
// decode, and an odd channel count.
func pickedKernels(props cuda.Props) []jit.Kernel {
	shapes := append([]shape{
		{dim: 8192, tokens: 256, seqs: 256, seqLen: 1, inPlace: true},
		{dim: 8192, tokens: 512, seqs: 256, seqLen: 2},
		{dim: 8192, tokens: 1536, seqs: 256, seqLen: 6},
		{dim: 37, tokens: 100, seqs: 2},
	}, preparedShapes...)
	var ks []jit.Kernel
	for _, k := range pickedKeys(props, shapes, []int{2, 3, 4}, []bool{false, true}) {
		ks = append(ks, k.kernel())
	}
	return ks
}

// TestPrepareNilDevice: a nil device is an error naming dev, not a panic.
func TestPrepareNilDevice(t *testing.T) {
	if err := Prepare(nil); err == nil || !strings.Contains(err.Error(), "argument dev: is nil") {
		t.Errorf("Prepare(nil) = %v, want an error naming dev", err)
	}
}

// TestPrepare compiles Prepare's kernels on the GPU.
func TestPrepare(t *testing.T) {
	if err := Prepare(gputest.Device(t)); err != nil {
		t.Fatal(err)
	}
}
