package norm

import (
	"testing"

	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/jit"
)

// variants are the (op, add, weight, bias) combinations the API launches,
// and the padded and statistics-writing forms.
var variants = []kernelKey{
	{op: opRMS, weight: weightPlain, pad: true}, {op: opRMS, add: addFP32, weight: weightPlain, pad: true},
	{op: opRMS, weight: weightPlain, stats: true}, {op: opLayer, weight: weightPlain, bias: true, stats: true},
	{op: opRMS, weight: weightPlain}, {op: opRMS, weight: weightPlusOne},
	{op: opRMS, add: addRounded, weight: weightPlain}, {op: opRMS, add: addRounded, weight: weightPlusOne},
	{op: opRMS, add: addFP32, weight: weightPlain}, {op: opRMS, add: addFP32, weight: weightPlusOne},
	{op: opRMS}, // L2Norm
	{op: opLayer, weight: weightPlain}, {op: opLayer, weight: weightPlain, bias: true},
	{op: opLayer, add: addRounded, weight: weightPlain, bias: true},
	{op: opL2Backward},
}

// TestKernelsCompile compiles, with NVRTC alone, every specialization the
// picker yields for a spread of row lengths (4096 rows, and 16384, where
// LayerNorm launches outgrow L2), with both looped flavours and
// every row loop (striding, prefetching, waves) and, for 16-byte accesses,
// with the L2 hint flipped, and as withRows specializes them for contiguous
// rows, and every kernel Prepare compiles (see gputest.CompileAll).
func TestKernelsCompile(t *testing.T) {
	keys := map[kernelKey]bool{}
	for _, v := range variants {
		for _, dt := range activationDTypes {
			for _, n := range []int{1, 16, 64, 128, 1000, 2048, 2880, 4097, 7168, 16384, 65536} {
				for _, rv := range []struct {
					rows   int
					vector bool
				}{{4096, false}, {4096, true}, {16384, true}} {
					rows, vector := rv.rows, rv.vector
					k := v
					k.dtype = dt
					c := pickConfig(propsH100, k.shape(rows, n, vector))
					k = k.withConfig(c, n)
					keys[k] = true
					keys[k.withRows(c, rows, n, []int64{int64(n), int64(n), int64(n), int64(n)})] = true // contiguous rows
					if k.looped {
						k.cache = !k.cache // both looped flavours
						keys[k] = true
						continue
					}
					for _, loop := range [][2]bool{{false, false}, {true, false}, {false, true}} {
						k.prefetch, k.waves = loop[0], loop[1] // every row loop
						keys[k] = true
					}
					if k.vec > 1 { // the L2 hint on row reads
						k.hint = !k.hint
						keys[k] = true
					}
				}
			}
		}
	}
	for _, k := range prepared(propsH100) {
		keys[k] = true
	}
	kernels := make([]jit.Kernel, 0, len(keys))
	for k := range keys {
		kernels = append(kernels, k.kernel())
	}
	gputest.CompileAll(t, kernels)
}
