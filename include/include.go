// Package include holds the device code every kernel shares: fixed-width
// types, bf16/fp16/fp8 conversions, Vec (the vectors every global load and
// store moves, with their cache hints), warp and block reductions, and the Hopper tile helpers (mbarriers
// and the producer/consumer ring on them, TMA and bulk copies, clusters).
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
	"github.com/gokittens/kittens/tensor"
)

// cTypes names each dtype's element type in kittens.cuh.
var cTypes = map[tensor.DType]string{
	tensor.F32: "float", tensor.F16: "f16", tensor.BF16: "bf16", tensor.F8E4M3: "fp8e4m3", tensor.F8E5M2: "fp8e5m2",
	tensor.I8: "i8", tensor.U8: "u8", tensor.I32: "i32", tensor.I64: "i64",
}

// CType returns the name of dt's element type in kittens.cuh ("bf16",
// "float", "i32", ...), or "" for a dtype the headers do not define.
func CType(dt tensor.DType) string { return cTypes[dt] }

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
