package softmax_test

import (
	"fmt"
	"log"

	"github.com/gokittens/kittens/softmax"
	"github.com/gokittens/kittens/tensor"
)

// Softmax over the last dim, with x scaled first (here by 1/2, a
// temperature of 2). Host tensors run the CPU reference.
func ExampleSoftmax() {
	x := tensor.New(tensor.F32, 2, 3)
	x.SetFloat64s([]float64{0, 2, 4, 1, 1, 1})
	y := tensor.New(tensor.F32, 2, 3)
	if err := softmax.Softmax(nil, y, x, softmax.Options{Scale: 0.5}); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%.4f\n", y.Float64s())
	// Output:
	// [0.0900 0.2447 0.6652 0.3333 0.3333 0.3333]
}
