package check_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/tensor"
)

// TestWarm: Warm runs the op on device copies, once plainly and, where the
// device has dependent launches, once more on a stream set for them, never
// capturing; the host tensors it was given are left as they were. Without
// a device it is an error.
func TestWarm(t *testing.T) {
	x := tensor.Rand(tensor.SeededRNG(3), tensor.F32, 1, 7)
	y := tensor.New(tensor.F32, 7)
	xb, yb := append([]byte(nil), x.Bytes()...), append([]byte(nil), y.Bytes()...)
	var dependent []bool
	spec := check.Spec{
		Tensors: []*tensor.Tensor{x, y}, Names: []string{"x", "y"}, Outputs: []int{1}, Poison: []int{1},
		Run: func(s *cuda.Stream, ts []*tensor.Tensor) error {
			capturing, err := s.Capturing()
			if err != nil {
				return err
			}
			if capturing || !ts[0].IsDevice() {
				t.Errorf("capturing %v, x on the device %v: want a direct device run", capturing, ts[0].IsDevice())
			}
			dependent = append(dependent, s.DependentLaunch())
			return ts[1].CopyFromOn(s, ts[0])
		},
	}
	if err := check.Warm(nil, spec); err == nil || len(dependent) > 0 {
		t.Fatalf("without a device: error %v, %d runs", err, len(dependent))
	}
	dev := gputest.Device(t)
	if err := check.Warm(dev, spec); err != nil {
		t.Fatal(err)
	}
	want := []bool{false}
	if dev.Props().DependentLaunch() {
		want = append(want, true)
	}
	if !slices.Equal(dependent, want) {
		t.Errorf("runs on dependent streams %v, want %v", dependent, want)
	}
	if !bytes.Equal(x.Bytes(), xb) || !bytes.Equal(y.Bytes(), yb) {
		t.Error("Warm changed the host tensors")
	}
}
