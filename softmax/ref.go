package softmax

import (
	"math"

	"github.com/gokittens/kittens/tensor"
)

// reference is the CPU path of Softmax: float64 throughout but for v =
// x·scale, which is rounded to fp32 as the kernel rounds it (the float64
// product of two fp32 values is exact, so one rounding gives the fp32
// product), so that a product past the fp32 range is ±inf on both paths;
// then one rounding to y's dtype at the end. It reads all of x before
// writing y, so y may be x. The special values need no special code: max
// skips NaN (a comparison with NaN is false), exp(NaN) and
// −inf − (−inf) = +inf − (+inf) = NaN then spread through the row's sum.
func reference(y, x *tensor.Tensor, scale float64) {
	m, n := x.Dim(0), x.Dim(1)
	v := x.Float64s()
	for i := range m {
		softmaxRow(v[i*n:(i+1)*n], scale)
	}
	y.SetFloat64s(v)
}

// softmaxRow replaces row with softmax(row·scale), row·scale rounded to
// fp32.
func softmaxRow(row []float64, scale float64) {
	mx := math.Inf(-1)
	for j := range row {
		row[j] = float64(float32(row[j] * scale))
		if row[j] > mx {
			mx = row[j]
		}
	}
	sum := 0.0
	for j := range row {
		row[j] = math.Exp(row[j] - mx)
		sum += row[j]
	}
	for j := range row {
		row[j] /= sum
	}
}
