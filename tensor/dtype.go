// Package tensor is the library's n-dimensional array: a dtype, a shape, and
// strides in elements (the last dimension is always contiguous; a row stride
// may exceed the row), stored on the host or on a CUDA device.
//
// Host tensors are what the CPU references read and write, through float64
// (Float64s, SetFloat64s) with round-to-nearest-even into the tensor's dtype.
// Device tensors are what kernels read and write; copy between the two with
// ToDevice and ToHost. .npy files move data to and from NumPy and PyTorch.
package tensor

import (
	"fmt"
	"math"
)

// DType is an element type.
type DType uint8

// Element types. FP8 is the OCP format (e4m3fn: max 448, no infinity).
// Packed fp4 (e2m1) and e8m0 scales will join as the quantization family needs them.
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

// Size is the element size in bytes.
func (d DType) Size() int {
	if int(d) >= len(dtypeInfo) {
		return 0
	}
	return dtypeInfo[d].size
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return int(d) < len(dtypeInfo) && dtypeInfo[d].float }

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
	hasInf           bool   // overflow rounds to infinity; otherwise saturate
	nan              uint32 // canonical NaN bit pattern without sign
}

var (
	fmtBF16   = smallFloat{8, 7, 127, 0x1.FEp127, true, 0x7fc0}
	fmtF16    = smallFloat{5, 10, 15, 65504, true, 0x7e00}
	fmtE4M3   = smallFloat{4, 3, 7, 448, false, 0x7f}
	fmtE5M2   = smallFloat{5, 2, 15, 57344, false, 0x7f}
	fmtFloat8 = map[DType]smallFloat{BF16: fmtBF16, F16: fmtF16, F8E4M3: fmtE4M3, F8E5M2: fmtE5M2}
)

// encode rounds v to the nearest representable value (ties to even) and
// returns its bit pattern. Formats without infinity saturate to ±max, as
// the hardware's satfinite conversions do.
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
	expMask := uint32(1)<<f.expBits - 1
	minExp := 1 - f.bias // exponent of the smallest normal
	if math.IsInf(v, 0) {
		if f.hasInf {
			return sign | expMask<<f.manBits
		}
		v = f.maxFinite
	}
	if v == 0 {
		return sign
	}
	_, e := math.Frexp(v) // v = m·2^e, m in [0.5, 1): exponent of v is e-1
	exp := e - 1
	if exp < minExp {
		exp = minExp
	}
	quantum := math.Ldexp(1, exp-int(f.manBits))
	q := math.RoundToEven(v/quantum) * quantum
	if q > f.maxFinite {
		if f.hasInf {
			return sign | expMask<<f.manBits
		}
		q = f.maxFinite
	}
	if q == 0 {
		return sign
	}
	_, e = math.Frexp(q)
	exp = e - 1
	if exp < minExp { // subnormal
		m := uint32(q / math.Ldexp(1, minExp-int(f.manBits)))
		return sign | m
	}
	m := uint32(q/math.Ldexp(1, exp-int(f.manBits))) - 1<<f.manBits
	return sign | uint32(exp+f.bias)<<f.manBits | m
}

// decode returns the value of a bit pattern.
func (f smallFloat) decode(b uint32) float64 {
	width := 1 + f.expBits + f.manBits
	sign := 1.0
	if b>>(width-1)&1 == 1 {
		sign = -1
	}
	expMask := uint32(1)<<f.expBits - 1
	e := b >> f.manBits & expMask
	m := b & (1<<f.manBits - 1)
	switch {
	case e == 0:
		return sign * math.Ldexp(float64(m), 1-f.bias-int(f.manBits))
	case f.hasInf && e == expMask:
		if m == 0 {
			return sign * math.Inf(1)
		}
		return math.NaN()
	case !f.hasInf && e == expMask && b&(1<<(width-1)-1) == f.nan:
		return math.NaN()
	}
	return sign * math.Ldexp(float64(m|1<<f.manBits), int(e)-f.bias-int(f.manBits))
}

// BF16Bits rounds v to bfloat16 (nearest, ties to even).
func BF16Bits(v float64) uint16 { return uint16(fmtBF16.encode(v)) }

// BF16Value returns the value of a bfloat16 bit pattern.
func BF16Value(b uint16) float64 { return float64(math.Float32frombits(uint32(b) << 16)) }

// F16Bits rounds v to IEEE half precision (nearest, ties to even).
func F16Bits(v float64) uint16 { return uint16(fmtF16.encode(v)) }

// F16Value returns the value of a half-precision bit pattern.
func F16Value(b uint16) float64 { return f16Table[b] }

// F8E4M3Bits rounds v to OCP fp8 e4m3fn, saturating to ±448.
func F8E4M3Bits(v float64) uint8 { return uint8(fmtE4M3.encode(v)) }

// F8E5M2Bits rounds v to fp8 e5m2, saturating to ±57344.
func F8E5M2Bits(v float64) uint8 { return uint8(fmtE5M2.encode(v)) }

// F8Value returns the value of an fp8 bit pattern of dtype d.
func F8Value(d DType, b uint8) float64 {
	if d == F8E5M2 {
		return e5m2Table[b]
	}
	return e4m3Table[b]
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
// tensor of that dtype keeps. Integer dtypes round half away from zero and
// saturate to their range.
func Round(d DType, v float64) float64 {
	switch d {
	case F32:
		return float64(float32(v))
	case BF16:
		return BF16Value(BF16Bits(v))
	case F16:
		return F16Value(F16Bits(v))
	case F8E4M3, F8E5M2:
		return fmtFloat8[d].decode(fmtFloat8[d].encode(v))
	}
	return float64(toInt(d, v))
}

func toInt(d DType, v float64) int64 {
	if math.IsNaN(v) {
		return 0
	}
	v = math.Round(v)
	lo, hi := intRange(d)
	return int64(math.Max(lo, math.Min(hi, v)))
}

func intRange(d DType) (float64, float64) {
	switch d {
	case I8:
		return -128, 127
	case U8:
		return 0, 255
	case I32:
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}
