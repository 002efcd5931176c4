package act

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/tensor"
)

// TestPrepareNil: a nil device (an unchecked cuda.Default, say) is an
// ArgError naming dev, not a panic.
func TestPrepareNil(t *testing.T) {
	err := Prepare(nil)
	var ae *tensor.ArgError
	if !errors.As(err, &ae) || ae.Arg != "dev" {
		t.Fatalf("Prepare(nil) = %v, want an ArgError naming dev", err)
	}
}

// TestPrepare compiles and loads every kernel Prepare names.
func TestPrepare(t *testing.T) {
	if err := Prepare(gputest.Device(t)); err != nil {
		t.Fatal(err)
	}
}

// TestActivationValues checks the reference against values computed by hand
// (Python's math module, float64).
func TestActivationValues(t *testing.T) {
	for _, c := range []struct {
		kind     Kind
		x, alpha float64
		want     float64
	}{
		{KindSiLU, 0, 1, 0},
		{KindSiLU, 1, 1, 0.7310585786300049},
		{KindSiLU, -1, 1, -0.2689414213699951},
		{KindSiLU, 1, SwiGLUAlpha, 0.8457957659328212},
		{KindGELU, 0, 1, 0},
		{KindGELU, 1, 1, 0.8413447460685429},
		{KindGELU, -1, 1, -0.15865525393145707},
		{KindGELU, -3, 1, -0.004049694094890287},
		{KindGELUTanh, 1, 1, 0.8411919906082768},
		{KindGELUTanh, -1, 1, -0.15880800939172324},
		{KindGELUTanh, 2, 1, 1.954597694087775},
		{KindReLU, -2, 1, 0},
		{KindReLU, 2.5, 1, 2.5},
		{KindTanh, 0.5, 1, 0.46211715726000974},
		{KindTanh, 0, 1, 0},
	} {
		got := activation(c.kind, c.x, c.alpha)
		if math.Abs(got-c.want) > 1e-15*math.Max(1, math.Abs(c.want)) {
			t.Errorf("%v(%g, α=%g) = %.17g, want %.17g", c.kind, c.x, c.alpha, got, c.want)
		}
	}
}

// TestActivationTails checks the reference on extreme inputs: a finite
// input gives a finite result of the right sign, tiny tails keep their
// value, NaN gives NaN.
func TestActivationTails(t *testing.T) {
	for kind := range numKinds {
		for _, x := range []float64{-3e38, -1e20, -1000, -90, -20, 20, 1000, 1e20, 3e38} {
			y := activation(kind, x, 1)
			if math.IsNaN(y) || math.IsInf(y, 0) {
				t.Errorf("%v(%g) = %g, want finite", kind, x, y)
			}
			if y != 0 && math.Signbit(y) != math.Signbit(x) && kind != KindReLU {
				t.Errorf("%v(%g) = %g: wrong sign", kind, x, y)
			}
		}
		if y := activation(kind, math.NaN(), 1); !math.IsNaN(y) {
			t.Errorf("%v(NaN) = %g", kind, y)
		}
	}
	// silu(−90) = −90·e^−90/(1 + e^−90): a naive x/(1 + e^−x) is still fine
	// in float64; the point is that the stable forms agree with it.
	if got, want := activation(KindSiLU, -90, 1), -90/(1+math.Exp(90)); math.Abs(got-want) > 1e-15*math.Abs(want) {
		t.Errorf("silu(-90) = %g, want %g", got, want)
	}
	if got := activation(KindGELUTanh, -10, 1); got >= 0 || got < -1e-30 {
		t.Errorf("gelu_tanh(-10) = %g, want a tiny negative number", got)
	}
}

// host returns a contiguous f32 host tensor holding v.
func host(shape []int, v ...float64) *tensor.Tensor {
	t := tensor.New(tensor.F32, shape...)
	t.SetFloat64s(v)
	return t
}

// TestGatedValues runs the public ops on the host path with inputs whose
// results are known by hand.
func TestGatedValues(t *testing.T) {
	s1, g1 := 0.7310585786300049, 0.8413447460685429 // silu(1), gelu(1)
	for _, c := range []struct {
		name string
		op   func(s *cuda.Stream, y, x *tensor.Tensor) error
		x    []float64 // one row of 2d = 4
		want []float64
	}{
		{"silu_and_mul", SiLUAndMul, []float64{1, 0, 3, 5}, []float64{3 * s1, 0}},
		{"mul_and_silu", MulAndSiLU, []float64{3, 5, 1, 0}, []float64{3 * s1, 0}},
		{"gelu_and_mul", GELUAndMul, []float64{1, -2, 2, 0.5}, []float64{2 * g1, 0.5 * activation(KindGELU, -2, 1)}},
		{"gelu_tanh_and_mul", GELUTanhAndMul, []float64{1, 2, -1, 1}, []float64{-0.8411919906082768, 1.954597694087775}},
		// gpt-oss: g·σ(1.702·g)·(u + 1); g = 9 clamps to 7, u = −20 to −7.
		{"swiglu interleaved", func(s *cuda.Stream, y, x *tensor.Tensor) error { return SwiGLU(s, y, x, Interleaved) },
			[]float64{1, 0, 9, -20}, []float64{0.8457957659328212, activation(KindSiLU, 7, SwiGLUAlpha) * -6}},
		{"swiglu halves", func(s *cuda.Stream, y, x *tensor.Tensor) error { return SwiGLU(s, y, x, Halves) },
			[]float64{1, 2, 0, 3}, []float64{0.8457957659328212, 7.742634492576833}},
		{"limit", func(s *cuda.Stream, y, x *tensor.Tensor) error {
			return Gated(s, y, x, GatedOptions{Kind: KindSiLU, Limit: 1})
		}, []float64{5, -5, 9, -9}, []float64{s1 * 1, activation(KindSiLU, -5, 1) * -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			y := tensor.New(tensor.F32, 1, 2)
			if err := c.op(nil, y, host([]int{1, 4}, c.x...)); err != nil {
				t.Fatal(err)
			}
			for i, got := range y.Float64s() {
				if w := float64(float32(c.want[i])); got != w {
					t.Errorf("y[%d] = %.9g, want %.9g", i, got, w)
				}
			}
		})
	}
}

// TestNaNThroughClamp: the limit compares rather than calls min, so NaN
// survives it, as torch.clamp lets it.
func TestNaNThroughClamp(t *testing.T) {
	y := tensor.New(tensor.F32, 2)
	if err := SwiGLU(nil, y, host([]int{4}, math.NaN(), 1, 1, math.NaN()), Interleaved); err != nil {
		t.Fatal(err)
	}
	for i, v := range y.Float64s() {
		if !math.IsNaN(v) {
			t.Errorf("y[%d] = %g, want NaN", i, v)
		}
	}
}

func TestInPlace(t *testing.T) {
	x := host([]int{3}, -1, 0, 1)
	if err := ReLU(nil, x, x); err != nil {
		t.Fatal(err)
	}
	if got := x.Float64s(); !slices.Equal(got, []float64{0, 0, 1}) {
		t.Errorf("relu in place: %v", got)
	}
}

// TestValidation checks that each kind of bad argument is refused with an
// ArgError naming it, and that nothing was written.
func TestValidation(t *testing.T) {
	f32 := func(shape ...int) *tensor.Tensor { return tensor.New(tensor.F32, shape...) }
	strided := func(shape, strides []int) *tensor.Tensor {
		tt, err := tensor.NewStrided(tensor.F32, shape, strides)
		if err != nil {
			t.Fatal(err)
		}
		return tt
	}
	shared := f32(4, 8)
	overlap := view(t, shared, []int{4, 4}, []int{8, 1})
	silu := func(y, x *tensor.Tensor) error { return SiLU(nil, y, x) }
	glu := func(y, x *tensor.Tensor) error { return SiLUAndMul(nil, y, x) }
	for _, c := range []struct {
		name string
		op   func(y, x *tensor.Tensor) error
		y, x *tensor.Tensor
		arg  string
	}{
		{"unary nil x", silu, f32(4), nil, "x"},
		{"unary nil y", silu, nil, f32(4), "y"},
		{"unary shape", silu, f32(4, 3), f32(4, 4), "y"},
		{"unary dtype", silu, tensor.New(tensor.BF16, 4), f32(4), "y"},
		{"unary int dtype", silu, tensor.New(tensor.I32, 4), tensor.New(tensor.I32, 4), "x"},
		{"unary rank 0", silu, f32(), f32(), "x"},
		{"unary partial overlap", silu, overlap, view(t, shared, []int{4, 4}, []int{4, 1}), "y"},
		{"unary rows do not collapse", silu, f32(2, 3, 4), strided([]int{2, 3, 4}, []int{20, 5, 1}), "x"},
		{"unknown kind", func(y, x *tensor.Tensor) error { return Unary(nil, y, x, numKinds) }, f32(4), f32(4), "kind"},
		{"gated odd last dim", glu, f32(2, 3), f32(2, 7), "x"},
		{"gated output width", glu, f32(2, 4), f32(2, 4), "y"},
		{"gated output rows", glu, f32(3, 2), f32(2, 4), "y"},
		{"gated dtype", glu, tensor.New(tensor.F16, 2, 2), f32(2, 4), "y"},
		{"gated in-place", glu, overlap, shared, "y"},
		{"gated negative limit", func(y, x *tensor.Tensor) error {
			return Gated(nil, y, x, GatedOptions{Kind: KindSiLU, Limit: -1})
		}, f32(2, 2), f32(2, 4), "limit"},
		{"gated NaN limit", func(y, x *tensor.Tensor) error {
			return Gated(nil, y, x, GatedOptions{Kind: KindSiLU, Limit: math.NaN()})
		}, f32(2, 2), f32(2, 4), "limit"},
		{"gated layout", func(y, x *tensor.Tensor) error {
			return Gated(nil, y, x, GatedOptions{Kind: KindSiLU, Layout: 7})
		}, f32(2, 2), f32(2, 4), "layout"},
		{"gated rows do not collapse", glu, f32(2, 3, 2), strided([]int{2, 3, 4}, []int{20, 5, 1}), "x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var before []byte
			if c.y != nil {
				c.y.Poison()
				before = slices.Clone(c.y.Bytes())
			}
			err := c.op(c.y, c.x)
			var ae *tensor.ArgError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want an ArgError", err)
			}
			if ae.Arg != c.arg {
				t.Errorf("error names %q, want %q: %v", ae.Arg, c.arg, err)
			}
			if c.y != nil && !slices.Equal(before, c.y.Bytes()) {
				t.Error("y was written")
			}
		})
	}
}

// view returns base's storage seen with another shape and strides.
func view(t *testing.T, base *tensor.Tensor, shape, strides []int) *tensor.Tensor {
	t.Helper()
	v, err := base.View(base.DType(), shape, strides)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestZeroRows: an empty call succeeds and writes nothing.
func TestZeroRows(t *testing.T) {
	if err := SiLUAndMul(nil, tensor.New(tensor.BF16, 0, 8), tensor.New(tensor.BF16, 0, 16)); err != nil {
		t.Error(err)
	}
	if err := GELU(nil, tensor.New(tensor.F16, 3, 0), tensor.New(tensor.F16, 3, 0)); err != nil {
		t.Error(err)
	}
	// A zero inside the leading dimensions: contiguous, yet its strides do
	// not chain as a non-empty tensor's would.
	if err := SiLU(nil, tensor.New(tensor.F32, 2, 0, 4), tensor.New(tensor.F32, 2, 0, 4)); err != nil {
		t.Error(err)
	}
	if err := SiLUAndMul(nil, tensor.New(tensor.F32, 3, 0, 1, 4), tensor.New(tensor.F32, 3, 0, 1, 8)); err != nil {
		t.Error(err)
	}
}
