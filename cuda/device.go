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
	"fmt"
	"runtime"
	"sync"
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
}

// Arch is the NVRTC architecture name for the device: sm_90a on Hopper (the
// "a" target unlocks wgmma and setmaxnreg), sm_XY elsewhere.
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
	n := newOut[int32]()
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
	h := newOut[int32]()
	if err := newError("cuDeviceGet", cuDeviceGet.call(ptr(h), uintptr(ordinal))); err != nil {
		return nil, err
	}
	ctx := newOut[uintptr]()
	if err := newError("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRet.call(ptr(ctx), uintptr(*h))); err != nil {
		return nil, err
	}
	d := &Device{Ordinal: ordinal, handle: *h, ctx: *ctx}
	if err := d.readProps(); err != nil {
		return nil, err
	}
	devices[ordinal] = d
	return d, nil
}

// Default opens device 0.
func Default() (*Device, error) { return Open(0) }

// Props returns the properties read when the device was opened.
func (d *Device) Props() Props { return d.props }

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
	v := newOut[int32]()
	err := newError("cuDeviceGetAttribute", cuDeviceGetAttribute.call(ptr(v), uintptr(a), uintptr(d.handle)))
	return int(*v), err
}

func (d *Device) readProps() error {
	name := newOut[[256]byte]()
	if err := newError("cuDeviceGetName", cuDeviceGetName.call(ptr(&name[0]), 256, uintptr(d.handle))); err != nil {
		return err
	}
	d.props.Name = cString(uintptr(unsafe.Pointer(&name[0])))
	runtime.KeepAlive(name)
	mem := newOut[uint64]()
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

// bind locks the calling goroutine to its OS thread and makes the device's
// context current there. Every driver call runs between bind and unbind.
func (d *Device) bind() {
	runtime.LockOSThread()
	cuCtxSetCurrent.call(d.ctx)
}

func unbind() { runtime.UnlockOSThread() }

// Synchronize waits for all work on the device's context.
func (d *Device) Synchronize() error {
	d.bind()
	defer unbind()
	return newError("cuCtxSynchronize", cuCtxSynchronize.call())
}

// ResetPersistingL2 returns every L2 line that an evict-last (persisting)
// access left behind to normal priority. Such lines outlive the kernel
// that marked them: until they are reset or evicted, later kernels' data
// are evicted ahead of them, as if L2 were smaller. The benchmarks call it
// before each case, so that no case inherits the lines of the one before.
// Kittens' launches larger than L2 leave such lines, as torch.compile's
// kernels do; a program whose next kernels' data would fit in L2 can call it
// after them (17-43 µs of host time on an H100 and an H200, timed with a
// synchronize on each side).
func (d *Device) ResetPersistingL2() error {
	d.bind()
	defer unbind()
	return newError("cuCtxResetPersistingL2Cache", cuCtxResetPersistingL2.call())
}

// MemInfo returns the free and total device memory in bytes.
func (d *Device) MemInfo() (free, total int64, err error) {
	d.bind()
	defer unbind()
	f, t := newOut[uint64](), newOut[uint64]()
	err = newError("cuMemGetInfo", cuMemGetInfo.call(ptr(f), ptr(t)))
	return int64(*f), int64(*t), err
}

// DriverVersion returns the driver's CUDA version as major*1000+minor*10.
func DriverVersion() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	v := newOut[int32]()
	err := newError("cuDriverGetVersion", cuDriverGetVersion.call(ptr(v)))
	return int(*v), err
}

// ptr passes the address of a Go value to C.
func ptr[T any](p *T) uintptr { return uintptr(unsafe.Pointer(p)) }

// newOut returns a heap-allocated out-parameter. A C function must never be
// handed the address of a stack variable: the goroutine's stack may move
// while the call is being set up. Returning the pointer from a function the
// compiler may not inline forces it onto the heap, which never moves.
//
//go:noinline
func newOut[T any]() *T { return new(T) }
