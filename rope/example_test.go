package rope_test

import (
	"fmt"
	"log"

	"github.com/gokittens/kittens/rope"
	"github.com/gokittens/kittens/tensor"
)

// RotateQK rotates q (and k, here left out) in place, token t by the cache
// row of positions[t]. With NeoX pairing dim i turns with dim i + D/2; at
// position 1 the first pair turns by 1 radian and the second by 1/100
// (θ = 10000, D = 4).
func ExampleRotateQK() {
	q := tensor.New(tensor.F32, 1, 1, 4) // [tokens, heads, head_dim]
	q.SetFloat64s([]float64{1, 1, 1, 1})
	positions := tensor.New(tensor.I64, 1)
	positions.SetFloat64s([]float64{1})
	cache, err := rope.CosSinCache(tensor.F32, 16, 4, 10000)
	if err != nil {
		log.Fatal(err)
	}
	if err := rope.RotateQK(nil, q, nil, positions, cache, rope.Options{}); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%.4f\n", q.Float64s())
	// Output:
	// [-0.3012 0.9900 1.3818 1.0099]
}
