package ropetest

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/rope"
	"github.com/gokittens/kittens/tensor"
)

// benchDT and benchCacheDT are the dtypes of every bench case: bf16
// activations with a bf16 table, as vLLM runs it (it casts its fp32 cache to
// the query dtype) and as the original port did.
const (
	benchDT      = tensor.BF16
	benchCacheDT = tensor.BF16
	benchMaxPos  = 16384 // cache rows of the serving cases; positions are drawn below it
)

// qkBench is one serving-layout bench case.
type qkBench struct {
	model        string
	t, hq, hk, d int
	r            int
	style        rope.Style
}

var qkBenchCases = []qkBench{
	{model: "llama3-8b", t: 1, hq: 32, hk: 8, d: 128, r: 128},
	{model: "llama3-8b", t: 32, hq: 32, hk: 8, d: 128, r: 128},
	{model: "llama3-8b", t: 4096, hq: 32, hk: 8, d: 128, r: 128},
	{model: "llama3-8b", t: 16384, hq: 32, hk: 8, d: 128, r: 128},
	{model: "qwen3-next", t: 4096, hq: 16, hk: 2, d: 256, r: 64},
	{model: "deepseek-v3 gptj", t: 4096, hq: 128, hk: 1, d: 64, r: 64, style: rope.GPTJ},
}

func qkBenches() []bench.Case {
	var out []bench.Case
	for _, c := range qkBenchCases {
		o := rope.Options{Style: c.style, RotaryDim: c.r, TrustPositions: true}
		// In place, only the rotary part of each head is read and written;
		// each token reads one cache row and one int64 position.
		bytes := int64(c.t) * int64((c.hq+c.hk)*c.r*2*benchDT.Size()+c.r*benchCacheDT.Size()+8)
		out = append(out, bench.Case{
			Goal:  bench.RowwiseGoal,
			Name:  fmt.Sprintf("%s T=%d q %dx%d k %dx%d r=%d bf16", c.model, c.t, c.hq, c.d, c.hk, c.d, c.r),
			Bytes: bytes,
			New: func(dev *cuda.Device, rng *rand.Rand) (bench.Instance, error) {
				var ts []*tensor.Tensor
				for _, h := range []int{c.hq, c.hk} {
					x, err := tensor.RandDevice(dev, rng, benchDT, 0, 1, c.t, h, c.d)
					if err != nil {
						freeAll(ts)
						return bench.Instance{}, err
					}
					ts = append(ts, x)
				}
				cache, err := rope.CosSinCache(benchCacheDT, benchMaxPos, c.r, 1e4)
				if err != nil {
					freeAll(ts)
					return bench.Instance{}, err
				}
				rest, err := onDevice(dev, randomPositions(rng, tensor.I64, c.t, benchMaxPos), cache)
				if err != nil {
					freeAll(ts)
					return bench.Instance{}, err
				}
				ts = append(ts, rest...)
				return bench.Instance{
					Run:  func(s *cuda.Stream) error { return rope.RotateQK(s, ts[0], ts[1], ts[2], ts[3], o) },
					Free: func() { freeAll(ts) },
				}, nil
			},
			Torch: &bench.TorchCase{Op: "rope_qk", Args: map[string]any{
				"t": c.t, "hq": c.hq, "hk": c.hk, "d": c.d, "rot": c.r, "style": c.style.String(),
				"dtype": benchDT.String(), "cache_dtype": benchCacheDT.String(), "max_pos": benchMaxPos}},
		})
	}
	return out
}

// bhsdBenchShapes are the original port's B×H×S×D bench shapes (NeoX, r = D).
var bhsdBenchShapes = [][4]int{{4, 32, 1024, 128}, {8, 32, 2048, 128}, {16, 32, 4096, 128}}

func bhsdBenches() []bench.Case {
	var out []bench.Case
	for _, sh := range bhsdBenchShapes {
		b, h, s, d := sh[0], sh[1], sh[2], sh[3]
		n := int64(b * h * s * d)
		out = append(out, bench.Case{
			Goal:  bench.RowwiseGoal,
			Name:  fmt.Sprintf("%dx%dx%dx%d bf16", b, h, s, d),
			Bytes: 2*n*int64(benchDT.Size()) + int64(2*s*d/2*benchCacheDT.Size()),
			New: func(dev *cuda.Device, rng *rand.Rand) (bench.Instance, error) {
				cos, sin, err := tables(benchCacheDT, s, d, 1e4)
				if err != nil {
					return bench.Instance{}, err
				}
				x, err := tensor.RandDevice(dev, rng, benchDT, 0, 1, b, h, s, d)
				if err != nil {
					return bench.Instance{}, err
				}
				y, err1 := tensor.Empty(dev, benchDT, b, h, s, d)
				ts, err2 := onDevice(dev, cos, sin)
				if err := errors.Join(err1, err2); err != nil {
					x.Free()
					y.Free()
					freeAll(ts)
					return bench.Instance{}, err
				}
				return bench.Instance{
					Run:  func(st *cuda.Stream) error { return rope.Rope(st, y, x, ts[0], ts[1], rope.Options{}) },
					Free: func() { freeAll(append(ts, x, y)) },
				}, nil
			},
			Torch: &bench.TorchCase{Op: "rope_bhsd", Args: map[string]any{
				"shape": []int{b, h, s, d}, "rot": d, "style": rope.NeoX.String(),
				"dtype": benchDT.String(), "cache_dtype": benchCacheDT.String()}},
		})
	}
	return out
}
