package registry

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gokittens/kittens/check"
)

func TestRegisterLookupFamily(t *testing.T) {
	t.Cleanup(func() { // leave the registry as it was, so that -count=N runs again
		mu.Lock()
		defer mu.Unlock()
		delete(ops, "zz_test_a")
		delete(ops, "zz_test_b")
	})
	Register(&Op{Name: "zz_test_b", Family: "zz_fam"})
	Register(&Op{Name: "zz_test_a", Family: "zz_fam"})
	ops := Family("zz_fam")
	if len(ops) != 2 || ops[0].Name != "zz_test_a" {
		t.Fatalf("family not sorted by name: %v", ops)
	}
	if _, ok := Lookup("zz_test_b"); !ok {
		t.Fatal("lookup failed")
	}
	if _, ok := Lookup("nope"); ok {
		t.Fatal("found an unregistered op")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a duplicate name did not panic")
		}
	}()
	Register(&Op{Name: "zz_test_a", Family: "other"})
}

func TestTorchSnippetsSorted(t *testing.T) {
	RegisterTorch("zz_b", "b")
	RegisterTorch("zz_a", "a")
	s := TorchSnippets()
	ia, ib := -1, -1
	for i, v := range s {
		switch v {
		case "a":
			ia = i
		case "b":
			ib = i
		}
	}
	if ia < 0 || ib < ia {
		t.Fatalf("snippets not sorted by family: %v", s)
	}
}

// TestWarmRunsEveryCase: Warm draws every case once and calls done after
// each, with some running at once; a case that cannot warm (here: no
// device) is left for its Run to report.
func TestWarmRunsEveryCase(t *testing.T) {
	const n = 40
	var drawn, running, most, done atomic.Int32
	checks := make([]Check, n)
	for i := range checks {
		checks[i] = Check{Name: fmt.Sprint(i), Spec: func(*rand.Rand) (check.Spec, error) {
			drawn.Add(1)
			r := running.Add(1)
			for m := most.Load(); r > m && !most.CompareAndSwap(m, r); m = most.Load() {
			}
			time.Sleep(2 * time.Millisecond)
			running.Add(-1)
			return check.Spec{}, errors.New("no case")
		}}
	}
	Warm(nil, checks, func() { done.Add(1) })
	if drawn.Load() != n || done.Load() != n {
		t.Fatalf("%d cases drawn, done called %d times, want %d", drawn.Load(), done.Load(), n)
	}
	if runtime.NumCPU() > 1 && most.Load() < 2 {
		t.Errorf("at most %d cases at once on %d CPUs", most.Load(), runtime.NumCPU())
	}
}

// TestFanOutBudget: fanOut never holds more than its budget of sizes at
// once, yet runs a case larger than the budget (alone), and runs them all.
func TestFanOutBudget(t *testing.T) {
	sizes := []int64{6, 5, 4, 20, 3, 2, 7, 1, 0, 9}
	const budget = 10
	var mu sync.Mutex
	var held, most int64
	ran := make([]bool, len(sizes))
	fanOut(len(sizes), func(i int) int64 { return sizes[i] }, budget, nil, func(i int, _ *rand.Rand) {
		w := min(sizes[i], budget)
		mu.Lock()
		held += w
		most = max(most, held)
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		held -= w
		ran[i] = true
		mu.Unlock()
	})
	if most > budget || slices.Contains(ran, false) {
		t.Fatalf("at most %d held at once (budget %d), ran %v", most, budget, ran)
	}
}
