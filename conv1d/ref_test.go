package conv1d_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/gokittens/kittens/conv1d"
	"github.com/gokittens/kittens/conv1d/conv1dtest"
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
			seqs := conv1d.Varlen{CuSeqlens: i32s(0, int64(n)), CacheIndices: i32s(1), ConvStates: pool}
			if tc.state != nil {
				seqs.HasInitialState = tensor.New(tensor.U8, 1)
				seqs.HasInitialState.SetInt64s([]int64{1})
			}
			if err := conv1d.Forward(nil, y, x, w, bias, seqs, conv1d.Options{SiLU: tc.silu}); err != nil {
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
	if err := conv1d.Update(nil, out, x, w, nil, conv1d.Decode{ConvStates: pool}, conv1d.Options{}); err != nil {
		t.Fatal(err)
	}
	if !near(out.Float64s(), []float64{30 + 400}) || !near(pool.Float64s(), []float64{2, 3, 4}) {
		t.Errorf("out %v pool %v; want [430] and [2 3 4]", out.Float64s(), pool.Float64s())
	}
	// A pad index leaves everything alone.
	out.SetFloat64s([]float64{-1})
	if err := conv1d.Update(nil, out, x, w, nil, conv1d.Decode{ConvStates: pool, StateIndices: i32s(-1)}, conv1d.Options{}); err != nil {
		t.Fatal(err)
	}
	if !near(out.Float64s(), []float64{-1}) || !near(pool.Float64s(), []float64{2, 3, 4}) {
		t.Errorf("pad: out %v pool %v; want them untouched", out.Float64s(), pool.Float64s())
	}
}

// TestUpdateModesByHand: the speculative-decoding and circular-buffer modes
// on one channel, W = 3, w = [1 10 100] (oldest tap first), no bias.
func TestUpdateModesByHand(t *testing.T) {
	w := f32s([]int{1, 3}, 1, 10, 100)
	for _, tc := range []struct {
		name            string
		row, x          []float64
		accepted, seqln int64 // one of the two is set (> 0 or ≥ 0 with circular)
		circular        bool
		wantY, wantRow  []float64
	}{
		// state_len = W−2+L = 3. accepted = 1: window columns [0, 2); the
		// row keeps column [1, 2) and appends x.
		{"spec accepted 1", []float64{1, 2, 3}, []float64{4, 5}, 1, 0, false,
			[]float64{1 + 20 + 400, 2 + 40 + 500}, []float64{2, 4, 5}},
		// accepted = 2: window columns [1, 3); the row keeps column [2, 3).
		{"spec accepted 2", []float64{1, 2, 3}, []float64{4, 5}, 2, 0, false,
			[]float64{2 + 30 + 400, 3 + 40 + 500}, []float64{3, 4, 5}},
		// state_len 4, cache_seqlen 5: ring position 1, window columns
		// 3, 0; x goes to columns 1, 2, 3.
		{"circular", []float64{1, 2, 3, 4}, []float64{7, 8, 9}, 0, 5, true,
			[]float64{4 + 10 + 700, 1 + 70 + 800, 7 + 80 + 900}, []float64{1, 7, 8, 9}},
		// L = 5 > state_len 4 from position 2: columns 2, 3, 0, 1, 2; the
		// ring keeps the last four inputs.
		{"circular wraps", []float64{1, 2, 3, 4}, []float64{5, 6, 7, 8, 9}, 0, 2, true,
			[]float64{1 + 20 + 500, 2 + 50 + 600, 5 + 60 + 700, 6 + 70 + 800, 7 + 80 + 900}, []float64{7, 8, 9, 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, sl := len(tc.x), len(tc.row)
			pool := f32s([]int{1, sl, 1}, tc.row...)
			x, out := f32s([]int{1, n, 1}, tc.x...), tensor.New(tensor.F32, 1, n, 1)
			st := conv1d.Decode{ConvStates: pool}
			if tc.circular {
				st.CacheSeqlens = i32s(tc.seqln)
			} else {
				st.NumAcceptedTokens = i32s(tc.accepted)
			}
			if err := conv1d.Update(nil, out, x, w, nil, st, conv1d.Options{}); err != nil {
				t.Fatal(err)
			}
			if !near(out.Float64s(), tc.wantY) || !near(pool.Float64s(), tc.wantRow) {
				t.Errorf("out %v row %v; want %v and %v", out.Float64s(), pool.Float64s(), tc.wantY, tc.wantRow)
			}
		})
	}
	// A pad slot's entry is never read, so it need not be in range.
	pool := f32s([]int{1, 2, 1}, 1, 2)
	st := conv1d.Decode{ConvStates: pool, StateIndices: i32s(-1), NumAcceptedTokens: i32s(0)}
	if err := conv1d.Update(nil, tensor.New(tensor.F32, 1, 1), f32s([]int{1, 1}, 3), w, nil, st, conv1d.Options{}); err != nil {
		t.Errorf("pad with accepted 0: %v", err)
	}
}

// TestSplitMatchesPlain: the split outputs are the plain output's columns.
func TestSplitMatchesPlain(t *testing.T) {
	c := conv1dtest.Case{Op: conv1dtest.OpForward, DType: bf16, Width: 4, Dim: 20, Lens: []int{3, 9}, NSlots: 2, InitShare: 0.5, SiLU: true}
	rng := tensor.SeededRNG(7)
	b := c.Build(rng, conv1dtest.NormalFill(rng))
	x, w, bias := b.Named("x"), b.Named("w"), b.Named("bias")
	seqs := conv1d.Varlen{CuSeqlens: b.Named("cu_seqlens"), HasInitialState: b.Named("has_initial_state")}
	poolA := b.Named("conv_states")
	poolB := tensor.New(bf16, poolA.Shape()...)
	copy(poolB.Bytes(), poolA.Bytes())
	seqs.ConvStates = poolA
	y := tensor.New(bf16, 12, 20)
	if err := conv1d.Forward(nil, y, x, w, bias, seqs, conv1d.Options{SiLU: true}); err != nil {
		t.Fatal(err)
	}
	q, k, v := tensor.New(bf16, 12, 6), tensor.New(bf16, 12, 6), tensor.New(bf16, 12, 8)
	seqs.ConvStates = poolB
	if err := conv1d.ForwardSplit(nil, q, k, v, x, w, bias, seqs, conv1d.Options{SiLU: true}); err != nil {
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

// TestSpecAfterForward checks the hand-off from prefill to speculative
// decoding that Decode.NumAcceptedTokens documents: in vLLM's layout
// (state_len = W−2+L), the step after a Forward passes L, and then
// continues the sequence exactly as one Forward over all its inputs; a
// count of 1 reads a window L−1 inputs too old.
func TestSpecAfterForward(t *testing.T) {
	const width, L = 4, 2
	w := f32s([]int{1, width}, 1, 10, 100, 1000)
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	next := []float64{11, 12}

	// The whole sequence in one call: the outputs of the two new tokens.
	all := append(append([]float64(nil), xs...), next...)
	yAll := tensor.New(tensor.F32, len(all), 1)
	if err := conv1d.Forward(nil, yAll, f32s([]int{len(all), 1}, all...), w, nil,
		conv1d.Varlen{CuSeqlens: i32s(0, int64(len(all)))}, conv1d.Options{}); err != nil {
		t.Fatal(err)
	}
	want := yAll.Float64s()[len(xs):]

	for _, tc := range []struct {
		accepted int64
		same     bool
	}{{L, true}, {1, false}} {
		pool := tensor.New(tensor.F32, 1, width-2+L, 1)
		y := tensor.New(tensor.F32, len(xs), 1)
		if err := conv1d.Forward(nil, y, f32s([]int{len(xs), 1}, xs...), w, nil,
			conv1d.Varlen{CuSeqlens: i32s(0, int64(len(xs))), ConvStates: pool}, conv1d.Options{}); err != nil {
			t.Fatal(err)
		}
		out := tensor.New(tensor.F32, 1, L, 1)
		st := conv1d.Decode{ConvStates: pool, NumAcceptedTokens: i32s(tc.accepted)}
		if err := conv1d.Update(nil, out, f32s([]int{1, L, 1}, next...), w, nil, st, conv1d.Options{}); err != nil {
			t.Fatal(err)
		}
		if got := near(out.Float64s(), want); got != tc.same {
			t.Errorf("accepted %d after Forward: out %v, one Forward %v; want them equal: %v", tc.accepted, out.Float64s(), want, tc.same)
		}
	}
}

// TestReferenceLeavesSkippedBytes: the CPU path writes only the rows and
// state columns a call uses. A pad sequence's output rows, unused slots and,
// in circular mode, the ring columns no input reaches keep their bytes, NaN
// payloads included (a round trip through float64 would change them).
func TestReferenceLeavesSkippedBytes(t *testing.T) {
	const nan = 0x7fab // a bf16 NaN whose payload float64 does not keep
	fill := func(x *tensor.Tensor) {
		b := x.Bytes()
		for i := 0; i < len(b); i += 2 {
			binary.LittleEndian.PutUint16(b[i:], nan)
		}
	}
	bf := tensor.BF16
	x, w := tensor.New(bf, 2, 2), tensor.New(bf, 2, 2)
	x.SetFloat64s([]float64{1, 2, 3, 4})
	w.SetFloat64s([]float64{1, 1, 1, 1})
	y, pool := tensor.New(bf, 2, 2), tensor.New(bf, 3, 1, 2)
	fill(y)
	fill(pool)
	v := conv1d.Varlen{CuSeqlens: i32s(0, 1, 2), CacheIndices: i32s(0, -1), ConvStates: pool}
	if err := conv1d.Forward(nil, y, x, w, nil, v, conv1d.Options{}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []uint16{0x3f80, 0x4000, nan, nan} { // y row 0 is x row 0 (no initial state); row 1 is a pad's
		if got := binary.LittleEndian.Uint16(y.Bytes()[2*i:]); got != want {
			t.Errorf("y element %d: bits %#04x, want %#04x", i, got, want)
		}
	}
	for i, want := range []uint16{0x3f80, 0x4000, nan, nan, nan, nan} { // slot 0 is written; slots 1 and 2 are not used
		if got := binary.LittleEndian.Uint16(pool.Bytes()[2*i:]); got != want {
			t.Errorf("state element %d: bits %#04x, want %#04x", i, got, want)
		}
	}
	// Circular mode, a ring of 4 columns, one input written at column 2.
	ring := tensor.New(bf, 1, 4, 1)
	fill(ring)
	out := tensor.New(bf, 1, 1)
	if err := conv1d.Update(nil, out, tensor.New(bf, 1, 1), tensor.New(bf, 1, 2), nil,
		conv1d.Decode{ConvStates: ring, CacheSeqlens: i32s(2)}, conv1d.Options{}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []uint16{nan, nan, 0, nan} {
		if got := binary.LittleEndian.Uint16(ring.Bytes()[2*i:]); got != want {
			t.Errorf("ring column %d: bits %#04x, want %#04x", i, got, want)
		}
	}
}
