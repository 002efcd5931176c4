package rope_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/rope"
	"github.com/gokittens/kittens/rope/ropetest"
	"github.com/gokittens/kittens/tensor"
)

// TestParityKnobs runs the parity cases at each of rope.ParityKnobs (GPU).
func TestParityKnobs(t *testing.T) {
	gputest.Device(t)
	for _, k := range rope.ParityKnobs {
		restore := rope.SetTuning(k)
		t.Run(k.String(), func(t *testing.T) { gputest.RunChecks(t, ropetest.Suite()) })
		restore()
	}
}

// touchFuncs is an in-place identity pass (16-byte load, store back), the
// reference for an in-place rotation's bytes.
var touchFuncs = jit.Funcs[int]{Kernel: func(int) jit.Kernel {
	return jit.Kernel{File: "rope/touch.cu", Entry: "touch", Source: `extern "C" __global__ void touch(uint4* p) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  uint4 v = p[i];
  asm volatile("" : "+r"(v.x));
  p[i] = v;
}`}
}}

// BenchmarkTune (KITTENS_ROPE_TUNE=1, GPU) prints the time of an in-place
// identity pass (the ceiling of an in-place rotation) at three sizes, then
// of the large serving cases at each of rope.TuneKnobs and of the
// [B, H, S, D] cases at each of rope.BHSDKnobs.
func BenchmarkTune(b *testing.B) {
	if os.Getenv("KITTENS_ROPE_TUNE") != "1" {
		b.Skip("set KITTENS_ROPE_TUNE=1 to run")
	}
	dev := gputest.Device(b)
	gbs, err := bench.CopyBandwidth(dev)
	if err != nil {
		b.Fatal(err)
	}
	var lines []string
	for _, mb := range []int{84, 135, 336} {
		n := mb << 20 / 2 // bf16 elements read and written in place
		bc := bench.Case{Bytes: int64(4 * n), New: func(dev *cuda.Device, rng *rand.Rand) (bench.Instance, error) {
			x, err := tensor.RandDevice(dev, rng, tensor.BF16, 0, 1, n)
			if err != nil {
				return bench.Instance{}, err
			}
			fn, err := touchFuncs.Get(dev, nil, 0)
			if err != nil {
				return bench.Instance{}, err
			}
			cfg := cuda.LaunchConfig{Grid: cuda.D1(n / 8 / 256), Block: cuda.D1(256)}
			return bench.Instance{
				Run:  func(s *cuda.Stream) error { cfg.Stream = s; return fn.Launch(cfg, cuda.NewArgs().Ptr(x.Ptr())) },
				Free: func() { x.Free() },
			}, nil
		}}
		r, err := bench.Measure(dev, bc, bench.Options{Runs: 100})
		if err != nil {
			b.Fatal(err)
		}
		same, err := bench.CopyAt(dev, bc.Bytes)
		if err != nil {
			b.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("in-place identity, %d MiB: %.2f µs %.0f GB/s %.0f%% of copy, same-size copy %.0f GB/s",
			mb, r.MedianUS, r.GBs, 100*r.GBs/gbs, same))
	}
	for _, op := range ropetest.Suite().Ops {
		for _, c := range op.Benches {
			ks := rope.TuneKnobs
			switch {
			case op.Name == "rope_bhsd":
				ks = rope.BHSDKnobs
			case strings.Contains(c.Name, "T=1 ") || strings.Contains(c.Name, "T=32 "):
				continue
			}
			for _, k := range ks {
				restore := rope.SetTuning(k)
				r, err := bench.Measure(dev, c, bench.Options{Runs: 100})
				restore()
				if err != nil {
					b.Fatal(err)
				}
				lines = append(lines, fmt.Sprintf("%-52s %-34s %8.2f µs %6.0f GB/s %4.0f%%",
					c.Name, k, r.MedianUS, r.GBs, 100*r.GBs/gbs))
			}
		}
	}
	fmt.Printf("copy %.0f GB/s\n%s\n", gbs, strings.Join(lines, "\n"))
}
