package cuda

import (
	"runtime"
	"strings"
)

// NVRTCVersion returns NVRTC's major and minor version.
func NVRTCVersion() (major, minor int, err error) {
	if err := initNVRTC(); err != nil {
		return 0, 0, err
	}
	ma, mi := new(int32), new(int32)
	if r := nvrtcVersion.call(ptr(ma), ptr(mi)); r != 0 {
		return 0, 0, newNVRTCError("nvrtcVersion", r, "")
	}
	return int(*ma), int(*mi), nil
}

// Header is a file NVRTC may #include by name.
type Header struct{ Name, Source string }

// cstr returns a NUL-terminated copy of s.
func cstr(s string) []byte { return append([]byte(s), 0) }

// CompileCUBIN compiles CUDA C++ source to a CUBIN with NVRTC. opts are NVRTC
// options such as "-arch=sm_90a". On failure the error carries the compile log.
func CompileCUBIN(name, source string, headers []Header, opts []string) ([]byte, error) {
	if err := initNVRTC(); err != nil {
		return nil, err
	}
	// Keep every C string alive in Go memory for the duration of the calls.
	keep := [][]byte{cstr(source), cstr(name)}
	hdrSrc := make([]uintptr, len(headers)+1)
	hdrName := make([]uintptr, len(headers)+1)
	for i, h := range headers {
		s, n := cstr(h.Source), cstr(h.Name)
		keep = append(keep, s, n)
		hdrSrc[i] = hostPtr(s)
		hdrName[i] = hostPtr(n)
	}
	optPtrs := make([]uintptr, len(opts)+1)
	for i, o := range opts {
		c := cstr(o)
		keep = append(keep, c)
		optPtrs[i] = hostPtr(c)
	}
	defer runtime.KeepAlive(keep)
	defer runtime.KeepAlive(hdrSrc)
	defer runtime.KeepAlive(hdrName)
	defer runtime.KeepAlive(optPtrs)

	prog := new(uintptr)
	if r := nvrtcCreateProgram.call(ptr(prog), hostPtr(keep[0]), hostPtr(keep[1]),
		uintptr(len(headers)), ptr(&hdrSrc[0]), ptr(&hdrName[0])); r != 0 {
		return nil, newNVRTCError("nvrtcCreateProgram", r, "")
	}
	defer func() {
		nvrtcDestroyProgram.call(ptr(prog))
		runtime.KeepAlive(prog) // the library reads and clears *prog
	}()
	rc := nvrtcCompileProgram.call(*prog, uintptr(len(opts)), ptr(&optPtrs[0]))
	log := programLog(*prog)
	if rc != 0 {
		return nil, newNVRTCError("nvrtcCompileProgram "+name, rc, log)
	}
	size := new(uint64)
	if r := nvrtcGetCUBINSize.call(*prog, ptr(size)); r != 0 {
		return nil, newNVRTCError("nvrtcGetCUBINSize", r, log)
	}
	out := make([]byte, *size)
	if r := nvrtcGetCUBIN.call(*prog, hostPtr(out)); r != 0 {
		return nil, newNVRTCError("nvrtcGetCUBIN", r, log)
	}
	return out, nil
}

func programLog(prog uintptr) string {
	n := new(uint64)
	if nvrtcGetProgramLogSize.call(prog, ptr(n)) != 0 || *n <= 1 {
		return ""
	}
	buf := make([]byte, *n)
	if nvrtcGetProgramLog.call(prog, hostPtr(buf)) != 0 {
		return ""
	}
	return strings.TrimRight(string(buf[:len(buf)-1]), "\n\x00")
}
