package cuda

import (
	"runtime"
	"unsafe"
)

// Alloc allocates n bytes of device memory.
func (d *Device) Alloc(n int) (DevicePtr, error) {
	if n <= 0 {
		n = 1
	}
	if err := d.bind(); err != nil {
		return 0, err
	}
	defer unbind()
	p := new(uint64)
	if err := newError("cuMemAlloc", cuMemAlloc.call(ptr(p), uintptr(n))); err != nil {
		return 0, err
	}
	return DevicePtr(*p), nil
}

// Free releases memory from Alloc.
func (d *Device) Free(p DevicePtr) error {
	if err := d.bind(); err != nil {
		return err
	}
	defer unbind()
	return newError("cuMemFree", cuMemFree.call(uintptr(p)))
}

// hostPtr is the address of a byte slice's first element, 0 when empty, to
// hand to C. Like ptr, it makes the compiler allocate the slice's backing
// array on the heap (see heapAddr).
func hostPtr(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	return heapAddr(uintptr(unsafe.Pointer(&b[0])))
}

// CopyHtoD copies len(src) bytes from host memory to dst and waits for it.
func (d *Device) CopyHtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if err := d.bind(); err != nil {
		return err
	}
	defer unbind()
	err := newError("cuMemcpyHtoD", cuMemcpyHtoD.call(uintptr(dst), hostPtr(src), uintptr(len(src))))
	runtime.KeepAlive(src)
	return err
}

// CopyDtoH copies len(dst) bytes from device memory to the host and waits.
func (d *Device) CopyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	if err := d.bind(); err != nil {
		return err
	}
	defer unbind()
	err := newError("cuMemcpyDtoH", cuMemcpyDtoH.call(hostPtr(dst), uintptr(src), uintptr(len(dst))))
	runtime.KeepAlive(dst)
	return err
}

// CopyDtoD copies n bytes between device buffers and waits for it.
func (d *Device) CopyDtoD(dst, src DevicePtr, n int) error {
	if n == 0 {
		return nil
	}
	if err := d.bind(); err != nil {
		return err
	}
	defer unbind()
	if err := newError("cuMemcpyDtoD", cuMemcpyDtoD.call(uintptr(dst), uintptr(src), uintptr(n))); err != nil {
		return err
	}
	return newError("cuCtxSynchronize", cuCtxSynchronize.call())
}

// CopyHtoD queues a copy of src to dst on the stream. src must stay untouched
// until the stream has passed the copy. Like every copy and memset of
// Stream and Device, one of zero bytes is a no-op that calls no driver.
func (s *Stream) CopyHtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if err := s.bind(); err != nil {
		return err
	}
	defer unbind()
	err := newError("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync.call(uintptr(dst), hostPtr(src), uintptr(len(src)), s.h))
	runtime.KeepAlive(src)
	return err
}

// CopyDtoH queues a copy of device memory into dst on the stream.
func (s *Stream) CopyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	if err := s.bind(); err != nil {
		return err
	}
	defer unbind()
	err := newError("cuMemcpyDtoHAsync", cuMemcpyDtoHAsync.call(hostPtr(dst), uintptr(src), uintptr(len(dst)), s.h))
	runtime.KeepAlive(dst)
	return err
}

// CopyDtoD queues a device-to-device copy of n bytes.
func (s *Stream) CopyDtoD(dst, src DevicePtr, n int) error {
	if n == 0 {
		return nil
	}
	if err := s.bind(); err != nil {
		return err
	}
	defer unbind()
	return newError("cuMemcpyDtoDAsync", cuMemcpyDtoDAsync.call(uintptr(dst), uintptr(src), uintptr(n), s.h))
}

// Memset8 queues setting n bytes at dst to v.
func (s *Stream) Memset8(dst DevicePtr, v byte, n int) error {
	if n == 0 {
		return nil
	}
	if err := s.bind(); err != nil {
		return err
	}
	defer unbind()
	return newError("cuMemsetD8Async", cuMemsetD8Async.call(uintptr(dst), uintptr(v), uintptr(n), s.h))
}

// Memset32 queues setting n 32-bit words at dst (4-byte aligned) to v.
func (s *Stream) Memset32(dst DevicePtr, v uint32, n int) error {
	if n == 0 {
		return nil
	}
	if err := s.bind(); err != nil {
		return err
	}
	defer unbind()
	return newError("cuMemsetD32Async", cuMemsetD32Async.call(uintptr(dst), uintptr(v), uintptr(n), s.h))
}
