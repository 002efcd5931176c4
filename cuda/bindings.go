package cuda

// This file is the only place where C functions are bound. purego checks
// nothing about argument types, so every binding lists the width class of each
// argument; TestBindingsMatchHeaders (run on a GPU machine) parses the
// toolkit's cuda.h and nvrtc.h and checks each entry against its prototype.

import (
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// argKind is the width class of one C argument as it is passed in a register.
type argKind byte

const (
	aPtr  argKind = 'p' // any pointer, CUdeviceptr, handles, size_t, cuuint64_t: 8 bytes
	aU32  argKind = 'u' // unsigned int, cuuint32_t, unsigned char: 4 bytes or less
	aI32  argKind = 'i' // int, CUdevice, enums: 4 bytes
	aU64  argKind = 'q' // unsigned long long by value: 8 bytes
	aSize argKind = 's' // size_t: 8 bytes
)

// lib names the library a symbol comes from.
type lib byte

const (
	libDriver lib = iota
	libNVRTC
)

// binding is one bound C function: its name (the name the header declares),
// where it lives, the width class of each argument, and the resolved address.
type binding struct {
	name string
	lib  lib
	args string // one argKind per argument
	fn   uintptr
}

// Every bound symbol. The driver ones are resolved with cuGetProcAddress for
// the CUDA 12.0 ABI, which names each function by its header name and picks
// the matching versioned entry point; no "_v2" guessing.
var (
	cuInit                 = &binding{name: "cuInit", args: "u"}
	cuDriverGetVersion     = &binding{name: "cuDriverGetVersion", args: "p"}
	cuGetErrorName         = &binding{name: "cuGetErrorName", args: "ip"}
	cuGetErrorString       = &binding{name: "cuGetErrorString", args: "ip"}
	cuDeviceGetCount       = &binding{name: "cuDeviceGetCount", args: "p"}
	cuDeviceGet            = &binding{name: "cuDeviceGet", args: "pi"}
	cuDeviceGetName        = &binding{name: "cuDeviceGetName", args: "pii"}
	cuDeviceGetAttribute   = &binding{name: "cuDeviceGetAttribute", args: "pii"}
	cuDeviceTotalMem       = &binding{name: "cuDeviceTotalMem", args: "pi"}
	cuDevicePrimaryCtxRet  = &binding{name: "cuDevicePrimaryCtxRetain", args: "pi"}
	cuDevicePrimaryCtxRel  = &binding{name: "cuDevicePrimaryCtxRelease", args: "i"}
	cuCtxSetCurrent        = &binding{name: "cuCtxSetCurrent", args: "p"}
	cuCtxGetCurrent        = &binding{name: "cuCtxGetCurrent", args: "p"}
	cuCtxSynchronize       = &binding{name: "cuCtxSynchronize", args: ""}
	cuCtxResetPersistingL2 = &binding{name: "cuCtxResetPersistingL2Cache", args: ""}
	cuMemGetInfo           = &binding{name: "cuMemGetInfo", args: "pp"}
	cuMemAlloc             = &binding{name: "cuMemAlloc", args: "ps"}
	cuMemFree              = &binding{name: "cuMemFree", args: "p"}
	cuMemcpyHtoD           = &binding{name: "cuMemcpyHtoD", args: "pps"}
	cuMemcpyDtoH           = &binding{name: "cuMemcpyDtoH", args: "pps"}
	cuMemcpyDtoD           = &binding{name: "cuMemcpyDtoD", args: "pps"}
	cuMemcpyHtoDAsync      = &binding{name: "cuMemcpyHtoDAsync", args: "ppsp"}
	cuMemcpyDtoHAsync      = &binding{name: "cuMemcpyDtoHAsync", args: "ppsp"}
	cuMemcpyDtoDAsync      = &binding{name: "cuMemcpyDtoDAsync", args: "ppsp"}
	cuMemsetD8Async        = &binding{name: "cuMemsetD8Async", args: "pusp"}
	cuMemsetD32Async       = &binding{name: "cuMemsetD32Async", args: "pusp"}
	cuStreamCreate         = &binding{name: "cuStreamCreate", args: "pu"}
	cuStreamDestroy        = &binding{name: "cuStreamDestroy", args: "p"}
	cuStreamSynchronize    = &binding{name: "cuStreamSynchronize", args: "p"}
	cuStreamBeginCapture   = &binding{name: "cuStreamBeginCapture", args: "pi"}
	cuStreamEndCapture     = &binding{name: "cuStreamEndCapture", args: "pp"}
	cuStreamIsCapturing    = &binding{name: "cuStreamIsCapturing", args: "pp"}
	cuGraphGetNodes        = &binding{name: "cuGraphGetNodes", args: "ppp"}
	cuGraphInstantiate     = &binding{name: "cuGraphInstantiate", args: "ppq"}
	cuGraphLaunch          = &binding{name: "cuGraphLaunch", args: "pp"}
	cuGraphExecDestroy     = &binding{name: "cuGraphExecDestroy", args: "p"}
	cuGraphDestroy         = &binding{name: "cuGraphDestroy", args: "p"}
	cuEventCreate          = &binding{name: "cuEventCreate", args: "pu"}
	cuEventDestroy         = &binding{name: "cuEventDestroy", args: "p"}
	cuEventRecord          = &binding{name: "cuEventRecord", args: "pp"}
	cuEventSynchronize     = &binding{name: "cuEventSynchronize", args: "p"}
	cuEventElapsedTime     = &binding{name: "cuEventElapsedTime", args: "ppp"}
	cuModuleLoadData       = &binding{name: "cuModuleLoadData", args: "pp"}
	cuModuleUnload         = &binding{name: "cuModuleUnload", args: "p"}
	cuModuleGetFunction    = &binding{name: "cuModuleGetFunction", args: "ppp"}
	cuFuncGetAttribute     = &binding{name: "cuFuncGetAttribute", args: "pip"}
	cuFuncSetAttribute     = &binding{name: "cuFuncSetAttribute", args: "pii"}
	cuOccupancyMaxBlocks   = &binding{name: "cuOccupancyMaxActiveBlocksPerMultiprocessor", args: "ppis"}
	cuOccupancyMaxClusters = &binding{name: "cuOccupancyMaxActiveClusters", args: "ppp"}
	cuLaunchKernel         = &binding{name: "cuLaunchKernel", args: "puuuuuuuppp"}
	cuLaunchKernelEx       = &binding{name: "cuLaunchKernelEx", args: "pppp"}
	cuTensorMapEncodeTiled = &binding{name: "cuTensorMapEncodeTiled", args: "piupppppiiii"}

	nvrtcVersion           = &binding{name: "nvrtcVersion", lib: libNVRTC, args: "pp"}
	nvrtcGetErrorString    = &binding{name: "nvrtcGetErrorString", lib: libNVRTC, args: "i"}
	nvrtcCreateProgram     = &binding{name: "nvrtcCreateProgram", lib: libNVRTC, args: "pppipp"}
	nvrtcDestroyProgram    = &binding{name: "nvrtcDestroyProgram", lib: libNVRTC, args: "p"}
	nvrtcCompileProgram    = &binding{name: "nvrtcCompileProgram", lib: libNVRTC, args: "pip"}
	nvrtcGetCUBINSize      = &binding{name: "nvrtcGetCUBINSize", lib: libNVRTC, args: "pp"}
	nvrtcGetCUBIN          = &binding{name: "nvrtcGetCUBIN", lib: libNVRTC, args: "pp"}
	nvrtcGetProgramLogSize = &binding{name: "nvrtcGetProgramLogSize", lib: libNVRTC, args: "pp"}
	nvrtcGetProgramLog     = &binding{name: "nvrtcGetProgramLog", lib: libNVRTC, args: "pp"}
)

// bindings lists every entry above, for resolution and for the header test.
var bindings = []*binding{
	cuInit, cuDriverGetVersion, cuGetErrorName, cuGetErrorString, cuDeviceGetCount, cuDeviceGet,
	cuDeviceGetName, cuDeviceGetAttribute, cuDeviceTotalMem, cuDevicePrimaryCtxRet, cuDevicePrimaryCtxRel, cuCtxSetCurrent,
	cuCtxGetCurrent, cuCtxSynchronize, cuCtxResetPersistingL2, cuMemGetInfo, cuMemAlloc, cuMemFree, cuMemcpyHtoD, cuMemcpyDtoH,
	cuMemcpyDtoD, cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuMemcpyDtoDAsync, cuMemsetD8Async,
	cuMemsetD32Async, cuStreamCreate, cuStreamDestroy, cuStreamSynchronize, cuStreamBeginCapture, cuStreamEndCapture,
	cuStreamIsCapturing, cuGraphGetNodes, cuGraphInstantiate, cuGraphLaunch, cuGraphExecDestroy, cuGraphDestroy, cuEventCreate,
	cuEventDestroy, cuEventRecord, cuEventSynchronize, cuEventElapsedTime, cuModuleLoadData,
	cuModuleUnload, cuModuleGetFunction, cuFuncGetAttribute, cuFuncSetAttribute, cuOccupancyMaxBlocks,
	cuOccupancyMaxClusters, cuLaunchKernel, cuLaunchKernelEx, cuTensorMapEncodeTiled,
	nvrtcVersion, nvrtcGetErrorString, nvrtcCreateProgram, nvrtcDestroyProgram, nvrtcCompileProgram,
	nvrtcGetCUBINSize, nvrtcGetCUBIN, nvrtcGetProgramLogSize, nvrtcGetProgramLog,
}

// callBuf holds one call's arguments. purego.SyscallN keeps a reference to
// its argument slice (escape analysis says "leaking param"), which would move
// every call's variadic slice to the heap; copying into a pooled array keeps
// the caller's slice on its stack and the call allocation-free.
type callBuf [16]uintptr

var callPool = sync.Pool{New: func() any { return new(callBuf) }}

// call invokes a bound function and returns its 32-bit result code
// (CUresult or nvrtcResult). It does not allocate.
func (b *binding) call(args ...uintptr) int32 {
	if len(args) != len(b.args) {
		panic("cuda: wrong argument count for " + b.name) // a bug in this package
	}
	buf := callPool.Get().(*callBuf)
	n := copy(buf[:], args)
	r, _, _ := purego.SyscallN(b.fn, buf[:n]...)
	callPool.Put(buf)
	return int32(uint32(r))
}

// callPtr invokes a bound function that returns a pointer (nvrtcGetErrorString).
func (b *binding) callPtr(arg uintptr) uintptr {
	r, _, _ := purego.SyscallN(b.fn, arg)
	return r
}

// cuProcAddressVersion is the ABI version asked of cuGetProcAddress: 12.0, the
// first with cuLaunchKernelEx and tensor maps.
const cuProcAddressVersion = 12000

// resolveDriver looks every driver binding up through cuGetProcAddress_v2.
func resolveDriver(handle uintptr) error {
	gpa, err := purego.Dlsym(handle, "cuGetProcAddress_v2")
	if err != nil {
		return &LoadError{Library: "libcuda", Detail: "driver has no cuGetProcAddress_v2 (needs a CUDA 12 or newer driver)"}
	}
	for _, b := range bindings {
		if b.lib != libDriver {
			continue
		}
		name := append([]byte(b.name), 0)
		var fn uintptr
		var status int32
		r, _, _ := purego.SyscallN(gpa, uintptr(unsafe.Pointer(&name[0])), uintptr(unsafe.Pointer(&fn)),
			cuProcAddressVersion, 0, uintptr(unsafe.Pointer(&status)))
		if int32(uint32(r)) != 0 || fn == 0 {
			return &LoadError{Library: "libcuda", Detail: "cuGetProcAddress found no " + b.name}
		}
		b.fn = fn
	}
	return nil
}

// resolveNVRTC looks every NVRTC binding up with dlsym.
func resolveNVRTC(handle uintptr, path string) error {
	for _, b := range bindings {
		if b.lib != libNVRTC {
			continue
		}
		fn, err := purego.Dlsym(handle, b.name)
		if err != nil {
			return &LoadError{Library: "libnvrtc", Detail: path + " has no " + b.name}
		}
		b.fn = fn
	}
	return nil
}

// cString reads a NUL-terminated C string.
func cString(p uintptr) string {
	if p == 0 {
		return ""
	}
	base := cPointer(p)
	var n int
	for *(*byte)(unsafe.Add(base, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(base), n))
}

// cPointer turns an address that C handed back (memory Go does not manage)
// into a pointer without the uintptr-to-pointer conversion vet warns about.
func cPointer(p uintptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&p))
}
