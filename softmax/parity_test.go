package softmax_test

import (
	"testing"

	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/softmax/softmaxtest"
)

func TestParity(t *testing.T) { gputest.RunChecks(t, softmaxtest.Suite()) }

func BenchmarkSoftmax(b *testing.B) { gputest.RunBenches(b, softmaxtest.Suite()) }
