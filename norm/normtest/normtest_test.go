package normtest

import (
	"math/rand/v2"
	"testing"

	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/internal/gputest"
)

// TestLayerNormStridingGrid runs LayerNorm's resident, row-striding grid,
// where a block prefetches its next row, in every dtype (the suite reaches
// it in bf16 only) against the reference, with the statistics written:
// 3000 rows of 1040 are more rows than the grid has blocks (norm's
// TestPickConfigLayerNormStrides checks that the picker strides there).
func TestLayerNormStridingGrid(t *testing.T) {
	dev := gputest.Device(t)
	var layer *op
	for _, d := range ops {
		if d.name == "layernorm" {
			layer = d
		}
	}
	c := caseSpec{rows: 3000, n: 1040, stats: true}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, dt := range dtypes {
		spec, err := layer.spec(c, dt, rng)
		if err != nil {
			t.Fatal(err)
		}
		r, err := check.Run(dev, spec)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Pass {
			t.Errorf("%v %dx%d: %v", dt, c.rows, c.n, r)
		}
	}
}
