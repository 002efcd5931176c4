package tensor

import (
	"fmt"
	"math"
)

// DType is an element type.
type DType uint8

// Element types. BF16 is bfloat16 (8 exponent bits, 7 mantissa bits) and
// F16 IEEE half precision. The fp8 types are the OCP formats: F8E4M3 is
// e4m3fn (max 448, no infinity, NaN 0x7f/0xff) and F8E5M2 is e5m2 (max
// 57344, IEEE-style infinities and NaNs); conversions into both saturate to
// the finite range, as the hardware's satfinite conversions do. Packed fp4
// (e2m1) and e8m0 scales will join as the quantization family needs them.
const (
	Invalid DType = iota
	F32
	F16
	BF16
	F8E4M3
	F8E5M2
	I8
	U8
	I32
	I64
)

var dtypeInfo = [...]struct {
	name  string
	size  int
	float bool
}{
	Invalid: {"invalid", 0, false},
	F32:     {"f32", 4, true}, F16: {"f16", 2, true}, BF16: {"bf16", 2, true},
	F8E4M3: {"f8e4m3", 1, true}, F8E5M2: {"f8e5m2", 1, true},
	I8: {"i8", 1, false}, U8: {"u8", 1, false}, I32: {"i32", 4, false}, I64: {"i64", 8, false},
}

// Size is the element size in bytes, 0 for Invalid and unknown values.
func (d DType) Size() int {
	if int(d) >= len(dtypeInfo) {
		return 0
	}
	return dtypeInfo[d].size
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return int(d) < len(dtypeInfo) && dtypeInfo[d].float }

// String returns the dtype's short name ("f32", "bf16", "f8e4m3", ...), or
// "dtype(N)" for a value that is no dtype.
func (d DType) String() string {
	if int(d) >= len(dtypeInfo) {
		return fmt.Sprintf("dtype(%d)", d)
	}
	return dtypeInfo[d].name
}

// ParseDType reads a dtype name as String writes it.
func ParseDType(s string) (DType, error) {
	for i, in := range dtypeInfo {
		if i > 0 && in.name == s {
			return DType(i), nil
		}
	}
	return Invalid, fmt.Errorf("tensor: unknown dtype %q", s)
}

// smallFloat describes a binary floating-point format narrower than float64.
type smallFloat struct {
	expBits, manBits uint
	bias             int
	maxFinite        float64
	// hasInf: the top exponent holds ±Inf (mantissa 0) and NaNs (any other
	// mantissa), as in IEEE formats. Otherwise (e4m3fn) the top exponent
	// holds finite values and only the all-ones mantissa is NaN.
	hasInf bool
	// satfinite: encoding saturates overflow and ±Inf to ±maxFinite, as the
	// hardware's cvt.rn.satfinite conversions to fp8 do. Otherwise overflow
	// rounds to ±Inf.
	satfinite bool
	nan       uint32 // canonical NaN bit pattern without sign
}

var (
	fmtBF16 = smallFloat{expBits: 8, manBits: 7, bias: 127, maxFinite: 0x1.FEp127, hasInf: true, nan: 0x7fc0}
	fmtF16  = smallFloat{expBits: 5, manBits: 10, bias: 15, maxFinite: 65504, hasInf: true, nan: 0x7e00}
	fmtE4M3 = smallFloat{expBits: 4, manBits: 3, bias: 7, maxFinite: 448, satfinite: true, nan: 0x7f}
	fmtE5M2 = smallFloat{expBits: 5, manBits: 2, bias: 15, maxFinite: 57344, hasInf: true, satfinite: true, nan: 0x7f}
)

// encode rounds v to the nearest representable value (ties to even) and
// returns its bit pattern. NaN keeps its sign and becomes the canonical NaN.
// Overflow (a value that rounds above maxFinite) and ±Inf become ±Inf, or
// ±maxFinite in a satfinite format.
func (f smallFloat) encode(v float64) uint32 {
	width := 1 + f.expBits + f.manBits
	sign := uint32(0)
	if math.Signbit(v) {
		sign = 1 << (width - 1)
		v = -v
	}
	if math.IsNaN(v) {
		return sign | f.nan
	}
	inf := (uint32(1)<<f.expBits - 1) << f.manBits
	if math.IsInf(v, 0) {
		if !f.satfinite {
			return sign | inf
		}
		v = f.maxFinite
	}
	if v == 0 {
		return sign
	}
	minExp := 1 - f.bias  // exponent of the smallest normal
	_, e := math.Frexp(v) // v = m·2^e, m in [0.5, 1): exponent of v is e-1
	exp := max(e-1, minExp)
	// quantum is the spacing of representable values at v's exponent; v is
	// a float64 and quantum a power of two, so v/quantum is exact.
	quantum := math.Ldexp(1, exp-int(f.manBits))
	q := math.RoundToEven(v/quantum) * quantum
	if q > f.maxFinite {
		if !f.satfinite {
			return sign | inf
		}
		q = f.maxFinite
	}
	if q == 0 {
		return sign
	}
	_, e = math.Frexp(q)
	exp = e - 1
	if exp < minExp { // subnormal: the exponent field is 0
		return sign | uint32(q/math.Ldexp(1, minExp-int(f.manBits)))
	}
	m := uint32(q/math.Ldexp(1, exp-int(f.manBits))) - 1<<f.manBits
	return sign | uint32(exp+f.bias)<<f.manBits | m
}

// decode returns the value of a bit pattern. A NaN pattern gives a NaN with
// the pattern's sign, so that 0xFF poison reads as a negative NaN in every
// format, as it does in f32 and bf16.
func (f smallFloat) decode(b uint32) float64 {
	width := 1 + f.expBits + f.manBits
	sign := 1.0
	if b>>(width-1)&1 == 1 {
		sign = -1
	}
	expMask := uint32(1)<<f.expBits - 1
	manMask := uint32(1)<<f.manBits - 1
	e := b >> f.manBits & expMask
	m := b & manMask
	switch {
	case e == 0:
		return sign * math.Ldexp(float64(m), 1-f.bias-int(f.manBits))
	case f.hasInf && e == expMask && m == 0:
		return sign * math.Inf(1)
	case f.hasInf && e == expMask, e == expMask && m == manMask:
		return math.Copysign(math.NaN(), sign)
	}
	return sign * math.Ldexp(float64(m|1<<f.manBits), int(e)-f.bias-int(f.manBits))
}

// BF16Bits rounds v to bfloat16 (nearest, ties to even). Overflow gives
// ±Inf; NaN gives the canonical quiet NaN 0x7fc0 with v's sign.
func BF16Bits(v float64) uint16 { return uint16(fmtBF16.encode(v)) }

// BF16Value returns the value of a bfloat16 bit pattern.
func BF16Value(b uint16) float64 { return float64(math.Float32frombits(uint32(b) << 16)) }

// F16Bits rounds v to IEEE half precision (nearest, ties to even). Overflow
// (|v| ≥ 65520) gives ±Inf; NaN gives 0x7e00 with v's sign.
func F16Bits(v float64) uint16 { return uint16(fmtF16.encode(v)) }

// F16Value returns the value of a half-precision bit pattern.
func F16Value(b uint16) float64 { return f16Table[b] }

// F8E4M3Bits rounds v to OCP fp8 e4m3fn (nearest, ties to even),
// saturating overflow and ±Inf to ±448 like the hardware's satfinite
// conversion. NaN gives 0x7f with v's sign (the format's only NaNs are 0x7f
// and 0xff).
func F8E4M3Bits(v float64) uint8 { return uint8(fmtE4M3.encode(v)) }

// F8E5M2Bits rounds v to fp8 e5m2 (nearest, ties to even), saturating
// overflow and ±Inf to ±57344 like the hardware's satfinite conversion, so
// it never produces an infinity although the format has them (0x7c, 0xfc,
// which F8Value reads as ±Inf). NaN gives 0x7f with v's sign.
func F8E5M2Bits(v float64) uint8 { return uint8(fmtE5M2.encode(v)) }

// F8Value returns the value of an fp8 bit pattern of dtype d, which must be
// F8E4M3 or F8E5M2.
func F8Value(d DType, b uint8) float64 {
	switch d {
	case F8E4M3:
		return e4m3Table[b]
	case F8E5M2:
		return e5m2Table[b]
	}
	panic(fmt.Sprintf("tensor: F8Value of dtype %v", d))
}

var (
	f16Table  [1 << 16]float64
	e4m3Table [256]float64
	e5m2Table [256]float64
)

func init() {
	for i := range f16Table {
		f16Table[i] = fmtF16.decode(uint32(i))
	}
	for i := range 256 {
		e4m3Table[i] = fmtE4M3.decode(uint32(i))
		e5m2Table[i] = fmtE5M2.decode(uint32(i))
	}
}

// Round returns v rounded to dtype d and read back: what storing v into a
// tensor of that dtype keeps. Float dtypes round to nearest, ties to even,
// as BF16Bits, F16Bits, F8E4M3Bits and F8E5M2Bits describe. Integer dtypes
// round half away from zero and saturate to their range; NaN becomes 0.
// Round panics on an invalid dtype.
func Round(d DType, v float64) float64 {
	switch d {
	case F32:
		return float64(float32(v))
	case BF16:
		return BF16Value(BF16Bits(v))
	case F16:
		return F16Value(F16Bits(v))
	case F8E4M3:
		return F8Value(d, F8E4M3Bits(v))
	case F8E5M2:
		return F8Value(d, F8E5M2Bits(v))
	case I8, U8, I32, I64:
		return float64(toInt(d, v))
	}
	panic(fmt.Sprintf("tensor: Round to dtype %v", d))
}

// toInt rounds v half away from zero and saturates it to integer dtype d's
// range; NaN becomes 0.
func toInt(d DType, v float64) int64 {
	if math.IsNaN(v) {
		return 0
	}
	lo, hi := intRange(d)
	switch v = math.Round(v); {
	case v <= float64(lo):
		return lo
	case v >= float64(hi): // float64(MaxInt64) is 2^63, itself out of range
		return hi
	}
	return int64(v)
}

// clampInt saturates v to integer dtype d's range.
func clampInt(d DType, v int64) int64 {
	lo, hi := intRange(d)
	return min(max(v, lo), hi)
}

// intRange is the range of integer dtype d.
func intRange(d DType) (lo, hi int64) {
	switch d {
	case I8:
		return math.MinInt8, math.MaxInt8
	case U8:
		return 0, math.MaxUint8
	case I32:
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}
