package topk

import (
	"testing"

	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

// TestKernelsCompile compiles, with NVRTC alone, the specializations the
// picker yields on an H200 over routing and vocabulary rows, every value and
// index dtype, aligned rows or not, and those Prepare names (see
// gputest.CompileAll; the radix kernel's clusters need NVRTC 12 or later).
func TestKernelsCompile(t *testing.T) {
	warps, radixes := prepared(propsH200)
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
		for _, it := range []tensor.DType{tensor.I32, tensor.I64} {
			for _, m := range []int{1, 64, 4096} {
				for _, n := range []int{8, 37, 128, 1024, 1025, 32000, 151936, 262144} {
					for _, k := range []int{1, 8, 32, 50, 1024} {
						for _, al := range []bool{true, false} {
							if k > n {
								continue
							}
							if c := pickConfig(propsH200, m, n, k, dt, al); c.Algo == algoWarp {
								warps = append(warps, c.warpKey(dt, it))
							} else {
								radixes = append(radixes, c.radixKey(dt, it))
							}
						}
					}
				}
			}
		}
	}
	var ks []jit.Kernel
	seenW, seenR := map[warpKey]bool{}, map[radixKey]bool{}
	for _, k := range warps {
		if !seenW[k] {
			seenW[k] = true
			ks = append(ks, warpFuncs.Kernel(k))
		}
	}
	for _, k := range radixes {
		if !seenR[k] {
			seenR[k] = true
			ks = append(ks, radixFuncs.Kernel(k))
		}
	}
	gputest.CompileAll(t, ks)
}
