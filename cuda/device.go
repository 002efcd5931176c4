// Package cuda is a small CUDA driver runtime for Go programs built with
// CGO_ENABLED=0. It opens libcuda and NVRTC at run time through purego, so
// building needs no CUDA toolkit; on a machine without a driver every call
// returns an error that says what was missing.
//
// Each type is one CUDA concept: Device (with its primary context), Stream,
// Event, Module, Function, TensorMap. Goroutines move between OS threads, so
// every method that talks to the driver first locks its goroutine to the
// thread and makes the device's context current there.
package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// DevicePtr is an address in device memory (CUdeviceptr).
type DevicePtr uint64

// Props are the device properties kernels size themselves by.
type Props struct {
	Name                string
	Major, Minor        int   // compute capability
	SMs                 int   // multiprocessor count
	MaxThreadsPerBlock  int   //
	SharedPerBlock      int   // bytes a block gets without opting in (48 KiB)
	SharedPerBlockOptin int   // bytes a block may get after raising its limit
	SharedPerSM         int   // bytes of shared memory per multiprocessor
	RegistersPerBlock   int   //
	L2Bytes             int   //
	TotalMem            int64 // bytes of device memory
	MemBusWidth         int   // bits
	MemClockKHz         int   //
	// L2EvictLast is the device's Device.SetL2EvictLast setting when the
	// properties were read: whether kernels may read large launches under
	// an L2 evict-last policy.
	L2EvictLast bool
}

// DependentLaunch reports whether the device has programmatic dependent
// launches (Stream.SetDependentLaunch): compute capability 9.0 and later.
func (p Props) DependentLaunch() bool { return p.Major >= 9 }

// Arch is the NVRTC architecture name for the device. From compute
// capability 9.0 (Hopper) on it is the architecture-specific target, sm_XYa
// (sm_90a, sm_100a, sm_120a), which unlocks the instructions of that
// architecture alone, such as wgmma and setmaxnreg on Hopper; code built for
// it runs on that architecture only, which suits a kernel compiled for the
// device at hand. Older devices get sm_XY.
func (p Props) Arch() string {
	if p.Major >= 9 {
		return fmt.Sprintf("sm_%d%da", p.Major, p.Minor)
	}
	return fmt.Sprintf("sm_%d%d", p.Major, p.Minor)
}

// Device is one GPU and its primary context.
type Device struct {
	Ordinal int
	handle  int32
	ctx     uintptr
	props   Props
	// evictLast is SetL2EvictLast's setting.
	evictLast atomic.Bool
}

var (
	devMu   sync.Mutex
	devices = map[int]*Device{}
)

// DeviceCount returns the number of CUDA devices.
func DeviceCount() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	n := new(int32)
	if err := newError("cuDeviceGetCount", cuDeviceGetCount.call(ptr(n))); err != nil {
		return 0, err
	}
	return int(*n), nil
}

// Open returns device ordinal with its primary context retained. The same
// *Device is returned for the same ordinal every time.
func Open(ordinal int) (*Device, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	devMu.Lock()
	defer devMu.Unlock()
	if d := devices[ordinal]; d != nil {
		return d, nil
	}
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: device %d does not exist (%d found)", ordinal, n)
	}
	h := new(int32)
	if err := newError("cuDeviceGet", cuDeviceGet.call(ptr(h), uintptr(ordinal))); err != nil {
		return nil, err
	}
	ctx := new(uintptr)
	if err := newError("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRet.call(ptr(ctx), uintptr(*h))); err != nil {
		return nil, err
	}
	d := &Device{Ordinal: ordinal, handle: *h, ctx: *ctx}
	if err := d.readProps(); err != nil {
		// Hand the retained context back: a device that cannot be
		// described is not kept, and a later Open retains it anew.
		cuDevicePrimaryCtxRel.call(uintptr(*h))
		return nil, err
	}
	devices[ordinal] = d
	return d, nil
}

// Default opens device 0.
func Default() (*Device, error) { return Open(0) }

// Props returns the properties read when the device was opened. It panics
// on a nil device (ErrNilDevice): there are no properties to return, and
// zero ones would send a caller on with nonsense sizes.
func (d *Device) Props() Props {
	if d == nil {
		panic(ErrNilDevice)
	}
	p := d.props
	p.L2EvictLast = d.evictLast.Load()
	return p
}

// SetL2EvictLast lets the kernels of launches larger than L2 read their
// inputs under an L2 evict-last policy, as torch.compile's reductions do.
// Such a launch runs a few per cent faster (rmsnorm 16384x8192 bf16: 3.6%
// on an H200), but the lines it read keep that priority after it ends:
// until other traffic evicts them or ResetPersistingL2 resets them, later
// kernels find L2 smaller, and those whose data would fit in it ran 3–12%
// slower. Off by default, so that a kittens kernel leaves nothing behind
// that slows the next kernel of other code; turn it on where that next
// kernel streams more than L2 anyway, or is ours. It applies to launches
// made after the call.
func (d *Device) SetL2EvictLast(on bool) {
	if d != nil {
		d.evictLast.Store(on)
	}
}

// device attributes (CUdevice_attribute).
const (
	attrMaxThreadsPerBlock  = 1
	attrSharedPerBlock      = 8
	attrRegistersPerBlock   = 12
	attrMultiprocessors     = 16
	attrMemClock            = 36
	attrMemBusWidth         = 37
	attrL2Size              = 38
	attrCCMajor             = 75
	attrCCMinor             = 76
	attrSharedPerSM         = 81
	attrSharedPerBlockOptin = 97
)

func (d *Device) attr(a int) (int, error) {
	v := new(int32)
	err := newError("cuDeviceGetAttribute", cuDeviceGetAttribute.call(ptr(v), uintptr(a), uintptr(d.handle)))
	return int(*v), err
}

func (d *Device) readProps() error {
	name := new([256]byte)
	if err := newError("cuDeviceGetName", cuDeviceGetName.call(ptr(&name[0]), 256, uintptr(d.handle))); err != nil {
		return err
	}
	d.props.Name = cString(uintptr(unsafe.Pointer(&name[0])))
	runtime.KeepAlive(name)
	mem := new(uint64)
	if err := newError("cuDeviceTotalMem", cuDeviceTotalMem.call(ptr(mem), uintptr(d.handle))); err != nil {
		return err
	}
	d.props.TotalMem = int64(*mem)
	for _, f := range []struct {
		attr int
		dst  *int
	}{
		{attrCCMajor, &d.props.Major}, {attrCCMinor, &d.props.Minor},
		{attrMultiprocessors, &d.props.SMs}, {attrMaxThreadsPerBlock, &d.props.MaxThreadsPerBlock},
		{attrSharedPerBlock, &d.props.SharedPerBlock}, {attrSharedPerBlockOptin, &d.props.SharedPerBlockOptin},
		{attrSharedPerSM, &d.props.SharedPerSM}, {attrRegistersPerBlock, &d.props.RegistersPerBlock},
		{attrL2Size, &d.props.L2Bytes}, {attrMemBusWidth, &d.props.MemBusWidth}, {attrMemClock, &d.props.MemClockKHz},
	} {
		v, err := d.attr(f.attr)
		if err != nil {
			return err
		}
		*f.dst = v
	}
	return nil
}

// ErrNilDevice is the error of every method called on a nil *Device, and of
// the functions of other packages given one: a nil device is what an
// unchecked failure of Default or Open leaves behind.
var ErrNilDevice = errors.New("cuda: no device (a nil *cuda.Device: check the error of cuda.Default or cuda.Open)")

// bind locks the calling goroutine to its OS thread and makes the device's
// context current there. Every driver call runs between bind and unbind
// (which must not be called when bind fails, for a nil device).
func (d *Device) bind() error {
	if d == nil {
		return ErrNilDevice
	}
	runtime.LockOSThread()
	cuCtxSetCurrent.call(d.ctx)
	return nil
}

func unbind() { runtime.UnlockOSThread() }

// Synchronize waits for all work on the device's context.
func (d *Device) Synchronize() error {
	if err := d.bind(); err != nil {
		return err
	}
	defer unbind()
	return newError("cuCtxSynchronize", cuCtxSynchronize.call())
}

// ResetPersistingL2 returns every L2 line that an evict-last (persisting)
// access left behind to normal priority. Such lines outlive the kernel
// that marked them: until they are reset or evicted, later kernels' data
// are evicted ahead of them, as if L2 were smaller. The benchmarks call it
// before each case, so that no case inherits the lines of the one before.
// torch.compile's kernels leave such lines, and so do kittens' large
// launches after SetL2EvictLast(true); a program whose next kernels' data
// would fit in L2 can call it after them, at some 40 µs of host time.
func (d *Device) ResetPersistingL2() error {
	if err := d.bind(); err != nil {
		return err
	}
	defer unbind()
	return newError("cuCtxResetPersistingL2Cache", cuCtxResetPersistingL2.call())
}

// MemInfo returns the free and total device memory in bytes.
func (d *Device) MemInfo() (free, total int64, err error) {
	if err := d.bind(); err != nil {
		return 0, 0, err
	}
	defer unbind()
	f, t := new(uint64), new(uint64)
	err = newError("cuMemGetInfo", cuMemGetInfo.call(ptr(f), ptr(t)))
	return int64(*f), int64(*t), err
}

// DriverVersion returns the driver's CUDA version as major*1000+minor*10.
func DriverVersion() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	v := new(int32)
	err := newError("cuDriverGetVersion", cuDriverGetVersion.call(ptr(v)))
	return int(*v), err
}

// ptr passes the address of a Go value to C. The value is allocated on the
// heap (see heapAddr), so any variable may be passed, as long as it stays
// alive until the C function returns.
func ptr[T any](p *T) uintptr { return heapAddr(uintptr(unsafe.Pointer(p))) }

// heapAddr returns p. It exists for its directive: the compiler allocates on
// the heap every object whose address is converted to uintptr in the
// argument list of a call to it. ptr and hostPtr go through it, and every Go
// address this package hands to C comes from one of them (resolveDriver's
// calls of purego.SyscallN excepted: that function carries the same
// directive).
//
// A C function must never be handed the address of a stack variable: the
// goroutine's stack is copied elsewhere when it grows, which can happen
// between taking the address and entering C, and a uintptr is not updated,
// so C would read or write the old stack. The escape reaches the callers of exported functions
// too: a caller's buffer passed to CopyDtoH is allocated on the heap by the
// caller's compiled code. Go's collector never moves heap objects, so nothing
// needs pinning (runtime.Pinner, whose argument escapes as well, would only
// add allocations); an object must merely stay alive until C is done with
// it, which each call site ensures by using it afterwards or with
// runtime.KeepAlive.
//
//go:uintptrescapes
func heapAddr(p uintptr) uintptr { return p }
