package act_test

import (
	"testing"

	"github.com/gokittens/kittens/act"
	"github.com/gokittens/kittens/act/acttest"
	"github.com/gokittens/kittens/internal/gputest"
)

func TestParity(t *testing.T) {
	if dev := gputest.Maybe(t); dev != nil {
		if err := act.Prepare(dev); err != nil {
			t.Fatal(err)
		}
	}
	gputest.RunChecks(t, acttest.Suite())
}

func BenchmarkAct(b *testing.B) { gputest.RunBenches(b, acttest.Suite()) }
