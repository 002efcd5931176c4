package norm_test

import (
	"fmt"
	"log"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/norm"
	"github.com/gokittens/kittens/tensor"
)

// Host tensors run the CPU reference: each row of x is scaled by the
// reciprocal of its root mean square, then by w.
func ExampleRMSNorm() {
	x := tensor.New(tensor.F32, 2, 4)
	x.SetFloat64s([]float64{1, 2, 3, 4, -1, 0, 0, 1})
	w := tensor.New(tensor.F32, 4)
	w.SetFloat64s([]float64{1, 1, 0.5, 2})
	y := tensor.New(tensor.F32, 2, 4)
	rstd := tensor.New(tensor.F32, 2)
	if err := norm.RMSNorm(nil, y, x, w, norm.Options{Eps: 1e-6, RStd: rstd}); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%.4f\n%.4f\n", y.Float64s(), rstd.Float64s())
	// Output:
	// [0.3651 0.7303 0.5477 2.9212 -1.4142 0.0000 0.0000 2.8284]
	// [0.3651 1.4142]
}

// The in-place form serving engines use: the sum x + residual replaces the
// residual, and its normalization replaces x.
func ExampleFusedAddRMSNorm() {
	x := tensor.New(tensor.BF16, 1, 4)
	x.SetFloat64s([]float64{1, 1, 1, 1})
	residual := tensor.New(tensor.BF16, 1, 4)
	residual.SetFloat64s([]float64{0, 1, 2, 3})
	w := tensor.New(tensor.BF16, 4)
	w.SetFloat64s([]float64{1, 1, 1, 1})
	if err := norm.FusedAddRMSNorm(nil, x, residual, x, residual, w, norm.Options{Eps: 1e-6}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(residual.Float64s())
	fmt.Println(x.Float64s())
	// Output:
	// [1 2 3 4]
	// [0.365234375 0.73046875 1.09375 1.4609375]
}

// Device tensors run the kernel, on the device's default stream when the
// stream is nil (the README's example).
func Example_device() {
	dev, err := cuda.Default()
	if err != nil {
		log.Fatal(err) // no driver or no GPU: the error says what was looked for
	}
	rng, _ := tensor.NewRNG()
	x, err := tensor.Rand(rng, tensor.BF16, 1, 4096, 4096).ToDevice(dev)
	if err != nil {
		log.Fatal(err)
	}
	defer x.Free()
	w, err := tensor.Rand(rng, tensor.BF16, 1, 4096).ToDevice(dev)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Free()
	y, err := tensor.Empty(dev, tensor.BF16, 4096, 4096)
	if err != nil {
		log.Fatal(err)
	}
	defer y.Free()
	if err := norm.RMSNorm(nil, y, x, w, norm.Options{Eps: 1e-6}); err != nil {
		log.Fatal(err)
	}
}
