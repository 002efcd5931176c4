package act

import (
	"testing"

	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/jit"
)

// TestKernelsCompile compiles, with NVRTC alone, every specialization
// Prepare names, the evict-last reads' included (see gputest.CompileAll).
func TestKernelsCompile(t *testing.T) {
	var kernels []jit.Kernel
	for _, k := range prepared(true) {
		kernels = append(kernels, k.kernel())
	}
	gputest.CompileAll(t, kernels)
}
