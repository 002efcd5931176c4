package moe_test

import (
	"testing"

	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/moe"
	"github.com/gokittens/kittens/moe/moetest"
)

// TestParity runs every parity case of the family: on the GPU against the
// CPU reference, or the reference alone without one.
func TestParity(t *testing.T) {
	gputest.RunChecks(t, moetest.Suite())
}

// BenchmarkMoE times every benchmark case of the family (GPU only), with
// the kernels Prepare names compiled first.
func BenchmarkMoE(b *testing.B) {
	if err := moe.Prepare(gputest.Device(b)); err != nil {
		b.Fatal(err)
	}
	gputest.RunBenches(b, moetest.Suite())
}
