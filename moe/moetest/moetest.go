// Package moetest holds the moe family's parity cases, benchmark cases and
// PyTorch snippet for the harness (kittens check and bench, the tests and
// the generated tables). Users of moe do not need it.
package moetest

import (
	"embed"
	"io/fs"
	"slices"
	"strings"

	"github.com/gokittens/kittens/suite"
)

// torchFiles are the family's PyTorch builders, one file per part.
//
//go:embed torch_*.py
var torchFiles embed.FS

// Suite returns the moe family's ops with their cases.
func Suite() suite.Family {
	names, _ := fs.Glob(torchFiles, "torch_*.py")
	slices.Sort(names)
	var torch strings.Builder
	for _, n := range names {
		b, _ := torchFiles.ReadFile(n)
		torch.Write(b)
		torch.WriteString("\n")
	}
	ops := slices.Concat(routerOps(), alignOps(), routingOps(), permuteOps())
	return suite.Family{Name: "moe", Ops: ops, Torch: torch.String()}
}
