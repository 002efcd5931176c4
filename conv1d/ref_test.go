package conv1d

import (
	"math"
	"testing"

	"github.com/gokittens/kittens/tensor"
)

func f32s(shape []int, v ...float64) *tensor.Tensor {
	t := tensor.New(tensor.F32, shape...)
	t.SetFloat64s(v)
	return t
}

func near(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-6*math.Max(1, math.Abs(b[i])) {
			return false
		}
	}
	return true
}

// TestReferenceByHand checks the host path on values worked out by hand.
func TestReferenceByHand(t *testing.T) {
	silu1 := 1 / (1 + math.Exp(-1))
	for _, tc := range []struct {
		name            string
		w, bias         []float64 // one channel
		x               []float64 // one sequence, one channel
		state           []float64 // initial state column values, oldest first; nil: none
		silu            bool
		wantY, wantStat []float64
	}{
		// y[t] = 1 + 0.5·x̃[t−1] + 2·x[t]
		{"W2 with state", []float64{0.5, 2}, []float64{1}, []float64{1, 2, 3}, []float64{10}, false,
			[]float64{8, 5.5, 8}, []float64{3}},
		{"W2 from zeros", []float64{0.5, 2}, []float64{1}, []float64{1, 2, 3}, nil, false,
			[]float64{3, 5.5, 8}, []float64{3}},
		// A sequence shorter than W−1: the state shifts by one.
		{"W3 short with state", []float64{1, 10, 100}, nil, []float64{2}, []float64{3, 5}, false,
			[]float64{3 + 50 + 200}, []float64{5, 2}},
		{"W3 short from zeros", []float64{1, 10, 100}, nil, []float64{2}, nil, false,
			[]float64{200}, []float64{0, 2}},
		// SiLU of 1 + 0·… = 1.
		{"W2 silu", []float64{3, 0}, []float64{1}, []float64{7}, nil, true,
			[]float64{silu1}, []float64{7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			width, n := len(tc.w), len(tc.x)
			x, y := f32s([]int{n, 1}, tc.x...), tensor.New(tensor.F32, n, 1)
			w := f32s([]int{1, width}, tc.w...)
			var bias *tensor.Tensor
			if tc.bias != nil {
				bias = f32s([]int{1}, tc.bias...)
			}
			pool := tensor.New(tensor.F32, 2, width-1, 1) // slot 1 is ours, slot 0 must stay 0
			if tc.state != nil {
				pool.SetFloat64s(append(make([]float64, width-1), tc.state...))
			}
			seqs := Varlen{CuSeqlens: i32s(0, int64(n)), CacheIndices: i32s(1), ConvStates: pool}
			if tc.state != nil {
				seqs.HasInitialState = tensor.New(tensor.U8, 1)
				seqs.HasInitialState.SetInt64s([]int64{1})
			}
			if err := Forward(nil, y, x, w, bias, seqs, Options{SiLU: tc.silu}); err != nil {
				t.Fatal(err)
			}
			got := pool.Float64s()
			if !near(y.Float64s(), tc.wantY) || !near(got[width-1:], tc.wantStat) || !near(got[:width-1], make([]float64, width-1)) {
				t.Errorf("y %v, pool %v; want y %v, slot 1 %v", y.Float64s(), got, tc.wantY, tc.wantStat)
			}
		})
	}
}

// TestUpdateByHand: one decode step with a state buffer longer than W−1.
func TestUpdateByHand(t *testing.T) {
	// W = 2, state_len = 3: the window is the newest column.
	pool := f32s([]int{1, 3, 1}, 1, 2, 3)
	x := f32s([]int{1, 1}, 4)
	out := tensor.New(tensor.F32, 1, 1)
	w := f32s([]int{1, 2}, 10, 100)
	if err := Update(nil, out, x, w, nil, pool, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	if !near(out.Float64s(), []float64{30 + 400}) || !near(pool.Float64s(), []float64{2, 3, 4}) {
		t.Errorf("out %v pool %v; want [430] and [2 3 4]", out.Float64s(), pool.Float64s())
	}
	// A pad index leaves everything alone.
	out.SetFloat64s([]float64{-1})
	if err := Update(nil, out, x, w, nil, pool, i32s(-1), Options{}); err != nil {
		t.Fatal(err)
	}
	if !near(out.Float64s(), []float64{-1}) || !near(pool.Float64s(), []float64{2, 3, 4}) {
		t.Errorf("pad: out %v pool %v; want them untouched", out.Float64s(), pool.Float64s())
	}
}

// TestSplitMatchesPlain: the split outputs are the plain output's columns.
func TestSplitMatchesPlain(t *testing.T) {
	c := testCase{op: opForward, dt: bf16, width: 4, dim: 20, lens: []int{3, 9}, nSlots: 2, initShare: 0.5, silu: true}
	rng := tensor.SeededRNG(7)
	b := c.build(rng, normalFill(rng))
	x, w, bias := b.named("x"), b.named("w"), b.named("bias")
	seqs := Varlen{CuSeqlens: b.named("cu_seqlens"), HasInitialState: b.named("has_initial_state")}
	poolA := b.named("conv_states")
	poolB := tensor.New(bf16, poolA.Shape()...)
	copy(poolB.Bytes(), poolA.Bytes())
	seqs.ConvStates = poolA
	y := tensor.New(bf16, 12, 20)
	if err := Forward(nil, y, x, w, bias, seqs, Options{SiLU: true}); err != nil {
		t.Fatal(err)
	}
	q, k, v := tensor.New(bf16, 12, 6), tensor.New(bf16, 12, 6), tensor.New(bf16, 12, 8)
	seqs.ConvStates = poolB
	if err := ForwardSplit(nil, q, k, v, x, w, bias, seqs, Options{SiLU: true}); err != nil {
		t.Fatal(err)
	}
	ys, qs, ks, vs := y.Float64s(), q.Float64s(), k.Float64s(), v.Float64s()
	for r := range 12 {
		for c := range 20 {
			var got float64
			switch {
			case c < 6:
				got = qs[r*6+c]
			case c < 12:
				got = ks[r*6+c-6]
			default:
				got = vs[r*8+c-12]
			}
			if got != ys[r*20+c] {
				t.Fatalf("row %d channel %d: split %g, plain %g", r, c, got, ys[r*20+c])
			}
		}
	}
	if string(poolA.Bytes()) != string(poolB.Bytes()) {
		t.Error("the split form left different states")
	}
}
