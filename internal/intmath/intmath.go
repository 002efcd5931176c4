// Package intmath holds the integer helpers every launch-configuration
// picker needs.
package intmath

import (
	"math"
	"math/bits"
)

// CeilDiv is ⌈a/b⌉ for a ≥ 0, b > 0.
func CeilDiv(a, b int) int { return (a + b - 1) / b }

// RoundUp rounds a up to a multiple of b.
func RoundUp(a, b int) int { return CeilDiv(a, b) * b }

// NextPow2 is the smallest power of two ≥ a (1 for a ≤ 1). It panics where
// that power does not fit in an int (a > 2^62 on 64-bit machines): callers
// pass sizes they have already bounded, so such an a is a bug.
func NextPow2(a int) int {
	if a <= 1 {
		return 1
	}
	n := bits.Len(uint(a - 1))
	if n >= bits.UintSize-1 {
		panic("intmath: NextPow2 overflows int")
	}
	return 1 << n
}

// IsPow2 reports whether a is a power of two (1, 2, 4, ...).
func IsPow2(a int) bool { return a > 0 && a&(a-1) == 0 }

// PrevPow2 is the largest power of two ≤ a, for a ≥ 1.
func PrevPow2(a int) int { return 1 << (bits.Len(uint(a)) - 1) }

// FitsInt32 reports whether rows·stride + n ≤ 2^31 − 1, without overflowing
// on the way, for rows ≥ 1 and stride, n ≥ 0: whether a kernel that forms
// the offsets of rows rows of n elements, stride apart, may form them in
// int.
func FitsInt32(rows, stride, n int64) bool { return stride <= (math.MaxInt32-n)/rows }
