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
	"github.com/gokittens/kittens/moe/moetest"
	"github.com/gokittens/kittens/norm/normtest"
	"github.com/gokittens/kittens/rope/ropetest"
	"github.com/gokittens/kittens/softmax/softmaxtest"
	"github.com/gokittens/kittens/suite"
	"github.com/gokittens/kittens/topk/topktest"
)

// Families returns every family's cases, sorted by family name. Each call
// builds the lists anew.
func Families() suite.Families {
	fs := suite.Families{
		acttest.Suite(),
		conv1dtest.Suite(),
		moetest.Suite(),
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

// Lookup returns the op named name.
func Lookup(name string) (*suite.Op, bool) { return Families().Lookup(name) }
