// Package bench times registered ops on the GPU and compares them with
// PyTorch eager and torch.compile measured in the same run.
//
// Method: CUDA events around every launch; a spin kernel queued first so
// the host runs ahead of the GPU and the events measure GPU time only; enough
// independent input sets, rotated, that the data they touch is several times
// the L2, up to 16 sets (cases of a few MB then stay in L2, as they do on
// PyTorch's side); L2's persisting lines reset and a warm-up first; the
// median of many launches. The timed launches go on the legacy default
// stream, the stream PyTorch's side runs on (its current stream) and the
// ops' own default. A small kernel's time depends on the process that
// launches it (its CUDA context draws one of two launch floors, about 0.2
// µs apart), so a run also times an empty kernel (Floor) and reports it.
package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/jit"
)

// Options tune a measurement.
type Options struct {
	Runs      int // timed launches (default 200)
	MaxSets   int // most input sets to rotate (default 16)
	L2Factor  int // rotate enough sets to touch this many times the L2 (default 3)
	MemBudget int64
	// KeepL2 leaves L2's persisting lines as earlier work left them; by
	// default Measure resets them first, so that no case inherits the
	// evict-last lines of the one before (registry's BenchmarkL2Leftovers
	// measures what they cost).
	KeepL2 bool
	// Graph, when positive, times launches inside CUDA graphs: that many
	// launches (rounded up to a whole number of rotations over the input
	// sets) are captured into one graph, each timed run replays it, and the
	// time per launch is the replay's over that number. A graph costs one
	// launch on the host and lets the GPU start each kernel as the one
	// before it ends, as serving engines run their decode steps, so small
	// kernels come out shorter than launched one at a time.
	Graph int
	// Dependent, with Graph, captures the launches as programmatic
	// dependent launches (cuda.Stream.SetDependentLaunch; compute
	// capability 9.0 and later): each kernel may launch while the one
	// before it runs, and waits for it on the GPU.
	Dependent bool
}

func (o *Options) defaults() {
	if o.Runs <= 0 {
		o.Runs = 200
	}
	if o.MaxSets <= 0 {
		o.MaxSets = 16
	}
	if o.L2Factor <= 0 {
		o.L2Factor = 3
	}
	if o.MemBudget <= 0 {
		o.MemBudget = 8 << 30
	}
}

// Result is one timed case.
type Result struct {
	MedianUS  float64 // median GPU time per launch, µs (see median)
	MinUS     float64
	GBs       float64 // Bytes / median
	TFLOPs    float64 // Flops / median
	Sets      int     // input sets rotated
	Runs      int
	Graph     int  // launches per timed graph replay (Options.Graph, rounded); 0: each launch timed alone
	Dependent bool // the graph's launches were dependent launches (Options.Dependent)
}

// Measure times one benchmark case on dev.
func Measure(dev *cuda.Device, b Case, opt Options) (Result, error) {
	opt.defaults()
	if opt.Dependent && opt.Graph <= 0 {
		return Result{}, fmt.Errorf("bench: Options.Dependent needs Options.Graph: dependent launches overlap inside a graph")
	}
	sets := 1
	if b.Bytes > 0 {
		want := int64(dev.Props().L2Bytes) * int64(opt.L2Factor)
		sets = int((want + b.Bytes - 1) / b.Bytes)
		sets = max(1, min(sets, opt.MaxSets, int(opt.MemBudget/max(b.Bytes, 1))))
	}
	rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
	insts := make([]Instance, 0, sets)
	defer func() {
		for _, in := range insts {
			if in.Free != nil {
				in.Free()
			}
		}
	}()
	for range sets {
		in, err := b.New(dev, rng)
		if err != nil {
			return Result{}, err
		}
		insts = append(insts, in)
	}
	// s warms the kernels up and is captured into graphs (which the legacy
	// default stream cannot be); the timed launches and graph replays go on
	// the legacy default stream, as PyTorch's do.
	s, err := dev.NewStream()
	if err != nil {
		return Result{}, err
	}
	defer s.Destroy()
	timed := dev.DefaultStream()
	if !opt.KeepL2 {
		if err := dev.ResetPersistingL2(); err != nil {
			return Result{}, err
		}
	}
	// Warm up: every set once (this also loads the op's kernels, those
	// built for dependent launches where the graph takes them).
	if err := s.SetDependentLaunch(opt.Dependent); err != nil {
		return Result{}, fmt.Errorf("bench: %w", err)
	}
	for _, in := range insts {
		if err := in.Run(s); err != nil {
			return Result{}, err
		}
	}
	if err := s.Synchronize(); err != nil {
		return Result{}, fmt.Errorf("bench: warm-up: %w", err)
	}
	launch, per := func(i int) error { return insts[i%sets].Run(timed) }, 1
	if opt.Graph > 0 {
		per = (opt.Graph + sets - 1) / sets * sets
		g, err := s.Capture(cuda.CaptureGlobal, func() error {
			for i := range per {
				if err := insts[i%sets].Run(s); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return Result{}, fmt.Errorf("bench: capturing %d launches into a CUDA graph: %w", per, err)
		}
		defer g.Destroy()
		launch = func(int) error { return g.Launch(timed) }
	}
	times, err := timeRuns(dev, timed, opt.Runs, launch)
	if err != nil {
		return Result{}, err
	}
	for i := range times {
		times[i] /= float64(per)
	}
	r := Result{MedianUS: median(times), MinUS: slices.Min(times), Sets: sets, Runs: opt.Runs}
	if opt.Graph > 0 {
		r.Graph, r.Dependent = per, opt.Dependent
	}
	if r.MedianUS > 0 {
		r.GBs = float64(b.Bytes) / (r.MedianUS * 1e3)
		r.TFLOPs = float64(b.Flops) / (r.MedianUS * 1e6)
	}
	return r, nil
}

// Floor times a kernel that does nothing (one block of 32 threads) as
// Measure times a case with opt: the launch floor under every case this
// process times, the GPU's cost of a launch and its events rather than a
// kernel's. Each CUDA context draws its floor (one of two speeds, about
// 0.2 µs apart on an H200) and a process times in one, its primary context;
// the floor may still rise early in a process's life, so a report gives
// each run's floor, ours and PyTorch's process's, before the first case and
// after the last (Env.Floors).
func Floor(dev *cuda.Device, opt Options) (Result, error) {
	f, err := jit.Get(dev, jit.Kernel{File: "bench/spin.cu", Source: spinSrc, Entry: "empty", Dependent: opt.Dependent})
	if err != nil {
		return Result{}, err
	}
	run := func(s *cuda.Stream) error {
		return f.Launch(cuda.LaunchConfig{Grid: cuda.D1(1), Block: cuda.D1(32), Stream: s}, cuda.NewArgs())
	}
	b := Case{Name: "empty kernel", New: func(*cuda.Device, *rand.Rand) (Instance, error) {
		return Instance{Run: run}, nil
	}}
	r, err := Measure(dev, b, opt)
	if err != nil {
		return Result{}, fmt.Errorf("bench: launch floor: %w", err)
	}
	return r, nil
}
