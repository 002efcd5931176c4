package moe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/fuzzargs"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

// routerPoisoned reports whether every byte of t is still 0xFF.
func routerPoisoned(t *tensor.Tensor) bool {
	return !slices.ContainsFunc(t.Bytes(), func(b byte) bool { return b != 0xFF })
}

// TestRouterValidation: each bad argument is a *tensor.ArgError naming it,
// and nothing is written.
func TestRouterValidation(t *testing.T) {
	type args struct {
		weights, ids, logits *tensor.Tensor
		o                    RouterOptions
	}
	const tok, e, k = 4, 64, 6
	good := func() args {
		return args{tensor.New(tensor.F32, tok, k), tensor.New(tensor.I32, tok, k),
			tensor.Rand(tensor.SeededRNG(1), tensor.BF16, 1, tok, e), RouterOptions{K: k}}
	}
	outs := func(a *args, cols int) {
		a.weights, a.ids = tensor.New(tensor.F32, tok, cols), tensor.New(tensor.I32, tok, cols)
	}
	grouped := func(a *args) { a.o.Scoring, a.o.Groups, a.o.TopKGroups = Sigmoid, 8, 2 }
	cases := []struct {
		name, arg string
		edit      func(a *args)
	}{
		{"K zero", "K", func(a *args) { a.o.K = 0; outs(a, 0) }},
		{"K negative", "K", func(a *args) { a.o.K = -1 }},
		{"K above E", "K", func(a *args) {
			a.logits = tensor.Rand(tensor.SeededRNG(2), tensor.F32, 1, tok, 8)
			a.o.K = 9
			outs(a, 9)
		}},
		{"K above 32", "K", func(a *args) { a.o.K = 33; outs(a, 33) }},
		{"logits nil", "logits", func(a *args) { a.logits = nil }},
		{"logits rank 3", "logits", func(a *args) { a.logits = tensor.New(tensor.BF16, 1, tok, e) }},
		{"logits dtype i32", "logits", func(a *args) { a.logits = tensor.New(tensor.I32, tok, e) }},
		{"logits dtype fp8", "logits", func(a *args) { a.logits = tensor.New(tensor.F8E4M3, tok, e) }},
		{"more than 512 experts", "logits", func(a *args) { a.logits = tensor.New(tensor.BF16, tok, 513) }},
		{"no experts", "logits", func(a *args) { a.logits = tensor.New(tensor.BF16, tok, 0) }},
		{"Scoring unknown", "Scoring", func(a *args) { a.o.Scoring = Scoring(2) }},
		{"Scale NaN", "Scale", func(a *args) { a.o.Scale = float32(math.NaN()) }},
		{"Scale inf", "Scale", func(a *args) { a.o.Scale = float32(math.Inf(-1)) }},
		{"Bias with softmax", "Bias", func(a *args) { a.o.Bias = tensor.New(tensor.F32, e) }},
		{"Bias shape", "Bias", func(a *args) { a.o.Scoring, a.o.Bias = Sigmoid, tensor.New(tensor.F32, e-1) }},
		{"Bias rank 2", "Bias", func(a *args) { a.o.Scoring, a.o.Bias = Sigmoid, tensor.New(tensor.F32, 1, e) }},
		{"Bias dtype bf16", "Bias", func(a *args) { a.o.Scoring, a.o.Bias = Sigmoid, tensor.New(tensor.BF16, e) }},
		{"Groups negative", "Groups", func(a *args) { a.o.Scoring, a.o.Groups = Sigmoid, -1 }},
		{"TopKGroups without Groups", "TopKGroups", func(a *args) { a.o.Scoring, a.o.TopKGroups = Sigmoid, 2 }},
		{"Groups with softmax", "Groups", func(a *args) { grouped(a); a.o.Scoring = Softmax }},
		{"Groups not dividing E", "Groups", func(a *args) { grouped(a); a.o.Groups = 5 }},
		{"groups of one expert", "Groups", func(a *args) { grouped(a); a.o.Groups = e }},
		{"TopKGroups above Groups", "TopKGroups", func(a *args) { grouped(a); a.o.TopKGroups = 9 }},
		{"TopKGroups zero", "TopKGroups", func(a *args) { grouped(a); a.o.TopKGroups = 0 }},
		{"K above the kept groups' experts", "K", func(a *args) {
			grouped(a)
			a.o.TopKGroups, a.o.K = 1, 9
			outs(a, 9)
		}},
		{"weights nil", "weights", func(a *args) { a.weights = nil }},
		{"weights short rows", "weights", func(a *args) { a.weights = tensor.New(tensor.F32, tok, k-1) }},
		{"weights too few rows", "weights", func(a *args) { a.weights = tensor.New(tensor.F32, tok-1, k) }},
		{"weights dtype bf16", "weights", func(a *args) { a.weights = tensor.New(tensor.BF16, tok, k) }},
		{"weights without the shared column", "weights", func(a *args) { a.o.SharedExpert = true }},
		{"ids nil", "ids", func(a *args) { a.ids = nil }},
		{"ids dtype i64", "ids", func(a *args) { a.ids = tensor.New(tensor.I64, tok, k) }},
		{"ids dtype f32", "ids", func(a *args) { a.ids = tensor.New(tensor.F32, tok, k) }},
		{"ids short rows", "ids", func(a *args) { a.ids = tensor.New(tensor.I32, tok, k-1) }},
		{"ids rank 1", "ids", func(a *args) { a.ids = tensor.New(tensor.I32, tok*k) }},
		{"weights overlap logits", "weights", func(a *args) {
			a.logits = tensor.Rand(tensor.SeededRNG(3), tensor.F32, 1, tok, e)
			a.weights, _ = a.logits.View(tensor.F32, []int{tok, k}, []int{e, 1})
		}},
		{"ids overlap weights", "ids", func(a *args) { a.ids, _ = a.weights.View(tensor.I32, []int{tok, k}, []int{k, 1}) }},
		{"weights overlap Bias", "weights", func(a *args) {
			a.o.Scoring, a.o.Bias = Sigmoid, tensor.New(tensor.F32, e)
			a.weights, _ = a.o.Bias.View(tensor.F32, []int{tok, k}, []int{k, 1})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := good()
			c.edit(&a)
			var before []byte
			if a.logits != nil {
				before = slices.Clone(a.logits.Bytes())
			}
			for _, o := range []*tensor.Tensor{a.weights, a.ids} {
				if o != nil && !tensor.Overlap(o, a.logits) && !tensor.Overlap(o, a.o.Bias) {
					o.Poison()
				}
			}
			err := TopK(nil, a.weights, a.ids, a.logits, a.o)
			var ae *tensor.ArgError
			if !errors.As(err, &ae) || ae.Arg != c.arg {
				t.Fatalf("got %v, want an ArgError on %s", err, c.arg)
			}
			if !strings.HasPrefix(err.Error(), "moe.TopK: argument "+c.arg+": ") {
				t.Errorf("error %q", err)
			}
			for _, o := range []*tensor.Tensor{a.weights, a.ids} {
				if o != nil && !tensor.Overlap(o, a.logits) && !tensor.Overlap(o, a.o.Bias) && !routerPoisoned(o) {
					t.Errorf("an output was written: %v", err)
				}
			}
			if a.logits != nil && !slices.Equal(before, a.logits.Bytes()) {
				t.Errorf("logits were written: %v", err)
			}
		})
	}
}

// TestRouterZeroTokens: T = 0 writes nothing and succeeds, after the same
// validation.
func TestRouterZeroTokens(t *testing.T) {
	w, ids, x := tensor.New(tensor.F32, 0, 8), tensor.New(tensor.I32, 0, 8), tensor.New(tensor.BF16, 0, 256)
	o := RouterOptions{K: 8, Scoring: Sigmoid, Groups: 8, TopKGroups: 4}
	if err := TopK(nil, w, ids, x, o); err != nil {
		t.Fatal(err)
	}
	o.TopKGroups = 9
	if err := TopK(nil, w, ids, x, o); err == nil {
		t.Error("TopKGroups > Groups accepted with zero tokens")
	}
}

// routerRun calls TopK on the host with logits row (one token, f32) and
// returns its ids and weights.
func routerRun(t *testing.T, row, bias []float64, o RouterOptions) ([]int64, []float64) {
	t.Helper()
	x := tensor.New(tensor.F32, 1, len(row))
	x.SetFloat64s(row)
	if bias != nil {
		o.Bias = tensor.New(tensor.F32, len(bias))
		o.Bias.SetFloat64s(bias)
	}
	cols := o.K
	if o.SharedExpert {
		cols++
	}
	w, ids := tensor.New(tensor.F32, 1, cols), tensor.New(tensor.I32, 1, cols)
	if err := TopK(nil, w, ids, x, o); err != nil {
		t.Fatal(err)
	}
	return ids.Int64s(), w.Float64s()
}

// TestRouterReference checks the CPU reference on hand-computed tokens.
func TestRouterReference(t *testing.T) {
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	e1, e2, e3 := math.E, math.Exp(2), math.Exp(3)
	inf, negZero := math.Inf(1), math.Copysign(0, -1)
	cases := []struct {
		name      string
		row, bias []float64
		o         RouterOptions
		ids       []int64
		w         []float64
	}{
		{"softmax, ties to the lower id", []float64{1, 3, 3, 2}, nil, RouterOptions{K: 3},
			[]int64{1, 2, 3}, []float64{e3 / (e1 + 2*e3 + e2), e3 / (e1 + 2*e3 + e2), e2 / (e1 + 2*e3 + e2)}},
		{"softmax renormalized and scaled", []float64{1, 3, 3, 2}, nil, RouterOptions{K: 2, Renormalize: true, Scale: 3},
			[]int64{1, 2}, []float64{1.5, 1.5}},
		{"−0 ties +0", []float64{negZero, 0, -1}, nil, RouterOptions{K: 2},
			[]int64{0, 1}, []float64{1 / (2 + 1/e1), 1 / (2 + 1/e1)}},
		{"sigmoid: the bias selects, the weights go without it", []float64{0, 0, 1, -1}, []float64{0.3, 0, 0, 0.6},
			RouterOptions{K: 2, Scoring: Sigmoid}, []int64{3, 0}, []float64{sig(-1), 0.5}},
		{"sigmoid renormalized and scaled", []float64{0, 0, 1, -1}, []float64{0.3, 0, 0, 0.6},
			RouterOptions{K: 2, Scoring: Sigmoid, Renormalize: true, Scale: 2},
			[]int64{3, 0}, []float64{2 * sig(-1) / (sig(-1) + 0.5), 2 * 0.5 / (sig(-1) + 0.5)}},
		// Group scores 1.0, 1.76, 1.0, 1.55: groups 1 and 3 are kept, and
		// expert 0, the best alone, is not a candidate.
		{"groups", []float64{5, -5, 2, 2, 3, -3, 1, 1.5}, nil,
			RouterOptions{K: 3, Scoring: Sigmoid, Groups: 4, TopKGroups: 2}, []int64{2, 3, 7}, []float64{sig(2), sig(2), sig(1.5)}},
		// Groups 0 and 2 both score 2 (biased scores 0.5 + 1.5 and 1 + 1):
		// the lower is kept.
		{"groups with bias", []float64{0, 0, 0, 0, 0, 0}, []float64{0, 1, 0.25, 0, 0.5, 0.5},
			RouterOptions{K: 2, Scoring: Sigmoid, Groups: 3, TopKGroups: 1}, []int64{1, 0}, []float64{0.5, 0.5}},
		{"groups: equal group scores keep the lower group", []float64{1, 1, 1, 1, 1, 1}, nil,
			RouterOptions{K: 2, Scoring: Sigmoid, Groups: 3, TopKGroups: 1}, []int64{0, 1}, []float64{sig(1), sig(1)}},
		{"shared expert", []float64{0, 2, 2, 1}, nil, RouterOptions{K: 1, Scoring: Sigmoid, SharedExpert: true},
			[]int64{1, 4}, []float64{sig(2), 1}},
		// σ(20) and σ(30) are both 1 in fp32: a tie, to the lower id.
		{"sigmoid top-1 saturated: ties", []float64{20, 30}, nil, RouterOptions{K: 1, Scoring: Sigmoid}, []int64{0}, []float64{1}},
		{"softmax: +inf makes the row NaN", []float64{0, inf, 1}, nil, RouterOptions{K: 2},
			[]int64{1, 2}, []float64{math.NaN(), math.NaN()}},
		{"softmax: a row of −inf is NaN", []float64{-inf, -inf, -inf}, nil, RouterOptions{K: 2},
			[]int64{0, 1}, []float64{math.NaN(), math.NaN()}},
		{"sigmoid: ±inf", []float64{-inf, inf, 0}, nil, RouterOptions{K: 3, Scoring: Sigmoid},
			[]int64{1, 2, 0}, []float64{1, 0.5, 0}},
		{"sigmoid renormalized: zero weights stay zero", []float64{-inf, -inf}, nil,
			RouterOptions{K: 2, Scoring: Sigmoid, Renormalize: true}, []int64{0, 1}, []float64{0, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ids, w := routerRun(t, c.row, c.bias, c.o)
			if !slices.Equal(ids, c.ids) {
				t.Fatalf("ids %v, want %v", ids, c.ids)
			}
			for i := range w {
				if !routerClose(w[i], c.w[i]) {
					t.Fatalf("weights %v, want %v", w, c.w)
				}
			}
		})
	}
}

// routerClose reports whether got is want rounded to f32, or both are NaN.
func routerClose(got, want float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(got)
	}
	return math.Abs(got-want) <= 1e-6*math.Abs(want)
}

// TestRouterNaN pins the documented NaN behaviour: a NaN logit (or bias)
// ranks below every number, −inf included, so it is taken only when fewer
// than K experts have a number; in a group's top two it makes the group's
// score NaN; softmax weights of a row with a NaN are NaN, and a NaN's
// sigmoid weight is NaN.
func TestRouterNaN(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	cases := []struct {
		name      string
		row, bias []float64
		o         RouterOptions
		ids       []int64
		w         []float64
	}{
		{"softmax: NaN after −inf", []float64{nan, -inf, 1, nan}, nil, RouterOptions{K: 2}, []int64{2, 1}, []float64{nan, nan}},
		{"softmax: NaNs last, lower id first", []float64{nan, -inf, 1, nan}, nil, RouterOptions{K: 4}, []int64{2, 1, 0, 3}, []float64{nan, nan, nan, nan}},
		{"softmax: a row of NaN", []float64{nan, nan, nan}, nil, RouterOptions{K: 2}, []int64{0, 1}, []float64{nan, nan}},
		{"sigmoid: NaN after −inf", []float64{nan, -inf, 2}, nil, RouterOptions{K: 3, Scoring: Sigmoid}, []int64{2, 1, 0}, []float64{sig(2), 0, nan}},
		{"sigmoid: a NaN bias", []float64{3, 0, 1}, []float64{nan, 0, 0}, RouterOptions{K: 2, Scoring: Sigmoid}, []int64{2, 1}, []float64{sig(1), 0.5}},
		// Group 0's top two hold a NaN, so group 1 (score 2σ(−9)) is kept.
		{"groups: a NaN group loses", []float64{nan, 5, -9, -9}, nil, RouterOptions{K: 2, Scoring: Sigmoid, Groups: 2, TopKGroups: 1},
			[]int64{2, 3}, []float64{sig(-9), sig(-9)}},
		{"renormalized with a NaN taken", []float64{nan, 1}, nil, RouterOptions{K: 2, Scoring: Sigmoid, Renormalize: true}, []int64{1, 0}, []float64{nan, nan}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ids, w := routerRun(t, c.row, c.bias, c.o)
			if !slices.Equal(ids, c.ids) {
				t.Fatalf("ids %v, want %v", ids, c.ids)
			}
			for i := range w {
				if !routerClose(w[i], c.w[i]) {
					t.Fatalf("weights %v, want %v", w, c.w)
				}
			}
		})
	}
}

// routerULPs is |got − want| in units of the fp32 spacing at want.
func routerULPs(got float32, want float64) float64 {
	w := float32(want)
	if math.IsInf(float64(w), 0) || w == 0 {
		if float64(got) == float64(w) {
			return 0
		}
	}
	step := float64(math.Nextafter32(w, float32(math.Inf(1))) - w)
	if math.IsInf(step, 0) {
		step = float64(w - math.Nextafter32(w, 0))
	}
	return math.Abs(float64(got)-want) / step
}

// TestRouterExp: selection's fp32 exp and sigmoid stay within 1.5 and 3
// units in the last place over every fp32 input that is a multiple of a
// sampling step (subnormal results included), and take ±inf and NaN as
// documented.
func TestRouterExp(t *testing.T) {
	var worstExp, worstSig float64
	for b := uint64(0); b < 1<<32; b += 4093 {
		x := math.Float32frombits(uint32(b))
		if x != x || math.Abs(float64(x)) > 120 {
			continue
		}
		worstExp = max(worstExp, routerULPs(routerExp(x), math.Exp(float64(x))))
		worstSig = max(worstSig, routerULPs(routerSigmoid(x), 1/(1+math.Exp(-float64(x)))))
	}
	if worstExp > 1.5 || worstSig > 3 {
		t.Errorf("exp within %.2f units in the last place, sigmoid within %.2f; want 1.5 and 3", worstExp, worstSig)
	}
	inf := float32(math.Inf(1))
	for _, c := range []struct{ x, exp, sig float32 }{{inf, inf, 1}, {-inf, 0, 0}, {0, 1, 0.5}, {float32(math.Copysign(0, -1)), 1, 0.5}, {100, inf, 1}, {-200, 0, 0}} {
		if e, s := routerExp(c.x), routerSigmoid(c.x); e != c.exp || s != c.sig {
			t.Errorf("x = %v: exp %v, sigmoid %v; want %v and %v", c.x, e, s, c.exp, c.sig)
		}
	}
	if nan := float32(math.NaN()); routerExp(nan) == routerExp(nan) || routerSigmoid(nan) == routerSigmoid(nan) {
		t.Error("NaN in, a number out")
	}
}

// TestRouterSameConstants: router.cu's exp uses the very bits of the Go
// reference's constants, so the two compute the same selection scores.
func TestRouterSameConstants(t *testing.T) {
	for _, c := range append([]uint32{routerLog2E, routerLn2Hi, routerLn2Lo}, routerExpPoly[:]...) {
		if want := fmt.Sprintf("router_f(0x%08xu)", c); !strings.Contains(routerSrc, want) {
			t.Errorf("router.cu has no %s", want)
		}
	}
	for i, c := range routerExpPoly[:6] {
		if want := float32(1 / math.Gamma(float64(8-i))); math.Float32bits(want) != c {
			t.Errorf("coefficient %d: bits %#x, want %#x (1/%d!)", i, c, math.Float32bits(want), 7-i)
		}
	}
}

// TestPickRouter: layouts of the models' shapes.
func TestPickRouter(t *testing.T) {
	cases := []struct {
		e, k    int
		dt      tensor.DType
		aligned bool
		want    routerConfig
	}{
		{8, 2, tensor.BF16, true, routerConfig{Vec: 8, Lanes: 1, Chunks: 1, KCap: 2}},
		{8, 2, tensor.F32, true, routerConfig{Vec: 4, Lanes: 1, Chunks: 2, KCap: 2}},
		{16, 1, tensor.BF16, true, routerConfig{Vec: 8, Lanes: 1, Chunks: 2, KCap: 1}},
		{128, 8, tensor.BF16, true, routerConfig{Vec: 8, Lanes: 8, Chunks: 2, KCap: 8}},
		{256, 8, tensor.F32, true, routerConfig{Vec: 4, Lanes: 16, Chunks: 4, KCap: 8}},
		{384, 22, tensor.BF16, true, routerConfig{Vec: 8, Lanes: 32, Chunks: 2, KCap: 32}},
		{512, 10, tensor.BF16, true, routerConfig{Vec: 8, Lanes: 32, Chunks: 2, KCap: 16}},
		{512, 10, tensor.F16, false, routerConfig{Vec: 1, Lanes: 32, Chunks: 16, KCap: 16}},
		{5, 3, tensor.F16, true, routerConfig{Vec: 4, Lanes: 1, Chunks: 2, KCap: 4}},
	}
	for _, c := range cases {
		if got := pickRouter(c.e, c.k, c.dt, c.aligned); got != c.want {
			t.Errorf("E=%d k=%d %v aligned=%v: %+v, want %+v", c.e, c.k, c.dt, c.aligned, got, c.want)
		}
	}
}

// TestPickRouterInvariants sweeps E, k, dtypes and alignment for what
// router.cu relies on: a row fits its lanes, at most routerSlots experts a
// lane, whole vectors of at most 16 bytes, KCap a power of two ≥ k, and the
// grouped kernel's static shared memory within the 48 KiB every device
// gives a block.
func TestPickRouterInvariants(t *testing.T) {
	for e := 1; e <= routerMaxE; e++ {
		for _, k := range []int{1, 2, 3, 8, 10, 22, 32} {
			if k > e {
				continue
			}
			for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
				for _, al := range []bool{false, true} {
					c := pickRouter(e, k, dt, al)
					slots := c.Chunks * c.Vec
					shared := routerThreads / c.Lanes * (c.Lanes*slots*4 + max(1, c.Lanes*slots/2))
					ok := c.Lanes >= 1 && c.Lanes <= 32 && c.Lanes&(c.Lanes-1) == 0 && routerThreads%c.Lanes == 0 &&
						c.Vec >= 1 && c.Vec&(c.Vec-1) == 0 && c.Vec*dt.Size() <= 16 && (al || c.Vec == 1) &&
						c.Lanes*slots >= e && slots <= routerSlots &&
						c.KCap >= k && c.KCap <= routerMaxK && c.KCap&(c.KCap-1) == 0 && shared <= 48<<10
					if !ok {
						t.Fatalf("E=%d k=%d %v aligned=%v: bad config %+v", e, k, dt, al, c)
					}
				}
			}
		}
	}
}

// routerCompileKeys are the specializations the picker yields over the
// parity cases' and models' shapes, every dtype, aligned or not, every
// scoring, plus those Prepare compiles.
func routerCompileKeys() []routerKey {
	seen := map[routerKey]bool{}
	var keys []routerKey
	add := func(k routerKey) {
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
		for _, c := range routerPrepared {
			add(pickRouter(c.e, c.k, dt, true).key(dt, c.sigmoid, c.bias, c.grouped))
		}
		for _, e := range []int{5, 8, 12, 16, 64, 100, 128, 256, 384, 512} {
			for _, k := range []int{1, 2, 8, 22} {
				for _, al := range []bool{true, false} {
					if k > e || (!al && e != 100 && e != 256 && e != 512) {
						continue
					}
					c := pickRouter(e, k, dt, al)
					add(c.key(dt, false, false, false))
					add(c.key(dt, true, true, true))
					if e == 8 || e == 100 || e == 512 {
						add(c.key(dt, true, false, false))
						add(c.key(dt, true, true, false))
						add(c.key(dt, true, false, true))
					}
				}
			}
		}
	}
	return keys
}

// TestRouterKernelsCompile compiles routerCompileKeys with NVRTC alone
// (see gputest.CompileAll).
func TestRouterKernelsCompile(t *testing.T) {
	var ks []jit.Kernel
	for _, k := range routerCompileKeys() {
		ks = append(ks, routerFuncs.Kernel(k))
	}
	gputest.CompileAll(t, ks)
}

// TestRouterDeviceMix needs a GPU: device logits with host outputs are
// refused, and nothing is written.
func TestRouterDeviceMix(t *testing.T) {
	dev := gputest.Device(t)
	x, err := tensor.Rand(tensor.SeededRNG(4), tensor.BF16, 1, 4, 64).ToDevice(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Free()
	w, ids := tensor.New(tensor.F32, 4, 2), tensor.New(tensor.I32, 4, 2)
	w.Poison()
	ids.Poison()
	var ae *tensor.ArgError
	if err := TopK(nil, w, ids, x, RouterOptions{K: 2}); !errors.As(err, &ae) || ae.Arg != "weights" {
		t.Fatalf("got %v, want a location error on weights", err)
	}
	if !routerPoisoned(w) || !routerPoisoned(ids) {
		t.Error("an output was written")
	}
}

// TestRouterStreamOfAnotherDevice needs a GPU: a stream of another device
// than the tensors' is an ArgError on s.
func TestRouterStreamOfAnotherDevice(t *testing.T) {
	dev := gputest.Device(t)
	other := (&cuda.Device{Ordinal: dev.Ordinal + 1}).DefaultStream()
	x, err1 := tensor.Empty(dev, tensor.BF16, 4, 64)
	w, err2 := tensor.Empty(dev, tensor.F32, 4, 2)
	ids, err3 := tensor.Empty(dev, tensor.I32, 4, 2)
	defer x.Free()
	defer w.Free()
	defer ids.Free()
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	var ae *tensor.ArgError
	if err := TopK(other, w, ids, x, RouterOptions{K: 2}); !errors.As(err, &ae) || ae.Arg != "s" {
		t.Errorf("TopK on a stream of device %d: %v, want an ArgError on s", dev.Ordinal+1, err)
	}
}

// routerFuzzValue stores at b one logit of dtype dt chosen by c: small
// integers (ties), ±0, ±inf, NaNs, or random bits.
func routerFuzzValue(b []byte, dt tensor.DType, c int, rng *rand.Rand) {
	specials := map[tensor.DType][5]uint64{
		tensor.F32:  {0x7fc00000, 0xffc00001, 0x7f800000, 0xff800000, 0x80000000},
		tensor.BF16: {0x7fc0, 0xffc1, 0x7f80, 0xff80, 0x8000},
		tensor.F16:  {0x7e00, 0xfe01, 0x7c00, 0xfc00, 0x8000},
	}[dt]
	var bits uint64
	switch c % 16 {
	case 10, 11, 12, 13, 14:
		bits = specials[c%16-10]
	case 15:
		bits = rng.Uint64()
	default:
		v := tensor.New(dt, 1)
		v.SetFloat64s([]float64{float64(c%16)/2 - 2})
		copy(b, v.Bytes())
		return
	}
	var w [8]byte
	binary.LittleEndian.PutUint64(w[:], bits)
	copy(b, w[:dt.Size()])
}

// routerFuzzCheck checks a successful call's outputs against the
// documented result, computed here independently of routerReference for
// one token row x (and bias) under o: the ids are distinct candidates in
// selection order, no candidate left out ranks before the last one taken,
// and the weights are the documented scores (within 1e-6, NaN for NaN).
func routerFuzzCheck(x, bias []float64, o RouterOptions, ids []int64, w []float64) error {
	e := len(x)
	key := make([]float32, e)
	score := make([]float64, e)
	m, sum := math.Inf(-1), 0.0
	for _, v := range x {
		if v > m {
			m = v
		}
	}
	for j, v := range x {
		if o.Scoring == Softmax {
			key[j], score[j] = float32(v), math.Exp(v-m)
			sum += score[j]
		} else {
			key[j], score[j] = routerSigmoid(float32(v)), 1/(1+math.Exp(-v))
			if bias != nil {
				key[j] += float32(bias[j])
			}
		}
	}
	before := func(a, b int) bool { // a ranks before b
		ka, kb := routerOrder(key[a]), routerOrder(key[b])
		return ka > kb || ka == kb && a < b
	}
	cand := make([]bool, e)
	size := e
	if o.Groups > 0 {
		size = e / o.Groups
	}
	gscore := make([]uint32, o.Groups)
	for g := range gscore {
		b1, b2 := -1, -1
		for j := g * size; j < (g+1)*size; j++ {
			switch {
			case b1 < 0 || before(j, b1):
				b1, b2 = j, b1
			case b2 < 0 || before(j, b2):
				b2 = j
			}
		}
		gscore[g] = routerOrder(key[b1] + key[b2])
	}
	for j := range cand {
		cand[j] = o.Groups == 0
	}
	for g := range gscore {
		ahead := 0
		for h := range gscore {
			if gscore[h] > gscore[g] || gscore[h] == gscore[g] && h < g {
				ahead++
			}
		}
		for j := g * size; j < (g+1)*size; j++ {
			cand[j] = ahead < o.TopKGroups
		}
	}
	taken := make([]bool, e)
	total := 0.0
	for i, id := range ids[:o.K] {
		if id < 0 || id >= int64(e) || taken[id] || !cand[id] {
			return fmt.Errorf("ids %v: id %d is out of range, repeated or not a candidate", ids, id)
		}
		if i > 0 && !before(int(ids[i-1]), int(id)) {
			return fmt.Errorf("ids %v out of order at %d", ids, i)
		}
		taken[id] = true
		if o.Scoring == Softmax {
			score[id] /= sum
		}
		total += score[id]
	}
	for j := range e {
		if cand[j] && !taken[j] && before(j, int(ids[o.K-1])) {
			return fmt.Errorf("ids %v leave out expert %d, which ranks before %d", ids, j, ids[o.K-1])
		}
	}
	scale := 1.0
	if o.Scale != 0 {
		scale = float64(o.Scale)
	}
	for i, id := range ids[:o.K] {
		want := score[id] * scale
		if o.Renormalize {
			want = score[id] / (total + 1e-20) * scale
		}
		if math.IsNaN(want) != math.IsNaN(w[i]) || !math.IsNaN(want) && math.Abs(w[i]-want) > 1e-6*math.Abs(want)+1e-30 {
			return fmt.Errorf("weights %v: weight %d is %v, want %v", w, i, w[i], want)
		}
	}
	if o.SharedExpert && (ids[o.K] != int64(e) || w[o.K] != 1) {
		return fmt.Errorf("the shared column holds id %d, weight %v; want %d and 1", ids[o.K], w[o.K], e)
	}
	return nil
}

// FuzzRouterTopK calls TopK on the CPU path with fuzzed shapes, dtypes, K,
// options (scoring, bias, groups, scale, the shared column), row strides,
// nil tensors and outputs that alias or overlap the inputs or each other
// in one buffer, and logits full of ties, ±0, ±inf and NaNs. No call may
// panic; an error must be a tensor.ArgError that comes exactly when an
// argument is bad and leaves every byte as it was; a success must write only
// the outputs' elements, with the documented result (routerFuzzCheck).
func FuzzRouterTopK(f *testing.F) {
	// The bytes read, in order: E, T, K and its variant, scoring and its
	// variant, groups and top groups with their variants, renormalize,
	// scale, shared, the logits', weights' and ids' dtype variants, then
	// per tensor (logits, weights, ids, bias) its shape variant, row
	// padding and placement, then one byte per logit and bias element.
	f.Add([]byte{0, 0, 1})
	// 64 experts, sigmoid, bias, 2 of 4 groups, K = 8
	f.Add([]byte{251, 0, 5, 0, 1, 0, 3, 4, 0, 2, 7, 0, 2, 1, 27: 1, 31: 0})
	// DeepSeek-V3: 256 experts, bias, 4 of 8 groups
	f.Add([]byte{253, 0, 5, 0, 1, 0, 3, 5, 0, 4, 7, 0, 2, 1, 27: 1, 31: 0})
	f.Add([]byte{253, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0})          // sigmoid top-1 with the shared expert
	f.Add([]byte{2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 1, 2, 20: 14}) // weights aliasing the logits
	f.Add([]byte{9, 2, 0, 249})                               // K above E
	f.Add([]byte{3, 3, 2, 0, 1, 0, 1, 2, 255, 12, 1})         // groups that do not divide E
	// ties and special values
	f.Add([]byte{249, 0, 7, 0, 0, 0, 0, 0, 0, 0, 1, 25: 10, 11, 12, 13, 14, 15, 1, 1, 10, 10, 3, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzargs.NewIn(data)
		a := fuzzargs.NewArena(in, 1<<15, uint64(len(data)))
		e := in.Dim(12, 16, 33, 64, 100, 256, 512, 513)
		tok := in.Dim(17, 0)
		if e > 64 {
			tok = min(tok, 3)
		}
		k := 1 + in.N(max(min(e, routerMaxK), 1))
		switch in.Rare(8) {
		case 1:
			k = 0
		case 2:
			k = e + 1
		case 3:
			k = routerMaxK + 1
		case 4:
			k = -1
		case 5:
			k = math.MaxInt
		}
		o := RouterOptions{K: k, Scoring: Scoring(in.N(2))}
		if v := in.Rare(8); v > 0 {
			o.Scoring = Scoring([]int{-1, 2, 7}[v%3])
		}
		if g := in.N(4); g > 0 && e > 0 {
			// a divisor of E, or now and then any count; top groups in [0, Groups + 1]
			o.Groups = max(1, e/[]int{1, 2, 4, 8, 16, 32}[in.N(6)]) // groups of 1 to 32 experts
			if in.Rare(8) > 0 {
				o.Groups = in.Byte() - 8
			}
			o.TopKGroups = in.N(max(o.Groups, 0) + 2)
			if g == 3 && o.Groups > 0 && e%o.Groups == 0 {
				o.K = 1 + in.N(max(min(o.TopKGroups*(e/o.Groups), routerMaxK), 1))
			}
		} else if in.Rare(16) > 0 {
			o.TopKGroups = 1
		}
		o.Renormalize = in.One(2)
		o.Scale = []float32{0, 0, 2.5, -1, float32(math.NaN()), float32(math.Inf(1))}[in.N(6)]
		o.SharedExpert = in.One(4)
		xdt := fuzzargs.FloatDTypes[in.N(3)]
		if v := in.Rare(16); v > 0 {
			xdt = fuzzargs.OtherDTypes[v%len(fuzzargs.OtherDTypes)]
		}
		wdt, idt := tensor.F32, tensor.I32
		if v := in.Rare(16); v > 0 {
			wdt = []tensor.DType{tensor.BF16, tensor.I32, tensor.F16}[v%3]
		}
		if v := in.Rare(16); v > 0 {
			idt = []tensor.DType{tensor.I64, tensor.F32, tensor.I8}[v%3]
		}
		kk := o.K // the columns actually allocated
		if o.K < 0 || o.K > routerMaxK+1 {
			kk = 1
		}
		if o.SharedExpert {
			kk++
		}
		shape := func(rows, cols int) []int {
			switch in.Rare(16) {
			case 1:
				return []int{rows * cols}
			case 2:
				return []int{1, rows, cols}
			case 3:
				return []int{rows + 1, cols}
			case 4:
				return []int{rows, cols + 1}
			case 5:
				return []int{rows, max(cols-1, 0)}
			}
			return []int{rows, cols}
		}
		place := func(name string, dt tensor.DType, shape []int, alias *tensor.Tensor) *tensor.Tensor {
			strides := fuzzargs.PaddedStrides(shape, fuzzargs.Pick(in, 0, 0, 1, 3))
			return a.Place(name, dt, shape, strides, alias, 16)
		}
		x := place("logits", xdt, shape(tok, e), nil)
		w := place("weights", wdt, shape(tok, kk), x)
		ids := place("ids", idt, shape(tok, kk), w)
		if o.Scoring == Sigmoid && in.N(3) > 0 {
			bdt, bshape := tensor.F32, []int{e}
			switch in.Rare(16) {
			case 1:
				bdt = tensor.BF16
			case 2:
				bshape = []int{e + 1}
			case 3:
				bshape = []int{1, e}
			}
			o.Bias = place("bias", bdt, bshape, w)
		}
		rng := rand.New(rand.NewPCG(uint64(len(data)), uint64(in.Byte())))
		for _, v := range []*tensor.Tensor{x, o.Bias} {
			if v != nil && slices.Contains(fuzzargs.FloatDTypes, v.DType()) {
				b := v.Bytes()
				for off, size := 0, v.DType().Size(); off+size <= len(b); off += size {
					routerFuzzValue(b[off:], v.DType(), in.Byte(), rng)
				}
			}
		}
		for _, out := range []*tensor.Tensor{w, ids} {
			if out != nil && !tensor.Overlap(out, x) && !tensor.Overlap(out, o.Bias) {
				out.Poison()
			}
		}

		cols := o.K
		if o.SharedExpert {
			cols++
		}
		n := 0 // the experts of a rank-2 logits
		if x != nil && x.Rank() == 2 {
			n = x.Dim(1)
		}
		groupsOK := o.Groups == 0 && o.TopKGroups == 0 ||
			o.Groups > 0 && o.Scoring == Sigmoid && n%o.Groups == 0 && n/o.Groups >= 2 &&
				o.TopKGroups >= 1 && o.TopKGroups <= o.Groups && o.K <= o.TopKGroups*(n/o.Groups)
		valid := x != nil && w != nil && ids != nil && x.Rank() == 2 && slices.Contains(fuzzargs.FloatDTypes, xdt) &&
			n >= 1 && n <= routerMaxE && (o.Scoring == Softmax || o.Scoring == Sigmoid) &&
			o.K >= 1 && o.K <= n && o.K <= routerMaxK && !math.IsNaN(float64(o.Scale)) && !math.IsInf(float64(o.Scale), 0) &&
			(o.Bias == nil || o.Scoring == Sigmoid && o.Bias.DType() == tensor.F32 && slices.Equal(o.Bias.Shape(), []int{n})) &&
			groupsOK && slices.Equal(w.Shape(), []int{x.Dim(0), cols}) && wdt == tensor.F32 &&
			slices.Equal(ids.Shape(), []int{x.Dim(0), cols}) && idt == tensor.I32 &&
			!tensor.Overlap(w, x) && !tensor.Overlap(ids, x) && !tensor.Overlap(ids, w) &&
			!tensor.Overlap(w, o.Bias) && !tensor.Overlap(ids, o.Bias)

		a.Snapshot()
		err := TopK(nil, w, ids, x, o)
		what := fmt.Sprintf("logits %s, weights %s, ids %s, bias %s, options %+v", a.Desc(x), a.Desc(w), a.Desc(ids), a.Desc(o.Bias), o)
		if err != nil {
			if valid {
				t.Fatalf("%s: valid call refused: %v", what, err)
			}
			a.CheckError(t, what, err, "moe", "logits", "weights", "ids", "K", "Scoring", "Scale", "Bias", "Groups", "TopKGroups")
			return
		}
		if !valid {
			t.Fatalf("%s: invalid call accepted", what)
		}
		a.CheckWrites(t, what+", success", w, ids)
		xv, wv, iv := x.Float64s(), w.Float64s(), ids.Int64s()
		var bv []float64
		if o.Bias != nil {
			bv = o.Bias.Float64s()
		}
		for r := range x.Dim(0) {
			if err := routerFuzzCheck(xv[r*n:(r+1)*n], bv, o, iv[r*cols:(r+1)*cols], wv[r*cols:(r+1)*cols]); err != nil {
				t.Fatalf("%s: row %d: %v", what, r, err)
			}
		}
	})
}
