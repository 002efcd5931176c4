package ropetest

import (
	"slices"
	"testing"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/rope"
	"github.com/gokittens/kittens/tensor"
)

// TestSuite checks the suite's shape: unique op and case names, parity
// cases for every op, and the row-wise goal on every benchmark case.
func TestSuite(t *testing.T) {
	f := Suite()
	if f.Name != "rope" || f.Torch == "" {
		t.Fatalf("family %q, %d bytes of PyTorch snippet", f.Name, len(f.Torch))
	}
	seen := map[string]bool{}
	for _, op := range f.Ops {
		if seen[op.Name] || op.Family != f.Name || len(op.Checks) == 0 || len(op.Benches) == 0 {
			t.Errorf("op %q (family %q): duplicate, foreign or without cases", op.Name, op.Family)
		}
		seen[op.Name] = true
		names := map[string]bool{}
		for _, c := range op.Checks {
			if names[c.Name] {
				t.Errorf("%s: duplicate case %q", op.Name, c.Name)
			}
			names[c.Name] = true
		}
		for _, c := range op.Benches {
			if names[c.Name] {
				t.Errorf("%s: duplicate case %q", op.Name, c.Name)
			}
			names[c.Name] = true
			if c.Goal != bench.RowwiseGoal || c.Torch == nil {
				t.Errorf("%s %s: goal %+v, torch %v; want bench.RowwiseGoal and a torch case", op.Name, c.Name, c.Goal, c.Torch)
			}
		}
	}
}

// TestTables checks that Rope's tables are the column halves of
// CosSinCache's rows, each contiguous.
func TestTables(t *testing.T) {
	const rows, r = 5, 8
	cache, err := rope.CosSinCache(tensor.BF16, rows, r, 1e4)
	if err != nil {
		t.Fatal(err)
	}
	cos, sin, err := tables(tensor.BF16, rows, r, 1e4)
	if err != nil {
		t.Fatal(err)
	}
	want := cache.Float64s()
	for i, x := range []*tensor.Tensor{cos, sin} {
		if !x.Contiguous() || !slices.Equal(x.Shape(), []int{rows, r / 2}) {
			t.Fatalf("table %d: shape %v, strides %v", i, x.Shape(), x.Strides())
		}
		got := x.Float64s()
		for p := range rows {
			if g, w := got[p*r/2:][:r/2], want[p*r+i*r/2:][:r/2]; !slices.Equal(g, w) {
				t.Errorf("table %d row %d: %v, want %v", i, p, g, w)
			}
		}
	}
}
