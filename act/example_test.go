package act_test

import (
	"fmt"
	"log"

	"github.com/gokittens/kittens/act"
	"github.com/gokittens/kittens/tensor"
)

// SiLUAndMul reads [M, 2d] rows whose first half is the gate and second half
// up, and writes [M, d]: silu(gate)·up. Host tensors run the CPU reference.
func ExampleSiLUAndMul() {
	x := tensor.New(tensor.F32, 1, 6)
	x.SetFloat64s([]float64{-1, 0, 2, 10, 10, 10}) // gate | up
	y := tensor.New(tensor.F32, 1, 3)
	if err := act.SiLUAndMul(nil, y, x); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%.4f\n", y.Float64s())
	// Output:
	// [-2.6894 0.0000 17.6159]
}

// gpt-oss's SwiGLU reads gate and up interleaved, caps the gate at 7 and
// clamps up to ±7, then takes gate·sigmoid(1.702·gate)·(up + 1).
func ExampleSwiGLU() {
	x := tensor.New(tensor.F32, 1, 4)
	x.SetFloat64s([]float64{1, 2, 9, -9}) // gate, up, gate, up
	y := tensor.New(tensor.F32, 1, 2)
	if err := act.SwiGLU(nil, y, x, act.Interleaved); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%.4f\n", y.Float64s())
	// Output:
	// [2.5374 -41.9997]
}
