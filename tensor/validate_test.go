package tensor

import (
	"errors"
	"strings"
	"testing"

	"github.com/gokittens/kittens/cuda"
)

func TestValidatorChecks(t *testing.T) {
	dev0, dev1 := &cuda.Device{Ordinal: 0}, &cuda.Device{Ordinal: 1}
	x := New(F32, 4, 6)
	strided, _ := NewStrided(BF16, []int{4, 6}, []int{8, 1})
	d := fakeDevice(dev0, 0x10000, F32, 4, 8)
	huge := fakeDevice(dev0, 0x10000, BF16, 1<<16, 1<<15+1)
	top, _ := x.Slice(0, 0, 2)
	bottom, _ := x.Slice(0, 2, 4)
	middle, _ := x.Slice(0, 1, 3)
	left, _ := x.Slice(1, 0, 3)
	tests := []struct {
		name  string
		check func(v *Validator)
		arg   string // the argument the error names; "" for no error
		msg   string
	}{
		{"rank ok", func(v *Validator) { v.Tensor("x", x).Rank(1, 2) }, "", ""},
		{"rank", func(v *Validator) { v.Tensor("x", x).Rank(3) }, "x", "has rank 2 (shape [4 6]), want rank [3]"},
		{"dtype ok", func(v *Validator) { v.Tensor("x", x).DType(BF16, F32) }, "", ""},
		{"dtype", func(v *Validator) { v.Tensor("x", x).DType(BF16, F16) }, "x", "has dtype f32, want one of [bf16 f16]"},
		{"dtype of", func(v *Validator) { v.Tensor("y", strided).DTypeOf(x) }, "y", "has dtype bf16, want f32"},
		{"dtype of nil", func(v *Validator) { v.Tensor("y", strided).DTypeOf(nil) }, "", ""},
		{"shape ok", func(v *Validator) { v.Tensor("x", x).Shape(4, 6) }, "", ""},
		{"shape wildcard", func(v *Validator) { v.Tensor("x", x).Shape(-1, 6) }, "", ""},
		{"shape all wildcards", func(v *Validator) { v.Tensor("x", x).Shape(-1, -1) }, "", ""},
		{"shape", func(v *Validator) { v.Tensor("x", x).Shape(-1, 5) }, "x", "has shape [4 6], want [any 5]"},
		{"shape rank", func(v *Validator) { v.Tensor("x", x).Shape(-1) }, "x", "has shape [4 6], want [any]"},
		{"shape of", func(v *Validator) { v.Tensor("y", strided).ShapeOf(x) }, "", ""},
		{"shape of differs", func(v *Validator) { v.Tensor("y", top).ShapeOf(x) }, "y", "has shape [2 6], want [4 6]"},
		{"contiguous ok", func(v *Validator) { v.Tensor("x", x).Contiguous() }, "", ""},
		{"contiguous", func(v *Validator) { v.Tensor("x", strided).Contiguous() }, "x", "must be contiguous (strides [8 1] for shape [4 6])"},
		{"int32 ok", func(v *Validator) { v.Tensor("x", x).Int32Indexable() }, "", ""},
		{"int32", func(v *Validator) { v.Tensor("x", huge).Int32Indexable() }, "x", "spans 2147549184 elements"},
		{"on device ok", func(v *Validator) { v.Tensor("x", d).OnDevice() }, "", ""},
		{"on device", func(v *Validator) { v.Tensor("x", x).OnDevice() }, "x", "is a host tensor"},
		{"nil", func(v *Validator) { v.Tensor("w", nil).Rank(1).DType(F32).Shape(3).Contiguous() }, "w", "is nil"},
		{"optional nil", func(v *Validator) { v.Optional("b", nil).Rank(1).DType(F32).Shape(3).Contiguous().Int32Indexable() }, "", ""},
		{"optional checked", func(v *Validator) { v.Optional("b", x).Rank(1) }, "b", "has rank 2"},
		{"same location host", func(v *Validator) { v.SameLocation(nil, []string{"y", "x"}, top, x) }, "", ""},
		{"same location nils", func(v *Validator) { v.SameLocation(nil, []string{"a", "b", "c"}, nil, d, nil) }, "", ""},
		{"host and device", func(v *Validator) { v.SameLocation(nil, []string{"y", "b", "x"}, x, nil, d) }, "x", "is on device 0 but y is on the host"},
		{"two devices", func(v *Validator) {
			v.SameLocation(nil, []string{"y", "x"}, d, fakeDevice(dev1, 0x10000, F32, 1))
		}, "x", "is on device 1 but y is on device 0"},
		{"stream of the device", func(v *Validator) { v.SameLocation(dev0.DefaultStream(), []string{"y", "x"}, d, nil) }, "", ""},
		{"stream of the host tensors", func(v *Validator) { v.SameLocation(dev1.DefaultStream(), []string{"y", "x"}, x, top) }, "", ""},
		{"stream of another device", func(v *Validator) {
			v.SameLocation(dev1.DefaultStream(), []string{"y", "x"}, nil, d)
		}, "s", "is a stream of device 1 but x is on device 0"},
		{"unnamed", func(v *Validator) { v.SameLocation(nil, nil, x, d) }, "#1", "is on device 0"},
		{"no overlap ok", func(v *Validator) { v.NoOverlap("y", top, "x", bottom) }, "", ""},
		{"no overlap", func(v *Validator) { v.NoOverlap("y", middle, "x", bottom) }, "y", "overlaps x; in-place use is not allowed here"},
		{"no overlap in place", func(v *Validator) { v.NoOverlap("y", x, "x", x) }, "y", "overlaps x"},
		{"unless same, in place", func(v *Validator) { v.NoOverlapUnlessSame("y", x, "x", x) }, "", ""},
		{"unless same, disjoint", func(v *Validator) { v.NoOverlapUnlessSame("y", top, "x", bottom) }, "", ""},
		{"unless same, partly", func(v *Validator) { v.NoOverlapUnlessSame("y", middle, "x", top) }, "y", "partly overlaps x"},
		{"unless same, columns", func(v *Validator) { v.NoOverlapUnlessSame("y", left, "x", x) }, "y", "partly overlaps x"},
		{"check", func(v *Validator) { v.Check(false, "k", "must be at most %d", 8) }, "k", "must be at most 8"},
		{"check ok", func(v *Validator) { v.Check(true, "k", "never") }, "", ""},
		{"failf without argument", func(v *Validator) { v.Failf("", "too many %s", "rows") }, "", "too many rows"},
	}
	for _, tt := range tests {
		v := Validate("pkg.Op")
		tt.check(v)
		err := v.Err()
		if tt.msg == "" {
			if err != nil {
				t.Errorf("%s: unexpected error %v", tt.name, err)
			}
			continue
		}
		var ae *ArgError
		if !errors.As(err, &ae) {
			t.Errorf("%s: error %v, want an *ArgError", tt.name, err)
			continue
		}
		want := "pkg.Op: argument " + tt.arg + ": "
		if tt.arg == "" {
			want = "pkg.Op: "
		}
		if ae.Op != "pkg.Op" || ae.Arg != tt.arg || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: error %q (arg %q), want %q…%q", tt.name, err, ae.Arg, want, tt.msg)
		}
	}
}

func TestValidatorFirstErrorWins(t *testing.T) {
	x := New(F32, 2, 3)
	v := Validate("norm.RMSNorm")
	v.Tensor("x", x).Rank(3).DType(BF16)
	v.Tensor("w", nil).Shape(3)
	v.Tensor("y", x).Shape(9)
	v.Check(false, "eps", "is negative")
	want := "norm.RMSNorm: argument x: has rank 2 (shape [2 3]), want rank [3]"
	if err := v.Err(); err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	if err := Validate("op").Err(); err != nil {
		t.Errorf("fresh validator: %v", err)
	}
}

func TestOverlapAndSame(t *testing.T) {
	dev := &cuda.Device{}
	x := New(F32, 4, 4)
	y := New(F32, 4, 4)
	rows01, _ := x.Slice(0, 0, 2)
	rows23, _ := x.Slice(0, 2, 4)
	rows12, _ := x.Slice(0, 1, 3)
	again, _ := x.Slice(0, 0, 4)
	asBytes, _ := x.View(U8, []int{64}, []int{1})
	empty, _ := x.Slice(0, 2, 2)
	d1 := fakeDevice(dev, 0x1000, F32, 4, 4) // [0x1000, 0x1040)
	d2 := fakeDevice(dev, 0x1040, F32, 4, 4) // adjacent
	d3 := fakeDevice(dev, 0x103c, F32, 4, 4) // one element shared
	other := fakeDevice(&cuda.Device{Ordinal: 1}, 0x1000, F32, 4, 4)
	row0, _ := x.Slice(0, 0, 1)                              // [1 4], strides [4 1]
	row0b, _ := x.View(F32, []int{1, 4}, []int{99, 1})       // the same elements
	rows02, _ := x.View(F32, []int{2, 1, 4}, []int{8, 5, 1}) // rows 0 and 2
	rows02b, _ := x.View(F32, []int{2, 1, 4}, []int{8, 4, 1})
	rows02c, _ := x.View(F32, []int{2, 4}, []int{8, 1})
	cols01, _ := x.Slice(1, 0, 2)
	cols23, _ := x.Slice(1, 2, 4)
	cols12, _ := x.Slice(1, 1, 3)
	block, _ := rows12.Slice(1, 2, 4)                   // elements 6, 7, 10, 11
	bytes23, _ := asBytes.Slice(0, 8, 16)               // elements 2 and 3, one row of bytes
	another, _ := x.View(F32, []int{2, 1}, []int{5, 1}) // elements 0 and 5: a row stride of 5
	tests := []struct {
		name          string
		a, b          *Tensor
		overlap, same bool
	}{
		{"itself", x, x, true, true},
		{"separate tensors", x, y, false, false},
		{"disjoint row slices", rows01, rows23, false, false},
		{"overlapping row slices", rows01, rows12, true, false},
		{"slice of all rows", x, again, true, true},
		{"slice in parent", x, rows12, true, false},
		{"bytes view", x, asBytes, true, false},
		{"empty slice", x, empty, false, false},
		{"nil", x, nil, false, false},
		{"host and device", x, d1, false, false},
		{"device itself", d1, d1, true, true},
		{"device adjacent", d1, d2, false, false},
		{"device one element", d1, d3, true, false},
		{"different devices", d1, other, false, false},
		{"a row, another size-1 stride", row0, row0b, true, true},
		{"rows 0 and 2, another size-1 stride", rows02, rows02b, true, true},
		{"rows 0 and 2, another rank", rows02, rows02c, true, false},
		{"disjoint column slices", cols01, cols23, false, false},
		{"overlapping column slices", cols01, cols12, true, false},
		{"a block beside columns", block, cols01, false, false},
		{"a block across columns", block, cols12, true, false},
		{"one row between rows", bytes23, cols01, false, false},
		{"one row across rows", bytes23, cols23, true, false},
		{"another row stride: the spans", another, cols23, true, false},
	}
	for _, tt := range tests {
		if got := Overlap(tt.a, tt.b); got != tt.overlap {
			t.Errorf("%s: Overlap = %v, want %v", tt.name, got, tt.overlap)
		}
		if got := Overlap(tt.b, tt.a); got != tt.overlap {
			t.Errorf("%s: Overlap reversed = %v, want %v", tt.name, got, tt.overlap)
		}
		if got := Same(tt.a, tt.b); got != tt.same {
			t.Errorf("%s: Same = %v, want %v", tt.name, got, tt.same)
		}
	}
}

// TestOverlapAgainstElements draws pairs of views of one buffer and checks
// Overlap against the bytes their elements take: it never calls two views
// that share a byte disjoint, and it is exact where its row model is (each
// view's rows are filled by its elements, and the two step by one stride
// or one of them is a single row).
func TestOverlapAgainstElements(t *testing.T) {
	rng := SeededRNG(11)
	buf := New(U8, 1024)
	dts := []DType{U8, BF16, F32, I64}
	view := func() (*Tensor, []bool) {
		dt := dts[rng.IntN(len(dts))]
		shape := make([]int, 1+rng.IntN(3))
		strides := make([]int, len(shape))
		span := 1
		for i := len(shape) - 1; i >= 0; i-- {
			shape[i], strides[i] = 1+rng.IntN(4), 1
			if i < len(shape)-1 {
				strides[i] = span + rng.IntN(3)*rng.IntN(2)
			}
			span += (shape[i] - 1) * strides[i]
		}
		off := rng.IntN(buf.SpanBytes() - span*dt.Size() + 1)
		b, _ := buf.Slice(0, off, buf.SpanBytes())
		v, err := b.View(dt, shape, strides)
		if err != nil {
			t.Fatal(err)
		}
		in := make([]bool, buf.SpanBytes())
		for i, e := range elementBytes(v) {
			in[off+i] = e
		}
		return v, in
	}
	for range 20000 {
		a, inA := view()
		b, inB := view()
		shared := false
		for i := range inA {
			shared = shared || inA[i] && inB[i]
		}
		na, sa, wa := a.rows()
		nb, sb, wb := b.rows()
		exact := na*wa == int64(a.Numel()*a.DType().Size()) && nb*wb == int64(b.Numel()*b.DType().Size()) &&
			(na == 1 || nb == 1 || sa == sb)
		for _, got := range []bool{Overlap(a, b), Overlap(b, a)} {
			if shared && !got || exact && got != shared {
				t.Fatalf("%v%v strides %v and %v%v strides %v, %d bytes apart: Overlap %v, shared bytes %v",
					a.DType(), a.Shape(), a.Strides(), b.DType(), b.Shape(), b.Strides(), int64(b.base())-int64(a.base()), got, shared)
			}
		}
	}
}

// TestDistance measures views of one host buffer from each other, and
// refuses a tensor without elements.
func TestDistance(t *testing.T) {
	buf := New(F32, 4, 6)
	a, _ := buf.Slice(1, 2, 4)
	b, _ := buf.Slice(0, 1, 3)
	if d, ok := Distance(a, b); !ok || d != 4*(6-2) {
		t.Errorf("Distance(a, b) = %d, %v, want %d, true", d, ok, 4*(6-2))
	}
	if d, ok := Distance(b, a); !ok || d != -16 {
		t.Errorf("Distance(b, a) = %d, %v, want -16, true", d, ok)
	}
	if _, ok := Distance(buf, New(F32, 0, 6)); ok {
		t.Error("Distance to a tensor without elements is defined")
	}
}
