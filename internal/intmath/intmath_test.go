package intmath

import (
	"math"
	"math/bits"
	"testing"
)

func TestHelpers(t *testing.T) {
	for _, c := range []struct{ a, b, ceil, round int }{{0, 4, 0, 0}, {1, 4, 1, 4}, {4, 4, 1, 4}, {5, 4, 2, 8}, {1023, 32, 32, 1024}} {
		if CeilDiv(c.a, c.b) != c.ceil || RoundUp(c.a, c.b) != c.round {
			t.Errorf("%d/%d: ceil %d round %d", c.a, c.b, CeilDiv(c.a, c.b), RoundUp(c.a, c.b))
		}
	}
	for a, want := range map[int]int{-5: 1, 0: 1, 1: 1, 2: 2, 3: 4, 16: 16, 17: 32, 1000: 1024,
		1<<40 + 1: 1 << 41, 1 << (bits.UintSize - 2): 1 << (bits.UintSize - 2)} {
		if NextPow2(a) != want {
			t.Errorf("NextPow2(%d) = %d, want %d", a, NextPow2(a), want)
		}
	}
	for a, want := range map[int]int{1: 1, 2: 2, 3: 2, 16: 16, 17: 16, 1000: 512} {
		if PrevPow2(a) != want {
			t.Errorf("PrevPow2(%d) = %d, want %d", a, PrevPow2(a), want)
		}
	}
	for a, want := range map[int]bool{-4: false, 0: false, 1: true, 2: true, 3: false, 64: true, 96: false} {
		if IsPow2(a) != want {
			t.Errorf("IsPow2(%d) = %v", a, IsPow2(a))
		}
	}
}

// TestNextPow2Overflow: past the largest power of two an int holds,
// NextPow2 panics instead of looping for ever or wrapping to a negative.
func TestNextPow2Overflow(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NextPow2(2^62 + 1) did not panic")
		}
	}()
	NextPow2(1<<(bits.UintSize-2) + 1)
}

// TestFitsInt32 checks the bound at 2^31 − 1 and that a product past int64
// does not wrap into a pass.
func TestFitsInt32(t *testing.T) {
	for _, c := range []struct {
		rows, stride, n int64
		want            bool
	}{
		{1, math.MaxInt32 - 5, 5, true}, {1, math.MaxInt32 - 5, 6, false},
		{1 << 24, 128, 0, false}, {1<<24 - 1, 128, 127, true}, {1<<24 - 1, 128, 129, false},
		{16, math.MaxInt64, 128, false}, {1 << 40, 1 << 30, 0, false},
	} {
		if got := FitsInt32(c.rows, c.stride, c.n); got != c.want {
			t.Errorf("FitsInt32(%d, %d, %d) = %v, want %v", c.rows, c.stride, c.n, got, c.want)
		}
	}
}
