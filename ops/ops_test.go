package ops_test

import (
	"testing"

	_ "github.com/gokittens/kittens/ops"
	"github.com/gokittens/kittens/registry"
	"github.com/gokittens/kittens/tensor"
)

// TestEveryOpIsComplete holds every registered op to the pattern: a doc
// line, parity cases, and benchmark cases that count their bytes, have a
// PyTorch counterpart and a goal, with case names unique within the op.
func TestEveryOpIsComplete(t *testing.T) {
	ops := registry.All()
	if len(ops) == 0 {
		t.Fatal("no ops registered")
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
			if b.Goal == (registry.Goal{}) {
				t.Errorf("%s/%s: no goal: BENCH.md cannot count it against its issue", op.Name, b.Name)
			}
			if seen["bench "+b.Name] {
				t.Errorf("%s: bench case %q twice", op.Name, b.Name)
			}
			seen["bench "+b.Name] = true
		}
	}
	for _, f := range []string{"norm", "act", "softmax", "rope", "topk", "conv1d"} {
		if !families[f] {
			t.Errorf("family %s is not linked into ops", f)
		}
	}
}

// TestEveryHostPathWritesItsOutputs runs every parity case on the host path
// (nil device), which checks each poisoned output, float or integer, for
// elements still holding the poison: it holds every registered op to
// writing all of them, and to never writing the poison pattern itself (−1
// in an integer output, see check.Run).
func TestEveryHostPathWritesItsOutputs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every parity case on the host (seconds)")
	}
	for _, op := range registry.All() {
		for _, c := range op.Checks {
			rng, seed := tensor.NewRNG()
			r, err := c.Run(nil, rng)
			if err != nil || !r.Pass {
				t.Errorf("%s %s (seed %d): %v %v", op.Name, c.Name, seed, r, err)
			}
		}
	}
}
