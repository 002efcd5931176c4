package bench

import (
	"math/rand/v2"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/fanout"
)

// Case is one benchmark case of an op.
type Case struct {
	Name  string // shape and dtype, e.g. "16384x8192 bf16"
	Bytes int64  // fewest bytes moved: each input read once, each output written once
	Flops int64  // floating-point operations, 0 when memory-bound accounting is enough
	// New allocates one independent set of inputs and outputs on dev and
	// returns the op call on a stream. Measure makes several sets and
	// rotates among them so that L2 does not flatter the timing.
	New func(dev *cuda.Device, rng *rand.Rand) (Instance, error)
	// Torch, when set, is the same case for the PyTorch side of the
	// comparison (see TorchCase).
	Torch *TorchCase
	// Goal is what the case must reach; reports count each case against it.
	Goal Goal
}

// Instance is one allocated benchmark set.
type Instance struct {
	Run  func(s *cuda.Stream) error
	Free func()
}

// TorchCase names a builder of the Python benchmark script and its
// arguments (JSON-encoded): the script builds the same inputs with PyTorch
// and times eager and torch.compile versions of the op.
type TorchCase struct {
	Op   string         // builder name in the family's Python snippet
	Args map[string]any // shape, dtype and options
}

// Goal is what a benchmark case must reach: each field is the least ratio
// or percentage, 0 where none is asked.
type Goal struct {
	// VsCompile is the least ratio of torch.compile's time over ours on
	// this case.
	VsCompile float64
	// VsCompileMedian is the least median of that ratio over the cases of
	// the case's family that ask it.
	VsCompileMedian float64
	// VsEager is the least ratio of PyTorch eager's time over ours (for
	// top-k: torch.topk's).
	VsEager float64
	// CopyPct is a percentage of a device copy of the case's own size,
	// timed in the same run, asked of cases that move CopyGoalMin bytes or
	// more.
	CopyPct float64
}

// CopyGoalMin is the least data of a case that Goal.CopyPct is asked of.
const CopyGoalMin = 64e6

// RowwiseGoal is what every memory-bound row-wise case must reach: no case
// under 0.90× torch.compile and a family median of at least 0.97×, and 95%
// of a same-size copy where the data is 64 MB or more.
var RowwiseGoal = Goal{VsCompile: 0.90, VsCompileMedian: 0.97, CopyPct: 95}

// Warm allocates one set of the case on dev, runs it once on a stream of
// its own, set for dependent launches where dependent is (as
// Options.Dependent times it), and frees it: the process then holds every
// kernel the case uses, compiled where the disk cache lacked it.
func (c Case) Warm(dev *cuda.Device, rng *rand.Rand, dependent bool) error {
	in, err := c.New(dev, rng)
	if err != nil {
		return err
	}
	if in.Free != nil {
		defer in.Free()
	}
	s, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer s.Destroy()
	if dependent {
		if err := s.SetDependentLaunch(true); err != nil {
			return err
		}
	}
	if err := in.Run(s); err != nil {
		return err
	}
	return s.Synchronize()
}

// WarmAll does for benchmark cases what check.WarmAll does for parity
// cases (Case.Warm, for launches on a stream set for dependent launches
// where dependent is set), holding at once cases of at most a quarter of
// dev's memory in all (a larger one alone), since each allocates a full
// set. A case that fails to warm is left to its measurement to report.
func WarmAll(dev *cuda.Device, cases []Case, dependent bool, done func()) {
	fanout.Run(len(cases), func(i int) int64 { return cases[i].Bytes }, dev.Props().TotalMem/4, done, func(i int, rng *rand.Rand) {
		_ = cases[i].Warm(dev, rng, dependent) // the measurement reports what fails
	})
}
