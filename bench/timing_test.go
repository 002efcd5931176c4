package bench

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/tensor"
)

// hostCase is a parity case of one f32 output y that run fills on the host:
// it counts its calls in *calls, and fails the test if it ever runs on a
// device.
func hostCase(t *testing.T, name string, calls *int, run func(y *tensor.Tensor) error) check.Case {
	return check.Case{Name: name, Spec: func(*rand.Rand) (check.Spec, error) {
		return check.Spec{
			Tensors: []*tensor.Tensor{tensor.New(tensor.F32, 4)}, Names: []string{"y"}, Outputs: []int{0}, Poison: []int{0},
			Run: func(s *cuda.Stream, ts []*tensor.Tensor) error {
				if s != nil {
					t.Error("MeasureHost passed a device stream")
				}
				*calls++
				return run(ts[0])
			},
		}, nil
	}}
}

func TestMeasureHost(t *testing.T) {
	fill := func(y *tensor.Tensor) error { y.SetFloat64s([]float64{1, 2, 3, 4}); return nil }
	for _, tc := range []struct {
		name      string
		runs      int
		run       func(y *tensor.Tensor) error
		wantRuns  int
		wantError string
	}{
		{name: "default runs", run: fill, wantRuns: hostRuns},
		{name: "five runs", runs: 5, run: fill, wantRuns: 5},
		{name: "unwritten output", run: func(*tensor.Tensor) error { return nil }, wantError: "seed"},
		{name: "host error", run: func(*tensor.Tensor) error { return errors.New("bad shape") }, wantError: "bad shape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			r, err := MeasureHost(hostCase(t, tc.name, &calls, tc.run), tc.runs)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if calls != tc.wantRuns || r.Runs != tc.wantRuns || r.MinUS < 0 || r.MinUS > r.MedianUS {
				t.Errorf("calls %d, result %+v, want %d runs", calls, r, tc.wantRuns)
			}
		})
	}
}

// TestMedian holds every median to one convention: the upper of the middle
// two for an even count, as torch_base.py takes PyTorch's.
func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		v    []float64
		want float64
	}{{nil, 0}, {[]float64{5}, 5}, {[]float64{4, 1, 3, 2}, 3}, {[]float64{2, 9}, 9}, {[]float64{3, 1, 2}, 2}} {
		if got := median(tc.v); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

// TestMeasureHostMedian times two runs, one far slower than the other: the
// median is the slower one, not their mean.
func TestMeasureHostMedian(t *testing.T) {
	calls := 0
	c := hostCase(t, "slow second", &calls, func(y *tensor.Tensor) error {
		if calls == 2 {
			time.Sleep(20 * time.Millisecond)
		}
		y.SetFloat64s([]float64{1, 2, 3, 4})
		return nil
	})
	r, err := MeasureHost(c, 2)
	if err != nil {
		t.Fatal(err)
	}
	if r.MedianUS < 20e3 || r.MinUS >= 20e3 {
		t.Errorf("median %.0f µs, min %.0f µs: want the slower run's time as the median", r.MedianUS, r.MinUS)
	}
}

func TestDescribeWithoutDevice(t *testing.T) {
	e := Describe(nil)
	if !e.CPUOnly() || e.Date.IsZero() || !strings.Contains(e.String(), "CPU path only") {
		t.Errorf("Describe(nil) = %+v (%s)", e, e)
	}
}

// TestCopyBytes checks that CopyAt's halves are whole copyGrain units, at
// least half the bytes asked for and less than a unit more.
func TestCopyBytes(t *testing.T) {
	for _, moved := range []int64{1, 2, 2 * copyGrain, 2*copyGrain + 2, 67117056, 67112960, 1 << 31} {
		h := CopyBytes(moved) / 2
		if h%copyGrain != 0 || 2*h < moved || 2*(h-copyGrain) >= moved {
			t.Errorf("CopyBytes(%d) = %d", moved, 2*h)
		}
	}
	for _, moved := range []int64{0, -4} {
		if b := CopyBytes(moved); b != 0 {
			t.Errorf("CopyBytes(%d) = %d, want 0", moved, b)
		}
	}
}
