package conv1d

import (
	"testing"

	"github.com/gokittens/kittens/internal/gputest"
)

func TestParity(t *testing.T) { gputest.RunChecks(t, "conv1d") }

// TestParityEvictLast runs the parity cases with the L2 evict-last bulk
// copies on every ring, which the picker keeps for calls larger than L2.
func TestParityEvictLast(t *testing.T) {
	gputest.Device(t)
	defer func() { tune = nil }()
	tune = func(_ shape, c config) config {
		c.evictLast = c.ring > 0
		return c
	}
	gputest.RunChecks(t, "conv1d")
}

// TestParityWide runs the parity cases of the register path (decode among
// them, in every state mode and in place) with 16 bytes a thread under the
// register cap the picker gives them, which it picks only for single-token
// decode over a deep grid, larger than any parity case.
func TestParityWide(t *testing.T) {
	gputest.Device(t)
	defer func() { tune = nil }()
	tune = func(sh shape, c config) config {
		if c.ring == 0 {
			c.vec, c.minBlocks = min(sh.maxVec, maxVecBytes/sh.elemSize), wideDecodeMinBlocks
		}
		return c
	}
	gputest.RunChecks(t, "conv1d")
}

func BenchmarkConv1d(b *testing.B) { gputest.RunBenches(b, "conv1d") }
