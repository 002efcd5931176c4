package bench

import (
	_ "embed"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

//go:embed spin.cu
var spinSrc string

var spinKernel = jit.Kernel{File: "bench/spin.cu", Source: spinSrc, Entry: "spin"}

// spinPerRun is how long the spin kernel holds the GPU for each queued
// launch: far more than the host needs to queue one.
const spinPerRun = 12 * time.Microsecond

// timeRuns times runs calls of launch on s, each between two events. A spin
// kernel queued first keeps the GPU busy while the host queues them all, so
// the events see GPU time only. It does this twice and keeps the second
// round (the first warms clocks and caches). The times come back in µs, in
// launch order.
func timeRuns(dev *cuda.Device, s *cuda.Stream, runs int, launch func(i int) error) ([]float64, error) {
	spin, err := jit.Get(dev, spinKernel)
	if err != nil {
		return nil, err
	}
	evs := make([]*cuda.Event, runs+1)
	for i := range evs {
		if evs[i], err = dev.NewEvent(); err != nil {
			return nil, err
		}
		defer evs[i].Destroy()
	}
	times := make([]float64, 0, runs)
	for range 2 {
		times = times[:0]
		if err := spin.Launch(cuda.LaunchConfig{Grid: cuda.D1(1), Block: cuda.D1(1), Stream: s},
			cuda.NewArgs().I64(int64(runs)*spinPerRun.Nanoseconds())); err != nil {
			return nil, err
		}
		if err := evs[0].Record(s); err != nil {
			return nil, err
		}
		for i := range runs {
			if err := launch(i); err != nil {
				return nil, err
			}
			if err := evs[i+1].Record(s); err != nil {
				return nil, err
			}
		}
		if err := s.Synchronize(); err != nil {
			return nil, fmt.Errorf("bench: timed runs: %w", err)
		}
		for i := range runs {
			ms, err := cuda.Elapsed(evs[i], evs[i+1])
			if err != nil {
				return nil, err
			}
			times = append(times, float64(ms)*1e3)
		}
	}
	return times, nil
}

// median is the middle of v, the upper of the middle two for an even count
// (as torch_base.py's time_us takes it, so that both sides of a comparison
// are the same statistic), 0 for none. It sorts v. Every median of this
// package, of launches and of runs alike, is this one.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

// Copy-bandwidth measurement: the largest buffer, the smallest that still
// says something, and how many copies are timed.
const (
	copyBytes    = 1 << 30
	copyMinBytes = 64 << 20
	copyRuns     = 20
)

// CopyBandwidth measures the device's practical memory ceiling in GB/s: the
// median of 20 device-to-device copies of a 1 GiB buffer (smaller when less
// memory is free), counting the bytes read plus the bytes written, timed
// with events as Measure times an op. Memory-bound ops are reported as a
// fraction of it.
func CopyBandwidth(dev *cuda.Device) (float64, error) {
	n := int64(copyBytes)
	if free, _, err := dev.MemInfo(); err == nil {
		n = min(n, free/4) // two buffers, and room left for the caller
	}
	n &^= 1<<20 - 1
	if n < copyMinBytes {
		return 0, fmt.Errorf("bench: copy bandwidth: only %d MiB of device memory free", n>>20)
	}
	return CopyAt(dev, 2*n)
}

// CopyAt measures one device-to-device copy that moves about `moved` bytes
// (half read, half written) in GB/s, timed as Measure times an op: events
// around each copy, rotated over enough buffer pairs to touch three times
// the L2, the median of 20. Against CopyBandwidth's 1 GiB copy it shows what
// a single launch of this size can reach: its ramp-up and drain are not
// amortized over a gigabyte.
//
// Each half is rounded up to whole copyGrain units (CopyBytes): the driver's
// device-to-device copy is slower where the size is not a multiple of 4 KiB
// (on an H200, a 16 MiB half plus 2 KiB by 18%).
func CopyAt(dev *cuda.Device, moved int64) (float64, error) {
	half := CopyBytes(moved) / 2
	if half <= 0 {
		return 0, fmt.Errorf("bench: copy of %d bytes", moved)
	}
	sets := int(max(1, min(16, (3*int64(dev.Props().L2Bytes)+moved-1)/moved)))
	var bufs []cuda.DevicePtr
	defer func() {
		for _, b := range bufs {
			dev.Free(b)
		}
	}()
	s := dev.DefaultStream() // as Measure times the cases
	for range 2 * sets {
		b, err := dev.Alloc(int(half))
		if err != nil {
			return 0, err
		}
		bufs = append(bufs, b)
		if err := s.Memset8(b, 0x5A, int(half)); err != nil {
			return 0, err
		}
	}
	times, err := timeRuns(dev, s, copyRuns, func(i int) error {
		k := 2 * (i % sets)
		return s.CopyDtoD(bufs[k+1], bufs[k], int(half))
	})
	if err != nil {
		return 0, err
	}
	return float64(2*half) / (median(times) * 1e3), nil
}

// copyGrain is the unit CopyAt rounds each half of a copy up to.
const copyGrain = 64 << 10

// CopyBytes is what CopyAt's copy of about moved bytes moves: two halves,
// each half of moved rounded up to whole copyGrain units (0 for moved ≤ 0).
// Sizes with the same CopyBytes share one measurement.
func CopyBytes(moved int64) int64 {
	if moved <= 0 {
		return 0
	}
	return 2 * (((moved+1)/2 + copyGrain - 1) / copyGrain * copyGrain)
}

// hostRuns is how many times MeasureHost runs a case by default.
const hostRuns = 3

// MeasureHost times the CPU path of one parity case: runs calls (3 when
// runs ≤ 0) of c.Run with a nil device, each on fresh inputs, by the wall
// clock. The time includes drawing the inputs and checking that every output
// was written, so it is an upper bound on the op's host path. A case that
// fails its host check is an error that names the seed.
func MeasureHost(c check.Case, runs int) (Result, error) {
	if runs <= 0 {
		runs = hostRuns
	}
	times := make([]float64, runs)
	for i := range times {
		rng, seed := tensor.NewRNG()
		t0 := time.Now()
		rep, err := c.Run(nil, rng)
		times[i] = float64(time.Since(t0).Nanoseconds()) / 1e3
		if err != nil {
			return Result{}, fmt.Errorf("seed %d: %w", seed, err)
		}
		if !rep.Pass {
			return Result{}, fmt.Errorf("seed %d: %v", seed, rep)
		}
	}
	return Result{MedianUS: median(times), MinUS: slices.Min(times), Sets: 1, Runs: runs}, nil
}
