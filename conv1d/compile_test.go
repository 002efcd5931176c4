package conv1d

import (
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

// TestKernelsCompile compiles, with NVRTC alone, the specializations the
// picker yields on an H200 for prefill (larger and smaller than L2), single-
// and multi-token decode and in-place decode (decode in each state mode),
// in every dtype, width and activation (see gputest.CompileAll). The
// prefill ring's bulk copies need an NVRTC of version 12 or newer (sm_90a).
func TestKernelsCompile(t *testing.T) {
	gputest.CompileAll(t, pickedKernels(cuda.Props{Major: 9, SMs: 132, L2Bytes: 60 << 20}))
}

// TestKernelsCompilePreHopper compiles what the picker yields on an A100
// (no bulk-copy ring there) for sm_80.
func TestKernelsCompilePreHopper(t *testing.T) {
	gputest.CompileAllFor(t, "sm_80", pickedKernels(cuda.Props{Major: 8, SMs: 108, L2Bytes: 40 << 20}))
}

// pickedKernels lists the specializations the picker yields on props for
// the shapes TestKernelsCompile names.
func pickedKernels(props cuda.Props) []jit.Kernel {
	specs := map[kernelSpec]bool{}
	var kernels []jit.Kernel
	for _, dt := range []tensor.DType{bf16, f16, f32} {
		for width := MinWidth; width <= MaxWidth; width++ {
			for _, sh := range []shape{
				{dim: 8192, tokens: 4096, seqs: 1},
				{dim: 8192, tokens: 1024, seqs: 1}, // the ring without the L2 evict-last copies: x and y fit L2
				{dim: 8192, tokens: 256, seqs: 256, seqLen: 1},
				{dim: 8192, tokens: 256, seqs: 256, seqLen: 1, inPlace: true},
				{dim: 8192, tokens: 512, seqs: 256, seqLen: 2},
				{dim: 8192, tokens: 1024, seqs: 256, seqLen: 4},
				{dim: 8192, tokens: 1536, seqs: 256, seqLen: 6},
				{dim: 37, tokens: 100, seqs: 2},
			} {
				sh.elemSize = dt.Size()
				sh.maxVec = maxVecBytes / dt.Size()
				if sh.dim%2 != 0 {
					sh.maxVec = 1
				}
				modes := []int{modeShift}
				if sh.seqLen > 0 {
					modes = append(modes, modeSpec, modeCircular)
				}
				for _, silu := range []bool{false, true} {
					for _, mode := range modes {
						sp := pickConfig(props, sh).spec(dt, width, silu, mode)
						if !specs[sp] {
							specs[sp] = true
							kernels = append(kernels, sp.kernel())
						}
					}
				}
			}
		}
	}
	return kernels
}
