package tensor_test

import (
	"bytes"
	"math"
	"slices"
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/tensor"
)

// TestDeviceRoundTrips moves strided tensors and views to a device and
// back, poisons and copies there (between overlapping views too), and
// writes a device tensor as .npy.
func TestDeviceRoundTrips(t *testing.T) {
	dev := gputest.Device(t)
	rng := tensor.SeededRNG(9)
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F8E4M3, tensor.I64} {
		x, _ := tensor.NewStrided(dt, []int{5, 7}, []int{9, 1})
		x.FillNormal(rng, 0, 10)
		// A slice's storage runs past its span: only the span may travel.
		rows, _ := x.Slice(0, 1, 3)
		d, err := rows.ToDevice(dev)
		if err != nil {
			t.Fatal(err)
		}
		h, err := d.ToHost()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(h.Float64s(), rows.Float64s(), sameValue) || !bytes.Equal(h.Bytes(), rows.Bytes()) {
			t.Errorf("%v: slice round trip %v, want %v", dt, h.Float64s(), rows.Float64s())
		}

		var viaDevice, viaHost bytes.Buffer
		if err := tensor.WriteNPY(&viaDevice, d); err != nil {
			t.Fatal(err)
		}
		tensor.WriteNPY(&viaHost, rows)
		if !bytes.Equal(viaDevice.Bytes(), viaHost.Bytes()) {
			t.Errorf("%v: WriteNPY of the device tensor differs from the host one", dt)
		}

		// Poison a device slice; the rows around it keep their values.
		full, _ := x.ToDevice(dev)
		mid, _ := full.Slice(0, 2, 4)
		if err := mid.Poison(); err != nil {
			t.Fatal(err)
		}
		if err := mid.Free(); err != nil { // a view: frees nothing
			t.Fatal(err)
		}
		back, _ := full.ToHost()
		got, want := back.Float64s(), x.Float64s()
		for i := range got {
			poisoned := i/7 >= 2 && i/7 < 4
			if poisoned && dt.IsFloat() && !math.IsNaN(got[i]) || poisoned && !dt.IsFloat() && got[i] != -1 || !poisoned && !sameValue(got[i], want[i]) {
				t.Errorf("%v: element %d = %v after poisoning rows 2-3 (was %v)", dt, i, got[i], want[i])
			}
		}

		// CopyFrom host → device slice → host.
		src, _ := tensor.NewStrided(dt, []int{2, 7}, []int{9, 1})
		src.FillUniform(rng, -5, 5)
		if err := mid.CopyFrom(src); err != nil {
			t.Fatal(err)
		}
		dst, _ := tensor.NewStrided(dt, []int{2, 7}, []int{9, 1})
		if err := dst.CopyFrom(mid); err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(dst.Float64s(), src.Float64s(), sameValue) {
			t.Errorf("%v: CopyFrom through the device: %v, want %v", dt, dst.Float64s(), src.Float64s())
		}
		// CopyFrom between overlapping slices of one device tensor: each
		// row gets its source row as it was before the call.
		up, _ := full.Slice(0, 0, 3)
		down, _ := full.Slice(0, 1, 4)
		before, _ := full.ToHost()
		if err := down.CopyFrom(up); err != nil {
			t.Fatal(err)
		}
		after, _ := full.ToHost()
		old, shifted := before.Float64s(), after.Float64s()
		for i := range shifted {
			want := old[i]
			if r := i / 7; r >= 1 && r < 4 {
				want = old[i-7]
			}
			if !sameValue(shifted[i], want) {
				t.Errorf("%v: element %d = %v after copying rows 0-2 onto rows 1-3, want %v", dt, i, shifted[i], want)
			}
		}
		for _, f := range []*tensor.Tensor{d, full} {
			if err := f.Free(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// sameValue is equality with NaN equal to NaN.
func sameValue(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }

// TestRandDeviceFillsEverything checks that the doubling copies reach the
// last element of an odd-sized tensor and leave nothing zero or NaN.
func TestRandDeviceFillsEverything(t *testing.T) {
	dev := gputest.Device(t)
	rng := tensor.SeededRNG(3)
	for _, n := range []int{1, 1000, 1<<16 + 7, 3<<16 + 5} {
		d, err := tensor.RandDevice(dev, rng, tensor.BF16, 2, 0.5, n)
		if err != nil {
			t.Fatal(err)
		}
		h, err := d.ToHost()
		d.Free()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range h.Float64s() {
			if v == 0 || v != v {
				t.Fatalf("n=%d: element %d is %v", n, i, v)
			}
		}
	}
}

// TestCopyFromOnStream copies on a stream: a column slice between device
// tensors captured into a CUDA graph and replayed (its gaps untouched),
// from and to the host, and between overlapping rows of one tensor.
func TestCopyFromOnStream(t *testing.T) {
	dev := gputest.Device(t)
	rng := tensor.SeededRNG(4)
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	x, y := tensor.New(tensor.BF16, 6, 10), tensor.New(tensor.BF16, 6, 10)
	x.FillNormal(rng, 0, 1)
	y.FillNormal(rng, 5, 1)
	dx, _ := x.ToDevice(dev)
	dy, _ := y.ToDevice(dev)
	defer dx.Free()
	defer dy.Free()
	from, _ := dx.Slice(1, 2, 7)
	to, _ := dy.Slice(1, 2, 7)
	g, err := s.Capture(cuda.CaptureGlobal, func() error { return to.CopyFromOn(s, from) })
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	if got, _ := dy.ToHost(); !bytes.Equal(got.Bytes(), y.Bytes()) {
		t.Fatal("capturing the copy ran it")
	}
	if err := g.Launch(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got, _ := dy.ToHost()
	want, _ := y.Slice(1, 2, 7)
	xs, _ := x.Slice(1, 2, 7)
	want.CopyFrom(xs)
	if !bytes.Equal(got.Bytes(), y.Bytes()) {
		t.Errorf("replayed column copy: %v, want %v", got.Float64s(), y.Float64s())
	}
	// Host → device and back on the stream; rows 0-4 onto rows 1-5.
	if err := dx.CopyFromOn(s, y); err != nil {
		t.Fatal(err)
	}
	up, _ := dx.Slice(0, 0, 5)
	down, _ := dx.Slice(0, 1, 6)
	if err := down.CopyFromOn(s, up); err != nil {
		t.Fatal(err)
	}
	back := tensor.New(tensor.BF16, 6, 10)
	if err := back.CopyFromOn(s, dx); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	b, w := back.Bytes(), y.Bytes()
	if !bytes.Equal(b[:20], w[:20]) || !bytes.Equal(b[20:], w[:100]) {
		t.Errorf("rows shifted on the stream: %v, from %v", back.Float64s(), y.Float64s())
	}
}
