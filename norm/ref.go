package norm

import (
	"math"

	"github.com/gokittens/kittens/tensor"
)

// reference runs a validated job on host tensors: float64 throughout, each
// output rounded once when stored, but for the pad kernel's residual sum,
// which is rounded to fp32 first, as that kernel holds it. Every input is
// read before any output is written, so in-place calls need no care.
func (j *job) reference() {
	m, n, dt := j.rows(), j.n(), j.x.DType()
	xs := j.x.Float64s()
	x2s := floatsOrNil(j.x2)
	ws := floatsOrNil(j.w)
	bs := floatsOrNil(j.b)
	rin := floatsOrNil(j.rstdIn)

	ys := make([]float64, m*j.nOut) // the padding stays +0.0
	var sums, rs, means []float64
	if j.residualOut != nil {
		sums = make([]float64, m*n)
	}
	if j.rstd != nil {
		rs = make([]float64, m)
	}
	if j.mean != nil {
		means = make([]float64, m)
	}
	v := make([]float64, n)
	for i := range m {
		a := xs[i*n : (i+1)*n]
		for k := range v {
			switch j.add {
			case addRounded:
				v[k] = tensor.Round(dt, a[k]+x2s[i*n+k])
			case addFP32: // the pad kernel's fp32 sum: ±Inf past fp32's range, as there
				v[k] = float64(float32(a[k] + x2s[i*n+k]))
			default:
				v[k] = a[k]
			}
		}
		if sums != nil {
			copy(sums[i*n:], v)
		}
		y := ys[i*j.nOut : i*j.nOut+n]
		var r, mu float64
		switch j.op {
		case opRMS:
			ss := 0.0
			for _, e := range v {
				ss += e * e
			}
			r = 1 / math.Sqrt(fp32Sum(ss)/j.denom+j.eps)
			for k, e := range v {
				y[k] = e * r * j.scale(ws, k)
			}
		case opLayer:
			for _, e := range v {
				mu += e
			}
			mu /= j.denom
			ss := 0.0
			for _, e := range v {
				ss += (e - mu) * (e - mu)
			}
			r = 1 / math.Sqrt(ss/j.denom+j.eps)
			for k, e := range v {
				y[k] = (e-mu)*r*j.scale(ws, k) + at(bs, k)
			}
		case opL2Backward:
			yin := x2s[i*n : (i+1)*n]
			dot := 0.0
			for k, e := range v {
				dot += e * yin[k]
			}
			r = rin[i]
			for k, e := range v {
				y[k] = r * (e - dot*yin[k])
			}
		}
		if rs != nil {
			rs[i] = r
		}
		if means != nil {
			means[i] = mu
		}
	}
	j.y.SetFloat64s(ys)
	if sums != nil {
		j.residualOut.SetFloat64s(sums)
	}
	if rs != nil {
		j.rstd.SetFloat64s(rs)
	}
	if means != nil {
		j.mean.SetFloat64s(means)
	}
}

// scale is the factor the weight contributes to element k.
func (j *job) scale(ws []float64, k int) float64 {
	switch j.weight {
	case weightPlain:
		return ws[k]
	case weightPlusOne:
		return 1 + ws[k]
	}
	return 1
}

func at(vs []float64, k int) float64 {
	if vs == nil {
		return 0
	}
	return vs[k]
}

func floatsOrNil(t *tensor.Tensor) []float64 {
	if t == nil {
		return nil
	}
	return t.Float64s()
}

// fp32Sum is a sum of squares as the kernels' fp32 accumulator holds it:
// +Inf past fp32's range (rows with |x| above about 1.8e19), where float64
// would still hold it. The row's r is then 0, on the host as on the device.
func fp32Sum(ss float64) float64 {
	if ss > math.MaxFloat32 {
		return math.Inf(1)
	}
	return ss
}
