// Package suite is what a family's test-support package hands the harness:
// the family's ops, each with its parity cases and benchmark cases as plain
// lists, and the PyTorch snippet its benchmark cases are compared with.
// registry.Families gathers every family's Family into one explicit list
// for the kittens command, the tests and the generated tables.
package suite

import (
	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/check"
)

// Op is one kernel op's cases.
type Op struct {
	Name    string // e.g. "rmsnorm"; unique across families
	Family  string // e.g. "norm"; the package that implements it
	Doc     string // one line: what it computes
	Checks  []check.Case
	Benches []bench.Case
}

// Family is one kernel family's cases.
type Family struct {
	Name string
	Ops  []*Op // each with Op.Family = Name
	// Torch is the family's Python snippet of builders, one for each
	// bench.TorchCase.Op its cases name (see the bench package for the
	// conventions it follows).
	Torch string
}

// Families is a list of families, as the registry gathers them.
type Families []Family

// Ops returns every op of every family, in the list's order.
func (fs Families) Ops() []*Op {
	var out []*Op
	for _, f := range fs {
		out = append(out, f.Ops...)
	}
	return out
}

// Lookup returns the op named name.
func (fs Families) Lookup(name string) (*Op, bool) {
	for _, op := range fs.Ops() {
		if op.Name == name {
			return op, true
		}
	}
	return nil, false
}

// Torch returns every family's PyTorch snippet, in the list's order.
func (fs Families) Torch() []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Torch
	}
	return out
}
