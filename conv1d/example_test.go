package conv1d_test

import (
	"fmt"
	"log"

	"github.com/gokittens/kittens/conv1d"
	"github.com/gokittens/kittens/tensor"
)

// One decode step for two sequences of one channel, width 3: each output is
// the taps over the slot's two newest inputs and the new one, and the slot
// then drops its oldest input for the new one. Sequence 1 uses slot 2;
// slot 1 belongs to nobody and is left as it was.
func ExampleUpdate() {
	x := tensor.New(tensor.F32, 2, 1) // [B, dim]
	x.SetFloat64s([]float64{3, 30})
	w := tensor.New(tensor.F32, 1, 3) // [dim, W]: oldest tap first
	w.SetFloat64s([]float64{1, 10, 100})
	states := tensor.New(tensor.F32, 3, 2, 1) // [slots, state_len, dim], oldest first
	states.SetFloat64s([]float64{1, 2, 7, 7, 10, 20})
	slots := tensor.New(tensor.I32, 2)
	slots.SetFloat64s([]float64{0, 2})
	out := tensor.New(tensor.F32, 2, 1)
	st := conv1d.Decode{ConvStates: states, StateIndices: slots}
	if err := conv1d.Update(nil, out, x, w, nil, st, conv1d.Options{}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Float64s())
	fmt.Println(states.Float64s())
	// Output:
	// [321 3210]
	// [2 3 7 7 20 30]
}
