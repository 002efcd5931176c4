// Package fanout runs many independent jobs at once, bounded by the host's
// CPUs and by a memory budget: how the harness warms many parity or
// benchmark cases, whose kernels then compile in parallel.
package fanout

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/gokittens/kittens/tensor"
)

// Run calls fn(i, rng) for every i < n, each with fresh random inputs to
// draw from, as many at once as the host has CPUs and as fit, by size(i),
// in budget together (one larger than budget runs alone), and done (when
// not nil) after each; it returns when all have run.
func Run(n int, size func(int) int64, budget int64, done func(), fn func(int, *rand.Rand)) {
	budget = max(budget, 1)
	mem := semaphore.NewWeighted(budget)
	cpus := make(chan struct{}, runtime.NumCPU())
	var wg sync.WaitGroup
	for i := range n {
		w := min(max(size(i), 0), budget)
		_ = mem.Acquire(context.Background(), w) // never fails: the context is never done
		cpus <- struct{}{}
		wg.Go(func() {
			defer mem.Release(w)
			defer func() { <-cpus }()
			rng, _ := tensor.NewRNG()
			fn(i, rng)
			if done != nil {
				done()
			}
		})
	}
	wg.Wait()
}
