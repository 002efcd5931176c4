// Package include holds the device code every kernel shares: fixed-width
// types, bf16/fp16/fp8 conversions, 16-byte vector loads and stores, warp and
// block reductions, and the Hopper tile helpers (mbarrier, TMA, clusters).
//
// We define the few types we need ourselves instead of including the
// toolkit's cuda_bf16.h, cuda_fp16.h and cuda_fp8.h: conversions are single
// PTX instructions, and kernels then compile wherever the NVRTC library alone
// is installed, with no CUDA include folder, and compile faster.
//
// Kernels include them by name: #include "kittens.cuh".
package include

import (
	"embed"
	"io/fs"
	"sort"

	"github.com/gokittens/kittens/cuda"
)

//go:embed *.cuh
var files embed.FS

// Headers returns every shared header, sorted by name.
func Headers() []cuda.Header {
	names, _ := fs.Glob(files, "*.cuh")
	sort.Strings(names)
	out := make([]cuda.Header, 0, len(names))
	for _, n := range names {
		b, _ := files.ReadFile(n)
		out = append(out, cuda.Header{Name: n, Source: string(b)})
	}
	return out
}
