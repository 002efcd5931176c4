package bench

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/registry"
)

func TestMeasureHost(t *testing.T) {
	calls := 0
	for _, tc := range []struct {
		name      string
		runs      int
		rep       check.Report
		err       error
		wantRuns  int
		wantError string
	}{
		{name: "default runs", rep: check.Report{Pass: true, CPUOnly: true}, wantRuns: hostRuns},
		{name: "five runs", runs: 5, rep: check.Report{Pass: true, CPUOnly: true}, wantRuns: 5},
		{name: "unwritten output", rep: check.Report{Name: "y", Unwritten: 3, CPUOnly: true}, wantError: "seed"},
		{name: "host error", err: errors.New("bad shape"), wantError: "bad shape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls = 0
			c := registry.Check{Name: tc.name, Run: func(dev *cuda.Device, rng *rand.Rand) (check.Report, error) {
				if dev != nil {
					t.Error("MeasureHost passed a device")
				}
				calls++
				return tc.rep, tc.err
			}}
			r, err := MeasureHost(c, tc.runs)
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
	c := registry.Check{Name: "slow second", Run: func(*cuda.Device, *rand.Rand) (check.Report, error) {
		calls++
		if calls == 2 {
			time.Sleep(20 * time.Millisecond)
		}
		return check.Report{Pass: true, CPUOnly: true}, nil
	}}
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
