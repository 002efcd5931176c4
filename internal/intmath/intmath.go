// Package intmath holds the integer helpers every launch-configuration
// picker needs.
package intmath

// CeilDiv is ⌈a/b⌉ for a ≥ 0, b > 0.
func CeilDiv(a, b int) int { return (a + b - 1) / b }

// RoundUp rounds a up to a multiple of b.
func RoundUp(a, b int) int { return CeilDiv(a, b) * b }

// NextPow2 is the smallest power of two ≥ a (1 for a ≤ 1).
func NextPow2(a int) int {
	p := 1
	for p < a {
		p <<= 1
	}
	return p
}
