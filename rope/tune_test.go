package rope

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
	"github.com/gokittens/kittens/tensor"
)

func (k knobs) String() string {
	s := fmt.Sprintf("hpt%d/threads%d/occ%d", k.hpt, k.threads, k.occ)
	if k.cs {
		s += "/cs"
	}
	if k.flat {
		s += "/flat"
	}
	if k.evict {
		s += "/evict"
	}
	return s
}

// tuneKnobs are the launch choices BenchmarkTune compares on the serving
// cases (pickKnobs says what they measured); the first is timed again last,
// to show the run-to-run spread.
var tuneKnobs = []knobs{
	{hpt: 4, threads: 128, occ: 1024, cs: true},
	{hpt: 2, threads: 64, occ: 1536, cs: true},
	{hpt: 4, threads: 128, occ: 1024, cs: true, flat: true},
	{hpt: 2, threads: 128, occ: 1536, cs: true, flat: true},
	{hpt: 1, threads: 128, occ: 1536, cs: true, flat: true},
	{hpt: 1, threads: 128, occ: 2048, cs: true, flat: true},
	{hpt: 1, threads: 128, occ: 1536, flat: true},
	{hpt: 4, threads: 128, occ: 1024, cs: true},
}

// bhsdKnobs are the launch choices BenchmarkTune compares on the [B, H, S, D]
// cases, the picker's (one head a thread, 128-thread blocks, the evict-last
// reads where the launch outgrows L2) first and again last.
var bhsdKnobs = []knobs{
	{hpt: 1, threads: 128, evict: true},
	{hpt: 1, threads: 128},
	{hpt: 1, threads: 64, evict: true},
	{hpt: 1, threads: 256, evict: true},
	{hpt: 1, threads: 512, evict: true},
	{hpt: 2, threads: 128, evict: true},
	{hpt: 1, threads: 128, evict: true, cs: true},
	{hpt: 1, threads: 128, occ: 2048, evict: true},
	{hpt: 1, threads: 128, evict: true},
}

// parityKnobs are launch choices the parity cases do not reach through
// pickKnobs (their shapes are small): flat launches, 3-D launches with the
// flat knobs (a flat launch of more than 2³¹ threads falls back to them),
// and the L2 evict-last reads of [B, H, S, D] launches larger than L2.
var parityKnobs = []knobs{
	{hpt: 1, threads: 128, occ: 1536, cs: true, flat: true},
	{hpt: 2, threads: 128, occ: 1536, cs: true, flat: true},
	{hpt: 4, threads: 256, flat: true},
	{hpt: 2, threads: 64, occ: 1536, cs: true},
	{hpt: 1, threads: 128, evict: true},
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

// TestParityKnobs runs the parity cases at each of parityKnobs (GPU).
func TestParityKnobs(t *testing.T) {
	gputest.Device(t)
	defer func() { tuning = knobs{} }()
	for _, k := range parityKnobs {
		tuning = k
		t.Run(k.String(), func(t *testing.T) { gputest.RunChecks(t, Suite()) })
	}
}

// BenchmarkTune times an in-place identity pass (the reference for in-place
// bytes), then the large serving cases at each of tuneKnobs and the
// [B, H, S, D] cases at each of bhsdKnobs (KITTENS_ROPE_TUNE=1, GPU).
func BenchmarkTune(b *testing.B) {
	if os.Getenv("KITTENS_ROPE_TUNE") != "1" {
		b.Skip("set KITTENS_ROPE_TUNE=1 to run")
	}
	dev := gputest.Device(b)
	defer func() { tuning = knobs{} }()
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
	for _, op := range Suite().Ops {
		for _, c := range op.Benches {
			ks := tuneKnobs
			switch {
			case op.Name == "rope_bhsd":
				ks = bhsdKnobs
			case strings.Contains(c.Name, "T=1 ") || strings.Contains(c.Name, "T=32 "):
				continue
			}
			for _, k := range ks {
				tuning = k
				r, err := bench.Measure(dev, c, bench.Options{Runs: 100})
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
