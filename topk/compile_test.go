package topk

import (
	"testing"

	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

// TestKernelsCompile compiles, with NVRTC alone, the specializations the
// picker yields on an H200 over routing and vocabulary rows, every value and
// index dtype, aligned rows or not (see gputest.CompileAll; the radix
// kernel's clusters need NVRTC 12 or later).
func TestKernelsCompile(t *testing.T) {
	warps, radixes := map[warpSpec]bool{}, map[radixSpec]bool{}
	var ks []jit.Kernel
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
		for _, it := range []tensor.DType{tensor.I32, tensor.I64} {
			for _, m := range []int{1, 64, 4096} {
				for _, n := range []int{8, 37, 128, 1024, 1025, 32000, 151936, 262144} {
					for _, k := range []int{1, 8, 32, 50, 1024} {
						for _, al := range []bool{true, false} {
							if k > n {
								continue
							}
							c := pickConfig(propsH200, m, n, k, dt, al)
							if c.Algo == algoWarp {
								s := warpSpec{dt, it, c.Vec, c.Chunks, c.Warps}
								if !warps[s] {
									warps[s] = true
									ks = append(ks, warpFuncs.Kernel(s))
								}
								continue
							}
							s := radixSpec{dt, it, c.Vec, c.Threads}
							if !radixes[s] {
								radixes[s] = true
								ks = append(ks, radixFuncs.Kernel(s))
							}
						}
					}
				}
			}
		}
	}
	gputest.CompileAll(t, ks)
}
