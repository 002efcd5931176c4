package softmax

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gokittens/kittens/internal/fuzzargs"
	"github.com/gokittens/kittens/tensor"
)

// unitRoundoff is the largest relative error of rounding to dt.
func unitRoundoff(dt tensor.DType) float64 {
	switch dt {
	case tensor.BF16:
		return 0x1p-8
	case tensor.F16:
		return 0x1p-11
	}
	return 0x1p-24
}

// FuzzSoftmax calls Softmax on host tensors made from the input: dtypes
// (some no float), ranks and sizes (some past the kernel's bounds), padded
// rows, y and x as views overlapping in a shared arena or the very same
// tensor, nil, and Scale in and out of range (0, NaN, ±Inf, negative,
// huge, tiny). It checks that the call never panics; that it fails exactly
// where the package doc says it must, with a tensor.ArgError naming an
// argument and every byte as it was; that on success only y's elements
// changed; that a row of values v = x·Scale (in fp32) with a NaN or +Inf,
// or of -Inf only, is NaN, and any other row a distribution (each in
// [0, 1], 0 for -Inf, summing to 1 within y's rounding, 1 where N = 1); and
// that y is what the same call gives on fresh contiguous copies.
func FuzzSoftmax(f *testing.F) {
	// bf16 [3, 3]; f32 [9, 70] in place with padded rows; f16 [5, 9] out of
	// place in the arena, y right after x; Scale 0.5; values near fp32's
	// largest scaled past it.
	f.Add([]byte{}, uint64(1), float32(1))
	f.Add([]byte{2, 6, 250, 0, 0, 0, 3, 13, 0}, uint64(2), float32(1))
	f.Add([]byte{1, 2, 6, 0, 10, 0, 0, 0, 10, 0, 0, 0}, uint64(3), float32(1))
	f.Add([]byte{0, 0, 0, 3}, uint64(4), float32(1))
	f.Add([]byte{2, 0, 0, 4, 0, 0, 0, 0, 0, 0, 4}, uint64(5), float32(1))
	f.Fuzz(func(t *testing.T, prog []byte, seed uint64, scale float32) {
		a := fuzzargs.NewArena(fuzzargs.NewIn(prog), 1<<15, seed)
		in := a.In
		dt := fuzzargs.Pick(in, tensor.BF16, tensor.F16, tensor.F32)
		m := in.Dim(70, 1025, maxRows, maxRows+1, math.MaxInt)
		n := in.Dim(70, 1025, 4097, maxCols, maxCols+1, math.MaxInt)
		inf := float32(math.Inf(1))
		o := Options{Scale: fuzzargs.Pick(in, 0, 1, -1, 0.5, 2, scale, float32(math.Copysign(0, -1)), float32(math.NaN()), inf, -inf,
			math.MaxFloat32, math.SmallestNonzeroFloat32, 1e-30, 1e30)}
		x := a.Arg("x", dt, m, n)
		y := a.Arg("y", dt, m, n)
		a.Fill()
		xs := fuzzargs.Values(x)
		err := Softmax(nil, y, x, o)
		what := fmt.Sprintf("Softmax(y %s, x %s, %+v)", a.Desc(y), a.Desc(x), o)

		// Why the package doc rejects the call, or "".
		why := ""
		switch {
		case x == nil || x.Rank() != 2 || !slices.Contains(fuzzargs.FloatDTypes, x.DType()):
			why = "x is no bf16, f16 or f32 matrix"
		case y == nil || y.DType() != x.DType() || !slices.Equal(y.Shape(), x.Shape()):
			why = "y is not like x"
		case tensor.Overlap(y, x) && !tensor.Same(y, x):
			why = "y partly overlaps x"
		case math.IsNaN(float64(o.Scale)) || math.IsInf(float64(o.Scale), 0):
			why = "Scale is not finite"
		case x.Dim(0) > maxRows || x.Dim(1) > maxCols:
			why = "too large for the kernel"
		}
		if err != nil {
			if why == "" {
				t.Fatalf("%s: error %v, but the docs take the call", what, err)
			}
			a.CheckError(t, what, err, "softmax", "x", "y", "Scale")
			return
		}
		if why != "" {
			t.Fatalf("%s: no error, but the docs reject it (%s)", what, why)
		}
		a.CheckWrites(t, what, y)
		dt, m, n = x.DType(), x.Dim(0), x.Dim(1) // as built, not as meant
		if m == 0 || n == 0 {
			return
		}
		s := float64(o.Scale)
		if s == 0 {
			s = 1
		}
		ys, tol := y.Float64s(), unitRoundoff(dt)
		for i := range m {
			row, v := ys[i*n:(i+1)*n], xs[i*n:(i+1)*n]
			nan, posInf, negInf := 0, 0, 0
			for _, e := range v {
				switch p := float64(float32(e * s)); {
				case math.IsNaN(p):
					nan++
				case math.IsInf(p, 1):
					posInf++
				case math.IsInf(p, -1):
					negInf++
				}
			}
			if nan > 0 || posInf > 0 || negInf == n {
				if k := slices.IndexFunc(row, func(e float64) bool { return !math.IsNaN(e) }); k >= 0 {
					t.Fatalf("%s: row %d holds NaN, +Inf or only -Inf values, but y[%d, %d] = %v", what, i, i, k, row[k])
				}
				continue
			}
			sum := 0.0
			for k, e := range row {
				if !(e >= 0 && e <= 1) || (math.IsInf(float64(float32(v[k]*s)), -1) && e != 0) {
					t.Fatalf("%s: y[%d, %d] = %v from %v", what, i, k, e, v[k])
				}
				sum += e
			}
			if math.Abs(sum-1) > 2*tol || (n == 1 && row[0] != 1) {
				t.Fatalf("%s: row %d sums to %v: %v", what, i, sum, row)
			}
		}
		// The same call on fresh contiguous copies.
		fx, fy := tensor.New(dt, m, n), tensor.New(dt, m, n)
		fx.SetFloat64s(xs)
		if err := Softmax(nil, fy, fx, o); err != nil {
			t.Fatalf("%s on contiguous copies: %v", what, err)
		}
		if want := fy.Float64s(); !fuzzargs.SameValues(ys, want) {
			t.Fatalf("%s: y is %v, but %v on contiguous copies", what, ys, want)
		}
	})
}
