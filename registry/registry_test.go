package registry

import (
	"slices"
	"testing"

	"strings"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/suite"
	"github.com/gokittens/kittens/tensor"
)

// TestFamiliesSortedAndNamed: families come sorted by name, their ops by
// name, each op naming its family, every name unique.
func TestFamiliesSortedAndNamed(t *testing.T) {
	fs := Families()
	if !slices.IsSortedFunc(fs, func(a, b suite.Family) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("families not sorted")
	}
	seen := map[string]bool{}
	for _, f := range fs {
		if f.Torch == "" {
			t.Errorf("family %s has no PyTorch snippet", f.Name)
		}
		for i, op := range f.Ops {
			if op.Family != f.Name {
				t.Errorf("op %s in family %s says family %q", op.Name, f.Name, op.Family)
			}
			if i > 0 && f.Ops[i-1].Name >= op.Name {
				t.Errorf("family %s: ops not sorted at %s", f.Name, op.Name)
			}
			if seen[op.Name] {
				t.Errorf("op %s twice", op.Name)
			}
			seen[op.Name] = true
		}
	}
	if _, ok := Lookup("rmsnorm"); !ok {
		t.Error("Lookup(rmsnorm) failed")
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("found an op that does not exist")
	}
}

// TestEveryOpIsComplete holds every op to the pattern: a doc line, parity
// cases, and benchmark cases that count their bytes, have a PyTorch
// counterpart and a goal, with case names unique within the op.
func TestEveryOpIsComplete(t *testing.T) {
	ops := Families().Ops()
	if len(ops) == 0 {
		t.Fatal("no ops")
	}
	families := map[string]bool{}
	for _, op := range ops {
		families[op.Family] = true
		if op.Doc == "" || len(op.Checks) == 0 {
			t.Errorf("%s: doc %q, %d parity cases", op.Name, op.Doc, len(op.Checks))
		}
		seen := map[string]bool{}
		for _, c := range op.Checks {
			if seen["check "+c.Name] {
				t.Errorf("%s: parity case %q twice", op.Name, c.Name)
			}
			seen["check "+c.Name] = true
		}
		for _, b := range op.Benches {
			if b.Bytes <= 0 || b.New == nil || b.Torch == nil || b.Torch.Op == "" {
				t.Errorf("%s/%s: bytes %d, has New %v, torch %+v", op.Name, b.Name, b.Bytes, b.New != nil, b.Torch)
			}
			if b.Goal == (bench.Goal{}) {
				t.Errorf("%s/%s: no goal: the tables cannot count it", op.Name, b.Name)
			}
			if seen["bench "+b.Name] {
				t.Errorf("%s: bench case %q twice", op.Name, b.Name)
			}
			seen["bench "+b.Name] = true
		}
	}
	for _, f := range []string{"norm", "act", "softmax", "rope", "topk", "conv1d", "moe"} {
		if !families[f] {
			t.Errorf("family %s is not in the list", f)
		}
	}
}

// TestEveryHostPathWritesItsOutputs runs every parity case on the host path
// (nil device), which checks each poisoned output, float or integer, for
// elements still holding the poison: it holds every op to writing all of
// them, and to never writing the poison pattern itself (−1 in an integer
// output, see check.Run).
func TestEveryHostPathWritesItsOutputs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every parity case on the host (seconds)")
	}
	for _, op := range Families().Ops() {
		for _, c := range op.Checks {
			rng, seed := tensor.NewRNG()
			r, err := c.Run(nil, rng)
			if err != nil || !r.Pass {
				t.Errorf("%s %s (seed %d): %v %v", op.Name, c.Name, seed, r, err)
			}
		}
	}
}
