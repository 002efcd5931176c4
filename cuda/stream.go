package cuda

import (
	"errors"
	"fmt"
)

// Stream is a CUDA stream. The zero handle is the legacy default stream.
type Stream struct {
	dev       *Device
	h         uintptr
	dependent bool // kernels launch with programmatic stream serialization
}

// NewStream creates a stream that synchronizes with the legacy default stream.
func (d *Device) NewStream() (*Stream, error) {
	if err := d.bind(); err != nil {
		return nil, err
	}
	defer unbind()
	h := new(uintptr)
	if err := newError("cuStreamCreate", cuStreamCreate.call(ptr(h), 0)); err != nil {
		return nil, err
	}
	return &Stream{dev: d, h: *h}, nil
}

// bind is Device.bind for the stream's device. A nil stream fails: where a
// method needs a device to talk to, nil names none.
func (s *Stream) bind() error {
	if s == nil {
		return errors.New("cuda: nil *Stream: use a stream of Device.NewStream or Device.DefaultStream")
	}
	return s.dev.bind()
}

// DefaultStream returns the device's legacy default stream.
func (d *Device) DefaultStream() *Stream { return &Stream{dev: d} }

// SetDependentLaunch turns programmatic dependent launch on or off for the
// kernels launched on s from now on (compute capability 9.0 and later).
// With it on, the GPU may start a kernel while the kernel queued before it
// on s is still running, as soon as that kernel allows it, instead of after
// it ends: the new kernel's launch and the previous one's tail overlap,
// which takes a few hundred nanoseconds off each small kernel in a CUDA
// graph.
//
// Only kernels that wait for the grids before them (griddepcontrol.wait)
// before they touch global memory may start that way, so only functions
// that say so (Function.AllowDependentLaunch) are launched as dependent
// launches; others start after the kernel before them ends, as on any
// stream. The library's ops build their kernels for such a stream with the
// wait (wait_prior_grids in include/kittens.cuh) and let the next kernel
// launch as soon as their own wait is over (jit.Kernel.Dependent, which
// needs NVRTC 12 or later). Copies, memsets and event
// records order as usual. Captured into a graph (Capture), the overlap is
// kept in the graph.
//
// It refuses the legacy default stream and devices before compute
// capability 9.0; turning it off always succeeds. Set it before queuing
// work, not while another goroutine launches on s.
func (s *Stream) SetDependentLaunch(on bool) error {
	if !on {
		if s != nil {
			s.dependent = false
		}
		return nil
	}
	if s == nil || s.h == 0 {
		return errors.New("cuda: dependent launches need a stream of NewStream, not the legacy default stream")
	}
	if p := s.dev.Props(); !p.DependentLaunch() {
		return fmt.Errorf("cuda: dependent launches need compute capability 9.0 or later; %s is %d.%d", p.Name, p.Major, p.Minor)
	}
	s.dependent = true
	return nil
}

// DependentLaunch reports whether kernels launched on s may start before
// the kernel before them ends (SetDependentLaunch).
func (s *Stream) DependentLaunch() bool { return s != nil && s.dependent }

// Device returns the stream's device (nil for a nil stream).
func (s *Stream) Device() *Device {
	if s == nil {
		return nil
	}
	return s.dev
}

// Synchronize waits for everything queued on the stream.
func (s *Stream) Synchronize() error {
	if err := s.bind(); err != nil {
		return err
	}
	defer unbind()
	return newError("cuStreamSynchronize", cuStreamSynchronize.call(s.h))
}

// Destroy releases the stream; the default stream (and a nil one) is left
// alone.
func (s *Stream) Destroy() error {
	if s == nil || s.h == 0 {
		return nil
	}
	if err := s.bind(); err != nil {
		return err
	}
	defer unbind()
	err := newError("cuStreamDestroy", cuStreamDestroy.call(s.h))
	s.h = 0
	return err
}

// Event is a CUDA event with timing enabled.
type Event struct {
	dev *Device
	h   uintptr
}

// NewEvent creates an event that records time.
func (d *Device) NewEvent() (*Event, error) {
	if err := d.bind(); err != nil {
		return nil, err
	}
	defer unbind()
	h := new(uintptr)
	if err := newError("cuEventCreate", cuEventCreate.call(ptr(h), 0)); err != nil {
		return nil, err
	}
	return &Event{dev: d, h: *h}, nil
}

// Record queues the event on the stream (nil: the legacy default stream).
// It does not allocate.
func (e *Event) Record(s *Stream) error {
	var stream uintptr
	if s != nil {
		stream = s.h
	}
	if err := e.dev.bind(); err != nil {
		return err
	}
	defer unbind()
	return newError("cuEventRecord", cuEventRecord.call(e.h, stream))
}

// Synchronize waits until the event has been reached.
func (e *Event) Synchronize() error {
	if err := e.dev.bind(); err != nil {
		return err
	}
	defer unbind()
	return newError("cuEventSynchronize", cuEventSynchronize.call(e.h))
}

// Elapsed returns the milliseconds between two recorded events.
func Elapsed(start, end *Event) (float32, error) {
	if err := start.dev.bind(); err != nil {
		return 0, err
	}
	defer unbind()
	ms := new(float32)
	err := newError("cuEventElapsedTime", cuEventElapsedTime.call(ptr(ms), start.h, end.h))
	return *ms, err
}

// Destroy releases the event.
func (e *Event) Destroy() error {
	if err := e.dev.bind(); err != nil {
		return err
	}
	defer unbind()
	return newError("cuEventDestroy", cuEventDestroy.call(e.h))
}
