package registry_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/registry"
)

// BenchmarkL2Leftovers checks that a large launch of ours leaves L2 to the
// kernels after it. Reads under an L2 evict-last policy keep their lines'
// priority after the kernel; left behind, such lines took L2 from later
// kernels whose data would fit in it (3-12% slower). Our kernels take that
// policy only where the device allows it (cuda.Device.SetL2EvictLast, off by
// default), so by default a foreign kernel runs at its own speed whatever
// ran before it; with it on, the lines are left behind.
//
// The probe is rmsnorm 4096x128 bf16 rotating 8 to 24 input sets, 16-48 MiB
// read and written: data that fit in L2, or nearly. For each family's
// largest case that the policy applies to, each setting and each probe size,
// the probe is timed after a reset of L2's persisting lines ("clean") and
// after one launch of the case with no reset in between ("after"), one
// beside the other, with the change. Set KITTENS_L2_LEFTOVERS=1 to run it;
// lines start with LEFT. l2_torch.py measures the same for torch.compile's
// kernels and cuBLAS GEMMs.
func BenchmarkL2Leftovers(b *testing.B) {
	if os.Getenv("KITTENS_L2_LEFTOVERS") != "1" {
		b.Skip("set KITTENS_L2_LEFTOVERS=1")
	}
	dev := gputest.Device(b)
	find := func(op, name string) bench.Case {
		if o, ok := registry.Lookup(op); ok {
			for _, c := range o.Benches {
				if c.Name == name {
					return c
				}
			}
		}
		b.Fatalf("no bench case %s %q", op, name)
		return bench.Case{}
	}
	s, err := dev.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Destroy()

	type hinted struct {
		name string
		in   bench.Instance
	}
	var cases []hinted
	rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
	for _, c := range [][2]string{
		{"rmsnorm", "16384x8192 bf16"}, {"fused_add_rmsnorm", "16384x8192 bf16"}, {"silu", "16384x8192 bf16"},
		{"softmax", "256x262144 f32"}, {"causal_conv1d_fwd", "1x32768x8192 bf16 w4"}, {"rope_bhsd", "16x32x4096x128 bf16"},
	} {
		in, err := find(c[0], c[1]).New(dev, rng)
		if err != nil {
			b.Fatal(err)
		}
		defer in.Free()
		cases = append(cases, hinted{c[0] + " " + c[1], in})
	}

	probe := find("rmsnorm", "4096x128 bf16")
	// timeProbe resets L2's persisting lines, runs leave (nil: nothing) and
	// times the probe over the given number of input sets.
	timeProbe := func(leave *bench.Instance, sets int) bench.Result {
		if err := dev.ResetPersistingL2(); err != nil {
			b.Fatal(err)
		}
		if leave != nil {
			if err := leave.Run(s); err != nil {
				b.Fatal(err)
			}
			if err := s.Synchronize(); err != nil {
				b.Fatal(err)
			}
		}
		r, err := bench.Measure(dev, probe, bench.Options{MaxSets: sets, Runs: 100, KeepL2: true})
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	defer dev.SetL2EvictLast(false)
	for _, on := range []bool{false, true} {
		dev.SetL2EvictLast(on)
		setting := map[bool]string{false: "default      ", true: "evict-last on"}[on]
		for _, c := range cases {
			worst := 0.0
			for _, sets := range []int{8, 12, 16, 20, 24} {
				clean := timeProbe(nil, sets)
				after := timeProbe(&c.in, sets)
				change := 100 * (after.MedianUS/clean.MedianUS - 1)
				worst = max(worst, change)
				fmt.Printf("LEFT %s  %-40s probe %2d MiB  clean %6.2f us  after %6.2f us  %+5.1f%%\n",
					setting, c.name, clean.Sets*int(probe.Bytes)>>20, clean.MedianUS, after.MedianUS, change)
			}
			fmt.Printf("LEFT %s  %-40s worst %+5.1f%%\n", setting, c.name, worst)
		}
	}
}
