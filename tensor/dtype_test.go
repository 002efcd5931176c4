package tensor

import (
	"math"
	"strings"
	"testing"
)

func TestDTypeNames(t *testing.T) {
	tests := []struct {
		d     DType
		name  string
		size  int
		float bool
	}{
		{F32, "f32", 4, true},
		{F16, "f16", 2, true},
		{BF16, "bf16", 2, true},
		{F8E4M3, "f8e4m3", 1, true},
		{F8E5M2, "f8e5m2", 1, true},
		{I8, "i8", 1, false},
		{U8, "u8", 1, false},
		{I32, "i32", 4, false},
		{I64, "i64", 8, false},
	}
	for _, tt := range tests {
		if got := tt.d.String(); got != tt.name {
			t.Errorf("String(%d) = %q, want %q", tt.d, got, tt.name)
		}
		if got := tt.d.Size(); got != tt.size {
			t.Errorf("%v.Size() = %d, want %d", tt.d, got, tt.size)
		}
		if got := tt.d.IsFloat(); got != tt.float {
			t.Errorf("%v.IsFloat() = %v, want %v", tt.d, got, tt.float)
		}
		if got, err := ParseDType(tt.name); err != nil || got != tt.d {
			t.Errorf("ParseDType(%q) = %v, %v; want %v", tt.name, got, err, tt.d)
		}
	}
	for _, d := range []DType{Invalid, DType(200)} {
		if d.Size() != 0 || d.IsFloat() {
			t.Errorf("%v: Size %d, IsFloat %v; want 0, false", d, d.Size(), d.IsFloat())
		}
	}
	if s := DType(200).String(); s != "dtype(200)" {
		t.Errorf("DType(200).String() = %q", s)
	}
	for _, s := range []string{"invalid", "float32", ""} {
		if _, err := ParseDType(s); err == nil || !strings.Contains(err.Error(), "unknown dtype") {
			t.Errorf("ParseDType(%q) error = %v, want unknown dtype", s, err)
		}
	}
}

// narrow describes each narrow float format through its exported API, for
// the exhaustive tests.
type narrow struct {
	d       DType
	bits    int // width of the pattern
	encode  func(float64) uint32
	decode  func(uint32) float64
	max     float64 // largest finite value
	maxBits uint32  // its pattern
}

var narrows = []narrow{
	{BF16, 16, func(v float64) uint32 { return uint32(BF16Bits(v)) }, func(b uint32) float64 { return BF16Value(uint16(b)) }, 0x1.FEp127, 0x7f7f},
	{F16, 16, func(v float64) uint32 { return uint32(F16Bits(v)) }, func(b uint32) float64 { return F16Value(uint16(b)) }, 65504, 0x7bff},
	{F8E4M3, 8, func(v float64) uint32 { return uint32(F8E4M3Bits(v)) }, func(b uint32) float64 { return F8Value(F8E4M3, uint8(b)) }, 448, 0x7e},
	{F8E5M2, 8, func(v float64) uint32 { return uint32(F8E5M2Bits(v)) }, func(b uint32) float64 { return F8Value(F8E5M2, uint8(b)) }, 57344, 0x7b},
}

// TestNarrowExhaustive decodes every bit pattern of every narrow format and
// encodes the value again: each finite pattern comes back as itself, each
// NaN as a NaN, each infinity as itself where overflow gives infinity and as
// the largest finite value where the format saturates (e5m2). The positive
// finite patterns must also be strictly increasing in value, negatives
// their mirror, and the generic decoder must agree with the tables.
func TestNarrowExhaustive(t *testing.T) {
	for _, f := range narrows {
		sign := uint32(1) << (f.bits - 1)
		prev := -1.0
		for b := range uint32(1) << f.bits {
			v := f.decode(b)
			if g := fmtOf(f.d).decode(b); !same(g, v) {
				t.Errorf("%v %#x: decode %v, table %v", f.d, b, g, v)
			}
			back := f.encode(v)
			switch {
			case math.IsNaN(v):
				if !math.IsNaN(f.decode(back)) {
					t.Errorf("%v %#x: NaN re-encodes to %#x = %v", f.d, b, back, f.decode(back))
				}
			case math.IsInf(v, 0) && f.d == F8E5M2:
				if want := f.maxBits | b&sign; back != want {
					t.Errorf("%v %#x (%v): re-encodes to %#x, want saturation %#x", f.d, b, v, back, want)
				}
			case back != b:
				t.Errorf("%v %#x (%v): re-encodes to %#x", f.d, b, v, back)
			}
			if b < sign && !math.IsNaN(v) { // positive: value increases with the pattern
				if !(v > prev) && b > 0 {
					t.Errorf("%v %#x: %v not above the previous pattern's %v", f.d, b, v, prev)
				}
				prev = v
				if n := f.decode(b | sign); !same(n, -v) {
					t.Errorf("%v %#x: negative pattern reads %v, want %v", f.d, b|sign, n, -v)
				}
			}
		}
		if got := f.decode(f.maxBits); got != f.max {
			t.Errorf("%v: max pattern %#x reads %v, want %v", f.d, f.maxBits, got, f.max)
		}
	}
}

// fmtOf returns the generic description of a narrow format.
func fmtOf(d DType) smallFloat {
	return map[DType]smallFloat{BF16: fmtBF16, F16: fmtF16, F8E4M3: fmtE4M3, F8E5M2: fmtE5M2}[d]
}

// same is equality that treats NaNs as equal and tells -0 from +0.
func same(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return a == b && math.Signbit(a) == math.Signbit(b)
}

// TestNarrowSpecialPatterns pins the patterns every format's reader must
// give: zeros, the smallest subnormal and normal, one, infinities, NaNs.
func TestNarrowSpecialPatterns(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	tests := []struct {
		d    DType
		bits uint32
		want float64
	}{
		{BF16, 0x0000, 0}, {BF16, 0x8000, math.Copysign(0, -1)}, {BF16, 0x0001, 0x1p-133}, {BF16, 0x0080, 0x1p-126},
		{BF16, 0x3f80, 1}, {BF16, 0xc000, -2}, {BF16, 0x7f80, inf}, {BF16, 0xff80, -inf}, {BF16, 0x7fc0, nan}, {BF16, 0x7f81, nan},
		{F16, 0x0000, 0}, {F16, 0x8000, math.Copysign(0, -1)}, {F16, 0x0001, 0x1p-24}, {F16, 0x0400, 0x1p-14},
		{F16, 0x3c00, 1}, {F16, 0x3555, 0x1.554p-2}, {F16, 0x7c00, inf}, {F16, 0xfc00, -inf}, {F16, 0x7e00, nan}, {F16, 0x7c01, nan},
		{F8E4M3, 0x00, 0}, {F8E4M3, 0x80, math.Copysign(0, -1)}, {F8E4M3, 0x01, 0x1p-9}, {F8E4M3, 0x08, 0x1p-6},
		{F8E4M3, 0x38, 1}, {F8E4M3, 0x78, 256}, {F8E4M3, 0x7e, 448}, {F8E4M3, 0xfe, -448}, {F8E4M3, 0x7f, nan}, {F8E4M3, 0xff, nan},
		{F8E5M2, 0x00, 0}, {F8E5M2, 0x80, math.Copysign(0, -1)}, {F8E5M2, 0x01, 0x1p-16}, {F8E5M2, 0x04, 0x1p-14},
		{F8E5M2, 0x3c, 1}, {F8E5M2, 0x7b, 57344}, {F8E5M2, 0x7c, inf}, {F8E5M2, 0xfc, -inf},
		{F8E5M2, 0x7d, nan}, {F8E5M2, 0x7e, nan}, {F8E5M2, 0x7f, nan}, {F8E5M2, 0xff, nan},
	}
	for _, tt := range tests {
		for _, f := range narrows {
			if f.d == tt.d {
				if got := f.decode(tt.bits); !same(got, tt.want) {
					t.Errorf("%v %#x reads %v, want %v", tt.d, tt.bits, got, tt.want)
				}
			}
		}
	}
	// Poison bytes are a negative NaN in every float dtype.
	for _, f := range narrows {
		if v := f.decode(1<<f.bits - 1); !math.IsNaN(v) || !math.Signbit(v) {
			t.Errorf("%v all-ones pattern reads %v (sign %v), want a negative NaN", f.d, v, math.Signbit(v))
		}
	}
	if v := float64(math.Float32frombits(0xffffffff)); !math.IsNaN(v) || !math.Signbit(v) {
		t.Errorf("f32 all-ones pattern reads %v, want a negative NaN", v)
	}
}

// TestNarrowRounding checks rounding to nearest with ties to even at
// several exponents, in the subnormal range, at overflow, and for signed
// zeros, infinities and NaN. The want values are what Round returns and
// what the device's cvt.rn (bf16, f16) and cvt.rn.satfinite (fp8)
// conversions produce.
func TestNarrowRounding(t *testing.T) {
	inf, nan, negZero := math.Inf(1), math.NaN(), math.Copysign(0, -1)
	type roundCase struct {
		d        DType
		in, want float64
		comment  string
	}
	tests := []roundCase{
		{BF16, 1 + 0x1p-8, 1, "tie, down to even"},
		{BF16, 1 + 3*0x1p-8, 1 + 0x1p-6, "tie, up to even"},
		{BF16, 1 + 0x1p-8 + 0x1p-40, 1 + 0x1p-7, "just above a tie"},
		{BF16, 0x1p100 * (1 + 0x1p-8), 0x1p100, "tie at 2^100"},
		{BF16, -0x1p-50 * (1 + 3*0x1p-8), -0x1p-50 * (1 + 0x1p-6), "negative tie at 2^-50"},
		{BF16, 1.5 * 0x1p-133, 0x1p-132, "subnormal tie up"},
		{BF16, 0.5 * 0x1p-133, 0, "half the smallest subnormal: tie to zero"},
		{BF16, 0.5*0x1p-133 + 0x1p-160, 0x1p-133, "above half the smallest subnormal"},
		{BF16, 0x1p-126 - 0x1p-140, 0x1p-126, "subnormal rounding up to the smallest normal"},
		{BF16, 0x1.FEp127, 0x1.FEp127, "max"},
		{BF16, 0x1.FFp127, inf, "tie above max overflows"},
		{BF16, 1e39, inf, "overflow"},
		{BF16, -1e39, -inf, "negative overflow"},
		{F16, 1 + 0x1p-11, 1, "tie, down to even"},
		{F16, 1 + 3*0x1p-11, 1 + 0x1p-9, "tie, up to even"},
		{F16, 2049, 2048, "tie at 2^11"},
		{F16, 2051, 2052, "tie at 2^11, up"},
		{F16, 0x1p-20 * (1 + 0x1p-11), 0x1p-20, "tie at 2^-20"},
		{F16, 1.5 * 0x1p-24, 0x1p-23, "subnormal tie up"},
		{F16, 2.5 * 0x1p-24, 0x1p-23, "subnormal tie down"},
		{F16, 0.5 * 0x1p-24, 0, "half the smallest subnormal"},
		{F16, -0x1p-30, negZero, "negative underflow"},
		{F16, 65504, 65504, "max"},
		{F16, 65519.99, 65504, "below the overflow threshold"},
		{F16, 65520, inf, "tie above max overflows"},
		{F16, -65520, -inf, "negative overflow"},
		{F8E4M3, 1 + 0x1p-4, 1, "tie, down to even"},
		{F8E4M3, 1 + 3*0x1p-4, 1.25, "tie, up to even"},
		{F8E4M3, 0x1p-9 * 1.5, 0x1p-8, "subnormal tie up"},
		{F8E4M3, 0x1p-9 * 0.5, 0, "half the smallest subnormal"},
		{F8E4M3, 0x1p-9 * 0.75, 0x1p-9, "above half the smallest subnormal"},
		{F8E4M3, 464, 448, "tie between 448 and 480, down to even"},
		{F8E4M3, 480, 448, "saturates"},
		{F8E4M3, 500, 448, "saturates"},
		{F8E4M3, -500, -448, "saturates"},
		{F8E4M3, inf, 448, "infinity saturates"},
		{F8E4M3, -inf, -448, "infinity saturates"},
		{F8E5M2, 1 + 0x1p-3, 1, "tie, down to even"},
		{F8E5M2, 1 + 3*0x1p-3, 1.5, "tie, up to even"},
		{F8E5M2, 0x1p-16 * 1.5, 0x1p-15, "subnormal tie up"},
		{F8E5M2, 0x1p-16 * 0.5, 0, "half the smallest subnormal"},
		{F8E5M2, 61440, 57344, "tie above max saturates"},
		{F8E5M2, 1e6, 57344, "saturates"},
		{F8E5M2, inf, 57344, "infinity saturates"},
		{F8E5M2, -inf, -57344, "infinity saturates"},
	}
	for _, d := range []DType{BF16, F16, F8E4M3, F8E5M2} {
		tests = append(tests,
			roundCase{d, negZero, negZero, "negative zero"},
			roundCase{d, 0, 0, "zero"},
			roundCase{d, nan, nan, "NaN"},
			roundCase{d, math.Copysign(nan, -1), nan, "negative NaN"},
		)
	}
	for _, tt := range tests {
		if got := Round(tt.d, tt.in); !same(got, tt.want) {
			t.Errorf("Round(%v, %v) = %v, want %v (%s)", tt.d, tt.in, got, tt.want, tt.comment)
		}
	}
}

func TestNaNPatterns(t *testing.T) {
	nan, negNaN := math.NaN(), math.Copysign(math.NaN(), -1)
	want := map[DType][2]uint32{BF16: {0x7fc0, 0xffc0}, F16: {0x7e00, 0xfe00}, F8E4M3: {0x7f, 0xff}, F8E5M2: {0x7f, 0xff}}
	for _, f := range narrows {
		if got := f.encode(nan); got != want[f.d][0] {
			t.Errorf("%v: NaN encodes to %#x, want %#x", f.d, got, want[f.d][0])
		}
		if got := f.encode(negNaN); got != want[f.d][1] {
			t.Errorf("%v: -NaN encodes to %#x, want %#x", f.d, got, want[f.d][1])
		}
	}
}

// bf16Trick is the classic float32 → bfloat16 conversion: add 0x7fff plus
// the lowest kept bit, then truncate. It is correct for every non-NaN
// float32 (overflow carries into the infinity pattern).
func bf16Trick(b uint32) uint16 { return uint16((b + 0x7fff + (b>>16)&1) >> 16) }

// f16Reference converts float32 bits to half precision with integer
// arithmetic only, rounding to nearest with ties to even.
func f16Reference(x uint32) uint16 {
	sign := uint16(x>>16) & 0x8000
	exp := int(x >> 23 & 0xff)
	man := x & 0x7fffff
	switch {
	case exp == 0xff && man != 0:
		return sign | 0x7e00
	case exp == 0xff:
		return sign | 0x7c00
	case exp == 0: // float32 subnormals are far below half the f16 minimum
		return sign
	}
	full := man | 0x800000 // value = full · 2^(exp−150)
	if e := exp - 127 + 15; e > 0 {
		h := uint32(e)<<10 + roundShift(full, 13) - 0x400 // a carry bumps the exponent
		return sign | uint16(min(h, 0x7c00))
	}
	// Subnormal: value = m · 2^−24, m = full · 2^(exp−126).
	return sign | uint16(roundShift(full, uint(126-exp)))
}

// roundShift returns v / 2^s rounded to nearest, ties to even.
func roundShift(v uint32, s uint) uint32 {
	if s > 25 {
		return 0 // v < 2^24 is below half of 2^s
	}
	q, rem, half := v>>s, v&(1<<s-1), uint32(1)<<(s-1)
	if rem > half || rem == half && q&1 == 1 {
		q++
	}
	return q
}

// randomF32Bits returns float32 patterns that cover every exponent, with a
// share of exact ties and near-ties for bf16 (low 16 bits) and f16 (low 13).
func randomF32Bits(n int) []uint32 {
	rng := SeededRNG(7)
	out := make([]uint32, n)
	for i := range out {
		b := rng.Uint32()
		switch i % 8 {
		case 0:
			b = b&^0xffff | 0x8000
		case 1:
			b = b&^0x1fff | 0x1000
		case 2:
			b = b&^0xffff | 0x7fff
		case 3:
			b = b&^0x1fff | 0x1001
		}
		out[i] = b
	}
	return append(out, 0, 0x80000000, 0x7f800000, 0xff800000, 0x7f7fffff, 0x477fefff, 0x477ff000, 0x33000000, 0x33000001, 0x387fc000)
}

func TestBF16BitsMatchesBitTrick(t *testing.T) {
	for _, b := range randomF32Bits(1_000_000) {
		f := math.Float32frombits(b)
		if f != f {
			continue
		}
		if got, want := BF16Bits(float64(f)), bf16Trick(b); got != want {
			t.Fatalf("BF16Bits(%g = %#08x) = %#04x, bit trick %#04x", f, b, got, want)
		}
	}
}

func TestF16BitsMatchesReference(t *testing.T) {
	for _, b := range randomF32Bits(1_000_000) {
		f := math.Float32frombits(b)
		got, want := F16Bits(float64(f)), f16Reference(b)
		if f != f {
			if got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
				t.Fatalf("F16Bits(NaN %#08x) = %#04x, not a NaN", b, got)
			}
			continue
		}
		if got != want {
			t.Fatalf("F16Bits(%g = %#08x) = %#04x, reference %#04x", f, b, got, want)
		}
	}
}

func TestRound(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	tests := []struct {
		d        DType
		in, want float64
	}{
		{F32, 1 + 0x1p-30, 1},
		{F32, 1 + 0x1p-24, 1},
		{F32, 1 + 3*0x1p-24, 1 + 0x1p-22},
		{F32, 1e39, inf},
		{F32, 0x1p-150, 0},
		{BF16, 3.14159, 3.140625},
		{F16, 3.14159, 3.140625},
		{F8E4M3, 3.14159, 3.25},
		{F8E5M2, 3.14159, 3},
		{I8, 2.5, 3},
		{I8, -2.5, -3},
		{I8, 2.4999, 2},
		{I8, 127.4, 127},
		{I8, 127.5, 127},
		{I8, 1000, 127},
		{I8, -128.6, -128},
		{I8, -inf, -128},
		{I8, nan, 0},
		{U8, -1, 0},
		{U8, -0.4, 0},
		{U8, 254.5, 255},
		{U8, 300, 255},
		{U8, nan, 0},
		{I32, 3e9, math.MaxInt32},
		{I32, -3e9, math.MinInt32},
		{I32, -7.5, -8},
		{I32, inf, math.MaxInt32},
		{I64, 1e19, math.MaxInt64},
		{I64, -1e19, math.MinInt64},
		{I64, inf, math.MaxInt64},
		{I64, 0x1p53 + 2, 0x1p53 + 2},
		{I64, -0.5, -1},
		{I64, nan, 0},
	}
	for _, tt := range tests {
		if got := Round(tt.d, tt.in); !same(got, tt.want) && !(tt.want == 0 && got == 0) {
			t.Errorf("Round(%v, %v) = %v, want %v", tt.d, tt.in, got, tt.want)
		}
	}
}

// TestRoundIdempotent: a rounded value is representable, so rounding it
// again changes nothing.
func TestRoundIdempotent(t *testing.T) {
	rng := SeededRNG(3)
	for _, d := range []DType{F32, F16, BF16, F8E4M3, F8E5M2, I8, U8, I32, I64} {
		for range 20000 {
			v := math.Ldexp(rng.NormFloat64(), rng.IntN(80)-40)
			r := Round(d, v)
			if again := Round(d, r); !same(again, r) {
				t.Fatalf("Round(%v, %v) = %v, but Round(%v, %v) = %v", d, v, r, d, r, again)
			}
		}
	}
}

func TestRoundInvalidPanics(t *testing.T) {
	for _, d := range []DType{Invalid, DType(99)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Round(%v) did not panic", d)
				}
			}()
			Round(d, 1)
		}()
	}
	defer func() {
		if recover() == nil {
			t.Errorf("F8Value(BF16) did not panic")
		}
	}()
	F8Value(BF16, 0)
}
