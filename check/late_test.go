package check_test

import (
	"strings"
	"testing"

	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

// plusOneSrc writes y = x + 1, after wait_prior_grids only when wait is set:
// built for dependent launches, it then skips the wait.
const plusOneSrc = `#include "kittens.cuh"
extern "C" __global__ void plus_one(const float* x, float* y, int n, int wait) {
  if (wait) wait_prior_grids();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = x[i] + 1.f;
}
`

// TestReplayCatchesEarlyKernels: a kernel that reads its input before it
// waits for the grids before it passes when launched directly, and fails
// check.Run's replay with dependent launches; the same kernel waiting
// first passes. Below compute capability 9.0 there are no dependent
// launches, and both pass.
func TestReplayCatchesEarlyKernels(t *testing.T) {
	dev := gputest.Device(t)
	plusOne := jit.Funcs[int]{Kernel: func(int) jit.Kernel {
		return jit.Kernel{File: "check/plus_one.cu", Source: plusOneSrc, Entry: "plus_one"}
	}}
	const n = 1001
	rng, _ := tensor.NewRNG()
	for _, wait := range []bool{true, false} {
		spec := check.Spec{
			Tensors: []*tensor.Tensor{tensor.Rand(rng, tensor.F32, 1, n), tensor.New(tensor.F32, n)},
			Names:   []string{"x", "y"},
			Outputs: []int{1},
			Poison:  []int{1},
			Run: func(s *cuda.Stream, ts []*tensor.Tensor) error {
				if s == nil {
					x, y := ts[0].Float64s(), make([]float64, n)
					for i := range y {
						y[i] = float64(float32(x[i]) + 1)
					}
					ts[1].SetFloat64s(y)
					return nil
				}
				fn, err := plusOne.Get(dev, s, 0) // built for dependent launches in the replay
				if err != nil {
					return err
				}
				w := int32(0)
				if wait {
					w = 1
				}
				return fn.Launch(cuda.LaunchConfig{Grid: cuda.D1(4), Block: cuda.D1(128), Stream: s},
					cuda.NewArgs().Ptr(ts[0].Ptr()).Ptr(ts[1].Ptr()).I32(n).I32(w))
			},
		}
		r, err := check.Run(dev, spec)
		if err != nil {
			t.Fatal(err)
		}
		early := !wait && dev.Props().DependentLaunch()
		if r.Pass == early || early != strings.Contains(r.String(), "replayed from a CUDA graph") {
			t.Errorf("wait %v, compute capability %d: %v", wait, dev.Props().Major, r)
		}
	}
}
