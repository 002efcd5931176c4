package moe

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gokittens/kittens/internal/fuzzargs"
	"github.com/gokittens/kittens/tensor"
)

// routingNew returns RoutingData's buffers for the shape, poisoned.
func routingNew(t *testing.T, tokens, k, e, bm int, weights bool) RoutingOutputs {
	t.Helper()
	sz, err := RoutingSizes(tokens, k, e, bm)
	if err != nil {
		t.Fatal(err)
	}
	n := tokens * k
	out := RoutingOutputs{Bitmatrix: tensor.New(tensor.I32, tokens, sz.Words), Hist: tensor.New(tensor.I32, e),
		TokenOffsRaw: tensor.New(tensor.I32, e+1), TokenOffsPad: tensor.New(tensor.I32, e+1), BlockPidMap: tensor.New(tensor.I32, sz.MaxTiles),
		GatherIndx: tensor.New(tensor.I32, n), ScatterIndx: tensor.New(tensor.I32, n)}
	if weights {
		out.GateScal = tensor.New(tensor.F32, n)
	}
	if sz.Workspace > 0 {
		out.Workspace = tensor.New(tensor.I32, sz.Workspace)
	}
	for _, o := range routingOuts(out) {
		if o != nil {
			o.Poison()
		}
	}
	return out
}

// routingOuts lists the outputs (nil where absent), without the workspace.
func routingOuts(o RoutingOutputs) []*tensor.Tensor {
	return []*tensor.Tensor{o.Bitmatrix, o.Hist, o.TokenOffsRaw, o.TokenOffsPad, o.BlockPidMap, o.GatherIndx, o.ScatterIndx, o.GateScal}
}

// TestRoutingWorkedExample: E = 3, k = 2, block_m = 2, ids [[0 1] [1 2]
// [0 2]], weights 1 to 6.
func TestRoutingWorkedExample(t *testing.T) {
	ids := tensor.New(tensor.I32, 3, 2)
	ids.SetInt64s([]int64{0, 1, 1, 2, 0, 2})
	w := tensor.New(tensor.F32, 3, 2)
	w.SetFloat64s([]float64{1, 2, 3, 4, 5, 6})
	out := routingNew(t, 3, 2, 3, 2, true)
	if err := RoutingData(nil, out, ids, w, RoutingOptions{Experts: 3, BlockM: 2}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		t    *tensor.Tensor
		want []int64
	}{
		{"bitmatrix", out.Bitmatrix, []int64{0b011, 0b110, 0b101}},
		{"hist", out.Hist, []int64{2, 2, 2}},
		{"token_offs_raw", out.TokenOffsRaw, []int64{0, 2, 4, 6}},
		{"token_offs_pad", out.TokenOffsPad, []int64{0, 1, 2, 3}},
		{"block_pid_map", out.BlockPidMap, []int64{0, 1, 2, -1}}, // max tiles: 3 − 1 + ⌈4/2⌉
		{"gather_indx", out.GatherIndx, []int64{0, 4, 1, 2, 3, 5}},
		{"scatter_indx", out.ScatterIndx, []int64{0, 2, 3, 4, 1, 5}},
		{"gate_scal", out.GateScal, []int64{1, 5, 2, 3, 4, 6}},
	} {
		if got := c.t.Int64s(); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRoutingTileIndices: one expert of 65536 one-row tiles fills the 16
// bits of the tile index (its top bit sets the sign of the entry), and a
// word's bit 31 the sign of a bitmatrix entry.
func TestRoutingTileIndices(t *testing.T) {
	const T = 65536
	ids := tensor.New(tensor.I32, T, 1)
	v := make([]int64, T)
	for i := range v {
		v[i] = 31
	}
	ids.SetInt64s(v)
	out := routingNew(t, T, 1, 40, 1, false)
	if err := RoutingData(nil, out, ids, nil, RoutingOptions{Experts: 40, BlockM: 1}); err != nil {
		t.Fatal(err)
	}
	pids := out.BlockPidMap.Int64s()
	if len(pids) != T {
		t.Fatalf("%d tiles, want %d", len(pids), T)
	}
	for i, p := range pids {
		if want := int64(int32(uint32(i)<<16 | 31)); p != want {
			t.Fatalf("block_pid_map[%d] = %#x, want %#x", i, p, want)
		}
	}
	if got := out.Bitmatrix.Int64s()[:4]; !slices.Equal(got, []int64{math.MinInt32, 0, math.MinInt32, 0}) {
		t.Errorf("bitmatrix rows 0 and 1: %v", got)
	}
}

// TestRoutingDropped: ids outside [0, E) get no bit, no count and scatter
// index −1; the sorted arrays end in −1 and +0; a repeated expert is one
// bit but two pairs.
func TestRoutingDropped(t *testing.T) {
	ids := tensor.New(tensor.I32, 3, 2)
	ids.SetInt64s([]int64{1, -1, 4, 0, 1, 1})
	w := tensor.New(tensor.F32, 3, 2)
	w.SetFloat64s([]float64{1, 2, 3, 4, 5, 6})
	out := routingNew(t, 3, 2, 4, 16, true)
	if err := RoutingData(nil, out, ids, w, RoutingOptions{Experts: 4, BlockM: 16}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		t    *tensor.Tensor
		want []int64
	}{
		{"bitmatrix", out.Bitmatrix, []int64{0b10, 0b01, 0b10}},
		{"hist", out.Hist, []int64{1, 3, 0, 0}},
		{"token_offs_raw", out.TokenOffsRaw, []int64{0, 1, 4, 4, 4}},
		{"token_offs_pad", out.TokenOffsPad, []int64{0, 1, 2, 2, 2}},
		{"block_pid_map", out.BlockPidMap, []int64{0, 1, -1, -1}},
		{"gather_indx", out.GatherIndx, []int64{3, 0, 4, 5, -1, -1}},
		{"scatter_indx", out.ScatterIndx, []int64{1, -1, -1, 0, 2, 3}},
		{"gate_scal", out.GateScal, []int64{4, 1, 5, 6, 0, 0}},
	} {
		if got := c.t.Int64s(); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRoutingSizes(t *testing.T) {
	for _, c := range []struct {
		t, k, e, bm int
		want        RoutingSize
	}{
		{3, 2, 3, 2, RoutingSize{1, 4, 0}},
		{1, 8, 256, 16, RoutingSize{8, 8, 0}}, // T·k ≤ E: a tile a pair
		{4096, 8, 128, 64, RoutingSize{4, 127 + (32768-128)/64 + 1, 8 * 128}},
		{0, 8, 33, 16, RoutingSize{2, 0, 0}},
		{65536, 1, 2, 1, RoutingSize{1, 65536, 16 * 2}},
	} {
		sz, err := RoutingSizes(c.t, c.k, c.e, c.bm)
		if err != nil {
			t.Fatal(err)
		}
		if sz != c.want {
			t.Errorf("RoutingSizes(%d, %d, %d, %d) = %+v, want %+v", c.t, c.k, c.e, c.bm, sz, c.want)
		}
	}
	for _, c := range []struct {
		t, k, e, bm int
		arg         string
	}{
		{-1, 2, 8, 16, "tokens"}, {4, 0, 8, 16, "k"}, {4, 9, 8, 16, "k"}, {4, 2, 2000, 16, "experts"},
		{4, 2, 8, 0, "blockM"}, {65537, 1, 2, 1, "blockM"}, {1 << 28, 8, 8, 16, "tokens"},
	} {
		var ae *tensor.ArgError
		if _, err := RoutingSizes(c.t, c.k, c.e, c.bm); !errors.As(err, &ae) || ae.Arg != c.arg {
			t.Errorf("RoutingSizes(%d, %d, %d, %d): %v, want an ArgError on %s", c.t, c.k, c.e, c.bm, err, c.arg)
		}
	}
}

func TestRoutingBlockM(t *testing.T) {
	for _, c := range []struct{ t, k, e, want int }{
		{1, 8, 256, 16}, {4096, 8, 128, 128}, {512, 8, 128, 32}, {300, 8, 128, 32}, {16384, 10, 512, 128}, {0, 8, 8, 16},
	} {
		if got := RoutingBlockM(c.t, c.k, c.e); got != c.want {
			t.Errorf("RoutingBlockM(%d, %d, %d) = %d, want %d", c.t, c.k, c.e, got, c.want)
		}
	}
}

// TestRoutingValidation: each bad argument is an ArgError naming it, and
// nothing is written.
func TestRoutingValidation(t *testing.T) {
	type args struct {
		out    RoutingOutputs
		ids, w *tensor.Tensor
		o      RoutingOptions
	}
	const T, k, e, bm = 600, 8, 40, 16 // two tiles: a workspace
	good := func() args {
		w := tensor.New(tensor.F32, T, k)
		w.FillUniform(tensor.SeededRNG(2), 0, 1)
		return args{out: routingNew(t, T, k, e, bm, true), ids: alignIDs(tensor.SeededRNG(1), T, k, e), w: w, o: RoutingOptions{Experts: e, BlockM: bm}}
	}
	sz, _ := RoutingSizes(T, k, e, bm)
	cases := []struct {
		name, arg string
		edit      func(a *args)
	}{
		{"ids nil", "ids", func(a *args) { a.ids = nil }},
		{"ids i64", "ids", func(a *args) { a.ids = tensor.New(tensor.I64, T, k) }},
		{"ids strided", "ids", func(a *args) { a.ids, _ = tensor.NewStrided(tensor.I32, []int{T, k}, []int{k + 3, 1}) }},
		{"k above E", "ids", func(a *args) { a.ids = tensor.New(tensor.I32, 2, e+1) }},
		{"Experts above 1024", "Experts", func(a *args) { a.o.Experts = 1025 }},
		{"BlockM zero", "BlockM", func(a *args) { a.o.BlockM = -3 }},
		{"BlockM too small for 16-bit tiles", "BlockM", func(a *args) {
			a.ids, a.w, a.out.GateScal, a.o.BlockM = tensor.New(tensor.I32, 65537, 1), nil, nil, 1
		}},
		{"weights f16", "weights", func(a *args) { a.w = tensor.New(tensor.F16, T, k) }},
		{"weights short", "weights", func(a *args) { a.w = tensor.New(tensor.F32, T-1, k) }},
		{"gate without weights", "GateScal", func(a *args) { a.w = nil }},
		{"weights without gate", "GateScal", func(a *args) { a.out.GateScal = nil }},
		{"bitmatrix words", "Bitmatrix", func(a *args) { a.out.Bitmatrix = tensor.New(tensor.I32, T, sz.Words+1) }},
		{"hist short", "Hist", func(a *args) { a.out.Hist = tensor.New(tensor.I32, e-1) }},
		{"offs raw short", "TokenOffsRaw", func(a *args) { a.out.TokenOffsRaw = tensor.New(tensor.I32, e) }},
		{"offs pad f32", "TokenOffsPad", func(a *args) { a.out.TokenOffsPad = tensor.New(tensor.F32, e+1) }},
		{"pid map short", "BlockPidMap", func(a *args) { a.out.BlockPidMap = tensor.New(tensor.I32, sz.MaxTiles-1) }},
		{"gather short", "GatherIndx", func(a *args) { a.out.GatherIndx = tensor.New(tensor.I32, T*k-1) }},
		{"scatter 2-D", "ScatterIndx", func(a *args) { a.out.ScatterIndx = tensor.New(tensor.I32, T, k) }},
		{"gate i32", "GateScal", func(a *args) { a.out.GateScal = tensor.New(tensor.I32, T*k) }},
		{"workspace short", "Workspace", func(a *args) { a.out.Workspace = tensor.New(tensor.I32, sz.Workspace-1) }},
		{"scatter is gather", "ScatterIndx", func(a *args) { a.out.ScatterIndx = a.out.GatherIndx }},
		{"workspace overlaps hist", "Workspace", func(a *args) {
			a.out.Workspace = tensor.New(tensor.I32, sz.Workspace)
			a.out.Hist, _ = a.out.Workspace.Slice(0, 0, e)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := good()
			c.edit(&a)
			outs := routingOuts(a.out)
			for _, o := range outs {
				if o != nil {
					o.Poison()
				}
			}
			err := RoutingData(nil, a.out, a.ids, a.w, a.o)
			var ae *tensor.ArgError
			if !errors.As(err, &ae) || ae.Arg != c.arg {
				t.Fatalf("%v, want an ArgError on %s", err, c.arg)
			}
			if !strings.Contains(err.Error(), "moe.RoutingData") {
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
	if err := RoutingData(nil, a.out, a.ids, a.w, a.o); err != nil {
		t.Fatalf("good arguments: %v", err)
	}
	a.out.GateScal = nil
	if err := RoutingData(nil, a.out, a.ids, nil, a.o); err != nil {
		t.Fatalf("no weights: %v", err)
	}
}

// FuzzRoutingData calls RoutingData on the CPU path as FuzzAlignBlockSize
// calls AlignBlockSize: fuzzed shapes, Experts and BlockM, ids of any
// values, weights or none, outputs of other dtypes, ranks or sizes, nil,
// aliasing or overlapping. Errors come exactly where the documentation
// rejects the call, name an argument and write nothing; a success writes
// only the outputs, as built here from a stable sort of the kept pairs.
func FuzzRoutingData(f *testing.F) {
	fuzzargs.AddRandomSeeds(f, 24)
	f.Fuzz(func(t *testing.T, data []byte) {
		a := fuzzargs.NewSeededArena(data)
		in := a.In
		tokens, k := in.Dim(0, 64, 600), in.Dim(1, 12, 70)
		e := fuzzargs.Pick(in, 8, 3, 1, 40, 64, 33, 0, alignMaxExperts+1)
		bm := fuzzargs.Pick(in, 4, 1, 16, 3, 0, -1, 128, math.MaxInt)
		n, words := tokens*k, (max(e, 1)+31)/32
		maxTiles := n // as meant, for the shapes of the outputs
		if e >= 1 && n > e {
			maxTiles = e - 1 + (n-e)/max(bm, 1) + 1
		}
		ids := a.Arg("ids", tensor.I32, tokens, k)
		var w *tensor.Tensor
		if !in.One(3) {
			w = a.Arg("weights", tensor.F32, tokens, k)
		}
		out := RoutingOutputs{
			Bitmatrix: a.Arg("Bitmatrix", tensor.I32, tokens, words), Hist: a.Arg("Hist", tensor.I32, e),
			TokenOffsRaw: a.Arg("TokenOffsRaw", tensor.I32, e+1), TokenOffsPad: a.Arg("TokenOffsPad", tensor.I32, e+1),
			BlockPidMap: a.Arg("BlockPidMap", tensor.I32, maxTiles), GatherIndx: a.Arg("GatherIndx", tensor.I32, n),
			ScatterIndx: a.Arg("ScatterIndx", tensor.I32, n),
		}
		if w != nil || in.One(8) {
			out.GateScal = a.Arg("GateScal", tensor.F32, n)
		}
		if alignTiles(tokens, max(k, 1)) > 1 || in.One(4) {
			out.Workspace = a.Arg("Workspace", tensor.I32, alignTiles(tokens, max(k, 1))*e)
		}
		a.Fill()
		o := RoutingOptions{Experts: e, BlockM: bm}
		what := fmt.Sprintf("RoutingData(ids %s, weights %s, E %d, block_m %d)", a.Desc(ids), a.Desc(w), e, bm)
		err := RoutingData(nil, out, ids, w, o)

		// Why the documentation rejects the call, or "".
		why := ""
		outs := routingOuts(out)
		switch {
		case ids == nil || ids.Rank() != 2 || ids.DType() != tensor.I32 || !ids.Contiguous():
			why = "ids is no contiguous i32 matrix"
		case e < 1 || e > alignMaxExperts || ids.Dim(1) < 1 || ids.Dim(1) > e:
			why = "k or E out of range"
		case bm < 1 || bm > 1<<30:
			why = "BlockM outside [1, 2^30]"
		case w != nil && (w.DType() != tensor.F32 || !slices.Equal(w.Shape(), ids.Shape()) || !w.Contiguous()):
			why = "weights are no contiguous f32 like ids"
		}
		var ws int
		if why == "" {
			tokens, k = ids.Dim(0), ids.Dim(1)
			n, words = tokens*k, (e+31)/32
			maxTiles, ws = n, 0
			if n > e {
				maxTiles = e - 1 + (n-e)/bm + 1
			}
			if tiles := (tokens + alignTileTokens(k) - 1) / alignTileTokens(k); tiles > 1 {
				ws = tiles * e
			}
			if n > 0 && (n-1)/bm+1 > 1<<16 {
				why = "more than 65536 tiles of one expert"
			}
		}
		wsT := out.Workspace
		switch {
		case why != "":
		case out.Bitmatrix == nil || out.Bitmatrix.DType() != tensor.I32 || !slices.Equal(out.Bitmatrix.Shape(), []int{tokens, words}) || !out.Bitmatrix.Contiguous(),
			!alignFuzzI32(out.Hist, e), !alignFuzzI32(out.TokenOffsRaw, e+1), !alignFuzzI32(out.TokenOffsPad, e+1),
			!alignFuzzI32(out.BlockPidMap, maxTiles), !alignFuzzI32(out.GatherIndx, n), !alignFuzzI32(out.ScatterIndx, n):
			why = "an output's shape or dtype"
		case (w == nil) != (out.GateScal == nil),
			out.GateScal != nil && (out.GateScal.Rank() != 1 || out.GateScal.DType() != tensor.F32 || out.GateScal.Dim(0) != n):
			why = "GateScal"
		case (wsT != nil || ws > 0) && (wsT == nil || wsT.Rank() != 1 || wsT.DType() != tensor.I32 || wsT.Dim(0) < ws):
			why = "the workspace"
		case alignFuzzOverlap([]*tensor.Tensor{ids, w}, append(outs, wsT)):
			why = "an output overlaps"
		}
		if err != nil {
			if why == "" {
				t.Fatalf("%s: error %v, but the docs take the call", what, err)
			}
			a.CheckError(t, what, err, "moe", "ids", "weights", "Experts", "BlockM", "Bitmatrix", "Hist", "TokenOffsRaw",
				"TokenOffsPad", "BlockPidMap", "GatherIndx", "ScatterIndx", "GateScal", "Workspace")
			return
		}
		if why != "" {
			t.Fatalf("%s: no error, but the docs reject it (%s)", what, why)
		}
		a.CheckWrites(t, what, outs...)

		flat := ids.Int64s()
		bits := make([]int64, tokens*words)
		hist, raw, pad := make([]int64, e), make([]int64, e+1), make([]int64, e+1)
		gather, scatter := make([]int64, n), make([]int64, n)
		for i := range gather {
			gather[i], scatter[i] = -1, -1
		}
		var gate []byte
		if w != nil {
			gate = make([]byte, 4*n)
		}
		pairs := alignModelPairs(flat, nil, e)
		for p, q := range pairs {
			f, b := q[0], q[1]
			bits[f/k*words+b/32] = int64(int32(uint32(bits[f/k*words+b/32]) | 1<<(b%32)))
			hist[b]++
			gather[p], scatter[f] = int64(f), int64(p)
			if w != nil {
				copy(gate[4*p:4*p+4], fuzzargs.ElemBytes(w)[4*f:4*f+4])
			}
		}
		var pids []int64
		for b := range e {
			raw[b+1] = raw[b] + hist[b]
			tiles := (hist[b] + int64(bm) - 1) / int64(bm)
			pad[b+1] = pad[b] + tiles
			for i := range tiles {
				pids = append(pids, int64(int32(uint32(i)<<16|uint32(b))))
			}
		}
		for len(pids) < maxTiles {
			pids = append(pids, -1)
		}
		for i, want := range [][]int64{bits, hist, raw, pad, pids, gather, scatter} {
			if got := outs[i].Int64s(); !slices.Equal(got, want) {
				t.Fatalf("%s: output %d is %v, want %v", what, i, got, want)
			}
		}
		if w != nil && !slices.Equal(fuzzargs.ElemBytes(out.GateScal), gate) {
			t.Fatalf("%s: gate_scal bits % x, want % x", what, fuzzargs.ElemBytes(out.GateScal), gate)
		}
	})
}
