package norm_test

import (
	"testing"

	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/norm"
	"github.com/gokittens/kittens/norm/normtest"
)

// TestParity runs every parity case of the family: on the GPU against the
// CPU reference, or the reference alone without one.
func TestParity(t *testing.T) {
	gputest.RunChecks(t, normtest.Suite())
}

// BenchmarkNorm times every benchmark case of the family (GPU only), with
// their kernels compiled first by norm.Prepare, which covers them.
func BenchmarkNorm(b *testing.B) {
	if err := norm.Prepare(gputest.Device(b)); err != nil {
		b.Fatal(err)
	}
	gputest.RunBenches(b, normtest.Suite())
}
