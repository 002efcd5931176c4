package fanout

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestBudget: Run never holds more than its budget of sizes at once, yet
// runs a job larger than the budget (alone), and runs them all.
func TestBudget(t *testing.T) {
	sizes := []int64{6, 5, 4, 20, 3, 2, 7, 1, 0, 9}
	const budget = 10
	var mu sync.Mutex
	var held, most int64
	ran := make([]bool, len(sizes))
	Run(len(sizes), func(i int) int64 { return sizes[i] }, budget, nil, func(i int, _ *rand.Rand) {
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
