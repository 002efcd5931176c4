package moetest

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/moe"
	"github.com/gokittens/kittens/suite"
	"github.com/gokittens/kittens/tensor"
)

// permuteOps are moe.Permute's and moe.Unpermute's ops.
func permuteOps() []*suite.Op {
	p := &suite.Op{Name: "moe_permute", Family: "moe",
		Doc: "gather token rows [T, H] into expert order by sorted flat ids (padding entries give zero rows), " +
			"a bit-exact copy or fp8 e4m3 with per-row dynamic scales"}
	for _, c := range permuteCases {
		p.Checks = append(p.Checks, check.Case{Name: c.name(), Spec: c.spec})
	}
	u := &suite.Op{Name: "moe_unpermute", Family: "moe",
		Doc: "weighted combine of expert rows back to token order, out[t] = Σ_j w[t, j]·y[pos[t·k + j]] " +
			"in fp32 in slot order, dropped slots skipped"}
	for _, c := range unpermuteCases {
		u.Checks = append(u.Checks, check.Case{Name: c.name(), Spec: c.spec})
	}
	for _, b := range permuteBenches {
		p.Benches = append(p.Benches, b.bench(false))
		// The unpermute reads the rows of gather order, not quantized: a
		// shape that differs only there is timed once.
		if c := b.bench(true); !slices.ContainsFunc(u.Benches, func(o bench.Case) bool { return o.Name == c.Name }) {
			u.Benches = append(u.Benches, c)
		}
	}
	return []*suite.Op{p, u}
}

// permuteSkew is how a routing's experts are drawn.
type permuteSkew int

const (
	permuteUniform permuteSkew = iota // k distinct experts a token, uniformly
	permuteSkewed                     // expert 0 in every other token: it takes half the tokens
	permuteSparse                     // only every fourth expert takes tokens: the others get none
)

// permuteRoute draws the expert ids [T·k] (flat order) of t tokens, k
// distinct experts of e each.
func permuteRoute(rng *rand.Rand, t, e, k int, skew permuteSkew) []int {
	ids := make([]int, 0, t*k)
	pool, step := e, 1
	if skew == permuteSparse {
		pool, step = max(k, e/4), max(1, e/max(k, e/4))
	}
	for tok := range t {
		row := ids[len(ids):]
		for len(row) < k {
			x := rng.IntN(pool) * step
			if skew == permuteSkewed && tok%2 == 0 && len(row) == 0 {
				x = 0
			}
			if !slices.Contains(row, x) {
				row = append(row, x)
			}
		}
		ids = append(ids, row...)
	}
	return ids
}

// permuteLayout is which index arrays a case builds from its routing.
type permuteLayout int

const (
	// permuteGather: triton_kernels' gather indices, the flat ids sorted by
	// expert (ascending within one), P = T·k.
	permuteGather permuteLayout = iota
	// permuteAlign: vLLM's sorted_token_ids, each expert's flat ids padded
	// to a multiple of the block with T·k, then T·k up to T·k + E·(block−1).
	permuteAlign
	// permuteEP: the gather indices of the local experts only (every
	// fourth: an expert map that keeps a quarter), then −1 up to T·k; the
	// slots of the other experts are dropped (pos −1).
	permuteEP
)

var permuteLayoutNames = [...]string{"gather", "align", "ep"}

// permuteIndex builds idx (p → f, padding T·k or −1), pos (f → p, −1 for
// dropped slots) and the number of rows in use (vLLM's
// num_tokens_post_pad; the local rows for EP) from flat expert ids.
func permuteIndex(ids []int, e int, layout permuteLayout, block int) (idx, pos []int64, used int) {
	numel := len(ids)
	order := make([]int, numel)
	for f := range order {
		order[f] = f
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(ids[a], ids[b]) })
	pos = make([]int64, numel)
	for f := range pos {
		pos[f] = -1
	}
	switch layout {
	case permuteAlign:
		idx = make([]int64, 0, numel+e*(block-1))
		i := 0
		for x := range e {
			for ; i < numel && ids[order[i]] == x; i++ {
				pos[order[i]] = int64(len(idx))
				idx = append(idx, int64(order[i]))
			}
			for len(idx)%block != 0 {
				idx = append(idx, int64(numel))
			}
		}
		used = len(idx)
		for len(idx) < numel+e*(block-1) {
			idx = append(idx, int64(numel))
		}
	default:
		idx = make([]int64, 0, numel)
		for _, f := range order {
			if layout == permuteGather || ids[f]%4 == 0 {
				pos[f] = int64(len(idx))
				idx = append(idx, int64(f))
			}
		}
		used = len(idx)
		for len(idx) < numel {
			idx = append(idx, -1)
		}
	}
	return idx, pos, used
}

// permuteI32 is a contiguous host i32 tensor of v with shape.
func permuteI32(v []int64, shape ...int) *tensor.Tensor {
	t := tensor.New(tensor.I32, shape...)
	t.SetInt64s(v)
	return t
}

// permuteRows returns a host tensor [rows, h] of dt whose rows are pad
// elements apart more than h.
func permuteRows(dt tensor.DType, rows, h, pad int) (*tensor.Tensor, error) {
	return tensor.NewStrided(dt, []int{rows, h}, []int{h + pad, 1})
}

// permuteCase is one parity case of moe.Permute: T tokens of H elements of
// dtype In routed to K of E experts, laid out by Layout (Block for vLLM's
// padding), into y of dtype Out (f8e4m3: quantized). XPad and YPad pad the
// rows; Count passes the rows in use as o.Count (the rows past it keep
// their values); Special fills rows with NaN, ±inf, zeros, tiny and huge
// values.
type permuteCase struct {
	T, E, K, H int
	In, Out    tensor.DType
	Layout     permuteLayout
	Block      int
	Skew       permuteSkew
	XPad, YPad int
	Count      bool
	Special    bool
	What       string
}

// permuteCases cover the family's parity sizes (T of 0, 1, 7, 4096 and 65536; E from
// 8 to 512; k from 1 to 10), every dtype copied and quantized, the three
// layouts, skewed and sparse routing, rows of 16-byte, narrower and single
// accesses, one pass or several, sub-warp, warp and block groups, row
// strides, the count, and special values. Each stays within about 2M
// elements.
var permuteCases = []permuteCase{
	{T: 1, E: 8, K: 2, H: 4096, In: tensor.BF16, What: "one token"},
	{T: 7, E: 64, K: 6, H: 200, In: tensor.F16, Skew: permuteSkewed, What: "seven tokens"},
	{T: 7, E: 64, K: 6, H: 201, In: tensor.F32, What: "odd H"},
	{T: 4096, E: 128, K: 8, H: 48, In: tensor.BF16, Layout: permuteAlign, Block: 16, What: "Qwen3-30B-A3B routing"},
	{T: 4096, E: 128, K: 8, H: 48, In: tensor.BF16, Layout: permuteAlign, Block: 16, Count: true, What: "count"},
	{T: 65536, E: 8, K: 2, H: 12, In: tensor.F32, Skew: permuteSkewed, What: "many tokens"},
	{T: 256, E: 256, K: 8, H: 256, In: tensor.BF16, Out: tensor.F8E4M3, What: "DeepSeek-V3 routing"},
	{T: 100, E: 384, K: 10, H: 64, In: tensor.F16, Out: tensor.F8E4M3, Layout: permuteAlign, Block: 64, Skew: permuteSparse, What: "384 experts"},
	{T: 64, E: 512, K: 10, H: 2048, In: tensor.BF16, Out: tensor.F8E4M3, What: "Qwen3-Next"},
	{T: 16, E: 256, K: 8, H: 7168, In: tensor.BF16, Out: tensor.F8E4M3, What: "DeepSeek-V3 rows"},
	{T: 16, E: 256, K: 8, H: 7168, In: tensor.F32, Out: tensor.F8E4M3, What: "DeepSeek-V3 rows f32"},
	{T: 5, E: 16, K: 1, H: 40000, In: tensor.F32, Out: tensor.F8E4M3, What: "Llama-4 top-1, rows of several passes"},
	{T: 5, E: 16, K: 2, H: 40000, In: tensor.BF16, What: "rows of several passes"},
	{T: 48, E: 8, K: 2, H: 96, In: tensor.BF16, Out: tensor.F8E4M3, Special: true, What: "special values"},
	{T: 48, E: 8, K: 2, H: 100, In: tensor.F16, Out: tensor.F8E4M3, Special: true, What: "special values"},
	{T: 48, E: 8, K: 2, H: 96, In: tensor.F32, Out: tensor.F8E4M3, Special: true, What: "special values"},
	{T: 48, E: 8, K: 2, H: 1000, In: tensor.F32, Out: tensor.F8E4M3, Special: true, What: "special values, block groups"},
	{T: 48, E: 8, K: 2, H: 96, In: tensor.BF16, Special: true, What: "special values copied"},
	{T: 512, E: 64, K: 6, H: 64, In: tensor.F16, Layout: permuteEP, What: "expert map"},
	{T: 512, E: 64, K: 6, H: 64, In: tensor.BF16, Out: tensor.F8E4M3, Layout: permuteEP, Skew: permuteSkewed, What: "expert map"},
	{T: 100, E: 16, K: 4, H: 256, In: tensor.BF16, XPad: 8, YPad: 16, What: "strided"},
	{T: 100, E: 16, K: 4, H: 256, In: tensor.BF16, Out: tensor.F8E4M3, XPad: 3, YPad: 5, What: "unaligned strides"},
	{T: 100, E: 16, K: 4, H: 254, In: tensor.F16, Out: tensor.F8E4M3, What: "4-byte accesses"},
	{T: 300, E: 32, K: 4, H: 1, In: tensor.F32, Out: tensor.F8E4M3, What: "H = 1"},
	{T: 0, E: 8, K: 2, H: 64, In: tensor.BF16, Layout: permuteAlign, Block: 16, What: "zero tokens: padding only"},
	{T: 0, E: 8, K: 2, H: 64, In: tensor.F32, Out: tensor.F8E4M3, Layout: permuteAlign, Block: 16, Count: true, What: "zero tokens: count 0"},
}

func (c permuteCase) out() tensor.DType { return cmp.Or(c.Out, c.In) }

func (c permuteCase) name() string {
	s := fmt.Sprintf("%s T%d E%d k%d H%d %v", c.What, c.T, c.E, c.K, c.H, c.In)
	if c.Out != 0 {
		s += "→" + c.Out.String()
	}
	s += " " + permuteLayoutNames[c.Layout]
	if c.Block > 0 {
		s += fmt.Sprintf(" block %d", c.Block)
	}
	if c.XPad > 0 || c.YPad > 0 {
		s += fmt.Sprintf(" pads %d %d", c.XPad, c.YPad)
	}
	return s
}

// permuteSpecials fills rows of x, one special kind each, cycling from row
// 0 (the rest stay N(0, 1)): NaN among numbers, +inf, −inf, all zeros
// (both signs), values near the dtype's smallest subnormal, values near
// its largest finite, one large value among small ones (which round to
// fp8 zeros and subnormals).
func permuteSpecials(rng *rand.Rand, v []float64, rows, h int, dt tensor.DType) {
	tiny, huge := math.SmallestNonzeroFloat32, 1e37
	switch dt {
	case tensor.BF16:
		tiny, huge = math.Ldexp(1, -133), 1e37
	case tensor.F16:
		tiny, huge = math.Ldexp(1, -24), 60000
	}
	for r := 0; r < rows; r++ {
		row := v[r*h : (r+1)*h]
		c := rng.IntN(h)
		switch r % 8 {
		case 0:
			row[c] = math.NaN()
		case 1:
			row[c] = math.Inf(1)
		case 2:
			row[c] = math.Inf(-1)
		case 3:
			for i := range row {
				row[i] = math.Copysign(0, float64(i%2)-0.5)
			}
		case 4:
			for i := range row {
				row[i] = tiny * float64(rng.IntN(9)-4)
			}
		case 5:
			for i := range row {
				row[i] = huge * (rng.Float64() - 0.5)
			}
		case 6:
			for i := range row {
				row[i] *= 1e-3
			}
			row[c] = 1e3
		}
	}
}

// spec draws the case: x, idx, y (and scales, count) and a byte copy of
// y, so that y is compared bit for bit (NaN payloads, signed zeros).
func (c permuteCase) spec(rng *rand.Rand) (check.Spec, error) {
	ids := permuteRoute(rng, c.T, c.E, c.K, c.Skew)
	idxv, _, used := permuteIndex(ids, c.E, c.Layout, c.Block)
	p := len(idxv)
	x, err := permuteRows(c.In, c.T, c.H, c.XPad)
	if err != nil {
		return check.Spec{}, err
	}
	xv := make([]float64, c.T*c.H)
	for i := range xv {
		xv[i] = rng.NormFloat64()
	}
	if c.Special {
		permuteSpecials(rng, xv, c.T, c.H, c.In)
	}
	x.SetFloat64s(xv)
	if c.Special && c.Out == 0 && c.In == tensor.BF16 {
		// NaNs with payloads of either sign, copied as they are.
		b := x.Bytes()
		for r := 0; r < c.T; r += 8 {
			binary.LittleEndian.PutUint16(b[2*(r*(c.H+c.XPad)):], uint16(0x7f81+r/8%2*0x8040))
		}
	}
	out := c.out()
	y, err := permuteRows(out, p, c.H, c.YPad)
	if err != nil {
		return check.Spec{}, err
	}
	ts := []*tensor.Tensor{x, permuteI32(idxv, p), y}
	names := []string{"x", "idx", "y"}
	outputs := []int{2}
	tol := map[int]check.Tolerance{2: {}}
	scales := -1
	if out == tensor.F8E4M3 {
		scales = len(ts)
		ts, names, outputs = append(ts, tensor.New(tensor.F32, p)), append(names, "scales"), append(outputs, scales)
		tol[scales] = check.Tolerance{}
	}
	spec := check.Spec{Poison: outputs}
	if c.Count {
		// The rows in use hold the poison, the others values the op must keep.
		ts, names = append(ts, permuteI32([]int64{int64(used)}, 1)), append(names, "count")
		spec.Poison, spec.Marked = nil, outputs
		for _, i := range outputs {
			ts[i].FillNormal(rng, 0, 1)
			head, err := ts[i].Slice(0, 0, used)
			if err != nil {
				return check.Spec{}, err
			}
			head.Poison()
		}
	}
	bits := -1
	if c.YPad == 0 {
		bits = len(ts)
		ts, names, outputs = append(ts, tensor.New(tensor.U8, p, c.H*out.Size())), append(names, "y bits"), append(outputs, bits)
	}
	countIdx := slices.Index(names, "count")
	spec.Tensors, spec.Names, spec.Outputs, spec.Tol = ts, names, outputs, tol
	spec.Run = func(s *cuda.Stream, ts []*tensor.Tensor) error {
		var sc *tensor.Tensor
		if scales >= 0 {
			sc = ts[scales]
		}
		var o moe.PermuteOptions
		if countIdx >= 0 {
			o.Count = ts[countIdx]
		}
		if err := moe.Permute(s, ts[2], sc, ts[0], ts[1], c.K, o); err != nil {
			return err
		}
		if bits < 0 {
			return nil
		}
		view, err := ts[2].View(tensor.U8, ts[bits].Shape(), ts[bits].Strides())
		if err != nil {
			return err
		}
		return ts[bits].CopyFromOn(s, view)
	}
	return spec, nil
}

// unpermuteCase is one parity case of moe.Unpermute: T tokens routed to K
// of E experts, laid out by Layout, combining y of dtype In into out of
// dtype Out (In's when unset). NoW passes no weights, NoPos no positions (y
// in flat order), Pos2D positions shaped [T, k]. y's rows that no position
// names (padding, dropped slots' experts) hold NaN, so a read of one shows.
type unpermuteCase struct {
	T, E, K, H int
	In, Out    tensor.DType
	Layout     permuteLayout
	Block      int
	Skew       permuteSkew
	NoW, NoPos bool
	Pos2D      bool
	YPad, OPad int
	What       string
}

// unpermuteCases cover the family's parity sizes, every dtype and a widened
// output, the three layouts (vLLM's padded rows, dropped slots), no
// weights, no positions, strides and every access width.
var unpermuteCases = []unpermuteCase{
	{T: 1, E: 8, K: 2, H: 4096, In: tensor.BF16, What: "one token"},
	{T: 7, E: 64, K: 6, H: 200, In: tensor.F16, Skew: permuteSkewed, What: "seven tokens"},
	{T: 7, E: 64, K: 6, H: 201, In: tensor.F32, Pos2D: true, What: "odd H"},
	{T: 4096, E: 128, K: 8, H: 48, In: tensor.BF16, Layout: permuteAlign, Block: 16, What: "Qwen3-30B-A3B routing, padded rows"},
	{T: 65536, E: 8, K: 2, H: 12, In: tensor.F32, Skew: permuteSkewed, What: "many tokens"},
	{T: 256, E: 256, K: 8, H: 256, In: tensor.BF16, Out: tensor.F32, What: "DeepSeek-V3 routing, f32 out"},
	{T: 100, E: 384, K: 10, H: 64, In: tensor.F16, Layout: permuteAlign, Block: 64, Skew: permuteSparse, What: "384 experts"},
	{T: 64, E: 512, K: 10, H: 2048, In: tensor.BF16, What: "Qwen3-Next"},
	{T: 16, E: 256, K: 8, H: 7168, In: tensor.BF16, Pos2D: true, What: "DeepSeek-V3 rows"},
	{T: 512, E: 64, K: 6, H: 64, In: tensor.F16, Layout: permuteEP, What: "expert map: dropped slots"},
	{T: 300, E: 16, K: 4, H: 512, In: tensor.BF16, NoW: true, NoPos: true, What: "moe_sum"},
	{T: 64, E: 16, K: 8, H: 1024, In: tensor.F32, Out: tensor.BF16, NoPos: true, What: "flat order, weighted"},
	{T: 100, E: 16, K: 4, H: 256, In: tensor.BF16, YPad: 8, OPad: 16, What: "strided"},
	{T: 100, E: 16, K: 4, H: 256, In: tensor.F16, Out: tensor.F32, YPad: 3, OPad: 1, What: "unaligned strides"},
	{T: 4, E: 16, K: 2, H: 40000, In: tensor.BF16, What: "rows of several passes"},
	{T: 300, E: 32, K: 4, H: 1, In: tensor.F32, NoW: true, What: "H = 1"},
	{T: 0, E: 8, K: 2, H: 64, In: tensor.BF16, What: "zero tokens"},
}

func (c unpermuteCase) name() string {
	s := fmt.Sprintf("%s T%d E%d k%d H%d %v", c.What, c.T, c.E, c.K, c.H, c.In)
	if c.Out != 0 {
		s += "→" + c.Out.String()
	}
	s += " " + permuteLayoutNames[c.Layout]
	if c.Block > 0 {
		s += fmt.Sprintf(" block %d", c.Block)
	}
	if c.YPad > 0 || c.OPad > 0 {
		s += fmt.Sprintf(" pads %d %d", c.YPad, c.OPad)
	}
	return s
}

// spec draws the case: y, pos, w and out, compared within out's dtype's
// bound (float64 sums in the reference, fp32 on the device).
func (c unpermuteCase) spec(rng *rand.Rand) (check.Spec, error) {
	ids := permuteRoute(rng, c.T, c.E, c.K, c.Skew)
	idxv, posv, _ := permuteIndex(ids, c.E, c.Layout, c.Block)
	p := len(idxv)
	y, err := permuteRows(c.In, p, c.H, c.YPad)
	if err != nil {
		return check.Spec{}, err
	}
	yv := make([]float64, p*c.H)
	for r, f := range idxv {
		for i := range c.H {
			yv[r*c.H+i] = rng.NormFloat64()
			if !c.NoPos && (f < 0 || f >= int64(c.T*c.K)) {
				yv[r*c.H+i] = math.NaN()
			}
		}
	}
	y.SetFloat64s(yv)
	out, err := permuteRows(cmp.Or(c.Out, c.In), c.T, c.H, c.OPad)
	if err != nil {
		return check.Spec{}, err
	}
	ts := []*tensor.Tensor{y, out}
	names := []string{"y", "out"}
	posAt, wAt := -1, -1
	if !c.NoPos {
		posAt = len(ts)
		pos := permuteI32(posv, c.T*c.K)
		if c.Pos2D {
			pos = permuteI32(posv, c.T, c.K)
		}
		ts, names = append(ts, pos), append(names, "pos")
	}
	if !c.NoW {
		wAt = len(ts)
		w := tensor.New(tensor.F32, c.T, c.K)
		w.FillUniform(rng, 0, 1)
		ts, names = append(ts, w), append(names, "w")
	}
	return check.Spec{
		Tensors: ts,
		Names:   names,
		Outputs: []int{1},
		Poison:  []int{1},
		Run: func(s *cuda.Stream, ts []*tensor.Tensor) error {
			var pos, w *tensor.Tensor
			if posAt >= 0 {
				pos = ts[posAt]
			}
			if wAt >= 0 {
				w = ts[wAt]
			}
			return moe.Unpermute(s, ts[1], ts[0], pos, w, c.K)
		},
	}, nil
}

// permuteBench is one benchmark shape, timed for both ops: a model's
// routing of T tokens (K of E experts) with rows of H elements of DT,
// laid out by Layout. Quant times the permute with fp8 output.
type permuteBench struct {
	Model      string
	T, E, K, H int
	DT         tensor.DType
	Layout     permuteLayout
	Block      int
	Quant      bool
}

// permuteBenches: the routed models at decode (T ≤ 64), prefill and large
// batches; the large ones move 0.1 to 1.4 GB.
var permuteBenches = []permuteBench{
	{Model: "DeepSeek-V3", T: 1, E: 256, K: 8, H: 7168, DT: tensor.BF16, Quant: true},
	{Model: "Qwen3-30B-A3B", T: 16, E: 128, K: 8, H: 2048, DT: tensor.BF16},
	{Model: "DeepSeek-V3", T: 64, E: 256, K: 8, H: 7168, DT: tensor.BF16, Layout: permuteAlign, Block: 64},
	{Model: "Qwen3-30B-A3B", T: 512, E: 128, K: 8, H: 2048, DT: tensor.BF16, Quant: true},
	{Model: "Mixtral", T: 4096, E: 8, K: 2, H: 4096, DT: tensor.BF16},
	{Model: "Qwen3-30B-A3B", T: 4096, E: 128, K: 8, H: 2048, DT: tensor.BF16},
	{Model: "DeepSeek-V3", T: 4096, E: 256, K: 8, H: 7168, DT: tensor.BF16, Quant: true},
	{Model: "DeepSeek-V3", T: 4096, E: 256, K: 8, H: 7168, DT: tensor.BF16, Layout: permuteAlign, Block: 64},
	{Model: "Llama-4-Scout", T: 16384, E: 16, K: 1, H: 5120, DT: tensor.BF16},
	{Model: "Qwen3-Next", T: 16384, E: 512, K: 10, H: 2048, DT: tensor.BF16},
	{Model: "Llama-4-Maverick", T: 65536, E: 128, K: 1, H: 5120, DT: tensor.BF16, Quant: true},
}

// bytes is what one call moves. A permute reads each of the rows it
// copies (a token's row once per slot: in expert order they lie far apart,
// so L2 does not keep them between the slots) and writes every row of y,
// zeros for padding, with the scales where quantized; an unpermute reads
// the T·k rows and writes T. The index arrays and weights count too.
func (b permuteBench) bytes(unpermute bool) int64 {
	tk, h, sz := int64(b.T*b.K), int64(b.H), int64(b.DT.Size())
	if unpermute {
		return tk*h*sz + int64(b.T)*h*sz + tk*8
	}
	p := tk
	if b.Layout == permuteAlign {
		p += int64(b.E * (b.Block - 1))
	}
	out := sz
	if b.Quant {
		out = 1
	}
	n := tk*h*sz + p*h*out + p*4
	if b.Quant {
		n += p * 4
	}
	return n
}

func (b permuteBench) bench(unpermute bool) bench.Case {
	name := fmt.Sprintf("%s T%d E%d k%d H%d %v", b.Model, b.T, b.E, b.K, b.H, b.DT)
	if !unpermute {
		if b.Quant {
			name += "→f8e4m3"
		}
		if b.Layout == permuteAlign {
			name += fmt.Sprintf(" align %d", b.Block)
		}
	}
	bytes := b.bytes(unpermute)
	goal := bench.Goal{VsEager: 1}
	if bytes >= bench.CopyGoalMin {
		goal = bench.Goal{CopyPct: 85}
	}
	op, layout := "moe_permute", permuteLayoutNames[b.Layout]
	if unpermute {
		op, layout = "moe_unpermute", permuteLayoutNames[permuteGather]
	}
	return bench.Case{
		Name:  name,
		Bytes: bytes,
		Goal:  goal,
		New:   func(dev *cuda.Device, rng *rand.Rand) (bench.Instance, error) { return b.instance(dev, rng, unpermute) },
		Torch: &bench.TorchCase{Op: op, Args: map[string]any{
			"t": b.T, "e": b.E, "k": b.K, "h": b.H, "dtype": b.DT.String(), "layout": layout, "block": b.Block,
			"quant": b.Quant && !unpermute,
		}},
	}
}

// instance allocates one set of the case on dev: uniform routing, N(0, 1)
// rows, weights in [0, 1).
func (b permuteBench) instance(dev *cuda.Device, rng *rand.Rand, unpermute bool) (bench.Instance, error) {
	layout := b.Layout
	if unpermute {
		layout = permuteGather
	}
	idxv, posv, _ := permuteIndex(permuteRoute(rng, b.T, b.E, b.K, permuteUniform), b.E, layout, b.Block)
	p := len(idxv)
	var ts []*tensor.Tensor
	free := func() {
		for _, t := range ts {
			t.Free()
		}
	}
	add := func(t *tensor.Tensor, err error) *tensor.Tensor {
		if err == nil {
			ts = append(ts, t)
		}
		return t
	}
	var err error
	dev1 := func(t *tensor.Tensor) *tensor.Tensor {
		var d *tensor.Tensor
		if err == nil {
			d, err = t.ToDevice(dev)
		}
		return add(d, err)
	}
	rand2 := func(rows, h int) *tensor.Tensor {
		var d *tensor.Tensor
		if err == nil {
			d, err = tensor.RandDevice(dev, rng, b.DT, 0, 1, rows, h)
		}
		return add(d, err)
	}
	empty := func(dt tensor.DType, shape ...int) *tensor.Tensor {
		var d *tensor.Tensor
		if err == nil {
			d, err = tensor.Empty(dev, dt, shape...)
		}
		return add(d, err)
	}
	var run func(s *cuda.Stream) error
	if unpermute {
		w := tensor.New(tensor.F32, b.T, b.K)
		w.FillUniform(rng, 0, 1)
		y, pos, wd, out := rand2(p, b.H), dev1(permuteI32(posv, b.T*b.K)), dev1(w), empty(b.DT, b.T, b.H)
		run = func(s *cuda.Stream) error { return moe.Unpermute(s, out, y, pos, wd, b.K) }
	} else {
		outDT := b.DT
		if b.Quant {
			outDT = tensor.F8E4M3
		}
		x, idx, y := rand2(b.T, b.H), dev1(permuteI32(idxv, p)), empty(outDT, p, b.H)
		var scales *tensor.Tensor
		if b.Quant {
			scales = empty(tensor.F32, p)
		}
		run = func(s *cuda.Stream) error { return moe.Permute(s, y, scales, x, idx, b.K, moe.PermuteOptions{}) }
	}
	if err != nil {
		free()
		return bench.Instance{}, err
	}
	return bench.Instance{Run: run, Free: free}, nil
}
