package act

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gokittens/kittens/jit"
)

// TestKernelsCompile compiles, with NVRTC alone (no GPU needed), every
// specialization Prepare names, for the architecture in KITTENS_NVRTC_ARCH
// (e.g. sm_90a; sm_90 for an older NVRTC). Skipped when that is unset: it
// is a development check that finds compile errors before a GPU run. With
// KITTENS_ACT_CUBIN_DIR set it also writes each cubin there, for
// cuobjdump --dump-resource-usage and --dump-sass.
func TestKernelsCompile(t *testing.T) {
	arch := os.Getenv("KITTENS_NVRTC_ARCH")
	if arch == "" {
		t.Skip("set KITTENS_NVRTC_ARCH (e.g. sm_90a) to compile every specialization with NVRTC")
	}
	dir := os.Getenv("KITTENS_ACT_CUBIN_DIR")
	var wg sync.WaitGroup
	for _, sp := range prepared() {
		wg.Go(func() {
			kern := sp.kernel()
			bin, err := jit.Compile(arch, kern)
			if err != nil {
				t.Errorf("%v: %v", kern, err)
				return
			}
			if dir != "" {
				name := fmt.Sprintf("%s_%s_%s_v%d_u%d_l%d_f%v.cubin", kern.Entry, sp.kind, sp.dtype, sp.vec, sp.unroll,
					sp.layout, sp.full)
				if err := os.WriteFile(filepath.Join(dir, name), bin, 0o644); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}
