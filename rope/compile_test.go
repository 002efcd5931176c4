package rope

import (
	"testing"

	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

// TestKernelsCompile compiles, with NVRTC alone, the specializations the
// pickers yield for every dtype pair, style and vector width, the
// [B, H, S, D] ones also with the L2 evict-last reads where they are 16 bytes
// (see gputest.CompileAll).
func TestKernelsCompile(t *testing.T) {
	var specs []spec
	for _, p := range dtypePairs {
		for _, style := range []Style{NeoX, GPTJ} {
			w := map[Style]int{NeoX: 1, GPTJ: 2}[style]
			for v := 1; v*w*p[0].Size() <= 16; v *= 2 {
				base := spec{dt: p[0], cdt: p[1], style: style, v: v, da: min(w*v*p[0].Size(), 16)}
				for _, pos := range []tensor.DType{tensor.I64, tensor.I32} {
					qk := base
					qk.pos, qk.hpt, qk.cs, qk.maxT, qk.minB = pos, 4, true, 128, 8
					flat := qk
					flat.hpt, flat.minB, flat.flat = min(4, max(1, flatBytes/(2*v*p[0].Size()))), 12, true
					specs = append(specs, qk, flat)
				}
				bhsd := base
				bhsd.hpt, bhsd.pass, bhsd.wide = 1, 16/p[0].Size(), true
				specs = append(specs, bhsd)
				if base.da == 16 { // large [B, H, S, D] launches: L2 evict-last reads
					bhsd.evict = true
					specs = append(specs, bhsd)
				}
			}
			if style == GPTJ { // odd strides: pairs split in two
				specs = append(specs, spec{dt: p[0], cdt: p[1], style: style, v: 1, da: p[0].Size(), hpt: 1, pass: 1})
			}
		}
	}
	kernels := make([]jit.Kernel, len(specs))
	for i, sp := range specs {
		kernels[i] = sp.kernel()
	}
	gputest.CompileAll(t, kernels)
}
