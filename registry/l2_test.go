package registry_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/registry"
)

// BenchmarkL2Leftovers measures what the L2 evict-last lines that a large
// hinted launch leaves behind cost the kernel after it (PERFORMANCE.md,
// lever 7). The probe is rmsnorm 4096x128 rotating 8 to 24 input sets
// (16-48 MiB read and written); it is timed after a reset of L2's
// persisting lines ("clean"), and after one launch of each family's largest
// hinted case with no reset in between; "then copy" adds a 512 MiB copy
// (normal-priority traffic) between that launch and the probe. Set
// KITTENS_L2_LEFTOVERS=1 to run it; lines start with LEFT. l2_torch.py
// measures the same for torch.compile's kernels and cuBLAS GEMMs.
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
	const copyBytes = 512 << 20
	var bufs [2]cuda.DevicePtr
	for i := range bufs {
		if bufs[i], err = dev.Alloc(copyBytes); err != nil {
			b.Fatal(err)
		}
		defer dev.Free(bufs[i])
	}
	type state struct {
		name string
		run  func() error // leaves the lines; nil: clean
	}
	states := []state{{"clean", nil}}
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
		states = append(states, state{c[0] + " " + c[1], func() error { return in.Run(s) }})
		if c[0] == "rmsnorm" {
			states = append(states, state{c[0] + " " + c[1] + " then copy", func() error {
				if err := in.Run(s); err != nil {
					return err
				}
				return s.CopyDtoD(bufs[1], bufs[0], copyBytes)
			}})
		}
	}
	probe := find("rmsnorm", "4096x128 bf16")
	for round := range 2 {
		for _, st := range states {
			for _, sets := range []int{8, 12, 14, 16, 18, 20, 24} {
				if err := dev.ResetPersistingL2(); err != nil {
					b.Fatal(err)
				}
				if st.run != nil {
					if err := st.run(); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.Synchronize(); err != nil {
					b.Fatal(err)
				}
				r, err := bench.Measure(dev, probe, bench.Options{MaxSets: sets, Runs: 100, KeepL2: true})
				if err != nil {
					b.Fatal(err)
				}
				fmt.Printf("LEFT round %d  %-42s %2d sets (%2d MiB)  %7.2f us\n", round, st.name, r.Sets, r.Sets*int(probe.Bytes)>>20, r.MedianUS)
			}
		}
	}
}
