package ropetest

import (
	"fmt"
	"math/rand/v2"

	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/rope"
	"github.com/gokittens/kittens/tensor"
)

// xmax bounds the parity inputs, drawn uniformly from [−xmax, xmax]; the
// tolerance below depends on it.
const xmax = 2.0

// halfULP is the largest rounding error of a value in [−1, 1] stored as dt.
var halfULP = map[tensor.DType]float64{tensor.F32: 0x1p-25, tensor.F16: 0x1p-12, tensor.BF16: 0x1p-9}

// tolerance is the parity tolerance of outputs of dtype dt computed from a
// cos/sin table of dtype cdt. The reference reads an fp32 table, the
// kernel the cdt one, each entry off from the exact angle by at most
// halfULP(cdt) (|cos|, |sin| ≤ 1). An output x1·c − x2·s then moves by at
// most (|x1| + |x2|)·halfULP(cdt) ≤ 2·xmax·halfULP(cdt): that term is added
// to the absolute tolerance of an elementwise op rounded once to dt
// (check.ForDType, which covers the fp32 arithmetic, the output rounding
// and the fp32 table's own rounding), and its relative size, at most
// 2·halfULP, to the relative-norm bound.
func tolerance(dt, cdt tensor.DType) check.Tolerance {
	tol := check.ForDType(dt)
	tol.Atol += 2 * xmax * halfULP[cdt]
	tol.RelNorm += 2 * halfULP[cdt]
	return tol
}

// dtypePairs are the (activation, table) dtype pairs every check case runs.
var dtypePairs = [][2]tensor.DType{
	{tensor.BF16, tensor.BF16}, {tensor.BF16, tensor.F32},
	{tensor.F16, tensor.F16}, {tensor.F16, tensor.F32},
	{tensor.F32, tensor.F32},
}

// checksOf is every case in every (dtype, cache dtype) pair.
func checksOf[C interface {
	check(dt, cdt tensor.DType) check.Case
}](cases []C) []check.Case {
	var out []check.Case
	for _, c := range cases {
		for _, p := range dtypePairs {
			out = append(out, c.check(p[0], p[1]))
		}
	}
	return out
}

// uniform returns a host tensor of shape drawn from [−xmax, xmax].
func uniform(rng *rand.Rand, dt tensor.DType, shape ...int) *tensor.Tensor {
	t := tensor.New(dt, shape...)
	t.FillUniform(rng, -xmax, xmax)
	return t
}

// qkCase is one parity case of RotateQK.
type qkCase struct {
	name         string
	t, hq, hk, d int
	r            int // 0: d
	style        rope.Style
	gapT, gapH   int // elements after each token's heads and after each head
	pos          tensor.DType
	maxPos       int
	theta        float64
}

var qkCases = []qkCase{
	{name: "llama T=37 8/2x128", t: 37, hq: 8, hk: 2, d: 128, maxPos: 4096, theta: 5e5},
	{name: "deepseek gptj T=29 16/1x64", t: 29, hq: 16, hk: 1, d: 64, style: rope.GPTJ, maxPos: 4096, theta: 1e4},
	{name: "qwen3next partial r=64 T=33 5/1x256", t: 33, hq: 5, hk: 1, d: 256, r: 64, maxPos: 2048, theta: 1e7},
	{name: "partial gptj r=48 T=17 3/3x128", t: 17, hq: 3, hk: 3, d: 128, r: 48, style: rope.GPTJ, maxPos: 512, theta: 1e4},
	{name: "partial neox r=24 T=15 3/1x40", t: 15, hq: 3, hk: 1, d: 40, r: 24, maxPos: 100, theta: 1e4},
	{name: "fused qkv stride T=19 4/2x64", t: 19, hq: 4, hk: 2, d: 64, gapT: 2 * 64, maxPos: 300, theta: 1e4},
	{name: "odd strides gptj T=11 3/2x32", t: 11, hq: 3, hk: 2, d: 32, gapT: 3, gapH: 5, style: rope.GPTJ, maxPos: 64, theta: 1e4},
	{name: "head dim 6 T=13 3/1", t: 13, hq: 3, hk: 1, d: 6, maxPos: 50, theta: 1e4},
	{name: "rotary dim 2 gptj T=9 2/1x16", t: 9, hq: 2, hk: 1, d: 16, r: 2, style: rope.GPTJ, maxPos: 20, theta: 1e4},
	{name: "int32 positions T=21 6/3x128", t: 21, hq: 6, hk: 3, d: 128, pos: tensor.I32, maxPos: 8192, theta: 5e5},
	{name: "no k T=23 7x64", t: 23, hq: 7, d: 64, maxPos: 1024, theta: 1e4},
	{name: "large positions r=16 T=31 4/1x32", t: 31, hq: 4, hk: 1, d: 32, r: 16, maxPos: 1 << 17, theta: 5e5},
	{name: "decode T=1 32/8x128", t: 1, hq: 32, hk: 8, d: 128, maxPos: 4096, theta: 5e5},
	{name: "many tokens T=1025 3/1x128", t: 1025, hq: 3, hk: 1, d: 128, maxPos: 4096, theta: 5e5},
}

// stridedHeads returns a contiguous buffer filled with random values (gaps
// included) and the [t, h, d] view of it with the given gaps, as a function
// so the view can be rebuilt on the buffer's device copy.
func stridedHeads(rng *rand.Rand, dt tensor.DType, t, h, d, gapT, gapH int) (*tensor.Tensor, func(*tensor.Tensor) (*tensor.Tensor, error)) {
	sh := d + gapH
	st := h*sh + gapT
	span := max(0, (t-1)*st+(h-1)*sh+d)
	if t == 0 || h == 0 {
		span = 0
	}
	buf := uniform(rng, dt, span)
	return buf, func(b *tensor.Tensor) (*tensor.Tensor, error) {
		return b.View(dt, []int{t, h, d}, []int{st, sh, 1})
	}
}

// check is the case at activations dt and a cache of cdt. The device path
// reads the cdt cache; the host path, the reference, an fp32 one.
func (c qkCase) check(dt, cdt tensor.DType) check.Case {
	return check.Case{
		Name: fmt.Sprintf("%s %v cache %v", c.name, dt, cdt),
		Spec: func(rng *rand.Rand) (check.Spec, error) {
			o := rope.Options{Style: c.style, RotaryDim: c.r}
			r := rotaryDim(c.r, c.d)
			posDT := c.pos
			if posDT == tensor.Invalid {
				posDT = tensor.I64
			}
			cache, err := rope.CosSinCache(cdt, c.maxPos, r, c.theta)
			if err != nil {
				return check.Spec{}, err
			}
			ref, err := rope.CosSinCache(tensor.F32, c.maxPos, r, c.theta)
			if err != nil {
				return check.Spec{}, err
			}
			qbuf, qview := stridedHeads(rng, dt, c.t, c.hq, c.d, c.gapT, c.gapH)
			kbuf, kview := stridedHeads(rng, dt, c.t, c.hk, c.d, c.gapT, c.gapH)
			tol := tolerance(dt, cdt)
			s := check.Spec{
				Tensors: []*tensor.Tensor{randomPositions(rng, posDT, c.t, c.maxPos), cache, qbuf, kbuf},
				Names:   []string{"positions", "cosSin", "q", "k"},
				Outputs: []int{2, 3},
				Tol:     map[int]check.Tolerance{2: tol, 3: tol},
				Run: func(s *cuda.Stream, ts []*tensor.Tensor) error {
					q, err := qview(ts[2])
					if err != nil {
						return err
					}
					var k *tensor.Tensor
					if c.hk > 0 {
						if k, err = kview(ts[3]); err != nil {
							return err
						}
					}
					if !ts[2].IsDevice() {
						return rope.RotateQK(s, q, k, ts[0], ref, o)
					}
					o := o
					if o.TrustPositions, err = s.Capturing(); err != nil {
						return err
					}
					return rope.RotateQK(s, q, k, ts[0], ts[1], o)
				},
			}
			if c.hk == 0 {
				s.Tensors, s.Names, s.Outputs = s.Tensors[:3], s.Names[:3], s.Outputs[:1]
			}
			return s, nil
		},
	}
}

// bhsdCase is one parity case of Rope.
type bhsdCase struct {
	name       string
	b, h, s, d int
	r          int // 0: d
	style      rope.Style
	inPlace    bool
	gap        bool // strided x and y, different gaps
	extraRows  int  // cos/sin rows beyond S
	theta      float64
}

var bhsdCases = []bhsdCase{
	{name: "2x3x37x128", b: 2, h: 3, s: 37, d: 128, theta: 1e4},
	{name: "gptj 1x4x33x64", b: 1, h: 4, s: 33, d: 64, style: rope.GPTJ, theta: 1e4},
	{name: "partial r=64 2x2x19x256", b: 2, h: 2, s: 19, d: 256, r: 64, theta: 1e7},
	{name: "partial gptj r=32 3x1x21x128", b: 3, h: 1, s: 21, d: 128, r: 32, style: rope.GPTJ, theta: 1e4},
	{name: "in place partial r=64 2x3x17x128", b: 2, h: 3, s: 17, d: 128, r: 64, inPlace: true, theta: 1e4},
	{name: "in place gptj 1x5x23x64", b: 1, h: 5, s: 23, d: 64, style: rope.GPTJ, inPlace: true, theta: 1e4},
	{name: "strided partial r=40 2x3x13x72", b: 2, h: 3, s: 13, d: 72, r: 40, gap: true, theta: 1e4},
	{name: "head dim 6 2x2x11x6", b: 2, h: 2, s: 11, d: 6, theta: 1e4},
	{name: "longer tables 1x2x29x128", b: 1, h: 2, s: 29, d: 128, extraRows: 7, theta: 5e5},
	{name: "long sequence 1x2x2048x64", b: 1, h: 2, s: 2048, d: 64, theta: 5e5},
	// Past CUDA's 65535 blocks in the grid's z (batches) and y (heads):
	// launches in parts.
	{name: "many batches partial r=4 65537x1x3x8", b: 65537, h: 1, s: 3, d: 8, r: 4, theta: 1e4},
	{name: "many heads in place gptj 2x65537x1x8", b: 2, h: 65537, s: 1, d: 8, style: rope.GPTJ, inPlace: true, theta: 1e4},
}

// stridedBHSD returns a host [b, h, s, d] tensor with gaps between rows,
// heads and batches when gap is set (odd ones, with off = 0 or 1, so that
// vector widths shrink), contiguous otherwise.
func stridedBHSD(dt tensor.DType, b, h, s, d int, gap bool, off int) (*tensor.Tensor, error) {
	if !gap {
		return tensor.New(dt, b, h, s, d), nil
	}
	ss := d + 2 + off
	sh := s*ss + 3
	return tensor.NewStrided(dt, []int{b, h, s, d}, []int{h*sh + 5, sh, ss, 1})
}

// check is the case at activations dt and tables of cdt. The device path
// reads the cdt tables; the host path, the reference, fp32 ones.
func (c bhsdCase) check(dt, cdt tensor.DType) check.Case {
	return check.Case{
		Name: fmt.Sprintf("%s %v cache %v", c.name, dt, cdt),
		Spec: func(rng *rand.Rand) (check.Spec, error) {
			o := rope.Options{Style: c.style, RotaryDim: c.r}
			r := rotaryDim(c.r, c.d)
			x, err := stridedBHSD(dt, c.b, c.h, c.s, c.d, c.gap, 0)
			if err != nil {
				return check.Spec{}, err
			}
			x.FillUniform(rng, -xmax, xmax)
			y, err := stridedBHSD(dt, c.b, c.h, c.s, c.d, c.gap, 1)
			if err != nil {
				return check.Spec{}, err
			}
			cos, sin, err := tables(cdt, c.s+c.extraRows, r, c.theta)
			if err != nil {
				return check.Spec{}, err
			}
			refCos, refSin, err := tables(tensor.F32, c.s+c.extraRows, r, c.theta)
			if err != nil {
				return check.Spec{}, err
			}
			tol := tolerance(dt, cdt)
			s := check.Spec{
				Tensors: []*tensor.Tensor{cos, sin, x, y},
				Names:   []string{"cos", "sin", "x", "y"},
				Outputs: []int{3},
				Poison:  []int{3},
				Tol:     map[int]check.Tolerance{2: tol, 3: tol},
				Run: func(s *cuda.Stream, ts []*tensor.Tensor) error {
					y := ts[len(ts)-1]
					if !ts[2].IsDevice() {
						return rope.Rope(s, y, ts[2], refCos, refSin, o)
					}
					return rope.Rope(s, y, ts[2], ts[0], ts[1], o)
				},
			}
			if c.inPlace {
				s.Tensors, s.Names, s.Outputs, s.Poison = s.Tensors[:3], s.Names[:3], []int{2}, nil
			}
			return s, nil
		},
	}
}
