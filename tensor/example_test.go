package tensor_test

import (
	"bytes"
	"fmt"

	"github.com/gokittens/kittens/tensor"
)

// A bf16 matrix whose rows are 4 elements apart in storage: SetFloat64s
// rounds each value once, to nearest with ties to even, and Float64s reads
// the elements back in logical order.
func ExampleTensor_SetFloat64s() {
	x, err := tensor.NewStrided(tensor.BF16, []int{2, 3}, []int{4, 1})
	if err != nil {
		panic(err)
	}
	x.SetFloat64s([]float64{1, 1 + 1.0/256, 1 + 3.0/256, 3.14159, -0.1, 1e39})
	fmt.Println(x.Float64s())
	fmt.Println(x.Contiguous(), x.SpanBytes())
	// Output:
	// [1 1 1.015625 3.140625 -0.10009765625 +Inf]
	// false 14
}

// An op validates all its arguments before it writes anything; the first
// problem is the error, naming the op and the argument.
func ExampleValidate() {
	x := tensor.New(tensor.F32, 8, 64)
	w := tensor.New(tensor.F32, 32)
	y := tensor.New(tensor.F16, 8, 64)

	v := tensor.Validate("norm.RMSNorm")
	v.Tensor("x", x).Rank(2).DType(tensor.BF16, tensor.F16, tensor.F32)
	v.Tensor("w", w).Shape(x.Dim(-1)).DTypeOf(x)
	v.Tensor("y", y).ShapeOf(x).DTypeOf(x)
	v.SameLocation(nil, []string{"y", "x", "w"}, y, x, w)
	v.NoOverlapUnlessSame("y", y, "x", x)
	fmt.Println(v.Err())
	// Output:
	// norm.RMSNorm: argument w: has shape [32], want [64]
}

// WriteNPY and ReadNPY move tensors to and from NumPy. bfloat16 travels as
// uint16 bits ('<u2'); ReadNPY gives it back as BF16.
func ExampleWriteNPY() {
	x := tensor.New(tensor.BF16, 2, 2)
	x.SetFloat64s([]float64{0.5, -2, 3, 1.0 / 3})
	var buf bytes.Buffer
	if err := tensor.WriteNPY(&buf, x); err != nil {
		panic(err)
	}
	fmt.Printf("%d bytes, header %q\n", buf.Len(), buf.Bytes()[10:58])
	y, err := tensor.ReadNPY(&buf)
	if err != nil {
		panic(err)
	}
	fmt.Println(y.DType(), y.Shape(), y.Float64s())
	// Output:
	// 136 bytes, header "{'descr': '<u2', 'fortran_order': False, 'shape'"
	// bf16 [2 2] [0.5 -2 3 0.333984375]
}
