package norm

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/tensor"
)

// host returns a host tensor holding vals (row-major).
func host(dt tensor.DType, vals []float64, shape ...int) *tensor.Tensor {
	t := tensor.New(dt, shape...)
	t.SetFloat64s(vals)
	return t
}

func assertClose(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > tol*math.Max(1, math.Abs(want[i])) {
			t.Errorf("%s[%d] = %.9g, want %.9g", what, i, got[i], want[i])
		}
	}
}

// TestReferenceHandComputed checks the CPU reference on values worked out by
// hand, through the public API.
func TestReferenceHandComputed(t *testing.T) {
	const f32 = tensor.F32
	r := 1 / math.Sqrt(12.5)  // rows [3, 4]: mean square 12.5
	ln := 1 / math.Sqrt(1.25) // rows [1, 2, 3, 4]: variance 1.25
	cases := []struct {
		name string
		run  func() ([]float64, error)
		want []float64
	}{
		{"rmsnorm", func() ([]float64, error) {
			y := tensor.New(f32, 1, 2)
			err := RMSNorm(nil, y, host(f32, []float64{3, 4}, 1, 2), host(f32, []float64{1, 2}, 2), Options{})
			return y.Float64s(), err
		}, []float64{3 * r, 8 * r}},
		{"rmsnorm zero-centred", func() ([]float64, error) {
			y := tensor.New(f32, 1, 2)
			err := RMSNorm(nil, y, host(f32, []float64{3, 4}, 1, 2), host(f32, []float64{0, 1}, 2), Options{ZeroCentered: true})
			return y.Float64s(), err
		}, []float64{3 * r, 8 * r}},
		{"rmsnorm rsigma", func() ([]float64, error) {
			rs := tensor.New(f32, 2)
			err := RMSNorm(nil, tensor.New(f32, 2, 2), host(f32, []float64{3, 4, 0, 0}, 2, 2), host(f32, []float64{1, 1}, 2),
				Options{Eps: 1e-6, RStd: rs})
			return rs.Float64s(), err
		}, []float64{1 / math.Sqrt(12.5+1e-6), 1000}},
		{"rmsnorm padded", func() ([]float64, error) {
			y := tensor.New(f32, 1, 4)
			err := RMSNorm(nil, y, host(f32, []float64{3, 4}, 1, 2), host(f32, []float64{1, 1}, 2), Options{PadTo: 4})
			return y.Float64s(), err
		}, []float64{3 * r, 4 * r, 0, 0}},
		{"fused add rmsnorm", func() ([]float64, error) {
			y, ro := tensor.New(f32, 1, 2), tensor.New(f32, 1, 2)
			err := FusedAddRMSNorm(nil, y, ro, host(f32, []float64{1, 2}, 1, 2), host(f32, []float64{2, 2}, 1, 2),
				host(f32, []float64{1, 2}, 2), Options{})
			return append(y.Float64s(), ro.Float64s()...), err
		}, []float64{3 * r, 8 * r, 3, 4}},
		// bf16: 1 + 2^-9 rounds to 1, so the rounded sum's rsigma is exactly 1
		// while the fp32 sum of the pad kernel sees the 2^-9.
		{"fused add rounds the sum", func() ([]float64, error) {
			rs := tensor.New(f32, 1)
			err := FusedAddRMSNorm(nil, tensor.New(tensor.BF16, 1, 2), tensor.New(tensor.BF16, 1, 2),
				host(tensor.BF16, []float64{1, 1}, 1, 2), host(tensor.BF16, []float64{0x1p-9, 0}, 1, 2),
				host(tensor.BF16, []float64{1, 1}, 2), Options{RStd: rs})
			return rs.Float64s(), err
		}, []float64{1}},
		{"fused add pad keeps the fp32 sum", func() ([]float64, error) {
			rs := tensor.New(f32, 1)
			err := FusedAddRMSNorm(nil, tensor.New(tensor.BF16, 1, 2), tensor.New(tensor.BF16, 1, 2),
				host(tensor.BF16, []float64{1, 1}, 1, 2), host(tensor.BF16, []float64{0x1p-9, 0}, 1, 2),
				host(tensor.BF16, []float64{1, 1}, 2), Options{RStd: rs, PadTo: 2})
			return rs.Float64s(), err
		}, []float64{1 / math.Sqrt(((1+0x1p-9)*(1+0x1p-9)+1)/2)}},
		{"layernorm", func() ([]float64, error) {
			y, mean, rstd := tensor.New(f32, 1, 4), tensor.New(f32, 1), tensor.New(f32, 1)
			err := LayerNorm(nil, y, host(f32, []float64{1, 2, 3, 4}, 1, 4), host(f32, []float64{1, 1, 1, 2}, 4),
				host(f32, []float64{0.5, 0.5, 0.5, 0.5}, 4), Options{Mean: mean, RStd: rstd})
			return append(y.Float64s(), mean.Float64s()[0], rstd.Float64s()[0]), err
		}, []float64{-1.5*ln + 0.5, -0.5*ln + 0.5, 0.5*ln + 0.5, 3*ln + 0.5, 2.5, ln}},
		{"layernorm zero row gives the bias", func() ([]float64, error) {
			y := tensor.New(f32, 1, 2)
			err := LayerNorm(nil, y, host(f32, []float64{0, 0}, 1, 2), host(f32, []float64{3, 3}, 2),
				host(f32, []float64{0.25, -1}, 2), Options{Eps: 1e-5})
			return y.Float64s(), err
		}, []float64{0.25, -1}},
		{"fused add layernorm", func() ([]float64, error) {
			y, ro := tensor.New(f32, 1, 4), tensor.New(f32, 1, 4)
			err := FusedAddLayerNorm(nil, y, ro, host(f32, []float64{0, 1, 2, 3}, 1, 4), host(f32, []float64{1, 1, 1, 1}, 1, 4),
				host(f32, []float64{1, 1, 1, 1}, 4), nil, Options{})
			return append(y.Float64s(), ro.Float64s()...), err
		}, []float64{-1.5 * ln, -0.5 * ln, 0.5 * ln, 1.5 * ln, 1, 2, 3, 4}},
		{"l2norm", func() ([]float64, error) {
			y, rs := tensor.New(f32, 1, 2), tensor.New(f32, 1)
			err := L2Norm(nil, y, host(f32, []float64{3, 4}, 1, 2), Options{RStd: rs})
			return append(y.Float64s(), rs.Float64s()...), err
		}, []float64{0.6, 0.8, 0.2}},
		{"l2norm zero row", func() ([]float64, error) {
			y, rs := tensor.New(f32, 1, 2), tensor.New(f32, 1)
			err := L2Norm(nil, y, host(f32, []float64{0, 0}, 1, 2), Options{Eps: 1e-6, RStd: rs})
			return append(y.Float64s(), rs.Float64s()...), err
		}, []float64{0, 0, 1000}},
		{"l2norm backward", func() ([]float64, error) {
			dx := tensor.New(f32, 1, 2)
			err := L2NormBackward(nil, dx, host(f32, []float64{0.6, 0.8}, 1, 2), host(f32, []float64{1, 0}, 1, 2),
				host(f32, []float64{0.2}, 1))
			return dx.Float64s(), err
		}, []float64{0.2 * (1 - 0.36), 0.2 * (0 - 0.48)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.run()
			if err != nil {
				t.Fatal(err)
			}
			assertClose(t, c.name, got, c.want, 1e-6)
		})
	}
}

// TestEpsRoundsToFP32: the CPU path adds Options.Eps rounded to fp32, as
// the kernels do. 1e-50 rounds to 0, so an all-zero row divides by zero on
// the host as on the device (rsigma +Inf, outputs NaN), where adding 1e-50
// in float64 would give rsigma 1e25 and outputs 0. Where a GPU is found the
// kernel runs the same row.
func TestEpsRoundsToFP32(t *testing.T) {
	const f32 = tensor.F32
	ts := []*tensor.Tensor{tensor.New(f32, 1, 2), tensor.New(f32, 1), host(f32, []float64{0, 0}, 1, 2), host(f32, []float64{1, 1}, 2)}
	gputest.OnHostAndDevice(t, ts, func(ts []*tensor.Tensor) error {
		return RMSNorm(nil, ts[0], ts[2], ts[3], Options{Eps: 1e-50, RStd: ts[1]})
	}, func(where string, ts []*tensor.Tensor) {
		if r := ts[1].Float64s()[0]; !math.IsInf(r, 1) {
			t.Errorf("%s: rsigma %v, want +Inf", where, r)
		}
		for _, v := range ts[0].Float64s() {
			if !math.IsNaN(v) {
				t.Errorf("%s: output %v, want NaN", where, v)
			}
		}
	})
}

// TestSumOfSquaresOverflowsAsFP32: a row whose sum of squares passes fp32's
// range gets r = 0 on the host, as the kernels' fp32 accumulator gives it,
// and an Inf zeroes the row's finite elements (RMSNorm and L2Norm alike).
// Where a GPU is found the kernel runs the same rows.
func TestSumOfSquaresOverflowsAsFP32(t *testing.T) {
	const f32 = tensor.F32
	ts := []*tensor.Tensor{tensor.New(f32, 2, 3), host(f32, []float64{0x1p64, 0x1p64, 1, math.Inf(1), 1, 2}, 2, 3), host(f32, []float64{1, 1, 1}, 3)}
	for name, op := range map[string]func(ts []*tensor.Tensor) error{
		"rmsnorm": func(ts []*tensor.Tensor) error { return RMSNorm(nil, ts[0], ts[1], ts[2], Options{Eps: 1e-6}) },
		"l2norm":  func(ts []*tensor.Tensor) error { return L2Norm(nil, ts[0], ts[1], Options{Eps: 1e-6}) },
	} {
		gputest.OnHostAndDevice(t, ts, op, func(where string, ts []*tensor.Tensor) {
			got := ts[0].Float64s()
			if !slices.Equal(got[:3], []float64{0, 0, 0}) || !math.IsNaN(got[3]) || got[4] != 0 || got[5] != 0 {
				t.Errorf("%s on the %s: %v, want [0 0 0 NaN 0 0]", name, where, got)
			}
		})
	}
}

// TestPadAddOverflowsAsFP32: with PadTo the fused add keeps x + residual
// in fp32, so a sum past fp32's range is +Inf on the host as in the pad
// kernel: residualOut holds it, and its y element is NaN (Inf·0) where a
// float64 sum gave 0. Where a GPU is found the kernel runs the same row.
func TestPadAddOverflowsAsFP32(t *testing.T) {
	const f32 = tensor.F32
	ts := []*tensor.Tensor{tensor.New(f32, 1, 4), tensor.New(f32, 1, 3), host(f32, []float64{3e38, 1, -1}, 1, 3),
		host(f32, []float64{3e38, 1, -1}, 1, 3), host(f32, []float64{1, 1, 1}, 3)}
	gputest.OnHostAndDevice(t, ts, func(ts []*tensor.Tensor) error {
		return FusedAddRMSNorm(nil, ts[0], ts[1], ts[2], ts[3], ts[4], Options{Eps: 1e-6, PadTo: 4})
	}, func(where string, ts []*tensor.Tensor) {
		y, ro := ts[0].Float64s(), ts[1].Float64s()
		if !math.IsNaN(y[0]) || y[1] != 0 || y[2] != 0 || y[3] != 0 {
			t.Errorf("y on the %s: %v, want [NaN 0 0 0]", where, y)
		}
		if !slices.Equal(ro, []float64{math.Inf(1), 2, -2}) {
			t.Errorf("residualOut on the %s: %v, want [+Inf 2 -2]", where, ro)
		}
	})
}

// TestPaddingIsPositiveZero checks the pad columns hold +0.0 bit for bit.
func TestPaddingIsPositiveZero(t *testing.T) {
	y := tensor.New(tensor.BF16, 2, 8)
	y.Poison()
	x := host(tensor.BF16, []float64{-1, -2, -3, 1, 2, 3}, 2, 3)
	if err := RMSNorm(nil, y, x, host(tensor.BF16, []float64{1, 1, 1}, 3), Options{PadTo: 8, Eps: 1e-6}); err != nil {
		t.Fatal(err)
	}
	b := y.Bytes()
	for row := range 2 {
		for col := 3; col < 8; col++ {
			if off := (row*8 + col) * 2; b[off] != 0 || b[off+1] != 0 {
				t.Errorf("pad element [%d,%d] has bits %#02x%02x, want +0", row, col, b[off+1], b[off])
			}
		}
	}
}

// TestInPlaceMatchesOutOfPlace runs fused_add_rmsnorm both ways on the host.
func TestInPlaceMatchesOutOfPlace(t *testing.T) {
	rng, _ := tensor.NewRNG()
	x := tensor.Rand(rng, tensor.BF16, 1, 5, 33)
	res := tensor.Rand(rng, tensor.BF16, 1, 5, 33)
	w := tensor.Rand(rng, tensor.BF16, 1, 33)
	y, ro := tensor.New(tensor.BF16, 5, 33), tensor.New(tensor.BF16, 5, 33)
	o := Options{Eps: 1e-6}
	if err := FusedAddRMSNorm(nil, y, ro, x, res, w, o); err != nil {
		t.Fatal(err)
	}
	if err := FusedAddRMSNorm(nil, x, res, x, res, w, o); err != nil {
		t.Fatal(err)
	}
	if string(x.Bytes()) != string(y.Bytes()) || string(res.Bytes()) != string(ro.Bytes()) {
		t.Fatal("in-place results differ from out-of-place ones")
	}
}

// TestHintedReadsMatch runs kernels with the L2 hint on row reads, which the
// picker sets only where the device allows it (cuda.Device.SetL2EvictLast)
// and mostly for launches larger than L2, so for none of the parity cases,
// beside the same kernels without it: a cache policy must change no
// bit of any output. The cases cover block and group rows, fused inputs,
// one-pass LayerNorm, L2 backward's second input and fp32.
func TestHintedReadsMatch(t *testing.T) {
	dev := gputest.Device(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		op         opKind
		add        addMode
		bias       bool
		dt         tensor.DType
		rows, n    int
		name       string
		stats, rin bool
	}{
		{opRMS, addNone, false, tensor.BF16, 300, 4096, "rmsnorm", true, false},
		{opRMS, addRounded, false, tensor.BF16, 300, 1000, "fused_add_rmsnorm", false, false},
		{opLayer, addNone, true, tensor.BF16, 300, 7168, "layernorm", true, false},
		{opLayer, addRounded, true, tensor.F16, 300, 4096, "fused_add_layernorm", true, false},
		{opL2Backward, addNone, false, tensor.BF16, 300, 256, "l2norm_bwd", false, true},
		{opRMS, addNone, false, tensor.F32, 300, 2048, "rmsnorm f32", false, false},
	} {
		var frees []*tensor.Tensor
		dt := func(dt tensor.DType, shape ...int) *tensor.Tensor {
			d, err := tensor.RandDevice(dev, rng, dt, 0.5, 1, shape...)
			if err != nil {
				t.Fatal(err)
			}
			frees = append(frees, d)
			return d
		}
		j := &job{op: c.op, add: c.add, weight: weightPlain, x: dt(c.dt, c.rows, c.n), y: dt(c.dt, c.rows, c.n),
			w: dt(c.dt, c.n), eps: 1e-5, denom: float64(c.n), nOut: c.n}
		if c.bias {
			j.b = dt(c.dt, c.n)
		}
		if c.add != addNone {
			j.x2, j.residualOut = dt(c.dt, c.rows, c.n), dt(c.dt, c.rows, c.n)
		}
		if c.stats {
			j.rstd = dt(tensor.F32, c.rows)
			if c.op == opLayer {
				j.mean = dt(tensor.F32, c.rows)
			}
		}
		if c.rin {
			j.weight, j.w, j.denom = weightNone, nil, 1
			j.x2, j.rstdIn = dt(c.dt, c.rows, c.n), dt(tensor.F32, c.rows)
		}
		cfg := pickConfig(dev.Props(), j.shape())
		if !cfg.waves || cfg.vec == 1 {
			t.Fatalf("%s %dx%d: %+v is not a config the hint applies to", c.name, c.rows, c.n, cfg)
		}
		var outs [2]string
		for i, hint := range []bool{false, true} {
			written := []*tensor.Tensor{j.y}
			for _, o := range []*tensor.Tensor{j.residualOut, j.rstd, j.mean} {
				if o != nil {
					written = append(written, o)
				}
			}
			for _, o := range written {
				if err := o.Poison(); err != nil {
					t.Fatal(err)
				}
			}
			cfg.hint = hint
			if err := j.launchWith(nil, cfg); err != nil {
				t.Fatal(err)
			}
			for _, o := range written {
				h, err := o.ToHost()
				if err != nil {
					t.Fatal(err)
				}
				outs[i] += string(h.Bytes())
			}
		}
		if outs[0] != outs[1] {
			t.Errorf("%s %dx%d %v: outputs differ with the L2 hint", c.name, c.rows, c.n, c.dt)
		}
		for _, f := range frees {
			f.Free()
		}
	}
}

// TestZeroRowsIsANoOp checks M = 0 returns nil and touches nothing.
func TestZeroRowsIsANoOp(t *testing.T) {
	x, y := tensor.New(tensor.BF16, 0, 16), tensor.New(tensor.BF16, 0, 16)
	w := tensor.New(tensor.BF16, 16)
	rs := tensor.New(tensor.F32, 0)
	if err := RMSNorm(nil, y, x, w, Options{RStd: rs}); err != nil {
		t.Fatal(err)
	}
	if err := L2NormBackward(nil, y, x, x, rs); err != nil {
		t.Fatal(err)
	}
	if err := FusedAddLayerNorm(nil, y, tensor.New(tensor.BF16, 0, 16), x, tensor.New(tensor.BF16, 0, 16), w, w, Options{}); err != nil {
		t.Fatal(err)
	}
}

// badCall is one invalid call: the tensors it writes are poisoned before and
// must stay poisoned after.
type badCall struct {
	name    string
	wantErr string
	call    func() (written []*tensor.Tensor, err error)
}

func TestValidation(t *testing.T) {
	const bf, f32 = tensor.BF16, tensor.F32
	x := func() *tensor.Tensor { return tensor.New(bf, 4, 8) }
	w := func() *tensor.Tensor { return tensor.New(bf, 8) }
	out := func(dt tensor.DType, shape ...int) *tensor.Tensor {
		t := tensor.New(dt, shape...)
		t.Poison()
		return t
	}
	// shared storage for the overlap cases: rows of 8 with stride 10
	base, _ := tensor.NewStrided(bf, []int{4, 8}, []int{10, 1})
	shifted, _ := base.View(bf, []int{4, 8}, []int{9, 1}) // same start, other layout: overlaps base partly
	cases := []badCall{
		{"x rank 1", "argument x: has rank 1", func() ([]*tensor.Tensor, error) {
			y := out(bf, 4, 8)
			return []*tensor.Tensor{y}, RMSNorm(nil, y, tensor.New(bf, 32), w(), Options{})
		}},
		{"y rank 3", "argument y: has rank 3", func() ([]*tensor.Tensor, error) {
			y := out(bf, 4, 8, 1)
			return []*tensor.Tensor{y}, RMSNorm(nil, y, x(), w(), Options{})
		}},
		{"y shape", "argument y: has shape [4 9]", func() ([]*tensor.Tensor, error) {
			y := out(bf, 4, 9)
			return []*tensor.Tensor{y}, RMSNorm(nil, y, x(), w(), Options{})
		}},
		{"padded y shape", "argument y: has shape [4 8], want [4 16]", func() ([]*tensor.Tensor, error) {
			y := out(bf, 4, 8)
			return []*tensor.Tensor{y}, RMSNorm(nil, y, x(), w(), Options{PadTo: 16})
		}},
		{"w length", "argument w: has shape [7]", func() ([]*tensor.Tensor, error) {
			y := out(bf, 4, 8)
			return []*tensor.Tensor{y}, RMSNorm(nil, y, x(), tensor.New(bf, 7), Options{})
		}},
		{"residual shape", "argument residual: has shape [3 8]", func() ([]*tensor.Tensor, error) {
			y, ro := out(bf, 4, 8), out(bf, 4, 8)
			return []*tensor.Tensor{y, ro}, FusedAddRMSNorm(nil, y, ro, x(), tensor.New(bf, 3, 8), w(), Options{})
		}},
		{"residualOut shape", "argument residualOut: has shape [4 16]", func() ([]*tensor.Tensor, error) {
			y, ro := out(bf, 4, 16), out(bf, 4, 16)
			return []*tensor.Tensor{y, ro}, FusedAddRMSNorm(nil, y, ro, x(), x(), w(), Options{PadTo: 16})
		}},
		{"x dtype", "argument x: has dtype i32", func() ([]*tensor.Tensor, error) {
			y := out(bf, 4, 8)
			return []*tensor.Tensor{y}, RMSNorm(nil, y, tensor.New(tensor.I32, 4, 8), w(), Options{})
		}},
		{"w dtype", "argument w: has dtype f16", func() ([]*tensor.Tensor, error) {
			y := out(bf, 4, 8)
			return []*tensor.Tensor{y}, RMSNorm(nil, y, x(), tensor.New(tensor.F16, 8), Options{})
		}},
		{"y dtype", "argument y: has dtype f32", func() ([]*tensor.Tensor, error) {
			y := out(f32, 4, 8)
			return []*tensor.Tensor{y}, LayerNorm(nil, y, x(), w(), w(), Options{})
		}},
		{"rstd dtype", "argument Options.RStd: has dtype bf16", func() ([]*tensor.Tensor, error) {
			y, rs := out(bf, 4, 8), out(bf, 4)
			return []*tensor.Tensor{y, rs}, RMSNorm(nil, y, x(), w(), Options{RStd: rs})
		}},
		{"mean shape", "argument Options.Mean: has shape [5]", func() ([]*tensor.Tensor, error) {
			y, mean := out(bf, 4, 8), out(f32, 5)
			return []*tensor.Tensor{y, mean}, LayerNorm(nil, y, x(), w(), nil, Options{Mean: mean})
		}},
		{"backward rstd missing", "argument rstd: is nil", func() ([]*tensor.Tensor, error) {
			dx := out(bf, 4, 8)
			return []*tensor.Tensor{dx}, L2NormBackward(nil, dx, x(), x(), nil)
		}},
		{"w missing", "argument w: is nil", func() ([]*tensor.Tensor, error) {
			y := out(bf, 4, 8)
			return []*tensor.Tensor{y}, RMSNorm(nil, y, x(), nil, Options{})
		}},
		{"empty rows", "argument x: has empty rows", func() ([]*tensor.Tensor, error) {
			y := out(bf, 4, 0)
			return []*tensor.Tensor{y}, L2Norm(nil, y, tensor.New(bf, 4, 0), Options{})
		}},
		{"negative eps", "argument Options.Eps: is -1", func() ([]*tensor.Tensor, error) {
			y := out(bf, 4, 8)
			return []*tensor.Tensor{y}, RMSNorm(nil, y, x(), w(), Options{Eps: -1})
		}},
		{"eps past fp32", "argument Options.Eps: is 1e+39", func() ([]*tensor.Tensor, error) {
			y := out(bf, 4, 8)
			return []*tensor.Tensor{y}, LayerNorm(nil, y, x(), w(), nil, Options{Eps: 1e39})
		}},
		{"NaN eps", "argument Options.Eps: is NaN", func() ([]*tensor.Tensor, error) {
			y := out(bf, 4, 8)
			return []*tensor.Tensor{y}, L2Norm(nil, y, x(), Options{Eps: math.NaN()})
		}},
		{"negative PadTo", "argument Options.PadTo: is -8", func() ([]*tensor.Tensor, error) {
			y := out(bf, 4, 8)
			return []*tensor.Tensor{y}, RMSNorm(nil, y, x(), w(), Options{PadTo: -8})
		}},
		{"PadTo past the kernel's width", "argument Options.PadTo: is 9223372036854775807", func() ([]*tensor.Tensor, error) {
			// (n + PadTo − 1) overflowed: y [4, 0] passed as the padded output
			y := out(bf, 4, 0)
			return []*tensor.Tensor{y}, RMSNorm(nil, y, x(), w(), Options{PadTo: math.MaxInt})
		}},
		{"rows padded past the kernel's width", "argument Options.PadTo: is 2147479550: rows of 2147479551 padded to 4294959100", func() ([]*tensor.Tensor, error) {
			// Rows without storage (M = 0) are checked all the same.
			y := out(bf, 0, 8)
			return []*tensor.Tensor{y}, RMSNorm(nil, y, tensor.New(bf, 0, maxCols), tensor.New(bf, 0), Options{PadTo: maxCols - 1})
		}},
		{"rows past the kernel's width", "argument x: has shape [0 2147479552]", func() ([]*tensor.Tensor, error) {
			y := out(bf, 0, maxCols+1)
			return []*tensor.Tensor{y}, L2Norm(nil, y, tensor.New(bf, 0, maxCols+1), Options{})
		}},
		{"ZeroCentered on LayerNorm", "Options.ZeroCentered: applies to RMSNorm only", func() ([]*tensor.Tensor, error) {
			y := out(bf, 4, 8)
			return []*tensor.Tensor{y}, LayerNorm(nil, y, x(), w(), nil, Options{ZeroCentered: true})
		}},
		{"PadTo on L2Norm", "Options.PadTo: applies to RMSNorm only", func() ([]*tensor.Tensor, error) {
			y := out(bf, 4, 8)
			return []*tensor.Tensor{y}, L2Norm(nil, y, x(), Options{PadTo: 8})
		}},
		{"Mean on RMSNorm", "Options.Mean: applies to LayerNorm only", func() ([]*tensor.Tensor, error) {
			y, mean := out(bf, 4, 8), out(f32, 4)
			return []*tensor.Tensor{y, mean}, RMSNorm(nil, y, x(), w(), Options{Mean: mean})
		}},
		{"y partly overlaps x", "argument y: partly overlaps x", func() ([]*tensor.Tensor, error) {
			base.Poison()
			return []*tensor.Tensor{base}, RMSNorm(nil, base, shifted, w(), Options{})
		}},
		{"in place over w", "argument y: overlaps w", func() ([]*tensor.Tensor, error) {
			xs := out(bf, 4, 8)
			ws, _ := xs.View(bf, []int{8}, []int{1})
			return []*tensor.Tensor{xs}, RMSNorm(nil, xs, xs, ws, Options{})
		}},
		{"residualOut is x", "argument residualOut: overlaps x", func() ([]*tensor.Tensor, error) {
			xs, y := out(bf, 4, 8), out(bf, 4, 8)
			return []*tensor.Tensor{xs, y}, FusedAddRMSNorm(nil, y, xs, xs, x(), w(), Options{})
		}},
		{"y is residual", "argument y: overlaps residual", func() ([]*tensor.Tensor, error) {
			res, ro := out(bf, 4, 8), out(bf, 4, 8)
			return []*tensor.Tensor{res, ro}, FusedAddRMSNorm(nil, res, ro, x(), res, w(), Options{})
		}},
		{"y is residualOut", "argument y: overlaps residualOut", func() ([]*tensor.Tensor, error) {
			y := out(bf, 4, 8)
			return []*tensor.Tensor{y}, FusedAddLayerNorm(nil, y, y, x(), x(), w(), nil, Options{})
		}},
		{"fused RMSNorm, every row tensor one", "argument y: overlaps residualOut", func() ([]*tensor.Tensor, error) {
			// y = x and residualOut = residual are each in place, but the two
			// outputs are one tensor.
			t := out(bf, 4, 8)
			return []*tensor.Tensor{t}, FusedAddRMSNorm(nil, t, t, t, t, w(), Options{})
		}},
		{"fused LayerNorm, every row tensor one", "argument y: overlaps residualOut", func() ([]*tensor.Tensor, error) {
			t := out(bf, 4, 8)
			return []*tensor.Tensor{t}, FusedAddLayerNorm(nil, t, t, t, t, w(), nil, Options{})
		}},
		{"y is x, which is residual too", "argument y: overlaps residual", func() ([]*tensor.Tensor, error) {
			// x may be y's partner, but residual is not, whatever tensor it is.
			t, ro := out(bf, 4, 8), out(bf, 4, 8)
			return []*tensor.Tensor{t, ro}, FusedAddRMSNorm(nil, t, ro, t, t, w(), Options{})
		}},
		{"rstd overlaps mean", "argument Options.RStd: overlaps Options.Mean", func() ([]*tensor.Tensor, error) {
			y, st := out(bf, 4, 8), out(f32, 4)
			return []*tensor.Tensor{y, st}, LayerNorm(nil, y, x(), w(), nil, Options{RStd: st, Mean: st})
		}},
		{"dx is y", "argument dx: overlaps y", func() ([]*tensor.Tensor, error) {
			ys := out(bf, 4, 8)
			return []*tensor.Tensor{ys}, L2NormBackward(nil, ys, ys, x(), tensor.New(f32, 4))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			written, err := c.call()
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, c.wantErr)
			}
			for _, w := range written {
				for i, b := range w.Bytes() {
					if b != 0xFF {
						t.Fatalf("byte %d of an output was written (%#x) before the error", i, b)
					}
				}
			}
		})
	}
}

// TestMixedLocations needs a device tensor, so a GPU.
func TestMixedLocations(t *testing.T) {
	dev := gputest.Device(t)
	xd, err := tensor.New(tensor.BF16, 4, 8).ToDevice(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer xd.Free()
	y := tensor.New(tensor.BF16, 4, 8)
	y.Poison()
	err = RMSNorm(nil, y, xd, tensor.New(tensor.BF16, 8), Options{})
	if err == nil || !strings.Contains(err.Error(), "is on") {
		t.Fatalf("error %v, want a location mismatch", err)
	}
	for _, b := range y.Bytes() {
		if b != 0xFF {
			t.Fatal("host output written despite the error")
		}
	}
}

// TestStreamOfAnotherDevice: a stream of a device other than the tensors'
// is an error naming s, before anything is written or launched.
func TestStreamOfAnotherDevice(t *testing.T) {
	dev := gputest.Device(t)
	x, err := tensor.New(tensor.BF16, 4, 8).ToDevice(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Free()
	w, err := tensor.New(tensor.BF16, 8).ToDevice(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Free()
	other := &cuda.Device{Ordinal: dev.Ordinal + 1}
	err = RMSNorm(other.DefaultStream(), x, x, w, Options{})
	if err == nil || !strings.Contains(err.Error(), "argument s:") {
		t.Fatalf("error %v, want one naming argument s", err)
	}
}

// TestPrepare: a nil device is an error; on a GPU every kernel Prepare
// lists compiles and loads.
func TestPrepare(t *testing.T) {
	if err := Prepare(nil); err == nil || !strings.Contains(err.Error(), "argument dev: is nil") {
		t.Fatalf("Prepare(nil) = %v, want an error naming dev", err)
	}
	dev := gputest.Device(t)
	start := time.Now()
	if err := Prepare(dev); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d kernels prepared in %v", len(prepared(dev.Props())), time.Since(start))
}

// TestPreparedCoversTypicalCalls checks, on a simulated H100, that the
// kernels of calls Prepare's doc names are among those it compiles.
func TestPreparedCoversTypicalCalls(t *testing.T) {
	keys := map[kernelKey]bool{}
	for _, k := range prepared(propsH100) {
		keys[k] = true
	}
	const bf = tensor.BF16
	for _, c := range []struct {
		name    string
		rows, n int
		call    func(y, x *tensor.Tensor, n int) *job
	}{
		{"rmsnorm", 32, 7168, func(y, x *tensor.Tensor, n int) *job {
			return &job{op: opRMS, weight: weightPlain, y: y, x: x, w: tensor.New(bf, n)}
		}},
		{"fused_add_rmsnorm", 1, 4096, func(y, x *tensor.Tensor, n int) *job {
			return &job{op: opRMS, add: addRounded, weight: weightPlain, y: y, x: x, x2: tensor.New(bf, 1, n),
				residualOut: tensor.New(bf, 1, n), w: tensor.New(bf, n)}
		}},
		{"layernorm", 4096, 2048, func(y, x *tensor.Tensor, n int) *job {
			return &job{op: opLayer, weight: weightPlain, y: y, x: x, w: tensor.New(bf, n), b: tensor.New(bf, n)}
		}},
		{"qk rmsnorm", 16384, 128, func(y, x *tensor.Tensor, n int) *job {
			return &job{op: opRMS, weight: weightPlain, y: y, x: x, w: tensor.New(bf, n)}
		}},
		{"l2norm_bwd", 65536, 64, func(y, x *tensor.Tensor, n int) *job {
			return &job{op: opL2Backward, y: y, x: x, x2: tensor.New(bf, 65536, n), rstdIn: tensor.New(tensor.F32, 65536)}
		}},
	} {
		j := c.call(tensor.New(bf, c.rows, c.n), tensor.New(bf, c.rows, c.n), c.n)
		j.nOut = c.n
		if k := j.key(pickConfig(propsH100, j.shape())); !keys[k] {
			t.Errorf("%s %dx%d: %+v is not prepared", c.name, c.rows, c.n, k)
		}
	}
}
