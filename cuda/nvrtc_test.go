package cuda

import (
	"runtime"
	"testing"
	"unsafe"
	"weak"
)

// TestCompileCUBINKeepsProgramAlive: nvrtcDestroyProgram, which CompileCUBIN
// defers, is handed the address of the Go variable that holds the program
// handle, reads the handle there and clears it. That variable must stay
// alive until the call returns: were it collected after its last use in Go,
// the library would read and write memory the collector had freed (and
// perhaps handed to another object). The fake library runs the collector
// inside nvrtcDestroyProgram and checks, through a weak pointer, that the
// variable survived.
func TestCompileCUBINKeepsProgramAlive(t *testing.T) {
	const handle = 0x5eed
	var (
		progVar  weak.Pointer[uintptr]
		alive    bool
		destroys int
	)
	fakeLibrary(t, libNVRTC, map[*binding]any{
		nvrtcCreateProgram: func(prog, src, name, n, hdrs, names uintptr) uintptr {
			p := (*uintptr)(cPointer(prog))
			*p = handle
			progVar = weak.Make(p)
			return 0
		},
		nvrtcCompileProgram: func(prog, n, opts uintptr) uintptr { return 0 },
		nvrtcGetProgramLogSize: func(prog, n uintptr) uintptr {
			*(*uint64)(cPointer(n)) = 1
			return 0
		},
		nvrtcGetProgramLog: func(prog, buf uintptr) uintptr { return 0 },
		nvrtcGetCUBINSize: func(prog, n uintptr) uintptr {
			*(*uint64)(cPointer(n)) = 4
			return 0
		},
		nvrtcGetCUBIN: func(prog, buf uintptr) uintptr {
			copy(unsafe.Slice((*byte)(cPointer(buf)), 4), "ELF!")
			return 0
		},
		nvrtcDestroyProgram: func(prog uintptr) uintptr {
			destroys++
			runtime.GC()
			runtime.GC()
			if p := progVar.Value(); p != nil && cPointer(prog) == unsafe.Pointer(p) {
				alive = *p == handle
			}
			return 0
		},
	})
	for range 20 {
		// Longer than 15 bytes each, so that no C string shares the
		// collector's tiny blocks with the handle's variable.
		out, err := CompileCUBIN("a-long-enough-name.cu", "// a source long enough to be no tiny object",
			[]Header{{Name: "a-long-enough-header.cuh", Source: "// a header long enough as well"}},
			[]string{"-an-option-long-enough"})
		if err != nil || string(out) != "ELF!" {
			t.Fatalf("CompileCUBIN: %q, %v", out, err)
		}
		if destroys == 0 {
			t.Fatal("the program was not destroyed")
		}
		if !alive {
			t.Fatal("the program handle's variable was collected before nvrtcDestroyProgram returned")
		}
		alive, destroys = false, 0
	}
}
