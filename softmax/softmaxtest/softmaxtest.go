// Package softmaxtest holds the softmax family's parity and benchmark cases
// and its PyTorch builder, for the kittens harness (the registry, the
// kittens command and the tests). Users of package softmax do not need it.
//
// Every case calls softmax.Softmax: on host tensors it runs the CPU
// reference, on device tensors the kernel, and the harness compares the two.
package softmaxtest

import (
	_ "embed"

	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/suite"
)

//go:embed torch_softmax.py
var torchSnippet string

// Suite returns the softmax family's op with its parity and benchmark cases
// and the PyTorch snippet the benchmark cases are compared with.
func Suite() suite.Family {
	op := &suite.Op{
		Name:   "softmax",
		Family: "softmax",
		Doc:    "y = softmax(x·scale) over the last dim of x [M, N]; bf16, f16, f32",
	}
	for _, c := range parityCases {
		op.Checks = append(op.Checks, check.Case{Name: c.String(), Spec: c.spec})
	}
	for _, b := range benchShapes {
		op.Benches = append(op.Benches, b.bench())
	}
	return suite.Family{Name: "softmax", Ops: []*suite.Op{op}, Torch: torchSnippet}
}
