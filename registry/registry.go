// Package registry is the one list of every kernel family's cases: each
// family's test-support package returns its suite.Family, and Families
// gathers them in one explicit list. The kittens command, the tests and
// the generated tables all read this list, so they cannot drift apart.
// Library packages never import it.
package registry

import (
	"sort"

	"github.com/gokittens/kittens/act/acttest"
	"github.com/gokittens/kittens/conv1d/conv1dtest"
	"github.com/gokittens/kittens/norm/normtest"
	"github.com/gokittens/kittens/rope/ropetest"
	"github.com/gokittens/kittens/softmax/softmaxtest"
	"github.com/gokittens/kittens/suite"
	"github.com/gokittens/kittens/topk/topktest"
)

// Families returns every family's cases, sorted by family name. Each call
// builds the lists anew.
func Families() []suite.Family {
	fs := []suite.Family{
		acttest.Suite(),
		conv1dtest.Suite(),
		normtest.Suite(),
		ropetest.Suite(),
		softmaxtest.Suite(),
		topktest.Suite(),
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].Name < fs[j].Name })
	for _, f := range fs {
		sort.Slice(f.Ops, func(i, j int) bool { return f.Ops[i].Name < f.Ops[j].Name })
	}
	return fs
}

// All returns every op, sorted by family, then name.
func All() []*suite.Op {
	var out []*suite.Op
	for _, f := range Families() {
		out = append(out, f.Ops...)
	}
	return out
}

// Family returns the ops of one family (nil for an unknown name).
func Family(name string) []*suite.Op {
	for _, f := range Families() {
		if f.Name == name {
			return f.Ops
		}
	}
	return nil
}

// Lookup returns the op with the given name.
func Lookup(name string) (*suite.Op, bool) {
	for _, o := range All() {
		if o.Name == name {
			return o, true
		}
	}
	return nil, false
}

// TorchSnippets returns every family's Python snippet, sorted by family.
func TorchSnippets() []string {
	var out []string
	for _, f := range Families() {
		out = append(out, f.Torch)
	}
	return out
}
