package check

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/tensor"
)

func TestCompare(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tol := Tolerance{Atol: 1e-3, Rtol: 1e-2, RelNorm: 1e-2}
	for _, c := range []struct {
		name      string
		got, want []float64
		pass      bool
		bad       int
	}{
		{"equal", []float64{1, 2, 3}, []float64{1, 2, 3}, true, 0},
		{"within rtol", []float64{100.5, 2}, []float64{100, 2}, true, 0},
		{"outside", []float64{1.1, 2}, []float64{1, 2}, false, 1},
		{"nan where a number is due", []float64{nan, 2}, []float64{1, 2}, false, 1},
		{"number where nan is due", []float64{1, 2}, []float64{nan, 2}, false, 1},
		{"nan matches nan", []float64{nan, 2}, []float64{nan, 2}, true, 0},
		{"inf must match", []float64{inf, 2}, []float64{-inf, 2}, false, 1},
		{"inf matches", []float64{inf}, []float64{inf}, true, 0},
		{"length", []float64{1}, []float64{1, 2}, false, 0},
	} {
		r := Compare(c.name, c.got, c.want, tol)
		if r.Pass != c.pass || r.Bad != c.bad {
			t.Errorf("%s: pass %v bad %d, want %v %d (%v)", c.name, r.Pass, r.Bad, c.pass, c.bad, r)
		}
	}
	// Each element within tolerance but a systematic bias over the norm bound.
	r := Compare("bias", []float64{1.02, 1.02, 1.02}, []float64{1, 1, 1}, Tolerance{Atol: 0.05, RelNorm: 1e-3})
	if r.Pass || r.RelNorm < 0.019 {
		t.Errorf("relative norm not enforced: %v", r)
	}
	if r := Exact("ids", []int64{1, 2, 4}, []int64{1, 2, 3}); r.Pass || r.Bad != 1 {
		t.Errorf("exact: %v", r)
	}
}

func TestMerge(t *testing.T) {
	m := Merge(Report{Name: "y", Elements: 4, MaxAbs: 0.1, Pass: true}, Report{Name: "r", Elements: 2, MaxAbs: 0.3, Bad: 1, Worst: "x"})
	if m.Pass || m.Elements != 6 || m.MaxAbs != 0.3 || m.Name != "y+r" {
		t.Fatalf("%+v", m)
	}
	if Merge().Pass {
		t.Fatal("an empty merge passes")
	}
}

// double is a toy op: out = 2·in on the host path. writeAll false leaves
// the last element untouched, as a buggy kernel would.
func double(writeAll bool) func(*cuda.Stream, []*tensor.Tensor) error {
	return func(_ *cuda.Stream, ts []*tensor.Tensor) error {
		in := ts[0].Float64s()
		out := make([]float64, len(in))
		for i := range in {
			out[i] = 2 * in[i]
		}
		b := ts[1].Bytes()
		size := ts[1].DType().Size()
		last := append([]byte(nil), b[len(b)-size:]...)
		ts[1].SetFloat64s(out)
		if !writeAll { // put back whatever the last element held
			copy(b[len(b)-size:], last)
		}
		return nil
	}
}

func TestRunHostPath(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16, tensor.I64, tensor.I32, tensor.I8, tensor.U8} {
		in := tensor.New(dt, 3, 5)
		in.FillNormal(tensor.SeededRNG(1), 0, 1)
		spec := Spec{Tensors: []*tensor.Tensor{in, tensor.New(dt, 3, 5)}, Names: []string{"x", "y"},
			Outputs: []int{1}, Poison: []int{1}, Run: double(true)}
		r, err := Run(nil, spec)
		if err != nil || !r.Pass || !r.CPUOnly || r.Unwritten != 0 {
			t.Fatalf("%v: %v %v", dt, r, err)
		}
		spec.Run = double(false)
		if r, _ := Run(nil, spec); r.Pass || r.Unwritten != 1 {
			t.Fatalf("%v: an unwritten element passed: %v", dt, r)
		}
	}
	spec := Spec{Tensors: []*tensor.Tensor{tensor.New(tensor.F32, 2)}, Names: []string{"x"},
		Run: func(*cuda.Stream, []*tensor.Tensor) error { return errors.New("bad shape") }}
	if _, err := Run(nil, spec); err == nil {
		t.Fatal("an op error was swallowed")
	}
}

// stridedSpec is y = 2·x for x [3, 5] of dtype dt and a poisoned y [3, 5]
// with a gap of three elements after each row; after runs once y is written.
func stridedSpec(t *testing.T, dt tensor.DType, after func(ts []*tensor.Tensor)) Spec {
	t.Helper()
	in := tensor.New(dt, 3, 5)
	in.FillNormal(tensor.SeededRNG(2), 0, 1)
	out, err := tensor.NewStrided(dt, []int{3, 5}, []int{8, 1})
	if err != nil {
		t.Fatal(err)
	}
	return Spec{Tensors: []*tensor.Tensor{in, out}, Names: []string{"x", "y"}, Outputs: []int{1}, Poison: []int{1},
		Run: func(_ *cuda.Stream, ts []*tensor.Tensor) error {
			if err := double(true)(nil, ts); err != nil {
				return err
			}
			after(ts)
			return nil
		}}
}

// TestUnwrittenStrided checks strided outputs (a gap after each row) the
// same way as contiguous ones: by the exact poison pattern. A negative NaN
// the op computes (Inf−Inf on amd64 gives 0xFFC00000) is written, an element
// left poisoned is not, and the gaps do not count.
func TestUnwrittenStrided(t *testing.T) {
	for _, tc := range []struct {
		dt  tensor.DType
		nan func(b []byte)
	}{
		{tensor.F32, func(b []byte) { binary.LittleEndian.PutUint32(b, 0xFFC00000) }},
		{tensor.BF16, func(b []byte) { binary.LittleEndian.PutUint16(b, 0xFFC0) }},
		{tensor.F16, func(b []byte) { binary.LittleEndian.PutUint16(b, 0xFE00) }},
	} {
		spec := stridedSpec(t, tc.dt, func(ts []*tensor.Tensor) {
			tc.nan(ts[1].Bytes()[8*tc.dt.Size():]) // row 1, column 0
		})
		if r, err := Run(nil, spec); err != nil || !r.Pass || r.Unwritten != 0 {
			t.Errorf("%v: a computed negative NaN counts as unwritten: %v %v", tc.dt, r, err)
		}
		spec.Run = double(false)
		if r, _ := Run(nil, spec); r.Pass || r.Unwritten != 1 {
			t.Errorf("%v: want the one unwritten element of a strided output: %v", tc.dt, r)
		}
	}
}

// TestMarked checks an output the case poisoned in part itself: Run keeps
// the values of the elements the op must leave, and an element of the
// poisoned part left as it was counts as unwritten.
func TestMarked(t *testing.T) {
	in := tensor.New(tensor.F32, 3, 5)
	in.FillNormal(tensor.SeededRNG(3), 0, 1)
	out := tensor.New(tensor.F32, 3, 5)
	out.FillNormal(tensor.SeededRNG(4), 0, 1)
	row1 := out.Bytes()[5*4 : 10*4]
	for i := range row1 {
		row1[i] = poisonByte
	}
	kept := slices.Clone(out.Float64s()[:5])
	write := func(cols int) func(*cuda.Stream, []*tensor.Tensor) error {
		return func(_ *cuda.Stream, ts []*tensor.Tensor) error {
			x, y := ts[0].Float64s(), ts[1].Float64s()
			if !slices.Equal(y[:5], kept) {
				return errors.New("row 0 lost its values before the op ran")
			}
			for j := range cols {
				y[5+j] = 2 * x[5+j]
			}
			ts[1].SetFloat64s(y)
			return nil
		}
	}
	spec := Spec{Tensors: []*tensor.Tensor{in, out}, Names: []string{"x", "y"}, Outputs: []int{1}, Marked: []int{1}, Run: write(5)}
	if r, err := Run(nil, spec); err != nil || !r.Pass || r.Unwritten != 0 {
		t.Fatalf("the marked row written in full: %v %v", r, err)
	}
	spec.Run = write(4)
	if r, err := Run(nil, spec); err != nil || r.Pass || r.Unwritten != 1 {
		t.Fatalf("want the one unwritten element of the marked row: %v %v", r, err)
	}
}

// TestUnwrittenOnlyPoisoned checks that an output the spec does not poison
// (here a byte copy of a value, which may be 0xFF) is not taken for
// unwritten.
func TestUnwrittenOnlyPoisoned(t *testing.T) {
	spec := Spec{Tensors: []*tensor.Tensor{tensor.New(tensor.U8, 4)}, Names: []string{"bits"}, Outputs: []int{0},
		Run: func(_ *cuda.Stream, ts []*tensor.Tensor) error {
			ts[0].SetInt64s([]int64{0xFF, 0x7F, 0xFF, 0})
			return nil
		}}
	if r, err := Run(nil, spec); err != nil || !r.Pass || r.Unwritten != 0 {
		t.Fatalf("an unpoisoned output's 0xFF bytes count as unwritten: %v %v", r, err)
	}
}

func TestForDTypeOrdering(t *testing.T) {
	prev := 0.0
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.F8E4M3} {
		tol := ForDType(dt)
		if tol.Rtol <= prev {
			t.Errorf("%v: rtol %g not looser than a wider type's %g", dt, tol.Rtol, prev)
		}
		prev = tol.Rtol
	}
}

// TestStrayWrites checks that bytes the op may not write are checked: the
// gap after each row of a strided output (a kernel whose vector stores run
// past the end of a row) and every byte of an input. Each op here writes
// every element of y right, so nothing else can fail the case.
func TestStrayWrites(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stray func(ts []*tensor.Tensor)
		pass  bool
	}{
		{"none", func([]*tensor.Tensor) {}, true},
		{"gap after row 0", func(ts []*tensor.Tensor) { ts[1].Bytes()[5*4] = 0 }, false},
		{"gap after row 1, whole element", func(ts []*tensor.Tensor) { copy(ts[1].Bytes()[(8+5)*4:], []byte{0, 0, 0x80, 0x3f}) }, false},
		{"input", func(ts []*tensor.Tensor) { ts[0].Bytes()[7] ^= 1 }, false},
	} {
		r, err := Run(nil, stridedSpec(t, tensor.F32, tc.stray))
		if err != nil {
			t.Fatal(err)
		}
		if r.Pass != tc.pass || (r.Stray > 0) == tc.pass {
			t.Errorf("%s: %v (pass %v, stray %d), want pass %v", tc.name, r, r.Pass, r.Stray, tc.pass)
		}
	}
}

// TestForDTypeTwoULPs holds ForDType to its doc: two units in the last
// place of the format pass, relative to a value at a power of two (where a
// unit is largest relative to the value), and three do not where the
// absolute floor is negligible beside the value. f32 outputs get more (see
// ForDType).
func TestForDTypeTwoULPs(t *testing.T) {
	for _, tc := range []struct {
		dt  tensor.DType
		ulp float64 // the spacing just above 1
	}{
		{tensor.F16, 0x1p-10}, {tensor.BF16, 0x1p-7}, {tensor.F8E4M3, 0x1p-3}, {tensor.F8E5M2, 0x1p-2},
	} {
		tol := ForDType(tc.dt)
		for _, c := range []struct {
			want, units float64
			pass        bool
		}{{0.5, 2, true}, {1, 2, true}, {256, 2, true}, {256, 3, false}} {
			got := c.want * (1 + c.units*tc.ulp)
			if tensor.Round(tc.dt, got) != got {
				t.Fatalf("%v: %g is not representable", tc.dt, got)
			}
			if r := Compare("y", []float64{got}, []float64{c.want}, tol); (r.Bad == 0) != c.pass {
				t.Errorf("%v: %g units above %g: bad %d, want pass %v", tc.dt, c.units, c.want, r.Bad, c.pass)
			}
		}
	}
}
