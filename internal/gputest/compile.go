package gputest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/gokittens/kittens/jit"
)

// EnvArch names the architecture CompileAll compiles for, as NVRTC names it
// (sm_90a; sm_90 for an NVRTC older than 12); EnvCubinDir, where it also
// writes each CUBIN (for cuobjdump --dump-sass where a toolkit is installed).
const (
	EnvArch     = "KITTENS_NVRTC_ARCH"
	EnvCubinDir = "KITTENS_CUBIN_DIR"
)

// CompileAll compiles every kernel with NVRTC alone (no GPU needed) for the
// architecture in KITTENS_NVRTC_ARCH, in parallel, failing the test on any
// compile error and logging each kernel that keeps a stack frame (spills or
// local arrays). It skips the test when the variable is unset: it is a
// development check that finds compile errors before a GPU run, for the
// specializations a package's pickers can yield.
func CompileAll(t *testing.T, kernels []jit.Kernel) {
	t.Helper()
	CompileAllFor(t, os.Getenv(EnvArch), kernels)
}

// CompileAllFor is CompileAll for the architecture arch, whatever
// KITTENS_NVRTC_ARCH names (which must still be set: it asks for the compile
// checks): it compiles what a package's pickers yield on other devices (an
// sm_80 part, say) for those devices.
func CompileAllFor(t *testing.T, arch string, kernels []jit.Kernel) {
	t.Helper()
	if os.Getenv(EnvArch) == "" {
		t.Skipf("set %s (e.g. sm_90a) to compile every specialization with NVRTC", EnvArch)
	}
	dir := os.Getenv(EnvCubinDir)
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.NumCPU())
	for i, k := range kernels {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			bin, err := jit.Compile(arch, k)
			if err != nil {
				t.Errorf("%v: %v", k, err)
				return
			}
			regs, frame, err := jit.Resources(bin)
			switch {
			case err != nil:
				t.Errorf("%v: %v", k, err)
			case frame > 0:
				t.Logf("%v: %d registers, a %d-byte stack frame", k, regs, frame)
			}
			if dir != "" {
				name := fmt.Sprintf("%03d_%s_%s.cubin", i, strings.TrimSuffix(filepath.Base(k.File), ".cu"), k.Entry)
				if err := os.WriteFile(filepath.Join(dir, name), bin, 0o644); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d specializations compiled for %s", len(kernels), arch)
}
