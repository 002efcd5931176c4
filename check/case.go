package check

import (
	"math/rand/v2"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/fanout"
)

// Case is one named parity case. Spec draws fresh inputs from rng and
// returns the case: host tensors, which of them the op writes, and the op
// call (see Spec); an error is a case that cannot be built.
type Case struct {
	Name string
	Spec func(rng *rand.Rand) (Spec, error)
}

// Run draws the case from rng and runs it (see the package Run): on dev and
// on the host (the CPU reference), compared. With a nil dev it runs the host
// path alone and checks that it wrote every element of the outputs it
// poisons first (Spec.Poison: the pure outputs, float or integer; an output
// updated in place cannot be checked so).
func (c Case) Run(dev *cuda.Device, rng *rand.Rand) (Report, error) {
	s, err := c.Spec(rng)
	if err != nil {
		return Report{}, err
	}
	return Run(dev, s)
}

// Warm draws the case from rng and runs its device path without comparing
// or capturing anything (see the package Warm), which loads every kernel it
// uses.
func (c Case) Warm(dev *cuda.Device, rng *rand.Rand) error {
	s, err := c.Spec(rng)
	if err != nil {
		return err
	}
	return Warm(dev, s)
}

// WarmAll runs Case.Warm for every case on dev, as many at once as the host
// has CPUs, and calls done (when not nil) after each, from the goroutine
// that ran it. Building the kernels a list of cases uses is mostly NVRTC's
// work on the host; done so in parallel, the cases then run one by one
// (Case.Run, whose graph capture must run alone) without waiting for a
// compile. A case that fails to warm is left to its Run to report.
func WarmAll(dev *cuda.Device, cases []Case, done func()) {
	fanout.Run(len(cases), func(int) int64 { return 0 }, 1, done, func(i int, rng *rand.Rand) {
		_ = cases[i].Warm(dev, rng) // Run reports what fails
	})
}
