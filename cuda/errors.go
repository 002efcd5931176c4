package cuda

import "fmt"

// Error is a failed CUDA driver or NVRTC call: the call, the error's name and
// the library's own description of it.
type Error struct {
	Call    string // e.g. "cuMemAlloc"
	Code    int    // CUresult or nvrtcResult
	Name    string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Message string
	Log     string // NVRTC compile log, when there is one
}

func (e *Error) Error() string {
	s := fmt.Sprintf("cuda: %s: %s (%d): %s", e.Call, e.Name, e.Code, e.Message)
	if e.Log != "" {
		s += "\n" + e.Log
	}
	return s
}

// Code values callers may want to test for.
const (
	ErrorNoDevice    = 100 // CUDA_ERROR_NO_DEVICE
	ErrorOutOfMemory = 2   // CUDA_ERROR_OUT_OF_MEMORY
)

// newError builds an Error for a driver call that returned r.
func newError(call string, r int32) error {
	if r == 0 {
		return nil
	}
	e := &Error{Call: call, Code: int(r), Name: "CUDA_ERROR_UNKNOWN", Message: "unknown error"}
	p := new(uintptr)
	if cuGetErrorName.fn != 0 && cuGetErrorName.call(uintptr(r), ptr(p)) == 0 {
		e.Name = cString(*p)
	}
	if cuGetErrorString.fn != 0 && cuGetErrorString.call(uintptr(r), ptr(p)) == 0 {
		e.Message = cString(*p)
	}
	return e
}

// newNVRTCError builds an Error for an NVRTC call that returned r.
func newNVRTCError(call string, r int32, log string) error {
	if r == 0 {
		return nil
	}
	return &Error{Call: call, Code: int(r), Name: "NVRTC_ERROR", Message: cString(nvrtcGetErrorString.callPtr(uintptr(r))), Log: log}
}
