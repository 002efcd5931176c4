package softmax

import (
	"testing"

	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

// TestKernelsCompile compiles, with NVRTC alone, the specializations the
// picker yields on an H200 for the benchmark shapes, as withRows and
// oneUnitEach specialize the lane-group ones, and the bulk variants (see
// gputest.CompileAll; the cluster and bulk-copy kernels need NVRTC 12 or
// later).
func TestKernelsCompile(t *testing.T) {
	specs := map[spec]bool{}
	for _, b := range benchShapes {
		specs[pickConfig(h200, b.M, b.N, b.DType, 16/b.DType.Size()).spec] = true
		c := pickRegister(h200, b.M, b.N, b.DType, 16/b.DType.Size())
		specs[c.spec] = true
		n := int64(b.N)
		r := c.withRows(b.M, b.N, n, n) // contiguous rows
		specs[r.spec] = true
		r.Once = r.oneUnitEach(b.M) // one unit a block, as the picker's grid gives it
		specs[r.spec] = true
		specs[c.withRows(b.M+1, b.N, n, n).spec] = true // a row past the last
	}
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
		specs[bulkConfig(h200, 16, 1<<16, dt, 8, 2, 0, 256, 1).spec] = true
	}
	var ks []jit.Kernel
	for sp := range specs {
		ks = append(ks, kernels.Kernel(sp))
	}
	gputest.CompileAll(t, ks)
}

// TestKernelsCompilePreHopper compiles what the pickers yield for the
// benchmark shapes on a small pre-Hopper GPU (no clusters, no bulk copies)
// for sm_86: the cluster merges these kernels hold, which such a GPU never
// takes, must still compile there.
func TestKernelsCompilePreHopper(t *testing.T) {
	specs := map[spec]bool{}
	for _, b := range benchShapes {
		specs[pickConfig(small, b.M, b.N, b.DType, 16/b.DType.Size()).spec] = true
		specs[pickRegister(small, b.M, b.N, b.DType, 16/b.DType.Size()).spec] = true
	}
	var ks []jit.Kernel
	for sp := range specs {
		ks = append(ks, kernels.Kernel(sp))
	}
	gputest.CompileAllFor(t, "sm_86", ks)
}
