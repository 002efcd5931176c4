package softmax

import (
	"testing"

	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

// TestKernelsCompile compiles, with NVRTC alone, what Prepare compiles on an
// H200; the picker's and the register path's configs of the same calls, as
// picked, as run specializes them on contiguous rows, and with a row past
// the last unit's; and the bulk kernel in every dtype (see
// gputest.CompileAll; the cluster and bulk-copy kernels need NVRTC 12 or
// later).
func TestKernelsCompile(t *testing.T) {
	keys := map[kernelKey]bool{}
	for _, c := range prepared(h200) {
		keys[c.kernelKey] = true
	}
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
		for _, mn := range preparedCalls {
			m, n := mn[0], mn[1]
			keys[pickConfig(h200, m, n, dt, 16/dt.Size()).kernelKey] = true
			c := pickRegister(h200, m, n, dt, 16/dt.Size())
			keys[c.kernelKey] = true
			r := c.withRows(m, n, int64(n), int64(n))
			keys[r.kernelKey] = true
			r.Once = r.oneUnitEach(m)
			keys[r.kernelKey] = true
			keys[c.withRows(m+1, n, int64(n), int64(n)).kernelKey] = true
		}
		keys[bulkConfig(h200, 16, 1<<16, dt, 8, 2, 0, 256, 1).kernelKey] = true
	}
	gputest.CompileAll(t, kernelsOf(keys))
}

// TestKernelsCompilePreHopper compiles what Prepare compiles on a small
// pre-Hopper GPU (no clusters, no bulk copies), and the picker's configs of
// the same calls before run specializes them on their rows, for sm_86: the cluster merges these kernels
// hold, which such a GPU never takes, must still compile there.
func TestKernelsCompilePreHopper(t *testing.T) {
	keys := map[kernelKey]bool{}
	for _, c := range prepared(small) {
		keys[c.kernelKey] = true
	}
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
		for _, mn := range preparedCalls {
			keys[pickConfig(small, mn[0], mn[1], dt, 16/dt.Size()).kernelKey] = true
			keys[pickRegister(small, mn[0], mn[1], dt, 16/dt.Size()).kernelKey] = true
		}
	}
	gputest.CompileAllFor(t, "sm_86", kernelsOf(keys))
}

// kernelsOf describes the kernels of keys.
func kernelsOf(keys map[kernelKey]bool) []jit.Kernel {
	var ks []jit.Kernel
	for k := range keys {
		ks = append(ks, kernels.Kernel(k))
	}
	return ks
}
