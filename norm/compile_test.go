package norm

import (
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/gokittens/kittens/jit"
)

// variants are the (op, add, weight, bias) combinations the API launches.
var variants = []kernelKey{
	{op: opRMS, weight: weightPlain}, {op: opRMS, weight: weightPlusOne},
	{op: opRMS, add: addRounded, weight: weightPlain}, {op: opRMS, add: addRounded, weight: weightPlusOne},
	{op: opRMS, add: addFP32, weight: weightPlain}, {op: opRMS, add: addFP32, weight: weightPlusOne},
	{op: opRMS}, // L2Norm
	{op: opLayer, weight: weightPlain}, {op: opLayer, weight: weightPlain, bias: true},
	{op: opLayer, add: addRounded, weight: weightPlain, bias: true},
	{op: opL2Backward},
}

// TestKernelsCompile compiles, with NVRTC alone (no GPU needed), every
// specialization the picker yields for a spread of row lengths, for the
// architecture named by KITTENS_NVRTC_ARCH (e.g. sm_90a; sm_90 for an older
// NVRTC), and logs any that keeps a stack frame (spills). Skipped when the
// variable is unset: it is a development check that finds compile errors
// before a GPU run.
func TestKernelsCompile(t *testing.T) {
	arch := os.Getenv("KITTENS_NVRTC_ARCH")
	if arch == "" {
		t.Skip("set KITTENS_NVRTC_ARCH (e.g. sm_90a) to compile every specialization with NVRTC")
	}
	keys := map[kernelKey]bool{}
	for _, v := range variants {
		for _, dt := range activationDTypes {
			for _, n := range []int{1, 16, 64, 128, 1000, 2048, 2880, 4097, 7168, 16384, 65536} {
				for _, vector := range []bool{false, true} {
					c := pickConfig(propsH100, rowShape{rows: 4096, n: n, elemSize: dt.Size(), heldFP32: v.add == addFP32,
						cachesTwo: v.op == opL2Backward, twoPass: v.op == opLayer, vector: vector})
					k := v
					k.dtype, k.vec, k.perThread, k.group, k.bound, k.prefetch, k.looped, k.cache = dt, c.vec, c.perThread, c.group, c.bound, c.prefetch, c.looped, c.cache
					keys[k] = true
					k.cache = !k.cache && k.looped // both looped flavours
					keys[k] = true
					k.prefetch = !k.prefetch && !k.looped // both row loops
					keys[k] = true
				}
			}
		}
	}
	t.Logf("%d specializations", len(keys))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.NumCPU())
	for k := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			kern := k.kernel()
			bin, err := jit.Compile(arch, kern)
			if err != nil {
				t.Errorf("%v: %v", kern, err)
				return
			}
			regs, frame, err := jit.Resources(bin)
			if err != nil {
				t.Errorf("%v: %v", kern, err)
			} else if frame > 0 {
				t.Logf("%v: %d registers and a %d-byte stack frame", kern, regs, frame)
			}
		}()
	}
	wg.Wait()
}
