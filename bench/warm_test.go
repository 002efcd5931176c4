package bench_test

import (
	"math/rand/v2"
	"testing"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
)

// TestCaseWarm: Case.Warm allocates one set, runs it once on a stream
// set for dependent launches exactly when asked, and frees it.
func TestCaseWarm(t *testing.T) {
	dev := gputest.Device(t)
	for _, dependent := range []bool{false, true} {
		if dependent && !dev.Props().DependentLaunch() {
			continue
		}
		var runs, frees int
		b := bench.Case{Name: "probe", Bytes: 1 << 20, New: func(dev *cuda.Device, _ *rand.Rand) (bench.Instance, error) {
			p, err := dev.Alloc(1 << 20)
			if err != nil {
				return bench.Instance{}, err
			}
			return bench.Instance{
				Run: func(s *cuda.Stream) error {
					runs++
					if s.DependentLaunch() != dependent {
						t.Errorf("stream set for dependent launches: %v, want %v", s.DependentLaunch(), dependent)
					}
					return s.Memset8(p, 1, 1<<20)
				},
				Free: func() { frees++; dev.Free(p) },
			}, nil
		}}
		if err := b.Warm(dev, rand.New(rand.NewPCG(1, 2)), dependent); err != nil {
			t.Fatal(err)
		}
		if runs != 1 || frees != 1 {
			t.Errorf("dependent %v: %d runs, %d frees, want 1 each", dependent, runs, frees)
		}
	}
}
