package cuda

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

// TestCaptureRefusesBeforeTheDriver checks the errors Capture returns
// without a GPU: the legacy default stream and an unknown mode.
func TestCaptureRefusesBeforeTheDriver(t *testing.T) {
	run := func() error { t.Fatal("fn ran"); return nil }
	for _, s := range []*Stream{nil, {}} {
		if _, err := s.Capture(CaptureGlobal, run); err == nil || !strings.Contains(err.Error(), "legacy default stream") {
			t.Errorf("legacy stream: got %v", err)
		}
	}
	if _, err := (&Stream{h: 1}).Capture(CaptureMode(3), run); err == nil || !strings.Contains(err.Error(), "capture mode 3") {
		t.Errorf("mode 3: got %v", err)
	}
	if c, err := (*Stream)(nil).Capturing(); c || err != nil {
		t.Errorf("nil stream capturing: %v %v", c, err)
	}
}

// floats reads n float32 values from device memory.
func floats(t *testing.T, d *Device, p DevicePtr, n int) []float32 {
	t.Helper()
	b := make([]byte, 4*n)
	if err := d.CopyDtoH(b, p); err != nil {
		t.Fatal(err)
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// TestGraphCaptureAndReplay captures kernel launches (a cluster launch
// among them), a memset and a copy, checks that capturing ran none of them,
// then replays the graph twice and checks the data after each replay.
func TestGraphCaptureAndReplay(t *testing.T) {
	d := testDevice(t)
	m := loadTestModule(t, d)
	fn := testFunction(t, m, "add1")
	const n = 1000
	a, _ := d.Alloc(4 * n)
	b, _ := d.Alloc(4 * n)
	defer d.Free(a)
	defer d.Free(b)
	s := testStream(t, d)
	if err := s.Memset32(a, math.Float32bits(1), n); err != nil {
		t.Fatal(err)
	}
	if err := s.Memset32(b, math.Float32bits(-7), n); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	var inside bool
	g, err := s.Capture(CaptureGlobal, func() error {
		var err error
		if inside, err = s.Capturing(); err != nil {
			return err
		}
		// b = a + 0.5; a += 2 (twice, once as a cluster launch); b's
		// first 100 elements = 3.
		if err := s.CopyDtoD(b, a, 4*n); err != nil {
			return err
		}
		if err := fn.Launch(LaunchConfig{Grid: D1(8), Block: D1(128), Stream: s}, NewArgs().Ptr(b).I32(n).F32(0.5)); err != nil {
			return err
		}
		if err := fn.Launch(LaunchConfig{Grid: D1(8), Block: D1(128), Stream: s}, NewArgs().Ptr(a).I32(n).F32(1)); err != nil {
			return err
		}
		if err := fn.Launch(LaunchConfig{Grid: D1(8), Block: D1(128), Cluster: D1(2), Stream: s}, NewArgs().Ptr(a).I32(n).F32(1)); err != nil {
			return err
		}
		return s.Memset32(b, math.Float32bits(3), 100)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	if !inside {
		t.Error("Capturing was false inside the capture")
	}
	if c, err := s.Capturing(); c || err != nil {
		t.Errorf("Capturing after the capture: %v %v", c, err)
	}
	if g.Nodes() != 5 {
		t.Errorf("graph has %d nodes, want 5", g.Nodes())
	}
	if got := floats(t, d, a, n); got[0] != 1 || got[n-1] != 1 {
		t.Fatalf("capturing ran the work: a = %v … %v", got[0], got[n-1])
	}
	for replay := 1; replay <= 2; replay++ {
		if err := g.Launch(s); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		wantA := float32(1 + 2*replay)
		wantB := wantA - 2 + 0.5
		ga, gb := floats(t, d, a, n), floats(t, d, b, n)
		for i := range n {
			wb := wantB
			if i < 100 {
				wb = 3
			}
			if ga[i] != wantA || gb[i] != wb {
				t.Fatalf("replay %d, element %d: a %v b %v, want %v %v", replay, i, ga[i], gb[i], wantA, wb)
			}
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := g.Launch(s); err != nil {
			t.Fatal(err)
		}
	})
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Errorf("Graph.Launch allocates %v times per call", allocs)
	}
}

// TestCaptureFailures checks that a capture whose fn fails, or that waits
// for the stream, returns an error and leaves the stream usable.
func TestCaptureFailures(t *testing.T) {
	d := testDevice(t)
	s := testStream(t, d)
	if _, err := d.DefaultStream().Capture(CaptureGlobal, func() error { return nil }); err == nil {
		t.Error("captured the legacy default stream")
	}
	buf, _ := d.Alloc(256)
	defer d.Free(buf)
	if err := s.Memset8(buf, 0, 256); err != nil {
		t.Fatal(err)
	}
	mine := errors.New("fn failed")
	if _, err := s.Capture(CaptureGlobal, func() error {
		if err := s.Memset8(buf, 1, 256); err != nil {
			return err
		}
		return mine
	}); err != mine {
		t.Errorf("fn's error: got %v", err)
	}
	for _, mode := range []CaptureMode{CaptureGlobal, CaptureThreadLocal} {
		_, err := s.Capture(mode, func() error {
			s.Memset8(buf, 2, 256)
			s.Synchronize() // refused; its error is ignored here
			return nil
		})
		var ce *Error
		if !errors.As(err, &ce) {
			t.Errorf("mode %d, a synchronization in the capture: got %v, want a CUDA error", mode, err)
		}
	}
	// The stream works again, and nothing captured ran.
	if c, err := s.Capturing(); c || err != nil {
		t.Fatalf("still capturing: %v %v", c, err)
	}
	if err := s.Memset8(buf, 9, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 2)
	if err := d.CopyDtoH(got, buf); err != nil {
		t.Fatal(err)
	}
	if got[0] != 9 || got[1] != 0 {
		t.Errorf("buffer holds %v after failed captures", got)
	}
}
