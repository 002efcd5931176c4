package topk_test

import (
	"fmt"
	"log"

	"github.com/gokittens/kittens/tensor"
	"github.com/gokittens/kittens/topk"
)

// The k largest of each row, in descending order; equal values come lower
// index first, as torch.topk's sorted result does. The indices tensor's
// dtype (int32 here, or int64) chooses how they are written.
func ExampleTopK() {
	x := tensor.New(tensor.F32, 1, 6)
	x.SetFloat64s([]float64{3, 5, 1, 5, 9, 2})
	values := tensor.New(tensor.F32, 1, 3)
	indices := tensor.New(tensor.I32, 1, 3)
	if err := topk.TopK(nil, values, indices, x, 3); err != nil {
		log.Fatal(err)
	}
	fmt.Println(values.Float64s(), indices.Float64s())
	// Output:
	// [9 5 5] [4 1 3]
}
