package conv1d

import (
	"testing"

	"github.com/gokittens/kittens/internal/gputest"
)

func TestParity(t *testing.T) { gputest.RunChecks(t, "conv1d") }

func BenchmarkConv1d(b *testing.B) { gputest.RunBenches(b, "conv1d") }
