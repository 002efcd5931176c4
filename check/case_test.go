package check

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestWarmAllRunsEveryCase: WarmAll draws every case once and calls done
// after each, with some running at once; a case that cannot warm (here: no
// device) is left for its Run to report.
func TestWarmAllRunsEveryCase(t *testing.T) {
	const n = 40
	var drawn, running, most, done atomic.Int32
	cases := make([]Case, n)
	for i := range cases {
		cases[i] = Case{Name: fmt.Sprint(i), Spec: func(*rand.Rand) (Spec, error) {
			drawn.Add(1)
			r := running.Add(1)
			for m := most.Load(); r > m && !most.CompareAndSwap(m, r); m = most.Load() {
			}
			time.Sleep(2 * time.Millisecond)
			running.Add(-1)
			return Spec{}, errors.New("no case")
		}}
	}
	WarmAll(nil, cases, func() { done.Add(1) })
	if drawn.Load() != n || done.Load() != n {
		t.Fatalf("%d cases drawn, done called %d times, want %d", drawn.Load(), done.Load(), n)
	}
	if runtime.NumCPU() > 1 && most.Load() < 2 {
		t.Errorf("at most %d cases at once on %d CPUs", most.Load(), runtime.NumCPU())
	}
}
