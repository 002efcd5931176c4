package rope

import (
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

// TestKernelsCompile compiles, with NVRTC alone, the specializations the
// pickers yield for every dtype pair, style and vector width, the
// [B, H, S, D] ones also with the L2 evict-last reads where they are 16 bytes,
// and those Prepare names for an H100 (see gputest.CompileAll).
func TestKernelsCompile(t *testing.T) {
	var keys []kernelKey
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16, tensor.F32} {
		cdts := []tensor.DType{tensor.F32} // tables of fp32 or the data's dtype
		if dt != tensor.F32 {
			cdts = append(cdts, dt)
		}
		for _, cdt := range cdts {
			for _, style := range []Style{NeoX, GPTJ} {
				w := map[Style]int{NeoX: 1, GPTJ: 2}[style]
				for v := 1; v*w*dt.Size() <= 16; v *= 2 {
					base := kernelKey{dt: dt, cdt: cdt, style: style, v: v, da: min(w*v*dt.Size(), 16)}
					for _, pos := range []tensor.DType{tensor.I64, tensor.I32} {
						qk := base
						qk.pos, qk.hpt, qk.cs, qk.maxT, qk.minB = pos, 4, true, 128, 8
						flat := qk
						flat.hpt, flat.minB, flat.flat = min(4, max(1, flatBytes/(2*v*dt.Size()))), 12, true
						keys = append(keys, qk, flat)
					}
					bhsd := base
					bhsd.hpt, bhsd.pass, bhsd.wide = 1, 16/dt.Size(), true
					keys = append(keys, bhsd)
					if base.da == 16 { // large [B, H, S, D] launches: L2 evict-last reads
						bhsd.evict = true
						keys = append(keys, bhsd)
					}
				}
				if style == GPTJ { // odd strides: pairs split in two
					keys = append(keys, kernelKey{dt: dt, cdt: cdt, style: style, v: 1, da: dt.Size(), hpt: 1, pass: 1})
				}
			}
		}
	}
	keys = append(keys, prepared(cuda.Props{SMs: 132, L2Bytes: 50 << 20, L2EvictLast: true})...)
	kernels := make([]jit.Kernel, len(keys))
	for i, k := range keys {
		kernels[i] = k.kernel()
	}
	gputest.CompileAll(t, kernels)
}
