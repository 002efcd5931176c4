package rope

import (
	"math"

	"github.com/gokittens/kittens/tensor"
)

// cosSinFunc returns cos and sin of pair i at position p.
type cosSinFunc func(p int64, i int) (c, s float64)

// rotateRow rotates the first 2·half dims of one head in place.
func rotateRow(x []float64, half int, style Style, p int64, cs cosSinFunc) {
	for i := range half {
		i1, i2 := i, i+half
		if style == GPTJ {
			i1, i2 = 2*i, 2*i+1
		}
		c, s := cs(p, i)
		x1, x2 := x[i1], x[i2]
		x[i1] = x1*c - x2*s
		x[i2] = x2*c + x1*s
	}
}

// refQK is the CPU reference of RotateQK: q and k (k may be nil) rotated in
// place, token t at position pos[t]. Only the rotary dims are read and
// written: the others keep their bytes, as the kernel leaves them.
func refQK(q, k *tensor.Tensor, pos []int64, half int, style Style, cs cosSinFunc) {
	for _, x := range []*tensor.Tensor{q, k} {
		if x == nil {
			continue
		}
		rot := rotary(x, half)
		v := rot.Float64s()
		H, r := x.Dim(1), 2*half
		for t, p := range pos {
			for h := range H {
				rotateRow(v[(t*H+h)*r:][:r], half, style, p, cs)
			}
		}
		rot.SetFloat64s(v)
	}
}

// refBHSD is the CPU reference of Rope: y = RoPE(x), row (b, h, s) at
// position s. y may be x. The dims past the rotary ones are copied bit for
// bit, as the kernel copies them (NaN payloads included).
func refBHSD(y, x *tensor.Tensor, half int, style Style, cs cosSinFunc) {
	if !tensor.Same(y, x) {
		copyPassThrough(y, x, 2*half)
	}
	v := rotary(x, half).Float64s()
	S, r := x.Dim(2), 2*half
	for row := range x.Dim(0) * x.Dim(1) * S {
		rotateRow(v[row*r:][:r], half, style, int64(row%S), cs)
	}
	rotary(y, half).SetFloat64s(v)
}

// rotary is the view of x's first 2·half dims of its last dimension.
func rotary(x *tensor.Tensor, half int) *tensor.Tensor {
	v, err := x.Slice(x.Rank()-1, 0, 2*half)
	if err != nil {
		panic(err) // a bug in this package: the rotary dim was checked
	}
	return v
}

// copyPassThrough copies the bytes of dims [r, D) of every row of the
// [B, H, S, D] host tensor x into y, whose strides may differ.
func copyPassThrough(y, x *tensor.Tensor, r int) {
	size, D := x.DType().Size(), x.Dim(3)
	xb, yb := x.Bytes(), y.Bytes()
	for b := range x.Dim(0) {
		for h := range x.Dim(1) {
			for s := range x.Dim(2) {
				xo := (b*x.Stride(0) + h*x.Stride(1) + s*x.Stride(2) + r) * size
				yo := (b*y.Stride(0) + h*y.Stride(1) + s*y.Stride(2) + r) * size
				copy(yb[yo:yo+(D-r)*size], xb[xo:])
			}
		}
	}
}

// tableCosSin reads a [maxPos, r] cache: cos in the first r/2 columns, sin
// in the last r/2.
func tableCosSin(cache *tensor.Tensor) cosSinFunc {
	v, r := cache.Float64s(), cache.Dim(1)
	return func(p int64, i int) (float64, float64) {
		row := v[int(p)*r:]
		return row[i], row[r/2+i]
	}
}

// splitCosSin reads separate cos and sin tables [rows, r/2].
func splitCosSin(cos, sin *tensor.Tensor) cosSinFunc {
	c, s, half := cos.Float64s(), sin.Float64s(), cos.Dim(1)
	return func(p int64, i int) (float64, float64) {
		return c[int(p)*half+i], s[int(p)*half+i]
	}
}

// angleCosSin computes cos and sin of p·θ^(−2i/r) in float64: the values
// CosSinCache rounds, and the tests' table-free reference.
func angleCosSin(theta float64, r int) cosSinFunc {
	omega := make([]float64, r/2)
	for i := range omega {
		omega[i] = math.Pow(theta, -2*float64(i)/float64(r))
	}
	return func(p int64, i int) (float64, float64) {
		s, c := math.Sincos(float64(p) * omega[i])
		return c, s
	}
}
