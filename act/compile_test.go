package act

import (
	"testing"

	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/jit"
)

// TestKernelsCompile compiles, with NVRTC alone, every specialization
// Prepare names (see gputest.CompileAll).
func TestKernelsCompile(t *testing.T) {
	var kernels []jit.Kernel
	for _, k := range prepared() {
		kernels = append(kernels, k.kernel())
	}
	gputest.CompileAll(t, kernels)
}
