package tensor

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/gokittens/kittens/cuda"
)

var allDTypes = []DType{F32, F16, BF16, F8E4M3, F8E5M2, I8, U8, I32, I64}

// fakeDevice returns a device tensor that was never allocated: enough for
// the code paths that only look at where a tensor lives.
func fakeDevice(dev *cuda.Device, ptr cuda.DevicePtr, dt DType, shape ...int) *Tensor {
	return &Tensor{dtype: dt, shape: shape, strides: ContiguousStrides(shape), dev: dev, ptr: ptr}
}

// mustPanic fails t unless fn panics with a message containing want.
func mustPanic(t *testing.T, want string, fn func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Errorf("no panic, want one mentioning %q", want)
		} else if !strings.Contains(fmt.Sprint(r), want) {
			t.Errorf("panic %v, want one mentioning %q", r, want)
		}
	}()
	fn()
}

func TestContiguousStrides(t *testing.T) {
	tests := []struct{ shape, want []int }{
		{[]int{}, []int{}},
		{[]int{5}, []int{1}},
		{[]int{2, 3, 4}, []int{12, 4, 1}},
		{[]int{2, 1, 3}, []int{3, 3, 1}},
		{[]int{4, 0}, []int{1, 1}},
		{[]int{0, 3}, []int{3, 1}},
		{[]int{2, 0, 5}, []int{5, 5, 1}},
		// An empty shape whose strides overflow int: saturated, still valid.
		{[]int{0, 1 << 40, 1 << 40}, []int{math.MaxInt, 1 << 40, 1}},
		{[]int{1 << 40, 1 << 40, 0, 1 << 40}, []int{math.MaxInt, 1 << 40, 1 << 40, 1}},
	}
	for _, tt := range tests {
		got := ContiguousStrides(tt.shape)
		if !slices.Equal(got, tt.want) {
			t.Errorf("ContiguousStrides(%v) = %v, want %v", tt.shape, got, tt.want)
		}
		if _, err := NewStrided(F32, tt.shape, got); err != nil {
			t.Errorf("NewStrided(%v, %v): %v", tt.shape, got, err)
		}
	}
}

func TestLayout(t *testing.T) {
	tests := []struct {
		name           string
		dt             DType
		shape, strides []int
		err            string // "" for a valid layout
		numel, span    int    // span in bytes
		contiguous     bool
	}{
		{"scalar", F32, []int{}, []int{}, "", 1, 4, true},
		{"vector", BF16, []int{7}, []int{1}, "", 7, 14, true},
		{"matrix", F32, []int{2, 3}, []int{3, 1}, "", 6, 24, true},
		{"row gap", F32, []int{2, 3}, []int{5, 1}, "", 6, 32, false},
		{"rank 3 gaps", I64, []int{2, 3, 4}, []int{20, 5, 1}, "", 24, (20 + 2*5 + 3 + 1) * 8, false},
		{"size-1 dim, any stride", F16, []int{3, 1, 4}, []int{4, 1, 1}, "", 12, 24, true},
		{"single row, wide stride", F32, []int{1, 4}, []int{100, 1}, "", 4, 16, true},
		{"zero rows", F32, []int{0, 3}, []int{3, 1}, "", 0, 0, true},
		{"zero cols", F32, []int{4, 0}, []int{1, 1}, "", 0, 0, true},
		{"zero, any strides", U8, []int{3, 0, 2}, []int{1, 7, 1}, "", 0, 0, true},
		{"invalid dtype", Invalid, []int{2}, []int{1}, "invalid dtype", 0, 0, false},
		{"negative dim", F32, []int{2, -1}, []int{1, 1}, "negative dimension", 0, 0, false},
		{"rank mismatch", F32, []int{2, 3}, []int{1}, "1 strides for rank 2", 0, 0, false},
		{"zero stride", F32, []int{2, 3}, []int{0, 1}, "must be positive", 0, 0, false},
		{"negative stride", F32, []int{2, 3}, []int{-3, 1}, "must be positive", 0, 0, false},
		{"last stride not 1", F32, []int{2, 3}, []int{6, 2}, "last dimension must be contiguous", 0, 0, false},
		{"rows overlap", F32, []int{2, 3}, []int{2, 1}, "overlaps", 0, 0, false},
		{"rank 3 overlap", F32, []int{2, 2, 2}, []int{3, 2, 1}, "overlaps", 0, 0, false},
		{"transposed", F32, []int{3, 2, 4}, []int{4, 12, 1}, "overlaps", 0, 0, false},
		{"too large", F32, []int{1 << 40, 1 << 40}, []int{1 << 40, 1}, "too large", 0, 0, false},
		{"too large in bytes", I64, []int{math.MaxInt / 4}, []int{1}, "too large", 0, 0, false},
		{"beyond any allocation", U8, []int{2, 1}, []int{1 << 62, 1}, "too large", 0, 0, false},
	}
	for _, tt := range tests {
		x, err := NewStrided(tt.dt, tt.shape, tt.strides)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: NewStrided error %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if x.Numel() != tt.numel || x.SpanBytes() != tt.span || len(x.Bytes()) != tt.span || x.Contiguous() != tt.contiguous {
			t.Errorf("%s: Numel %d, SpanBytes %d, len(Bytes) %d, Contiguous %v; want %d, %d, %d, %v", tt.name,
				x.Numel(), x.SpanBytes(), len(x.Bytes()), x.Contiguous(), tt.numel, tt.span, tt.span, tt.contiguous)
		}
		if x.Rank() != len(tt.shape) || x.DType() != tt.dt || !slices.Equal(x.Shape(), tt.shape) || !slices.Equal(x.Strides(), tt.strides) {
			t.Errorf("%s: got %v%v strides %v rank %d", tt.name, x.DType(), x.Shape(), x.Strides(), x.Rank())
		}
		if got := len(x.Float64s()); got != tt.numel {
			t.Errorf("%s: %d values, want %d", tt.name, got, tt.numel)
		}
	}
}

func TestNewIsContiguousAndZeroed(t *testing.T) {
	x := New(BF16, 2, 3, 4)
	if !x.Contiguous() || x.IsDevice() || x.Device() != nil || x.Dim(-1) != 4 || x.Dim(0) != 2 || x.Stride(-2) != 4 || x.Stride(0) != 12 {
		t.Fatalf("New(bf16, 2, 3, 4): shape %v strides %v", x.Shape(), x.Strides())
	}
	for _, v := range x.Float64s() {
		if v != 0 {
			t.Fatalf("New is not zeroed: %v", v)
		}
	}
	mustPanic(t, "negative dimension", func() { New(F32, -1) })
	if e := New(F32, 0, 1<<40, 1<<40); e.Numel() != 0 || e.SpanBytes() != 0 || !e.Contiguous() {
		t.Errorf("New(f32, 0, 1<<40, 1<<40): Numel %d, SpanBytes %d", e.Numel(), e.SpanBytes())
	}
	mustPanic(t, "too large", func() { New(F32, 2, 1<<40, 1<<40) })
	if e, err := Empty(nil, F32, 2, 2); err != nil || e.IsDevice() || e.Numel() != 4 {
		t.Errorf("Empty(nil) = %v, %v; want a host tensor", e, err)
	}
}

// elementBytes marks which bytes of x's storage belong to an element.
func elementBytes(x *Tensor) []bool {
	in := make([]bool, x.SpanBytes())
	x.offsets(func(_, off int) {
		for k := range x.dtype.Size() {
			in[off*x.dtype.Size()+k] = true
		}
	})
	return in
}

func TestFloat64sRoundTrip(t *testing.T) {
	layouts := []struct{ shape, strides []int }{
		{[]int{3, 5}, []int{5, 1}},
		{[]int{3, 5}, []int{8, 1}},
		{[]int{2, 3, 4}, []int{20, 5, 1}},
		{[]int{2, 1, 3}, []int{9, 1, 1}},
		{[]int{}, []int{}},
	}
	rng := SeededRNG(1)
	for _, dt := range allDTypes {
		for _, l := range layouts {
			x, err := NewStrided(dt, l.shape, l.strides)
			if err != nil {
				t.Fatal(err)
			}
			in := make([]float64, x.Numel())
			for i := range in {
				in[i] = 100 * rng.NormFloat64()
			}
			x.SetFloat64s(in)
			got := x.Float64s()
			for i := range in {
				if want := Round(dt, in[i]); !same(got[i], want) {
					t.Errorf("%v%v strides %v: element %d = %v, want Round(%v) = %v", dt, l.shape, l.strides, i, got[i], in[i], want)
				}
			}
			for i, isElem := range elementBytes(x) {
				if !isElem && x.Bytes()[i] != 0 {
					t.Errorf("%v%v strides %v: gap byte %d written", dt, l.shape, l.strides, i)
				}
			}
		}
	}
	x := New(F32, 2, 2)
	mustPanic(t, "SetFloat64s of 3 values into 4", func() { x.SetFloat64s(make([]float64, 3)) })
}

func TestInt64s(t *testing.T) {
	tests := []struct {
		dt      DType
		in, out []int64
	}{
		{I64, []int64{math.MaxInt64, math.MinInt64, 1<<53 + 1, -7}, []int64{math.MaxInt64, math.MinInt64, 1<<53 + 1, -7}},
		{I32, []int64{math.MaxInt32, math.MinInt32, 1 << 40, -1 << 40}, []int64{math.MaxInt32, math.MinInt32, math.MaxInt32, math.MinInt32}},
		{I8, []int64{127, -128, 1000, -1000}, []int64{127, -128, 127, -128}},
		{U8, []int64{0, 255, -5, 300}, []int64{0, 255, 0, 255}},
		{F32, []int64{1 << 24, 1<<24 + 1, -3, 0}, []int64{1 << 24, 1 << 24, -3, 0}},
		{BF16, []int64{256, 257, 259, -1}, []int64{256, 256, 260, -1}},
		// Beyond 2⁵³, rounded once from the integer, not again from float64.
		{BF16, []int64{1<<60 + 1<<52 + 1, -(1<<60 + 1<<52 + 1), 1<<60 + 1<<52, math.MinInt64}, []int64{1<<60 + 1<<53, -(1<<60 + 1<<53), 1 << 60, math.MinInt64}},
		{F32, []int64{1<<60 + 1<<36 + 1, -(1<<60 + 1<<36 + 1), 1<<60 + 1<<36, math.MaxInt64}, []int64{1<<60 + 1<<37, -(1<<60 + 1<<37), 1 << 60, math.MaxInt64}},
	}
	for _, tt := range tests {
		x, _ := NewStrided(tt.dt, []int{2, 2}, []int{3, 1})
		x.SetInt64s(tt.in)
		if got := x.Int64s(); !slices.Equal(got, tt.out) {
			t.Errorf("%v: SetInt64s(%v) reads back %v, want %v", tt.dt, tt.in, got, tt.out)
		}
	}
	f := New(F32, 4)
	f.SetFloat64s([]float64{2.5, -2.5, math.NaN(), 1e30})
	if got, want := f.Int64s(), []int64{3, -3, 0, math.MaxInt64}; !slices.Equal(got, want) {
		t.Errorf("Int64s of floats = %v, want %v", got, want)
	}
	mustPanic(t, "SetInt64s of 1 values into 4", func() { f.SetInt64s([]int64{1}) })
	// Integers of every magnitude round once, to nearest even, as math/big
	// rounds them (f32 and bf16 hold every int64 without overflow).
	rng := SeededRNG(1)
	for _, c := range []struct {
		dt   DType
		prec uint
	}{{F32, 24}, {BF16, 8}} {
		x := New(c.dt, 1)
		for range 10000 {
			v := int64(rng.Uint64() >> rng.IntN(64))
			want, _ := new(big.Float).SetPrec(c.prec).SetInt64(v).Float64()
			x.SetInt64s([]int64{v})
			if got := x.Float64s()[0]; got != want {
				t.Fatalf("%v: SetInt64s(%d) stores %v, want %v", c.dt, v, got, want)
			}
		}
	}
}

func TestPoison(t *testing.T) {
	for _, dt := range allDTypes {
		x, _ := NewStrided(dt, []int{3, 2}, []int{4, 1})
		if err := x.Poison(); err != nil {
			t.Fatal(err)
		}
		for i, b := range x.Bytes() {
			if b != 0xFF {
				t.Fatalf("%v: byte %d = %#x after Poison", dt, i, b)
			}
		}
		for i, v := range x.Float64s() {
			want := -1.0
			if dt == U8 {
				want = 255
			}
			if dt.IsFloat() && !(math.IsNaN(v) && math.Signbit(v)) || !dt.IsFloat() && v != want {
				t.Errorf("%v: poisoned element %d reads %v", dt, i, v)
			}
		}
	}
	// Poisoning a slice leaves the rest of the storage alone: rows 1-2 of a
	// matrix, and a column slice, whose gaps are its siblings' columns.
	x := New(U8, 4, 4)
	s, _ := x.Slice(0, 1, 3)
	s.Poison()
	for i, b := range x.Bytes() {
		if want := byte(0); i >= 4 && i < 12 && b != 0xFF || (i < 4 || i >= 12) && b != want {
			t.Errorf("byte %d = %#x after poisoning rows 1-2", i, b)
		}
	}
	qk := New(F32, 3, 4)
	qk.SetFloat64s([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	q, _ := qk.Slice(1, 0, 2)
	q.Poison()
	got := qk.Float64s()
	for i, v := range got {
		if col := i % 4; col < 2 != math.IsNaN(v) || col >= 2 && v != float64(i+1) {
			t.Fatalf("after poisoning columns 0-1: %v", got)
		}
	}
}

func TestView(t *testing.T) {
	x := New(F32, 2, 3)
	x.SetFloat64s([]float64{1, 2, 3, 4, 5, 6})
	tests := []struct {
		name           string
		dt             DType
		shape, strides []int
		err            string
	}{
		{"bytes", U8, []int{2, 12}, []int{12, 1}, ""},
		{"reshape", F32, []int{6}, []int{1}, ""},
		{"bf16 halves", BF16, []int{3, 4}, []int{4, 1}, ""},
		{"first row", F32, []int{3}, []int{1}, ""},
		{"too large", F32, []int{7}, []int{1}, "larger than"},
		{"too large in bytes", I64, []int{4}, []int{1}, "larger than"},
		{"bad layout", F32, []int{2, 3}, []int{1, 1}, "overlaps"},
		{"invalid dtype", Invalid, []int{1}, []int{1}, "invalid dtype"},
	}
	for _, tt := range tests {
		v, err := x.View(tt.dt, tt.shape, tt.strides)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || v.DType() != tt.dt || !slices.Equal(v.Shape(), tt.shape) {
			t.Errorf("%s: %v, %v", tt.name, v, err)
		}
	}
	// On a device, element 0 must be aligned for the view's dtype.
	dev := fakeDevice(&cuda.Device{}, 0x10000, BF16, 2, 8)
	odd, _ := dev.Slice(1, 1, 7) // at 0x10002
	if _, err := odd.View(F32, []int{2, 2}, []int{4, 1}); err == nil || !strings.Contains(err.Error(), "0x10002, which is not 4-byte aligned") {
		t.Errorf("f32 view at 0x10002: error %v", err)
	}
	if v, err := odd.View(U8, []int{2, 12}, []int{16, 1}); err != nil {
		t.Errorf("u8 view at 0x10002: %v, %v", v, err)
	}
	r, _ := x.View(F32, []int{6}, []int{1})
	r.SetFloat64s([]float64{6, 5, 4, 3, 2, 1})
	if got := x.Float64s(); !slices.Equal(got, []float64{6, 5, 4, 3, 2, 1}) {
		t.Errorf("write through a view: x = %v", got)
	}
	b, _ := x.View(U8, []int{24}, []int{1})
	if got := b.Int64s()[:4]; !slices.Equal(got, []int64{0, 0, 0xc0, 0x40}) { // 6.0f little-endian
		t.Errorf("bytes of 6.0f = %v", got)
	}
	if !Same(x, x) || Same(x, r) || !Overlap(x, r) {
		t.Errorf("Same(x, x) %v, Same(x, reshaped) %v, Overlap %v", Same(x, x), Same(x, r), Overlap(x, r))
	}
}

func TestSlice(t *testing.T) {
	x := New(I32, 4, 6)
	vals := make([]int64, 24)
	for i := range vals {
		vals[i] = int64(i)
	}
	x.SetInt64s(vals)
	tests := []struct {
		dim, start, end int
		shape, strides  []int
		want            []int64
		err             string
	}{
		{1, 2, 4, []int{4, 2}, []int{6, 1}, []int64{2, 3, 8, 9, 14, 15, 20, 21}, ""},
		{0, 1, 3, []int{2, 6}, []int{6, 1}, []int64{6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}, ""},
		{0, 3, 4, []int{1, 6}, []int{6, 1}, []int64{18, 19, 20, 21, 22, 23}, ""},
		{1, 5, 6, []int{4, 1}, []int{6, 1}, []int64{5, 11, 17, 23}, ""},
		{0, 4, 4, []int{0, 6}, []int{6, 1}, []int64{}, ""},
		{1, 6, 6, []int{4, 0}, []int{6, 1}, []int64{}, ""},
		{2, 0, 1, nil, nil, nil, "dim 2 of a rank-2"},
		{-1, 0, 1, nil, nil, nil, "dim -1 of a rank-2"},
		{1, 3, 2, nil, nil, nil, "[3, 2)"},
		{0, 0, 5, nil, nil, nil, "of size 4"},
		{0, -1, 2, nil, nil, nil, "[-1, 2)"},
	}
	for _, tt := range tests {
		s, err := x.Slice(tt.dim, tt.start, tt.end)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Slice(%d, %d, %d): error %v, want %q", tt.dim, tt.start, tt.end, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s.Shape(), tt.shape) || !slices.Equal(s.Strides(), tt.strides) || !slices.Equal(s.Int64s(), tt.want) {
			t.Errorf("Slice(%d, %d, %d) = %v strides %v values %v; want %v %v %v", tt.dim, tt.start, tt.end,
				s.Shape(), s.Strides(), s.Int64s(), tt.shape, tt.strides, tt.want)
		}
	}
	// A slice writes into its parent.
	c, _ := x.Slice(1, 0, 1)
	c.SetInt64s([]int64{-1, -2, -3, -4})
	if got := x.Int64s(); got[0] != -1 || got[6] != -2 || got[18] != -4 || got[1] != 1 {
		t.Errorf("after writing column 0: %v", got)
	}
	// Device slices move the address.
	d := fakeDevice(&cuda.Device{}, 0x1000, F32, 4, 6)
	ds, _ := d.Slice(0, 2, 4)
	if ds.Ptr() != 0x1000+2*6*4 {
		t.Errorf("device slice at %#x, want %#x", ds.Ptr(), 0x1000+2*6*4)
	}
	if err := ds.Free(); err != nil { // a view: no driver call
		t.Errorf("Free of a device view: %v", err)
	}
}

func TestCopyFrom(t *testing.T) {
	src, _ := NewStrided(F32, []int{2, 3}, []int{4, 1})
	src.SetFloat64s([]float64{1, 2, 3, 4, 5, 6})
	dst, _ := NewStrided(F32, []int{2, 3}, []int{4, 1})
	if err := dst.CopyFrom(src); err != nil {
		t.Fatal(err)
	}
	if got := dst.Float64s(); !slices.Equal(got, []float64{1, 2, 3, 4, 5, 6}) {
		t.Errorf("CopyFrom: %v", got)
	}
	for _, bad := range []*Tensor{New(F32, 2, 3), New(F16, 2, 3), New(F32, 3, 2)} {
		if err := dst.CopyFrom(bad); err == nil || !strings.Contains(err.Error(), "CopyFrom") {
			t.Errorf("CopyFrom %v%v strides %v: error %v", bad.DType(), bad.Shape(), bad.Strides(), err)
		}
	}
	// Copying into a slice stays within the slice, even from a view whose
	// storage runs further.
	big := New(U8, 4, 4)
	rows, _ := big.Slice(0, 1, 2)
	from := New(U8, 4, 4)
	from.Poison()
	fromRow, _ := from.Slice(0, 0, 1)
	if err := rows.CopyFrom(fromRow); err != nil {
		t.Fatal(err)
	}
	for i, b := range big.Bytes() {
		if want := byte(0); i >= 4 && i < 8 {
			want = 0xFF
			if b != want {
				t.Errorf("byte %d = %#x, want %#x", i, b, want)
			}
		} else if b != want {
			t.Errorf("byte %d = %#x outside the slice, want %#x", i, b, want)
		}
	}
	// Copying into a column slice writes its columns, not its siblings'.
	m := New(F32, 3, 4)
	m.SetFloat64s([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	left, _ := m.Slice(1, 0, 2)
	cols, _ := NewStrided(F32, []int{3, 2}, []int{4, 1})
	cols.SetFloat64s([]float64{-1, -2, -3, -4, -5, -6})
	if err := left.CopyFrom(cols); err != nil {
		t.Fatal(err)
	}
	if got := m.Float64s(); !slices.Equal(got, []float64{-1, -2, 3, 4, -3, -4, 7, 8, -5, -6, 11, 12}) {
		t.Errorf("CopyFrom into columns 0-1: %v", got)
	}
}

func TestHostDeviceMisuse(t *testing.T) {
	d := fakeDevice(&cuda.Device{}, 0x1000, F32, 2, 2)
	mustPanic(t, "needs a host tensor", func() { d.Float64s() })
	mustPanic(t, "needs a host tensor", func() { d.SetFloat64s(make([]float64, 4)) })
	mustPanic(t, "needs a host tensor", func() { d.Int64s() })
	mustPanic(t, "needs a host tensor", func() { d.FillNormal(SeededRNG(1), 0, 1) })
	if _, err := New(F32, 2).ToHost(); err == nil {
		t.Error("ToHost of a host tensor: no error")
	}
	if _, err := d.ToDevice(&cuda.Device{}); err == nil {
		t.Error("ToDevice of a device tensor: no error")
	}
	if err := New(F32, 2).Free(); err != nil {
		t.Errorf("Free of a host tensor: %v", err)
	}
	var nilT *Tensor
	if err := nilT.Free(); err != nil {
		t.Errorf("Free of nil: %v", err)
	}
	v, _ := d.View(U8, []int{16}, []int{1})
	if err := v.Free(); err != nil || v.Ptr() != 0x1000 {
		t.Errorf("Free of a device view: %v (ptr %#x)", err, v.Ptr())
	}
}

func TestFillStatistics(t *testing.T) {
	const n = 200_000
	tests := []struct {
		dt        DType
		uniform   bool
		a, b      float64 // mean, std or lo, hi
		mean, std float64
	}{
		{F32, false, 3, 2, 3, 2},
		{BF16, false, -1, 0.5, -1, 0.5},
		{F16, false, 0, 1, 0, 1},
		{F32, true, 2, 5, 3.5, 3 / math.Sqrt(12)},
		{BF16, true, -1, 1, 0, 2 / math.Sqrt(12)},
		{I32, true, 0, 1000, 500, 1000 / math.Sqrt(12)},
	}
	rng := SeededRNG(11)
	for _, tt := range tests {
		x, _ := NewStrided(tt.dt, []int{n / 100, 100}, []int{101, 1})
		if tt.uniform {
			x.FillUniform(rng, tt.a, tt.b)
		} else {
			x.FillNormal(rng, tt.a, tt.b)
		}
		var sum, sq float64
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range x.Float64s() {
			sum += v
			sq += v * v
			lo, hi = min(lo, v), max(hi, v)
		}
		mean := sum / n
		std := math.Sqrt(sq/n - mean*mean)
		// Sampling error of the mean is std/√n ≈ 0.002·std; allow 5σ plus rounding.
		if math.Abs(mean-tt.mean) > 0.012*tt.std+0.01*math.Abs(tt.mean) || math.Abs(std-tt.std) > 0.02*tt.std {
			t.Errorf("%v uniform=%v(%v, %v): mean %.4f std %.4f, want %.4f %.4f", tt.dt, tt.uniform, tt.a, tt.b, mean, std, tt.mean, tt.std)
		}
		if tt.uniform && (lo < tt.a || hi > tt.b) {
			t.Errorf("%v uniform [%v, %v): samples in [%v, %v]", tt.dt, tt.a, tt.b, lo, hi)
		}
		for i, isElem := range elementBytes(x) {
			if !isElem && x.Bytes()[i] != 0 {
				t.Fatalf("%v: gap byte %d written", tt.dt, i)
			}
		}
	}
	r := Rand(SeededRNG(5), BF16, 1, 3, 4)
	r2 := Rand(SeededRNG(5), BF16, 1, 3, 4)
	if r.DType() != BF16 || !slices.Equal(r.Shape(), []int{3, 4}) || !slices.Equal(r.Float64s(), r2.Float64s()) {
		t.Errorf("Rand: %v%v, same seed same values: %v", r.DType(), r.Shape(), slices.Equal(r.Float64s(), r2.Float64s()))
	}
	if _, seed := NewRNG(); seed == 0 {
		t.Log("NewRNG drew seed 0") // possible, merely unlikely
	}
}

// TestHostTooLarge: a host tensor larger than the machine's memory is an
// error that names its size and the machine's, from every host allocation
// path, where the allocation itself would end the process.
func TestHostTooLarge(t *testing.T) {
	const want = 1 << 45 // f32 [1<<23, 1<<20]: 32 TiB
	m := hostMemory()
	if m == 0 || m >= want {
		t.Skipf("the machine's memory reads %d bytes: not below %d", m, uint64(want))
	}
	limit := "more than the " + byteSize(m) + " this machine has"
	check := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "35184372088832 bytes (32 TiB)") || !strings.Contains(err.Error(), limit) {
			t.Errorf("%s: error %v, want one naming 35184372088832 bytes (32 TiB) and %q", what, err, limit)
		}
	}
	_, err := Empty(nil, F32, 1<<23, 1<<20)
	check("Empty", err)
	_, err = EmptyStrided(nil, F32, []int{1 << 23, 1 << 20}, []int{1 << 20, 1})
	check("EmptyStrided", err)
	_, err = NewStrided(F32, []int{1 << 23, 1 << 20}, []int{1 << 20, 1})
	check("NewStrided", err)
	func() {
		defer func() { check("New's panic", fmt.Errorf("%v", recover())) }()
		New(F32, 1<<23, 1<<20)
	}()
	_, err = ReadNPY(strings.NewReader(string(npyFile(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (8388608, 1048576), }\n", nil))))
	check("ReadNPY", err)
	// The largest tensor the machine could hold is still allowed past
	// the check (and not allocated here).
	if err := checkHost(U8, []int{int(m)}, int(m)); err != nil {
		t.Errorf("%d bytes on a machine of %d: %v", m, m, err)
	}
}

func TestByteSize(t *testing.T) {
	for n, want := range map[uint64]string{
		0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 62_800 << 20: "61.3 GiB",
		1 << 45: "32 TiB", 1<<48 - 1: "256 TiB", math.MaxUint64: "16 EiB",
	} {
		if got := byteSize(n); got != want {
			t.Errorf("byteSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestNilArguments: nil tensors, readers and devices are errors, not
// panics.
func TestNilArguments(t *testing.T) {
	x := New(F32, 2)
	var nilT *Tensor
	for what, err := range map[string]error{
		"CopyFrom(nil)":               x.CopyFrom(nil),
		"nil.CopyFrom":                nilT.CopyFrom(x),
		"CopyFromOn(nil stream, nil)": x.CopyFromOn(nil, nil),
		"nil.ToDevice":                func() error { _, err := nilT.ToDevice(&cuda.Device{}); return err }(),
		"nil.ToHost":                  func() error { _, err := nilT.ToHost(); return err }(),
		"ReadNPY(nil)":                func() error { _, err := ReadNPY(nil); return err }(),
	} {
		if err == nil || !strings.HasPrefix(err.Error(), "tensor: ") || !strings.Contains(err.Error(), "nil") {
			t.Errorf("%s: error %v, want one that names the nil", what, err)
		}
	}
	if _, err := x.ToDevice(nil); !errors.Is(err, cuda.ErrNilDevice) {
		t.Errorf("ToDevice(nil): error %v, want cuda.ErrNilDevice", err)
	}
	if _, err := RandDevice(nil, SeededRNG(1), F32, 0, 1, 4); !errors.Is(err, cuda.ErrNilDevice) {
		t.Errorf("RandDevice(nil): error %v, want cuda.ErrNilDevice", err)
	}
}

// TestDimIndex: Dim and Stride count negative indices from the end, and an
// index out of range panics with a message naming it and the rank.
func TestDimIndex(t *testing.T) {
	x, _ := NewStrided(F32, []int{2, 3, 4}, []int{20, 5, 1})
	for i, want := range map[int][2]int{0: {2, 20}, 2: {4, 1}, -1: {4, 1}, -2: {3, 5}, -3: {2, 20}} {
		if x.Dim(i) != want[0] || x.Stride(i) != want[1] {
			t.Errorf("Dim(%d), Stride(%d) = %d, %d; want %d, %d", i, i, x.Dim(i), x.Stride(i), want[0], want[1])
		}
	}
	m := New(F32, 2, 3)
	mustPanic(t, "Dim(5) of a rank-2 tensor: the index must lie in [-2, 2)", func() { m.Dim(5) })
	mustPanic(t, "Dim(2) of a rank-2 tensor", func() { m.Dim(2) })
	mustPanic(t, "Stride(-3) of a rank-2 tensor: the index must lie in [-2, 2)", func() { m.Stride(-3) })
	mustPanic(t, "Dim(-1) of a rank-0 tensor, which has no dimensions", func() { New(F32).Dim(-1) })
}
