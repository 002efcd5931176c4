// Package moe routes tokens to experts for mixture-of-experts layers: from
// router logits to the ids and weights each token takes (TopK, the Llama-4
// sigmoid top-1), to the metadata a grouped GEMM runs on — vLLM's
// block-aligned sorted token ids (AlignBlockSize) and triton_kernels'
// routing data (bitmatrix, per-expert counts, gather and scatter indices) —
// and the data movement around the experts (Permute, Unpermute).
//
// Every op is exact where its output is integral (ids, counts, offsets and
// orders equal the CPU reference's bit for bit) and runs inside a CUDA
// graph: no host synchronization, no allocation, output sizes bounded by
// functions of the shapes that the caller can allocate once.
//
// Host tensors run the CPU reference; device tensors run the kernels.
package moe

import (
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

// Prepare compiles, in parallel, the kernels the family uses most on dev,
// so that a program can keep NVRTC out of its first calls; any kernel it
// skips is compiled on first use. A nil dev is an error.
func Prepare(dev *cuda.Device) error {
	v := tensor.Validate("moe.Prepare")
	v.Check(dev != nil, "dev", "is nil")
	if err := v.Err(); err != nil {
		return err
	}
	p := dev.Props()
	var ks []jit.Kernel
	for _, part := range []func(cuda.Props) []jit.Kernel{preparedRouter, preparedAlign, preparedRouting, preparedPermute} {
		ks = append(ks, part(p)...)
	}
	return jit.Prepare(dev, ks)
}
