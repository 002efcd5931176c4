package cuda

import (
	"errors"
	"fmt"
	"runtime"
)

// CaptureMode says which driver calls other than the captured work may run
// while a stream is being captured (CUstreamCaptureMode). Allocations and
// synchronizations are what matter here: they cannot be recorded in a
// graph, and in the two strict modes they fail and invalidate the capture
// instead of running once at capture time.
type CaptureMode int32

const (
	// CaptureGlobal refuses those calls from every thread of the process
	// while the capture is open: an op that would wait for the stream
	// fails instead of being silently left out of the graph. PyTorch's
	// default, and the safe choice.
	CaptureGlobal CaptureMode = 0
	// CaptureThreadLocal refuses them on the capturing OS thread only.
	// Capture keeps its goroutine on one OS thread for the whole capture,
	// so that thread is the one fn runs on; goroutines fn starts are not
	// covered.
	CaptureThreadLocal CaptureMode = 1
	// CaptureRelaxed refuses nothing: a call that cannot be recorded runs
	// once, at capture time. An allocation freed after the capture is then
	// still used by every replay; only code that is known to make none
	// should be captured this way.
	CaptureRelaxed CaptureMode = 2
)

// Capture status values (CUstreamCaptureStatus).
const (
	captureNone   = 0
	captureActive = 1
)

// Graph is work captured from a stream (Capture), instantiated and ready to
// be replayed with Launch. A replay runs the same kernels with the same
// arguments, sizes and pointers as the capture saw, so the tensors it
// touches must stay allocated, and the ops must not depend on host-side
// state that changes between replays, for as long as the graph is used.
// Replaying a graph costs one launch on the host however many kernels it
// holds, which is how serving engines run their decode steps.
type Graph struct {
	dev   *Device
	exec  uintptr
	nodes int
}

// Capture records the work that fn queues on s into a graph instead of
// running it. s must be a stream of NewStream (the legacy default stream
// cannot be captured), and while the capture is open no other goroutine
// may queue work on the legacy default stream, which would have to wait
// for it. Nothing fn queues runs; a call that cannot be captured (in the
// strict modes: a synchronization, an allocation, a copy to pageable host
// memory) fails, and Capture returns fn's error, or the driver's when fn
// ignored it. The capture is always ended before Capture returns, so s is
// usable again whatever happened. Run the ops once before capturing them:
// a kernel's first use compiles and loads it, which is better done outside.
func (s *Stream) Capture(mode CaptureMode, fn func() error) (*Graph, error) {
	if s == nil || s.h == 0 {
		return nil, errors.New("cuda: the legacy default stream cannot be captured; capture a stream of NewStream")
	}
	if mode < CaptureGlobal || mode > CaptureRelaxed {
		return nil, fmt.Errorf("cuda: capture mode %d is not one of CaptureGlobal, CaptureThreadLocal, CaptureRelaxed", mode)
	}
	// The thread-local mode watches the thread that began the capture.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := s.bind(); err != nil {
		return nil, err
	}
	err := newError("cuStreamBeginCapture", cuStreamBeginCapture.call(s.h, uintptr(mode)))
	unbind()
	if err != nil {
		return nil, err
	}
	fnErr := fn()
	if err := s.bind(); err != nil {
		return nil, err
	}
	defer unbind()
	g := new(uintptr)
	endErr := newError("cuStreamEndCapture", cuStreamEndCapture.call(s.h, ptr(g)))
	if *g != 0 {
		defer cuGraphDestroy.call(*g) // the instantiated graph does not need it
	}
	if fnErr != nil {
		return nil, fnErr
	}
	if endErr != nil {
		return nil, endErr
	}
	n := new(uintptr)
	if err := newError("cuGraphGetNodes", cuGraphGetNodes.call(*g, 0, ptr(n))); err != nil {
		return nil, err
	}
	exec := new(uintptr)
	if err := newError("cuGraphInstantiate", cuGraphInstantiate.call(ptr(exec), *g, 0)); err != nil {
		return nil, err
	}
	return &Graph{dev: s.dev, exec: *exec, nodes: int(*n)}, nil
}

// Capturing reports whether work queued on s is being captured rather than
// run (it is also true for a capture that a failed call has invalidated).
// Ops that would have to wait for the stream ask it first, to fail with an
// error that says what to do instead. A nil stream and the legacy default
// stream are never captured.
func (s *Stream) Capturing() (bool, error) {
	if s == nil || s.h == 0 {
		return false, nil
	}
	if err := s.bind(); err != nil {
		return false, err
	}
	defer unbind()
	status := new(int32)
	if err := newError("cuStreamIsCapturing", cuStreamIsCapturing.call(s.h, ptr(status))); err != nil {
		return false, err
	}
	return *status != captureNone, nil
}

// Launch replays the graph on s, which may be any stream of the graph's
// device; nil is the legacy default stream. It does not allocate.
func (g *Graph) Launch(s *Stream) error {
	var stream uintptr
	if s != nil {
		stream = s.h
	}
	if err := g.dev.bind(); err != nil {
		return err
	}
	defer unbind()
	return newError("cuGraphLaunch", cuGraphLaunch.call(g.exec, stream))
}

// Nodes is the number of nodes the capture recorded: one per kernel launch,
// copy or memset.
func (g *Graph) Nodes() int { return g.nodes }

// Destroy releases the graph. Replays already queued still run.
func (g *Graph) Destroy() error {
	if g.exec == 0 {
		return nil
	}
	if err := g.dev.bind(); err != nil {
		return err
	}
	defer unbind()
	err := newError("cuGraphExecDestroy", cuGraphExecDestroy.call(g.exec))
	g.exec = 0
	return err
}
