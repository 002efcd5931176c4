package softmax

import (
	"os"
	"testing"

	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

// TestKernelsCompile compiles, with NVRTC alone (no GPU needed), the
// specializations the picker yields on an H200 for the benchmark shapes and
// the bulk variants, for the architecture named by KITTENS_NVRTC_ARCH (e.g.
// sm_90a; sm_90 for an older NVRTC, though the cluster and bulk-copy kernels
// need NVRTC 12 or later). Skipped when the variable is unset: it is a
// development check that finds compile errors before a GPU run.
func TestKernelsCompile(t *testing.T) {
	arch := os.Getenv("KITTENS_NVRTC_ARCH")
	if arch == "" {
		t.Skip("set KITTENS_NVRTC_ARCH (e.g. sm_90a) to compile the kernels with NVRTC")
	}
	specs := map[spec]bool{}
	for _, b := range benchShapes {
		specs[pickConfig(h200, b.M, b.N, b.DType, 16/b.DType.Size()).spec] = true
		specs[pickRegister(h200, b.M, b.N, b.DType, 16/b.DType.Size()).spec] = true
	}
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
		specs[bulkConfig(h200, 16, 1<<16, dt, 8, 2, 0, 256, 1).spec] = true
	}
	for sp := range specs {
		if _, err := jit.Compile(arch, kernels.Kernel(sp)); err != nil {
			t.Errorf("%+v: %v", sp, err)
		}
	}
	t.Logf("%d specializations", len(specs))
}
