package softmax

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

func fromRows(dt tensor.DType, rows ...[]float64) *tensor.Tensor {
	t := tensor.New(dt, len(rows), len(rows[0]))
	var v []float64
	for _, r := range rows {
		v = append(v, r...)
	}
	t.SetFloat64s(v)
	return t
}

func TestReference(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	ln2, ln3 := math.Ln2, math.Log(3)
	for _, c := range []struct {
		name  string
		x     []float64
		scale float32
		want  []float64
	}{
		{"exp is 1, 2, 3", []float64{0, ln2, ln3}, 0, []float64{1. / 6, 2. / 6, 3. / 6}},
		{"scale", []float64{0, 1, 2}, float32(ln2), []float64{1. / 7, 2. / 7, 4. / 7}},
		{"max subtracted", []float64{1000, 1000, 1000 + ln3}, 1, []float64{0.2, 0.2, 0.6}},
		{"negative scale", []float64{0, -ln3}, -1, []float64{0.25, 0.75}},
		{"-inf is a zero", []float64{-inf, 0, -inf, ln3}, 0, []float64{0, 0.25, 0, 0.75}},
		{"all -inf is NaN", []float64{-inf, -inf}, 0, []float64{nan, nan}},
		{"+inf is NaN", []float64{inf, 0}, 0, []float64{nan, nan}},
		{"NaN spreads", []float64{0, nan, 1}, 0, []float64{nan, nan, nan}},
		{"N=1", []float64{-7}, 0, []float64{1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := fromRows(tensor.F32, c.x)
			y := tensor.New(tensor.F32, 1, len(c.x))
			if err := Softmax(nil, y, x, Options{Scale: c.scale}); err != nil {
				t.Fatal(err)
			}
			if r := check.Compare("y", y.Float64s(), c.want, check.ForDType(tensor.F32)); !r.Pass {
				t.Errorf("softmax(%v) = %v, want %v: %v", c.x, y.Float64s(), c.want, r)
			}
			if err := Softmax(nil, x, x, Options{Scale: c.scale}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(x.Bytes(), y.Bytes()) {
				t.Errorf("in place gave %v, out of place %v", x.Float64s(), y.Float64s())
			}
		})
	}
}

// TestReferenceScaleOverflow checks that the reference rounds x·Scale to
// fp32, as the kernel does (and torch.softmax(x * scale) does for f32 and
// bf16 x): a product beyond the fp32 range is ±inf, so a row masked with the
// lowest finite value and scaled by 2 is a row of −inf (NaN out), and the
// largest finite value scaled by 2 is +inf (NaN out), where a float64
// product would give a uniform and a one-hot row.
func TestReferenceScaleOverflow(t *testing.T) {
	nan := math.NaN()
	for dt, big := range map[tensor.DType]float64{tensor.F32: math.MaxFloat32, tensor.BF16: tensor.BF16Value(0x7f7f)} {
		for _, c := range []struct {
			name  string
			x     []float64
			scale float32
			want  []float64
		}{
			{"masked row scaled to -inf", []float64{-big, -big}, 2, []float64{nan, nan}},
			{"largest scaled to +inf", []float64{big, 0}, 2, []float64{nan, nan}},
			{"N=1 scaled to +inf", []float64{big}, 2, []float64{nan}},
			{"negative scale to +inf", []float64{-big, 0}, -2, []float64{nan, nan}},
			{"in range", []float64{-big, -big}, 0.5, []float64{0.5, 0.5}},
		} {
			x := fromRows(dt, c.x)
			y := tensor.New(dt, 1, len(c.x))
			if err := Softmax(nil, y, x, Options{Scale: c.scale}); err != nil {
				t.Fatal(err)
			}
			if r := check.Compare("y", y.Float64s(), c.want, check.ForDType(dt)); !r.Pass {
				t.Errorf("%s %s: softmax(%v·%v) = %v, want %v: %v", dt, c.name, c.x, c.scale, y.Float64s(), c.want, r)
			}
		}
	}
}

// TestReferenceBF16 checks the single rounding to bf16: 1/3 rounds to
// nearest even, not truncated.
func TestReferenceBF16(t *testing.T) {
	x := fromRows(tensor.BF16, []float64{0, 0, 0})
	y := tensor.New(tensor.BF16, 1, 3)
	if err := Softmax(nil, y, x, Options{}); err != nil {
		t.Fatal(err)
	}
	want := tensor.Round(tensor.BF16, 1./3)
	for _, got := range y.Float64s() {
		if got != want {
			t.Fatalf("bf16 softmax of zeros = %v, want %v", got, want)
		}
	}
}

func TestZeroSizes(t *testing.T) {
	for _, shape := range [][2]int{{0, 16}, {4, 0}, {maxRows, 0}, {0, maxCols}} {
		x, y := tensor.New(tensor.BF16, shape[0], shape[1]), tensor.New(tensor.BF16, shape[0], shape[1])
		if err := Softmax(nil, y, x, Options{}); err != nil {
			t.Errorf("%v: %v", shape, err)
		}
	}
}

// TestValidation checks that each kind of bad argument is reported, naming
// the argument, and that nothing was written.
func TestValidation(t *testing.T) {
	slice := func(tt *tensor.Tensor, start, end int) *tensor.Tensor {
		s, err := tt.Slice(1, start, end)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	wide := tensor.New(tensor.F32, 4, 12)
	for _, c := range []struct {
		name string
		y, x *tensor.Tensor
		opt  Options
		arg  string
	}{
		{"nil x", tensor.New(tensor.F32, 2, 3), nil, Options{}, "x"},
		{"nil y", nil, tensor.New(tensor.F32, 2, 3), Options{}, "y"},
		{"x rank 1", tensor.New(tensor.F32, 2, 3), tensor.New(tensor.F32, 6), Options{}, "x"},
		{"x rank 3", tensor.New(tensor.F32, 2, 3), tensor.New(tensor.F32, 1, 2, 3), Options{}, "x"},
		{"y rank 3", tensor.New(tensor.F32, 1, 2, 3), tensor.New(tensor.F32, 2, 3), Options{}, "y"},
		{"shape mismatch", tensor.New(tensor.F32, 2, 4), tensor.New(tensor.F32, 2, 3), Options{}, "y"},
		{"dtype mismatch", tensor.New(tensor.BF16, 2, 3), tensor.New(tensor.F32, 2, 3), Options{}, "y"},
		{"integer dtype", tensor.New(tensor.I32, 2, 3), tensor.New(tensor.I32, 2, 3), Options{}, "x"},
		{"fp8 dtype", tensor.New(tensor.F8E4M3, 2, 3), tensor.New(tensor.F8E4M3, 2, 3), Options{}, "x"},
		{"partial overlap", slice(wide, 1, 9), slice(wide, 0, 8), Options{}, "y"},
		{"NaN scale", tensor.New(tensor.F32, 2, 3), tensor.New(tensor.F32, 2, 3), Options{Scale: float32(math.NaN())}, "Scale"},
		{"infinite scale", tensor.New(tensor.F32, 2, 3), tensor.New(tensor.F32, 2, 3), Options{Scale: float32(math.Inf(1))}, "Scale"},
		// Shapes with no elements have no storage: the bounds are checked all the same.
		{"too many rows", tensor.New(tensor.F32, maxRows+1, 0), tensor.New(tensor.F32, maxRows+1, 0), Options{}, "x"},
		{"too many columns", tensor.New(tensor.F32, 0, maxCols+1), tensor.New(tensor.F32, 0, maxCols+1), Options{}, "x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			expectRejected(t, nil, c.y, c.x, c.opt, c.arg)
		})
	}
}

// expectRejected calls Softmax with bad arguments and checks that the error
// names arg and, for a host y, that y is untouched.
func expectRejected(t *testing.T, s *cuda.Stream, y, x *tensor.Tensor, opt Options, arg string) {
	t.Helper()
	var before []byte
	if y != nil && !y.IsDevice() {
		y.FillNormal(tensor.SeededRNG(1), 0, 1)
		before = bytes.Clone(y.Bytes())
	}
	err := Softmax(s, y, x, opt)
	var ae *tensor.ArgError
	if !errors.As(err, &ae) {
		t.Fatalf("got error %v, want a *tensor.ArgError", err)
	}
	if ae.Arg != arg {
		t.Errorf("error %q names %q, want %q", err, ae.Arg, arg)
	}
	if before != nil && !bytes.Equal(before, y.Bytes()) {
		t.Errorf("y was written although the call failed")
	}
}

// TestValidationDevice covers the errors that need a device tensor: a mix of
// host and device tensors, a device tensor partly overlapping the output,
// and a stream of another device.
func TestValidationDevice(t *testing.T) {
	dev := gputest.Device(t)
	xd, err := tensor.Empty(dev, tensor.F32, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer xd.Free()
	yd, err := tensor.Empty(dev, tensor.F32, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer yd.Free()
	t.Run("device x, host y", func(t *testing.T) {
		expectRejected(t, nil, tensor.New(tensor.F32, 2, 8), xd, Options{}, "x")
	})
	t.Run("host x, device y", func(t *testing.T) {
		expectRejected(t, nil, xd, tensor.New(tensor.F32, 2, 8), Options{}, "x")
	})
	t.Run("device partial overlap", func(t *testing.T) {
		a, _ := xd.Slice(1, 0, 6)
		b, _ := xd.Slice(1, 2, 8)
		expectRejected(t, nil, b, a, Options{}, "y")
	})
	t.Run("stream of another device", func(t *testing.T) {
		other := &cuda.Device{Ordinal: dev.Ordinal + 1}
		expectRejected(t, other.DefaultStream(), yd, xd, Options{}, "s")
	})
}

// TestPrepareNil: a nil device is an ArgError naming dev, not a panic.
func TestPrepareNil(t *testing.T) {
	var ae *tensor.ArgError
	if err := Prepare(nil); !errors.As(err, &ae) || ae.Arg != "dev" {
		t.Errorf("Prepare(nil) = %v, want a *tensor.ArgError naming dev", err)
	}
}

// TestPrepare runs Prepare with an empty disk cache, then Softmax on the
// calls it prepares for, which must compile nothing more.
func TestPrepare(t *testing.T) {
	dev := gputest.Device(t)
	t.Setenv(jit.EnvCacheDir, t.TempDir())
	if err := Prepare(dev); err != nil {
		t.Fatal(err)
	}
	before := jit.Compiles()
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16, tensor.F32} {
		for _, mn := range preparedCalls {
			x, err := tensor.Empty(dev, dt, mn[0], mn[1])
			if err != nil {
				t.Fatal(err)
			}
			y, err := tensor.Empty(dev, dt, mn[0], mn[1])
			if err == nil {
				err = Softmax(nil, y, x, Options{})
				y.Free()
			}
			x.Free()
			if err != nil {
				t.Fatalf("%s %v: %v", dt, mn, err)
			}
		}
	}
	if n := jit.Compiles() - before; n != 0 {
		t.Errorf("Softmax compiled %d kernels Prepare did not", n)
	}
}

// TestKernelResources reports the registers and local memory of each kernel
// Prepare compiles for this GPU, and fails if one spills to local memory.
func TestKernelResources(t *testing.T) {
	dev := gputest.Device(t)
	for _, c := range prepared(dev.Props()) {
		fn, err := kernels.Get(dev, nil, c.kernelKey)
		if err != nil {
			t.Fatal(err)
		}
		if c.Bulk {
			if err := prepareBulk(fn, c); err != nil {
				t.Fatal(err)
			}
		}
		regs, _ := fn.Attribute(cuda.FuncNumRegs)
		local, _ := fn.Attribute(cuda.FuncLocalSizeBytes)
		occ, _ := fn.MaxActiveBlocksPerSM(c.Block, c.Smem)
		t.Logf("%+v: regs %d local %d blocks/SM %d", c, regs, local, occ)
		if local > 0 {
			t.Errorf("%+v spills: %d bytes of local memory", c, local)
		}
	}
}
