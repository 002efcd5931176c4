package ropetest

import (
	"slices"
	"testing"

	"github.com/gokittens/kittens/rope"
	"github.com/gokittens/kittens/tensor"
)

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
