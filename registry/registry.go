// Package registry is the one list of every op: its parity cases and its
// benchmark cases. Family packages register their ops in init; the tests,
// the kittens CLI (check, bench, list) and the generated KERNELS.md and
// BENCH.md all read this list, so they cannot drift apart.
package registry

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/tensor"
)

// Op is one registered kernel op.
type Op struct {
	Name    string // e.g. "rmsnorm"; unique
	Family  string // e.g. "norm"; the package that implements it
	Doc     string // one line: what it computes
	Checks  []Check
	Benches []Bench
}

// Check is one parity case. Spec draws fresh inputs from rng and returns the
// case: host tensors, which of them the op writes, and the op call (see
// check.Spec); an error is a case that cannot be built.
type Check struct {
	Name string
	Spec func(rng *rand.Rand) (check.Spec, error)
}

// Run draws the case from rng and runs it (check.Run): on dev and on the
// host (the CPU reference), compared. With a nil dev it runs the host path
// alone and checks that it wrote every element of the outputs it poisons
// first (check.Spec.Poison: the pure outputs, float or integer; an output
// updated in place cannot be checked so).
func (c Check) Run(dev *cuda.Device, rng *rand.Rand) (check.Report, error) {
	s, err := c.Spec(rng)
	if err != nil {
		return check.Report{}, err
	}
	return check.Run(dev, s)
}

// Warm draws the case from rng and runs its device path without comparing
// or capturing anything (check.Warm), which loads every kernel it uses.
func (c Check) Warm(dev *cuda.Device, rng *rand.Rand) error {
	s, err := c.Spec(rng)
	if err != nil {
		return err
	}
	return check.Warm(dev, s)
}

// Warm runs Check.Warm for every case of checks on dev, as many at once as
// the host has CPUs, and calls done (when not nil) after each, from the
// goroutine that ran it. Building the kernels a list of cases uses is
// mostly NVRTC's work on the host; done so in parallel, the cases then run
// one by one (Check.Run, whose graph capture must run alone) without
// waiting for a compile. A case that fails to warm is left to its Run to
// report.
func Warm(dev *cuda.Device, checks []Check, done func()) {
	fanOut(len(checks), func(int) int64 { return 0 }, 1, done, func(i int, rng *rand.Rand) {
		_ = checks[i].Warm(dev, rng) // Run reports what fails
	})
}

// WarmBenches does for benchmark cases what Warm does for parity cases
// (Bench.Warm, for launches on a stream set for dependent launches where
// dependent is set), holding at once cases of at most a quarter of dev's
// memory in all (a larger one alone), since each allocates a full set. A
// case that fails to warm is left to its measurement to report.
func WarmBenches(dev *cuda.Device, benches []Bench, dependent bool, done func()) {
	fanOut(len(benches), func(i int) int64 { return benches[i].Bytes }, dev.Props().TotalMem/4, done, func(i int, rng *rand.Rand) {
		_ = benches[i].Warm(dev, rng, dependent) // the measurement reports what fails
	})
}

// fanOut calls fn(i, rng) for every i < n, each with fresh random inputs to
// draw from, as many at once as the host has CPUs and as fit, by size(i),
// in budget together (one larger than budget runs alone), and done (when
// not nil) after each; it returns when all have run.
func fanOut(n int, size func(int) int64, budget int64, done func(), fn func(int, *rand.Rand)) {
	budget = max(budget, 1)
	mem := semaphore.NewWeighted(budget)
	cpus := make(chan struct{}, runtime.NumCPU())
	var wg sync.WaitGroup
	for i := range n {
		w := min(max(size(i), 0), budget)
		_ = mem.Acquire(context.Background(), w) // never fails: the context is never done
		cpus <- struct{}{}
		wg.Go(func() {
			defer mem.Release(w)
			defer func() { <-cpus }()
			rng, _ := tensor.NewRNG()
			fn(i, rng)
			if done != nil {
				done()
			}
		})
	}
	wg.Wait()
}

// Bench is one benchmark case.
type Bench struct {
	Name  string // shape and dtype, e.g. "16384x8192 bf16"
	Bytes int64  // fewest bytes moved: each input read once, each output written once
	Flops int64  // floating-point operations, 0 when memory-bound accounting is enough
	// New allocates one independent set of inputs and outputs on dev and
	// returns the op call on a stream. The harness makes several sets and
	// rotates among them so that L2 does not flatter the timing.
	New func(dev *cuda.Device, rng *rand.Rand) (Instance, error)
	// Torch, when set, is the same case for the PyTorch side of the
	// comparison (see TorchCase).
	Torch *TorchCase
	// Goal is what the family's issue asks of the case; the generated
	// BENCH.md counts each case against it.
	Goal Goal
}

// Goal is what an issue asks of a benchmark case: each field is the least
// ratio or percentage it must reach, 0 where the issue asks none.
type Goal struct {
	VsCompile float64 // torch.compile's time over ours
	VsEager   float64 // PyTorch eager's time over ours (for top-k: torch.topk's)
	// CopyPct is a percentage of the copy ceiling (the 1 GiB device copy),
	// asked of cases that move CopyGoalMin bytes or more.
	CopyPct float64
}

// CopyGoalMin is the least data of a case that Goal.CopyPct is asked of:
// the issues' "data ≥ 64 MB".
const CopyGoalMin = 64e6

// RowwiseGoal is what the row-wise families' issues ask of every shape
// they benchmark: as fast as torch.compile, and ≥ 95% of the copy ceiling
// where the data is 64 MB or more (norm asks more of eager; top-k asks
// against torch.topk instead).
var RowwiseGoal = Goal{VsCompile: 1, CopyPct: 95}

// Instance is one allocated benchmark set.
type Instance struct {
	Run  func(s *cuda.Stream) error
	Free func()
}

// Warm allocates one set of the case on dev, runs it once on a stream of
// its own, set for dependent launches where dependent is (as
// bench.Options.Dependent times it), and frees it: the process then holds
// every kernel the case uses, compiled where the disk cache lacked it.
func (b Bench) Warm(dev *cuda.Device, rng *rand.Rand, dependent bool) error {
	in, err := b.New(dev, rng)
	if err != nil {
		return err
	}
	defer in.Free()
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

// TorchCase names a builder of the Python benchmark script and its
// arguments (JSON-encoded): the script builds the same inputs with PyTorch and
// times eager and torch.compile versions of the op.
type TorchCase struct {
	Op   string         // builder name in the family's Python snippet
	Args map[string]any // shape, dtype and options
}

var (
	mu    sync.Mutex
	ops   = map[string]*Op{}
	torch = map[string]string{}
)

// Register adds an op; a duplicate name is a programming error and panics.
func Register(op *Op) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := ops[op.Name]; dup {
		panic(fmt.Sprintf("registry: op %q registered twice", op.Name))
	}
	ops[op.Name] = op
}

// RegisterTorch adds a family's Python snippet of torch builders (see the
// bench package for the conventions it follows).
func RegisterTorch(family, python string) {
	mu.Lock()
	defer mu.Unlock()
	torch[family] = python
}

// All returns every op sorted by family, then name.
func All() []*Op {
	mu.Lock()
	defer mu.Unlock()
	out := make([]*Op, 0, len(ops))
	for _, o := range ops {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Family != out[j].Family {
			return out[i].Family < out[j].Family
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Family returns the ops of one family.
func Family(name string) []*Op {
	var out []*Op
	for _, o := range All() {
		if o.Family == name {
			out = append(out, o)
		}
	}
	return out
}

// Lookup returns the op with the given name.
func Lookup(name string) (*Op, bool) {
	mu.Lock()
	defer mu.Unlock()
	o, ok := ops[name]
	return o, ok
}

// TorchSnippets returns every family's Python snippet, sorted by family.
func TorchSnippets() []string {
	mu.Lock()
	defer mu.Unlock()
	fams := make([]string, 0, len(torch))
	for f := range torch {
		fams = append(fams, f)
	}
	sort.Strings(fams)
	out := make([]string, len(fams))
	for i, f := range fams {
		out[i] = torch[f]
	}
	return out
}
