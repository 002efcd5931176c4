package moe

import (
	"cmp"
	_ "embed"
	"fmt"
	"math"
	"slices"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

// Scoring is how TopK turns a token's router logits into expert scores.
type Scoring int

const (
	// Softmax scores are the probabilities softmax(logits) over the
	// token's experts (Mixtral, Qwen3-MoE, Qwen3-Next).
	Softmax Scoring = iota
	// Sigmoid scores are σ(logit) = 1/(1 + e^−logit), expert by expert
	// (DeepSeek-V3, Llama-4).
	Sigmoid
)

func (sc Scoring) String() string {
	switch sc {
	case Softmax:
		return "softmax"
	case Sigmoid:
		return "sigmoid"
	}
	return fmt.Sprintf("Scoring(%d)", int(sc))
}

// RouterOptions say how TopK scores and selects experts; see TopK.
type RouterOptions struct {
	// K is the number of experts each token takes: 1 ≤ K ≤ min(E, 32).
	K int
	// Scoring turns logits into scores (Softmax by default).
	Scoring Scoring
	// Bias, when set, is a per-expert correction, f32 [E], that selection
	// adds to the sigmoid scores; the weights are the scores without it
	// (DeepSeek-V3's e_score_correction_bias). Sigmoid scoring only.
	Bias *tensor.Tensor
	// Groups, when above 0, splits the E experts into that many groups of
	// E/Groups consecutive experts (at least two each) and selects from the
	// TopKGroups groups of highest group score only: the sum of the group's
	// two highest selection scores (DeepSeek-V3's n_group and topk_group).
	// Sigmoid scoring only; 1 ≤ TopKGroups ≤ Groups, and K may not exceed
	// the TopKGroups·E/Groups experts they hold.
	Groups, TopKGroups int
	// Renormalize divides each of a token's K weights by their sum plus
	// 1e-20 (which keeps a row of zero weights at zero).
	Renormalize bool
	// Scale multiplies every weight last (DeepSeek-V3's
	// routed_scaling_factor); 0 means 1. It must be finite.
	Scale float32
	// SharedExpert appends one more column to weights and ids: the shared
	// expert, id E, with weight 1 (Llama-4's fused shared expert).
	SharedExpert bool
}

// routerMaxE and routerMaxK bound E and K: a row of experts fits in the
// registers of one warp, 16 a lane, and the selection loop is unrolled up
// to K.
const (
	routerMaxE = 512
	routerMaxK = 32
)

//go:embed router.cu
var routerSrc string

// TopK routes each token to its K experts: from router logits [T, E] (f32,
// bf16 or f16, 1 ≤ E ≤ 512; the row stride may exceed E) it writes the
// experts' ids to ids [T, K] (i32) and their weights to weights [T, K]
// (f32), one row per token, in descending order of selection score. The
// routers of common models:
//
//	Mixtral, Qwen3-MoE:  RouterOptions{K: 2 or 8, Renormalize: true}
//	DeepSeek-V3:         RouterOptions{K: 8, Scoring: Sigmoid, Bias: b, Groups: 8, TopKGroups: 4,
//	                                   Renormalize: true, Scale: 2.5}
//	Llama-4:             RouterOptions{K: 1, Scoring: Sigmoid, SharedExpert: true}
//
// Scores and selection: with Softmax scoring the score of expert e is p_e
// = exp(x_e − m) / Σ_j exp(x_j − m), m the row's largest logit; softmax
// keeps the order of the logits, so selection ranks the experts by logit,
// exactly. With Sigmoid scoring the score is s_e = σ(x_e), and selection
// ranks by s_e + Bias[e] (by s_e without a Bias), computed in fp32 by one
// fixed sequence of correctly rounded operations, the same on the host and
// the device (σ within 3 units in the last place), so that the selection is
// exactly reproducible; logits whose σ rounds to the same fp32 value (all
// those above about 17, whose σ is 1) tie. With Groups, only the experts
// of the TopKGroups groups of highest group score (ranked as experts are,
// the lower group first among equal scores) are candidates. Among the
// candidates the K of highest selection score are taken, the lower id
// first among equal scores (−0 equal to +0). A NaN ranks below every
// number, −inf included, so a NaN logit (or bias) is selected only where
// fewer than K candidates have a number, and a group whose two best scores
// include a NaN scores NaN.
//
// Weights: each selected expert's score (without the bias), divided by the
// sum of the K scores plus 1e-20 with Renormalize, then multiplied by
// Scale, in fp32 on the device (float64 in the CPU reference), rounded once
// to f32. They follow IEEE arithmetic: one NaN logit makes the whole row's
// softmax NaN, as does +inf (inf − inf) or a row of −inf (0/0), and a
// selected NaN logit has a NaN sigmoid weight. With SharedExpert, weights
// and ids are [T, K+1] and column K holds the shared expert: id E, weight 1.
//
// Host tensors run the CPU reference, device tensors the kernel, on s
// (nil: the device's default stream). A device call allocates no memory
// and never waits for the device, so it can be captured in a CUDA graph
// (the first call of a kind builds its kernel; Prepare builds the common
// ones ahead). Bad arguments return a *tensor.ArgError before anything is
// written. T = 0 does nothing.
func TopK(s *cuda.Stream, weights, ids, logits *tensor.Tensor, o RouterOptions) error {
	if err := routerValidate(s, weights, ids, logits, o); err != nil {
		return err
	}
	if logits.Dim(0) == 0 {
		return nil
	}
	if !logits.IsDevice() {
		routerReference(weights, ids, logits, o)
		return nil
	}
	return routerLaunch(s, weights, ids, logits, o)
}

func routerValidate(s *cuda.Stream, weights, ids, logits *tensor.Tensor, o RouterOptions) error {
	v := tensor.Validate("moe.TopK")
	v.Tensor("logits", logits).Rank(2).DType(tensor.F32, tensor.BF16, tensor.F16)
	if err := v.Err(); err != nil {
		return err
	}
	t, e, k := logits.Dim(0), logits.Dim(1), o.K
	v.Check(e >= 1 && e <= routerMaxE, "logits", "has %d experts, want 1 to %d", e, routerMaxE)
	v.Check(t <= math.MaxInt32, "logits", "has %d rows, more than the kernel's %d", t, math.MaxInt32)
	v.Check(o.Scoring == Softmax || o.Scoring == Sigmoid, "Scoring", "is %v, want Softmax or Sigmoid", o.Scoring)
	v.Check(k >= 1, "K", "is %d, want K ≥ 1", k)
	v.Check(k <= e, "K", "is %d, more than the %d experts", k, e)
	v.Check(k <= routerMaxK, "K", "is %d, more than the largest supported K %d", k, routerMaxK)
	v.Check(!math.IsNaN(float64(o.Scale)) && !math.IsInf(float64(o.Scale), 0), "Scale", "is %v, want a finite value", o.Scale)
	if o.Bias != nil {
		v.Check(o.Scoring == Sigmoid, "Bias", "is set with %v scoring; a correction bias applies to sigmoid scores", o.Scoring)
		v.Tensor("Bias", o.Bias).Rank(1).Shape(e).DType(tensor.F32)
	}
	v.Check(o.Groups >= 0, "Groups", "is %d, want 0 (no groups) or more", o.Groups)
	if o.Groups == 0 {
		v.Check(o.TopKGroups == 0, "TopKGroups", "is %d without Groups", o.TopKGroups)
	} else {
		v.Check(o.Scoring == Sigmoid, "Groups", "is set with %v scoring; grouped selection takes sigmoid scores", o.Scoring)
		v.Check(e%o.Groups == 0, "Groups", "is %d, which does not divide the %d experts", o.Groups, e)
		v.Check(e/o.Groups >= 2, "Groups", "is %d, which leaves fewer than 2 of the %d experts a group", o.Groups, e)
		v.Check(o.TopKGroups >= 1 && o.TopKGroups <= o.Groups, "TopKGroups", "is %d, want 1 to Groups = %d", o.TopKGroups, o.Groups)
		if v.Err() == nil {
			v.Check(k <= o.TopKGroups*(e/o.Groups), "K", "is %d, more than the %d experts of TopKGroups = %d groups", k, o.TopKGroups*(e/o.Groups), o.TopKGroups)
		}
	}
	if err := v.Err(); err != nil {
		return err
	}
	cols := k
	if o.SharedExpert {
		cols++
	}
	v.Tensor("weights", weights).Rank(2).Shape(t, cols).DType(tensor.F32)
	v.Tensor("ids", ids).Rank(2).Shape(t, cols).DType(tensor.I32)
	if err := v.Err(); err != nil {
		return err
	}
	v.SameLocation(s, []string{"logits", "weights", "ids", "Bias"}, logits, weights, ids, o.Bias)
	v.NoOverlap("weights", weights, "logits", logits)
	v.NoOverlap("ids", ids, "logits", logits)
	v.NoOverlap("ids", ids, "weights", weights)
	v.NoOverlap("weights", weights, "Bias", o.Bias)
	v.NoOverlap("ids", ids, "Bias", o.Bias)
	return v.Err()
}

// The deterministic fp32 sigmoid of selection. Every step is one correctly
// rounded fp32 operation, written out (no fused multiply-add), so the host
// and the device (router.cu's router_exp and router_sigmoid, whose
// constants are these bits) compute the same bits.
const (
	routerLog2E = 0x3fb8aa3b // log2(e)
	routerLn2Hi = 0x3f317200 // ln 2 to 15 significant bits: n·routerLn2Hi is exact for |n| < 512
	routerLn2Lo = 0x35bfbe8e // ln 2 − routerLn2Hi
)

// routerExpPoly is e^r's Taylor polynomial of degree 7, highest first
// (1/7!, 1/6!, ..., 1, 1): within 1e-8 relative on |r| ≤ ln(2)/2.
var routerExpPoly = [8]uint32{0x39500d01, 0x3ab60b61, 0x3c088889, 0x3d2aaaab, 0x3e2aaaab, 0x3f000000, 0x3f800000, 0x3f800000}

func routerF(bits uint32) float32 { return math.Float32frombits(bits) }

// routerExp is e^y in fp32: y = n·ln 2 + r with n = rint(y·log2 e) (y
// clamped to [−104, 89] first, past which e^y is 0 or +inf in fp32), e^r
// from the polynomial, then two exact scalings by powers of two. The
// explicit float32 conversions keep each product from fusing with an add.
func routerExp(y float32) float32 {
	if y != y {
		return y
	}
	y = min(max(y, -104), 89)
	n := float32(math.RoundToEven(float64(float32(y * routerF(routerLog2E)))))
	r := float32(y-float32(n*routerF(routerLn2Hi))) - float32(n*routerF(routerLn2Lo))
	p := routerF(routerExpPoly[0])
	for _, c := range routerExpPoly[1:] {
		p = float32(p*r) + routerF(c)
	}
	ni := int32(n)
	h := ni / 2
	a, b := math.Float32frombits(uint32(h+127)<<23), math.Float32frombits(uint32(ni-h+127)<<23)
	return float32(p*a) * b
}

// routerSigmoid is σ(x) in fp32, as selection computes it: from t =
// e^−|x|, 1/(1 + t) for x ≥ 0 and t/(1 + t) below, which keeps its relative
// accuracy where σ is subnormal.
func routerSigmoid(x float32) float32 {
	t := routerExp(-float32(math.Abs(float64(x))))
	if x >= 0 {
		return 1 / (1 + t)
	}
	return t / (1 + t)
}

// routerOrder maps a selection score to a key whose unsigned order is the
// selection's: NaN lowest (0), then −inf up to +inf, −0 equal to +0.
func routerOrder(f float32) uint32 {
	u := math.Float32bits(f)
	switch {
	case u&0x7fffffff > 0x7f800000:
		return 0
	case u == 0x80000000:
		u = 0
	}
	if u&0x80000000 != 0 {
		return ^u
	}
	return u ^ 0x80000000
}

// routerRank orders candidates as selection takes them: higher score
// first, then lower index.
func routerRank(ka, kb float32, ia, ib int) int {
	if c := cmp.Compare(routerOrder(kb), routerOrder(ka)); c != 0 {
		return c
	}
	return cmp.Compare(ia, ib)
}

// routerReference is the CPU TopK: selection scores in fp32 as documented,
// weights in float64, rounded once to f32.
func routerReference(weights, ids, logits *tensor.Tensor, o RouterOptions) {
	t, e, k := logits.Dim(0), logits.Dim(1), o.K
	x := logits.Float64s()
	var bias []float64
	if o.Bias != nil {
		bias = o.Bias.Float64s()
	}
	scale := 1.0
	if o.Scale != 0 {
		scale = float64(o.Scale)
	}
	cols := k
	if o.SharedExpert {
		cols++
	}
	outW, outID := make([]float64, 0, t*cols), make([]int64, 0, t*cols)
	key, score := make([]float32, e), make([]float64, e)
	cand := make([]int, 0, e)
	for r := range t {
		row := x[r*e : (r+1)*e]
		switch o.Scoring {
		case Softmax:
			m := math.Inf(-1)
			for _, v := range row {
				if v > m {
					m = v
				}
			}
			sum := 0.0
			for j, v := range row {
				score[j] = math.Exp(v - m)
				sum += score[j]
				key[j] = float32(v)
			}
			for j := range score {
				score[j] /= sum
			}
		case Sigmoid:
			for j, v := range row {
				score[j] = 1 / (1 + math.Exp(-v))
				key[j] = routerSigmoid(float32(v))
				if bias != nil {
					key[j] += float32(bias[j])
				}
			}
		}
		cand = cand[:0]
		if o.Groups == 0 {
			for j := range e {
				cand = append(cand, j)
			}
		} else {
			cand = routerGroups(cand, key, o.Groups, o.TopKGroups)
		}
		slices.SortFunc(cand, func(a, b int) int { return routerRank(key[a], key[b], a, b) })
		sum := 0.0
		for _, j := range cand[:k] {
			sum += score[j]
		}
		div := 1.0
		if o.Renormalize {
			div = sum + 1e-20
		}
		for _, j := range cand[:k] {
			outW = append(outW, score[j]/div*scale)
			outID = append(outID, int64(j))
		}
		if o.SharedExpert {
			outW = append(outW, 1)
			outID = append(outID, int64(e))
		}
	}
	weights.SetFloat64s(outW)
	ids.SetInt64s(outID)
}

// routerGroups appends to cand the experts of the kept groups, in order:
// the kept groups are the kgroups of highest group score, the fp32 sum of
// a group's two highest keys, ranked as experts are.
func routerGroups(cand []int, key []float32, groups, kgroups int) []int {
	size := len(key) / groups
	gscore := make([]float32, groups)
	order := make([]int, groups)
	best := make([]int, size)
	for g := range groups {
		for j := range best {
			best[j] = g*size + j
		}
		slices.SortFunc(best, func(a, b int) int { return routerRank(key[a], key[b], a, b) })
		gscore[g] = key[best[0]] + key[best[1]]
		order[g] = g
	}
	slices.SortFunc(order, func(a, b int) int { return routerRank(gscore[a], gscore[b], a, b) })
	kept := order[:kgroups]
	slices.Sort(kept)
	for _, g := range kept {
		for j := range size {
			cand = append(cand, g*size+j)
		}
	}
	return cand
}

// routerConfig is the picker's choice for one call: each row of E experts
// is held by Lanes lanes (a power of two ≤ 32) of a warp, lane l holding
// Chunks chunks of Vec consecutive experts at (c·Lanes + l)·Vec; the
// selection loop is unrolled to KCap ≥ K.
type routerConfig struct {
	Vec, Lanes, Chunks, KCap int
}

// routerThreads is the router kernel's block size (ROWS = routerThreads /
// Lanes rows a block).
const routerThreads = 128

// routerSlots is the most experts a lane holds: few enough to stay in
// registers (two 16-element arrays), many enough that a row of 512 fits a
// warp and small rows share one.
const routerSlots = 16

// pickRouter chooses the layout for rows of e experts of dtype dt and k
// selections; aligned says whether every row starts on a 16-byte boundary
// (then experts load as vectors of up to 16 bytes).
func pickRouter(e, k int, dt tensor.DType, aligned bool) routerConfig {
	vec := 1
	if aligned {
		vec = 16 / dt.Size()
	}
	lanes := min(32, intmath.NextPow2(intmath.CeilDiv(e, routerSlots)))
	vec = min(vec, intmath.PrevPow2(intmath.CeilDiv(e, lanes)))
	return routerConfig{Vec: vec, Lanes: lanes, Chunks: intmath.CeilDiv(e, lanes*vec), KCap: intmath.NextPow2(k)}
}

// routerKey is one specialization of router.cu.
type routerKey struct {
	dt                       tensor.DType
	vec, lanes, chunks, kcap int
	sigmoid, bias, grouped   bool
}

// key is the specialization of c for logits of dtype dt, scored by
// sigmoid or softmax, with or without a bias and groups.
func (c routerConfig) key(dt tensor.DType, sigmoid, bias, grouped bool) routerKey {
	return routerKey{dt, c.Vec, c.Lanes, c.Chunks, c.KCap, sigmoid, bias, grouped}
}

var routerFuncs = jit.Funcs[routerKey]{Kernel: func(k routerKey) jit.Kernel {
	return jit.Kernel{File: "moe/router.cu", Source: routerSrc, Entry: "moe_router", Defines: jit.Defines(map[string]any{
		"DTYPE": k.dt, "VEC": k.vec, "LANES": k.lanes, "CHUNKS": k.chunks, "KCAP": k.kcap, "THREADS": routerThreads,
		"SIGMOID": k.sigmoid, "BIAS": k.bias, "GROUPED": k.grouped,
	})}
}}

// routerPrepared are the router calls Prepare compiles, in every logits
// dtype on aligned rows: Mixtral, Qwen3-30B-A3B, Qwen3-Next, DeepSeek-V3
// and Llama-4 (Scout and Maverick).
var routerPrepared = []struct {
	e, k                   int
	sigmoid, bias, grouped bool
}{
	{8, 2, false, false, false},
	{128, 8, false, false, false},
	{512, 10, false, false, false},
	{256, 8, true, true, true},
	{16, 1, true, false, false},
	{128, 1, true, false, false},
}

// preparedRouter lists the kernels of routerPrepared.
func preparedRouter(cuda.Props) []jit.Kernel {
	var ks []jit.Kernel
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16, tensor.F32} {
		for _, c := range routerPrepared {
			ks = append(ks, routerFuncs.Kernel(pickRouter(c.e, c.k, dt, true).key(dt, c.sigmoid, c.bias, c.grouped)))
		}
	}
	return ks
}

// routerAligned reports whether every row of x starts on a 16-byte
// boundary.
func routerAligned(x *tensor.Tensor) bool {
	size := x.DType().Size()
	return uint64(x.Ptr())%16 == 0 && (x.Dim(0) <= 1 || x.Stride(0)*size%16 == 0)
}

func routerLaunch(s *cuda.Stream, weights, ids, logits *tensor.Tensor, o RouterOptions) error {
	dev := logits.Device()
	if s == nil {
		s = dev.DefaultStream()
	}
	t, e := logits.Dim(0), logits.Dim(1)
	c := pickRouter(e, o.K, logits.DType(), routerAligned(logits))
	fn, err := routerFuncs.Get(dev, s, c.key(logits.DType(), o.Scoring == Sigmoid, o.Bias != nil, o.Groups > 0))
	if err != nil {
		return err
	}
	rows := routerThreads / c.Lanes
	var bias cuda.DevicePtr
	if o.Bias != nil {
		bias = o.Bias.Ptr()
	}
	size, groups, kgroups := e, 1, 1
	if o.Groups > 0 {
		size, groups, kgroups = e/o.Groups, o.Groups, o.TopKGroups
	}
	scale := o.Scale
	if scale == 0 {
		scale = 1
	}
	var flags int32 // router.cu's FLAG_RENORM and FLAG_SHARED
	if o.Renormalize {
		flags |= 1
	}
	if o.SharedExpert {
		flags |= 2
	}
	a := cuda.NewArgs().Ptr(logits.Ptr()).I64(int64(logits.Stride(0))).Ptr(bias).
		Ptr(weights.Ptr()).I64(int64(weights.Stride(0))).Ptr(ids.Ptr()).I64(int64(ids.Stride(0))).
		I32(int32(t)).I32(int32(e)).I32(int32(o.K)).I32(int32(size)).I32(int32(groups)).I32(int32(kgroups)).
		F32(scale).I32(flags)
	cfg := cuda.LaunchConfig{Grid: cuda.D1(intmath.CeilDiv(t, rows)), Block: cuda.D1(routerThreads), Stream: s}
	return fn.Launch(cfg, a)
}
