package moe

import (
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
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

// alignPropsH100 and alignPropsSmall are simulated devices: an H100, and a
// device of 16 KiB of shared memory a block.
var (
	alignPropsH100  = cuda.Props{Name: "H100", Major: 9, SMs: 132, MaxThreadsPerBlock: 1024, SharedPerBlock: 48 << 10, SharedPerBlockOptin: 227 << 10, SharedPerSM: 228 << 10}
	alignPropsSmall = cuda.Props{Name: "small", Major: 8, SMs: 8, MaxThreadsPerBlock: 1024, SharedPerBlock: 16 << 10}
)

// TestAlignKernelsCompile compiles, with NVRTC alone, every kernel of
// align.cu and routing.cu at the warps pickAlign gives on an H100 and on a
// device of 16 KiB of shared memory a block, for 8 to 1024 experts (see
// gputest.CompileAll).
func TestAlignKernelsCompile(t *testing.T) {
	var ks []jit.Kernel
	seen := map[int]bool{}
	for _, p := range []cuda.Props{alignPropsH100, alignPropsSmall} {
		for _, e := range []int{8, 512, 1024} {
			w := pickAlign(p, 1, 1, e).warps
			if seen[w] {
				continue
			}
			seen[w] = true
			for _, entry := range alignEntries {
				ks = append(ks, alignFuncs.Kernel(alignKey{entry, w}))
			}
			for _, entry := range routingEntries {
				ks = append(ks, routingFuncs.Kernel(routingKey{entry, w}))
			}
		}
	}
	gputest.CompileAll(t, ks)
}

// TestPickAlign: the fused kernels' shared memory fits the device's block
// at every E, with as many warps as fit up to 16; tiles of whole tokens
// cover every token.
func TestPickAlign(t *testing.T) {
	for _, p := range []cuda.Props{alignPropsH100, alignPropsSmall} {
		for _, e := range []int{1, 8, 33, 256, 384, 512, 513, 1000, 1024} {
			c := pickAlign(p, 100, 3, e)
			if alignShared(c.warps, e) > p.SharedPerBlock {
				t.Errorf("%s E=%d: %d warps need %d bytes of shared memory, more than %d", p.Name, e, c.warps, alignShared(c.warps, e), p.SharedPerBlock)
			}
			if c.warps < alignMaxWarps && alignShared(2*c.warps, e) <= p.SharedPerBlock {
				t.Errorf("%s E=%d: %d warps, though %d fit", p.Name, e, c.warps, 2*c.warps)
			}
			if c.scanBlock%32 != 0 || c.scanBlock > 1024 || c.scanBlock < min(e, 1024) {
				t.Errorf("%s E=%d: scan block %d", p.Name, e, c.scanBlock)
			}
		}
	}
	if c := pickAlign(alignPropsH100, 512, 8, 512); c.warps != 16 {
		t.Errorf("H100 E=512: %d warps, want 16", c.warps)
	}
	for _, s := range []struct{ t, k, tiles int }{{0, 8, 1}, {1, 8, 1}, {512, 8, 1}, {513, 8, 2}, {4096, 8, 8}, {4096, 6, 7}, {65536, 10, 161}, {3, 5000, 3}} {
		c := pickAlign(alignPropsH100, s.t, s.k, 128)
		if c.tiles != s.tiles || (c.tiles-1)*c.tileTokens >= max(s.t, 1) || c.tiles*c.tileTokens < s.t {
			t.Errorf("T=%d k=%d: %d tiles of %d tokens, want %d", s.t, s.k, c.tiles, c.tileTokens, s.tiles)
		}
	}
}

// alignIDs returns ids [T, k] i32 of distinct random experts a token.
func alignIDs(rng *rand.Rand, t, k, e int) *tensor.Tensor {
	ids := tensor.New(tensor.I32, t, k)
	v := make([]int64, 0, t*k)
	perm := make([]int64, e)
	for i := range perm {
		perm[i] = int64(i)
	}
	for range t {
		for j := range k {
			r := j + rng.IntN(e-j)
			perm[j], perm[r] = perm[r], perm[j]
			v = append(v, perm[j])
		}
	}
	ids.SetInt64s(v)
	return ids
}

// alignNew returns AlignBlockSize's buffers for the shape, poisoned.
func alignNew(t *testing.T, tokens, k, e, bs int) AlignOutputs {
	t.Helper()
	sz, err := AlignSizes(tokens, k, e, bs)
	if err != nil {
		t.Fatal(err)
	}
	out := AlignOutputs{SortedTokenIDs: tensor.New(tensor.I32, sz.SortedTokenIDs), ExpertIDs: tensor.New(tensor.I32, sz.ExpertIDs),
		NumTokensPostPad: tensor.New(tensor.I32, 1)}
	if sz.Workspace > 0 {
		out.Workspace = tensor.New(tensor.I32, sz.Workspace)
	}
	for _, o := range []*tensor.Tensor{out.SortedTokenIDs, out.ExpertIDs, out.NumTokensPostPad} {
		o.Poison()
	}
	return out
}

// TestAlignWorkedExample: E = 3, k = 2, bs = 4, ids [[0 1] [1 2] [0 2]].
func TestAlignWorkedExample(t *testing.T) {
	ids := tensor.New(tensor.I32, 3, 2)
	ids.SetInt64s([]int64{0, 1, 1, 2, 0, 2})
	out := alignNew(t, 3, 2, 3, 4)
	if err := AlignBlockSize(nil, out, ids, AlignOptions{Experts: 3, BlockSize: 4}); err != nil {
		t.Fatal(err)
	}
	want := []int64{0, 4, 6, 6, 1, 2, 6, 6, 3, 5, 6, 6, 6, 6, 6, 6}
	if got := out.SortedTokenIDs.Int64s(); !slices.Equal(got, want) {
		t.Errorf("sorted ids %v, want %v", got, want)
	}
	if got := out.ExpertIDs.Int64s(); !slices.Equal(got, []int64{0, 1, 2, 0}) {
		t.Errorf("expert ids %v, want [0 1 2 0]", got)
	}
	if got := out.NumTokensPostPad.Int64s(); !slices.Equal(got, []int64{12}) {
		t.Errorf("post pad %v, want [12]", got)
	}
}

// TestAlignExpertMap: experts 1 and 3 of 4 live here as local 0 and 1;
// the pairs of experts 0 and 2, and an id out of range, are dropped.
func TestAlignExpertMap(t *testing.T) {
	ids := tensor.New(tensor.I32, 4, 2)
	ids.SetInt64s([]int64{0, 1, 3, 2, 1, 3, 7, 1})
	emap := tensor.New(tensor.I32, 4)
	emap.SetInt64s([]int64{-1, 0, -1, 1})
	out := alignNew(t, 4, 2, 4, 2)
	if err := AlignBlockSize(nil, out, ids, AlignOptions{Experts: 4, BlockSize: 2, ExpertMap: emap}); err != nil {
		t.Fatal(err)
	}
	// Local 0 (global 1): f = 1, 4, 7; local 1 (global 3): f = 2, 5.
	n := int64(8)
	want := []int64{1, 4, 7, n, 2, 5}
	for len(want) < out.SortedTokenIDs.Dim(0) {
		want = append(want, n)
	}
	if got := out.SortedTokenIDs.Int64s(); !slices.Equal(got, want) {
		t.Errorf("sorted ids %v, want %v", got, want)
	}
	wantE := make([]int64, out.ExpertIDs.Dim(0))
	wantE[2] = 1
	if got := out.ExpertIDs.Int64s(); !slices.Equal(got, wantE) {
		t.Errorf("expert ids %v, want %v", got, wantE)
	}
	if got := out.NumTokensPostPad.Int64s()[0]; got != 6 {
		t.Errorf("post pad %d, want 6", got)
	}
}

// TestAlignProperties checks the host path on random routings against the
// documented layout, written independently of the reference: each
// expert's range holds its pairs in ascending f, padding elsewhere.
func TestAlignProperties(t *testing.T) {
	rng, seed := tensor.NewRNG()
	for _, s := range []struct{ t, k, e, bs int }{{1, 1, 8, 16}, {7, 2, 8, 4}, {100, 8, 64, 16}, {300, 6, 384, 64}, {50, 10, 512, 128}, {0, 4, 8, 16}} {
		ids := alignIDs(rng, s.t, s.k, s.e)
		out := alignNew(t, s.t, s.k, s.e, s.bs)
		if err := AlignBlockSize(nil, out, ids, AlignOptions{Experts: s.e, BlockSize: s.bs}); err != nil {
			t.Fatal(err)
		}
		flat, sorted, eids := ids.Int64s(), out.SortedTokenIDs.Int64s(), out.ExpertIDs.Int64s()
		numel := int64(len(flat))
		post := int(out.NumTokensPostPad.Int64s()[0])
		if post%s.bs != 0 || post > len(sorted) {
			t.Fatalf("seed %d %v: post pad %d", seed, s, post)
		}
		seen := 0
		for b := range eids {
			e := eids[b]
			for i := b * s.bs; i < (b+1)*s.bs; i++ {
				f := sorted[i]
				switch {
				case f == numel:
				case i >= post || f < 0 || f > numel || flat[f] != e:
					t.Fatalf("seed %d %v: position %d holds %d in a block of expert %d", seed, s, i, f, e)
				case i > b*s.bs && sorted[i-1] != numel && sorted[i-1] >= f:
					t.Fatalf("seed %d %v: position %d: %d after %d", seed, s, i, f, sorted[i-1])
				default:
					seen++
				}
			}
			if b > 0 && b*s.bs < post && e < eids[b-1] {
				t.Fatalf("seed %d %v: block %d of expert %d after expert %d", seed, s, b, e, eids[b-1])
			}
			if b*s.bs >= post && e != 0 {
				t.Fatalf("seed %d %v: block %d past the total has expert %d", seed, s, b, e)
			}
		}
		if seen != len(flat) {
			t.Fatalf("seed %d %v: %d pairs placed, want %d", seed, s, seen, len(flat))
		}
	}
}

func TestAlignSizes(t *testing.T) {
	for _, c := range []struct {
		t, k, e, bs          int
		sorted, blocks, work int
	}{
		{3, 2, 3, 4, 16, 4, 0},
		{1, 8, 256, 64, 512, 8, 0}, // T·k < E: each pair pads alone
		{4096, 8, 256, 64, 32768 + 256*63, (32768 + 256*63) / 64, 2*256 + 1 + 8*256},
		{0, 8, 256, 16, 0, 0, 0},
		{65536, 10, 512, 16, 655360 + 512*15, (655360 + 512*15) / 16, 1025 + 161*512},
	} {
		sz, err := AlignSizes(c.t, c.k, c.e, c.bs)
		if err != nil {
			t.Fatal(err)
		}
		if want := (AlignSize{c.sorted, c.blocks, c.work}); sz != want {
			t.Errorf("AlignSizes(%d, %d, %d, %d) = %+v, want %+v", c.t, c.k, c.e, c.bs, sz, want)
		}
	}
	for _, c := range []struct {
		t, k, e, bs int
		arg         string
	}{
		{-1, 2, 8, 16, "tokens"}, {4, 0, 8, 16, "k"}, {4, 9, 8, 16, "k"}, {4, 2, 0, 16, "experts"},
		{4, 2, 1025, 16, "experts"}, {4, 2, 8, 0, "blockSize"}, {4, 2, 8, 1<<30 + 1, "blockSize"}, {1 << 28, 8, 8, 16, "tokens"}, {1 << 20, 8, 1024, 1 << 20, "tokens"},
	} {
		var ae *tensor.ArgError
		if _, err := AlignSizes(c.t, c.k, c.e, c.bs); !errors.As(err, &ae) || ae.Arg != c.arg {
			t.Errorf("AlignSizes(%d, %d, %d, %d): %v, want an ArgError on %s", c.t, c.k, c.e, c.bs, err, c.arg)
		}
	}
}

// alignPoisoned reports whether every byte of t is still 0xFF.
func alignPoisoned(t *tensor.Tensor) bool {
	for _, b := range t.Bytes() {
		if b != 0xFF {
			return false
		}
	}
	return true
}

// TestAlignValidation: each bad argument is an ArgError naming it, and
// nothing is written.
func TestAlignValidation(t *testing.T) {
	type args struct {
		out AlignOutputs
		ids *tensor.Tensor
		o   AlignOptions
	}
	const T, k, e, bs = 600, 8, 16, 16 // two tiles: a workspace
	good := func() args {
		out := alignNew(t, T, k, e, bs)
		return args{out, alignIDs(tensor.SeededRNG(1), T, k, e), AlignOptions{Experts: e, BlockSize: bs}}
	}
	sz, _ := AlignSizes(T, k, e, bs)
	cases := []struct {
		name, arg string
		edit      func(a *args)
	}{
		{"ids nil", "ids", func(a *args) { a.ids = nil }},
		{"ids i64", "ids", func(a *args) { a.ids = tensor.New(tensor.I64, T, k) }},
		{"ids f32", "ids", func(a *args) { a.ids = tensor.New(tensor.F32, T, k) }},
		{"ids rank 1", "ids", func(a *args) { a.ids = tensor.New(tensor.I32, T*k) }},
		{"ids strided", "ids", func(a *args) { a.ids, _ = tensor.NewStrided(tensor.I32, []int{T, k}, []int{k + 1, 1}) }},
		{"k above E", "ids", func(a *args) { a.ids = tensor.New(tensor.I32, 4, e+1) }},
		{"Experts zero", "Experts", func(a *args) { a.o.Experts = 0 }},
		{"Experts above 1024", "Experts", func(a *args) { a.o.Experts = 1025 }},
		{"BlockSize zero", "BlockSize", func(a *args) { a.o.BlockSize = 0 }},
		{"ExpertMap short", "ExpertMap", func(a *args) { a.o.ExpertMap = tensor.New(tensor.I32, e-1) }},
		{"ExpertMap i64", "ExpertMap", func(a *args) { a.o.ExpertMap = tensor.New(tensor.I64, e) }},
		{"sorted short", "SortedTokenIDs", func(a *args) { a.out.SortedTokenIDs = tensor.New(tensor.I32, sz.SortedTokenIDs-1) }},
		{"sorted nil", "SortedTokenIDs", func(a *args) { a.out.SortedTokenIDs = nil }},
		{"sorted i64", "SortedTokenIDs", func(a *args) { a.out.SortedTokenIDs = tensor.New(tensor.I64, sz.SortedTokenIDs) }},
		{"expert ids short", "ExpertIDs", func(a *args) { a.out.ExpertIDs = tensor.New(tensor.I32, sz.ExpertIDs-1) }},
		{"post pad rank 0", "NumTokensPostPad", func(a *args) { a.out.NumTokensPostPad = tensor.New(tensor.I32) }},
		{"workspace nil", "Workspace", func(a *args) { a.out.Workspace = nil }},
		{"workspace short", "Workspace", func(a *args) { a.out.Workspace = tensor.New(tensor.I32, sz.Workspace-1) }},
		{"workspace f32", "Workspace", func(a *args) { a.out.Workspace = tensor.New(tensor.F32, sz.Workspace) }},
		{"expert ids overlap sorted", "ExpertIDs", func(a *args) {
			a.out.ExpertIDs, _ = a.out.SortedTokenIDs.Slice(0, 0, sz.ExpertIDs)
		}},
		{"sorted is ids", "SortedTokenIDs", func(a *args) {
			a.out.SortedTokenIDs = tensor.New(tensor.I32, sz.SortedTokenIDs)
			a.ids, _ = a.out.SortedTokenIDs.View(tensor.I32, []int{T, k}, []int{k, 1})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := good()
			c.edit(&a)
			outs := []*tensor.Tensor{a.out.SortedTokenIDs, a.out.ExpertIDs, a.out.NumTokensPostPad}
			for _, o := range outs {
				if o != nil {
					o.Poison()
				}
			}
			err := AlignBlockSize(nil, a.out, a.ids, a.o)
			var ae *tensor.ArgError
			if !errors.As(err, &ae) || ae.Arg != c.arg {
				t.Fatalf("%v, want an ArgError on %s", err, c.arg)
			}
			if !strings.Contains(err.Error(), "moe.AlignBlockSize") {
				t.Errorf("error %q does not name the op", err)
			}
			for _, o := range outs {
				if o != nil && !alignPoisoned(o) {
					t.Errorf("an output was written")
				}
			}
		})
	}
	a := good()
	if err := AlignBlockSize(nil, a.out, a.ids, a.o); err != nil {
		t.Fatalf("good arguments: %v", err)
	}
	a.out.Workspace = tensor.New(tensor.I32, sz.Workspace+10) // larger is fine
	if err := AlignBlockSize(nil, a.out, a.ids, a.o); err != nil {
		t.Fatalf("a larger workspace: %v", err)
	}
}

// alignModelPairs returns the pairs the documentation keeps, as (f,
// bucket), stably sorted by bucket: the independent model of the fuzz
// tests. emap may be nil.
func alignModelPairs(ids, emap []int64, e int) [][2]int {
	var kept [][2]int
	for f, id := range ids {
		if id < 0 || id >= int64(e) {
			continue
		}
		if emap != nil {
			if id = emap[id]; id < 0 || id >= int64(e) {
				continue
			}
		}
		kept = append(kept, [2]int{f, int(id)})
	}
	slices.SortStableFunc(kept, func(a, b [2]int) int { return a[1] - b[1] })
	return kept
}

// alignFuzzOverlap reports whether an output overlaps an input or another
// output (nil ones skipped).
func alignFuzzOverlap(ins, outs []*tensor.Tensor) bool {
	for i, o := range outs {
		for _, x := range append(slices.Clone(ins), outs[:i]...) {
			if tensor.Overlap(o, x) {
				return true
			}
		}
	}
	return false
}

// alignFuzzI32 reports whether t is a rank-1 i32 tensor of n elements.
func alignFuzzI32(t *tensor.Tensor, n int) bool {
	return t != nil && t.Rank() == 1 && t.DType() == tensor.I32 && t.Dim(0) == n
}

// FuzzAlignBlockSize calls AlignBlockSize on the CPU path with fuzzed
// shapes, Experts and BlockSize (in and out of range), ids of any values,
// an expert map or none, and arguments of other dtypes, ranks or sizes,
// with padded rows, nil, or aliasing and overlapping each other in one
// buffer. It checks that no call panics; that an error is an ArgError
// naming an argument, comes exactly where the documentation rejects the
// call and leaves every byte as it was; and that a success writes only the
// outputs' elements, with the documented layout, built here from a stable
// sort of the kept pairs.
func FuzzAlignBlockSize(f *testing.F) {
	fuzzargs.AddRandomSeeds(f, 24)
	f.Fuzz(func(t *testing.T, data []byte) {
		a := fuzzargs.NewSeededArena(data)
		in := a.In
		tokens, k := in.Dim(0, 64, 600), in.Dim(1, 12, 70)
		e := fuzzargs.Pick(in, 8, 3, 1, 16, 64, 33, 0, alignMaxExperts+1)
		bs := fuzzargs.Pick(in, 4, 1, 16, 3, 0, -1, 1<<30, math.MaxInt)
		sz, _ := alignSizes(tokens, max(k, 1), max(e, 1), min(max(bs, 1), alignMaxElems)) // as meant
		ids := a.Arg("ids", tensor.I32, tokens, k)
		var emap *tensor.Tensor
		if in.One(3) {
			emap = a.Arg("ExpertMap", tensor.I32, e)
		}
		out := AlignOutputs{
			SortedTokenIDs:   a.Arg("SortedTokenIDs", tensor.I32, sz.SortedTokenIDs),
			ExpertIDs:        a.Arg("ExpertIDs", tensor.I32, sz.ExpertIDs),
			NumTokensPostPad: a.Arg("NumTokensPostPad", tensor.I32, 1),
		}
		if sz.Workspace > 0 || in.One(4) {
			out.Workspace = a.Arg("Workspace", tensor.I32, sz.Workspace)
		}
		a.Fill()
		o := AlignOptions{Experts: e, BlockSize: bs, ExpertMap: emap}
		what := fmt.Sprintf("AlignBlockSize(ids %s, map %s, E %d, bs %d)", a.Desc(ids), a.Desc(emap), e, bs)
		err := AlignBlockSize(nil, out, ids, o)

		// Why the documentation rejects the call, or "".
		why := ""
		outs := []*tensor.Tensor{out.SortedTokenIDs, out.ExpertIDs, out.NumTokensPostPad, out.Workspace}
		switch {
		case ids == nil || ids.Rank() != 2 || ids.DType() != tensor.I32 || !ids.Contiguous():
			why = "ids is no contiguous i32 matrix"
		case e < 1 || e > alignMaxExperts || ids.Dim(1) < 1 || ids.Dim(1) > e:
			why = "k or E out of range"
		case bs < 1 || bs > 1<<30:
			why = "BlockSize outside [1, 2^30]"
		case emap != nil && !alignFuzzI32(emap, e):
			why = "ExpertMap is no i32 [E]"
		}
		if why == "" {
			var ok bool
			if sz, ok = alignSizes(ids.Dim(0), ids.Dim(1), e, bs); !ok {
				why = "sizes past the kernels' int32 indexing"
			}
		}
		ws := out.Workspace
		switch {
		case why != "":
		case !alignFuzzI32(out.SortedTokenIDs, sz.SortedTokenIDs) || !alignFuzzI32(out.ExpertIDs, sz.ExpertIDs) || !alignFuzzI32(out.NumTokensPostPad, 1):
			why = "an output's shape or dtype"
		case (ws != nil || sz.Workspace > 0) && (ws == nil || ws.Rank() != 1 || ws.DType() != tensor.I32 || ws.Dim(0) < sz.Workspace):
			why = "the workspace"
		case alignFuzzOverlap([]*tensor.Tensor{ids, emap}, outs):
			why = "an output overlaps"
		}
		if err != nil {
			if why == "" {
				t.Fatalf("%s: error %v, but the docs take the call", what, err)
			}
			a.CheckError(t, what, err, "moe", "ids", "Experts", "BlockSize", "ExpertMap", "SortedTokenIDs", "ExpertIDs", "NumTokensPostPad", "Workspace")
			return
		}
		if why != "" {
			t.Fatalf("%s: no error, but the docs reject it (%s)", what, why)
		}
		a.CheckWrites(t, what, out.SortedTokenIDs, out.ExpertIDs, out.NumTokensPostPad)

		var mv []int64
		if emap != nil {
			mv = emap.Int64s()
		}
		flat := ids.Int64s()
		numel := int64(len(flat))
		sorted := make([]int64, sz.SortedTokenIDs)
		for i := range sorted {
			sorted[i] = numel
		}
		experts := make([]int64, sz.ExpertIDs)
		pos, last := 0, -1
		for _, p := range alignModelPairs(flat, mv, e) {
			if p[1] != last { // a new expert starts on a block
				pos, last = intmath.RoundUp(pos, bs), p[1]
			}
			sorted[pos] = int64(p[0])
			experts[pos/bs] = int64(p[1])
			pos++
		}
		post := intmath.RoundUp(pos, bs)
		for i, want := range [][]int64{sorted, experts, {int64(post)}} {
			if got := outs[i].Int64s(); !slices.Equal(got, want) {
				t.Fatalf("%s: output %d is %v, want %v", what, i, got, want)
			}
		}
	})
}
