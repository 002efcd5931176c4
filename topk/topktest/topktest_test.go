package topktest

import (
	"testing"

	"github.com/gokittens/kittens/bench"
)

// TestSuite checks the suite's shape: unique case names, parity and
// benchmark cases, and twice torch.topk's speed as every benchmark case's
// goal.
func TestSuite(t *testing.T) {
	f := Suite()
	if f.Name != "topk" || f.Torch == "" || len(f.Ops) != 1 {
		t.Fatalf("family %q, %d ops, %d bytes of PyTorch snippet", f.Name, len(f.Ops), len(f.Torch))
	}
	op := f.Ops[0]
	if op.Family != f.Name || len(op.Checks) == 0 || len(op.Benches) == 0 {
		t.Fatalf("op %q (family %q): %d checks, %d benches", op.Name, op.Family, len(op.Checks), len(op.Benches))
	}
	names := map[string]bool{}
	for _, c := range op.Checks {
		if names[c.Name] {
			t.Errorf("duplicate case %q", c.Name)
		}
		names[c.Name] = true
	}
	for _, c := range op.Benches {
		if names[c.Name] {
			t.Errorf("duplicate case %q", c.Name)
		}
		names[c.Name] = true
		if c.Goal != (bench.Goal{VsEager: 2}) || c.Torch == nil {
			t.Errorf("%s: goal %+v, torch %v; want bench.Goal{VsEager: 2} and a torch case", c.Name, c.Goal, c.Torch)
		}
	}
}
