// Package ropetest holds the rope family's parity and benchmark cases and
// its PyTorch builders, for the kittens harness (the tests, the kittens
// command and the generated tables). Users of package rope do not need it.
//
// Every case calls rope's public ops: on host tensors they run the CPU
// reference, on device tensors the kernel, and the harness compares the two.
package ropetest

import (
	_ "embed"
	"math/rand/v2"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/rope"
	"github.com/gokittens/kittens/suite"
	"github.com/gokittens/kittens/tensor"
)

//go:embed torch_rope.py
var torchSrc string

// Suite returns the rope family's ops with their parity and benchmark cases
// and the PyTorch snippet the benchmark cases are compared with.
func Suite() suite.Family {
	return suite.Family{
		Name: "rope",
		Ops: []*suite.Op{{
			Name: "rope_qk", Family: "rope",
			Doc:     "RoPE on q [T,Hq,D] and k [T,Hk,D] in place, positions + cos/sin cache (vLLM layout)",
			Checks:  checksOf(qkCases),
			Benches: qkBenches(),
		}, {
			Name: "rope_bhsd", Family: "rope",
			Doc:     "RoPE y = rope(x) on [B,H,S,D] with cos/sin [S,r/2] (the original port's layout)",
			Checks:  checksOf(bhsdCases),
			Benches: bhsdBenches(),
		}},
		Torch: torchSrc,
	}
}

// rotaryDim is the rotary dim r of a case: r, or the head dim d for 0.
func rotaryDim(r, d int) int {
	if r == 0 {
		return d
	}
	return r
}

// tables returns Rope's cos and sin tables [rows, r/2] of dt, contiguous:
// the column halves of CosSinCache's rows.
func tables(dt tensor.DType, rows, r int, theta float64) (cos, sin *tensor.Tensor, err error) {
	cache, err := rope.CosSinCache(dt, rows, r, theta)
	if err != nil {
		return nil, nil, err
	}
	out := make([]*tensor.Tensor, 2)
	for i := range out {
		half, err := cache.Slice(1, i*r/2, (i+1)*r/2)
		if err != nil {
			return nil, nil, err
		}
		out[i] = tensor.New(dt, rows, r/2)
		out[i].SetFloat64s(half.Float64s())
	}
	return out[0], out[1], nil
}

// randomPositions draws n positions in [0, maxPos), unsorted, as dt.
func randomPositions(rng *rand.Rand, dt tensor.DType, n, maxPos int) *tensor.Tensor {
	p := make([]int64, n)
	for i := range p {
		p[i] = rng.Int64N(int64(maxPos))
	}
	t := tensor.New(dt, n)
	t.SetInt64s(p)
	return t
}

// onDevice copies host tensors to dev, freeing what it made on an error.
func onDevice(dev *cuda.Device, hs ...*tensor.Tensor) ([]*tensor.Tensor, error) {
	out := make([]*tensor.Tensor, 0, len(hs))
	for _, h := range hs {
		d, err := h.ToDevice(dev)
		if err != nil {
			freeAll(out)
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// freeAll frees device tensors.
func freeAll(ts []*tensor.Tensor) {
	for _, t := range ts {
		t.Free()
	}
}
