package cuda

// Stream is a CUDA stream. The zero handle is the legacy default stream.
type Stream struct {
	dev *Device
	h   uintptr
}

// NewStream creates a stream that synchronizes with the legacy default stream.
func (d *Device) NewStream() (*Stream, error) {
	d.bind()
	defer unbind()
	h := new(uintptr)
	if err := newError("cuStreamCreate", cuStreamCreate.call(ptr(h), 0)); err != nil {
		return nil, err
	}
	return &Stream{dev: d, h: *h}, nil
}

// DefaultStream returns the device's legacy default stream.
func (d *Device) DefaultStream() *Stream { return &Stream{dev: d} }

// Device returns the stream's device.
func (s *Stream) Device() *Device { return s.dev }

// Synchronize waits for everything queued on the stream.
func (s *Stream) Synchronize() error {
	s.dev.bind()
	defer unbind()
	return newError("cuStreamSynchronize", cuStreamSynchronize.call(s.h))
}

// Destroy releases the stream; the default stream is left alone.
func (s *Stream) Destroy() error {
	if s.h == 0 {
		return nil
	}
	s.dev.bind()
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
	d.bind()
	defer unbind()
	h := new(uintptr)
	if err := newError("cuEventCreate", cuEventCreate.call(ptr(h), 0)); err != nil {
		return nil, err
	}
	return &Event{dev: d, h: *h}, nil
}

// Record queues the event on the stream. It does not allocate.
func (e *Event) Record(s *Stream) error {
	e.dev.bind()
	defer unbind()
	return newError("cuEventRecord", cuEventRecord.call(e.h, s.h))
}

// Synchronize waits until the event has been reached.
func (e *Event) Synchronize() error {
	e.dev.bind()
	defer unbind()
	return newError("cuEventSynchronize", cuEventSynchronize.call(e.h))
}

// Elapsed returns the milliseconds between two recorded events.
func Elapsed(start, end *Event) (float32, error) {
	start.dev.bind()
	defer unbind()
	ms := new(float32)
	err := newError("cuEventElapsedTime", cuEventElapsedTime.call(ptr(ms), start.h, end.h))
	return *ms, err
}

// Destroy releases the event.
func (e *Event) Destroy() error {
	e.dev.bind()
	defer unbind()
	return newError("cuEventDestroy", cuEventDestroy.call(e.h))
}
