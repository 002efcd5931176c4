package moe

import (
	_ "embed"
	"encoding/binary"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

//go:embed routing.cu
var routingSrc string

// routingMaxTileIndex bounds the tiles of one expert: block_pid_map keeps
// a tile's index within its expert in 16 bits.
const routingMaxTileIndex = 1 << 16

// RoutingOptions say how RoutingData counts the experts' tiles.
type RoutingOptions struct {
	// Experts is E, the number of experts: ids lie in [0, E), and
	// 1 ≤ k ≤ E ≤ 1024.
	Experts int
	// BlockM is the rows of the grouped GEMM's tiles, 1 ≤ BlockM ≤ 2^30
	// (RoutingBlockM gives triton_kernels' choice). An expert's tiles are
	// counted in 16 bits, so ⌈T·k/BlockM⌉ may not exceed 65536.
	BlockM int
}

// RoutingOutputs are what RoutingData writes, sized by RoutingSizes, and
// its scratch. Every index is i32.
type RoutingOutputs struct {
	// Bitmatrix [T, Words]: the 32-bit words of each token's row, word w
	// of token t at element t·Words + w, bit e mod 32 of word ⌊e/32⌋ set
	// where the token takes expert e (the words' bits, as i32).
	Bitmatrix *tensor.Tensor
	// Hist [E]: the pairs of each expert.
	Hist *tensor.Tensor
	// TokenOffsRaw [E + 1]: the exclusive prefix sums of Hist; the last
	// entry is the total.
	TokenOffsRaw *tensor.Tensor
	// TokenOffsPad [E + 1]: the exclusive prefix sums of the experts'
	// tile counts ⌈Hist[e]/BlockM⌉; the last entry is the total of tiles.
	TokenOffsPad *tensor.Tensor
	// BlockPidMap [MaxTiles]: for each tile of the sorted pairs, its index
	// within its expert in the high 16 bits and the expert in the low 16
	// ((i << 16) | e); −1 for the entries past the total of tiles.
	BlockPidMap *tensor.Tensor
	// GatherIndx [T·k]: the flat index f of the pair at each sorted
	// position p.
	GatherIndx *tensor.Tensor
	// ScatterIndx [T·k]: the sorted position p of each pair f (the
	// inverse of GatherIndx).
	ScatterIndx *tensor.Tensor
	// GateScal [T·k] f32: the weight of the pair at each sorted position
	// (weights.flat[GatherIndx[p]], its bits copied); set exactly when
	// RoutingData is given weights.
	GateScal *tensor.Tensor
	// Workspace: at least RoutingSize.Workspace i32 elements of scratch,
	// whose contents RoutingData neither reads nor keeps (nil where that
	// size is 0; the host path does not use it).
	Workspace *tensor.Tensor
}

// RoutingSize is the sizes of RoutingData's buffers that are not plain
// functions of T, k and E.
type RoutingSize struct {
	// Words is ⌈E/32⌉, the bitmatrix words of a token.
	Words int
	// MaxTiles is the most tiles any routing of the shape can need:
	// T·k where T·k ≤ E, else E − 1 + ⌈(T·k − E + 1)/BlockM⌉.
	MaxTiles int
	// Workspace is the scratch of the three-kernel path, taken when the
	// pairs do not fit one block's tile of about 4096 pairs; 0 otherwise.
	Workspace int
}

// RoutingSizes returns the sizes of RoutingData's buffers for T tokens of k
// experts each out of E, in tiles of blockM rows, so that a caller can
// allocate them once for a shape. It returns an error for arguments
// RoutingData would refuse.
func RoutingSizes(tokens, k, experts, blockM int) (RoutingSize, error) {
	v := tensor.Validate("moe.RoutingSizes")
	v.Check(tokens >= 0, "tokens", "is %d, want ≥ 0", tokens)
	alignCheckExperts(v, "k", k, "experts", experts)
	v.Check(blockM >= 1 && blockM <= alignMaxElems, "blockM", "is %d, want 1 to 2^30", blockM)
	if err := v.Err(); err != nil {
		return RoutingSize{}, err
	}
	sz := routingSizes(v, "tokens", "blockM", tokens, k, experts, blockM)
	return sz, v.Err()
}

// routingSizes computes RoutingSizes for valid arguments, recording
// against tArg a shape whose sizes the kernels cannot index and against
// bmArg a BlockM too small for 16-bit tile indices.
func routingSizes(v *tensor.Validator, tArg, bmArg string, t, k, e, bm int) RoutingSize {
	words := intmath.CeilDiv(e, 32)
	n, ok := alignPairs(t, k)
	v.Check(ok && t <= alignMaxElems/words, tArg, "%d tokens of %d experts out of %d make more than the %d elements the kernels index",
		t, k, e, alignMaxElems)
	if v.Err() != nil {
		return RoutingSize{}
	}
	perExpert := 0
	if n > 0 {
		perExpert = (n-1)/bm + 1
	}
	v.Check(perExpert <= routingMaxTileIndex, bmArg, "is %d: %d pairs may make %d tiles of one expert, more than the %d a 16-bit tile index counts",
		bm, n, perExpert, routingMaxTileIndex)
	sz := RoutingSize{Words: words, MaxTiles: n}
	if n > e {
		sz.MaxTiles = e - 1 + (n-e)/bm + 1
	}
	if tiles := alignTiles(t, k); tiles > 1 {
		sz.Workspace = tiles * e
	}
	return sz
}

// RoutingBlockM is triton_kernels' choice of tile rows for T tokens of k
// experts out of E: the power of two nearest above the mean pairs an expert
// (T·k/E, rounded down), within [16, 128].
func RoutingBlockM(tokens, k, experts int) int {
	if tokens <= 0 || k <= 0 || experts <= 0 {
		return 16
	}
	return min(128, max(16, intmath.NextPow2(min(tokens, alignMaxElems)*min(k, alignMaxElems)/experts)))
}

// RoutingData computes the routing metadata of triton_kernels' MoE GEMMs
// from the experts each token takes: the bitmatrix of selections, the
// experts' counts (sum_bitmatrix_rows), their offsets in pairs and in tiles
// and the map of tiles (expt_data), and the gather and scatter indices that
// sort the pairs by expert, with the gate weights in sorted order.
//
// ids is [T, k] i32, contiguous: the experts of each token; weights, when
// not nil, is [T, k] f32, contiguous: their gate weights. Pair (t, j) has
// the flat index f = t·k + j. The pairs are sorted by expert, ascending f
// within an expert: sorted position p of a pair of expert e is
// TokenOffsRaw[e] plus the number of e's pairs before it. See
// RoutingOutputs for each output; their sizes are exactly [T, Words] for
// Bitmatrix, [E] for Hist, [E + 1] for the offsets, [MaxTiles] for
// BlockPidMap, [T·k] for the sorted arrays, with Words and MaxTiles from
// RoutingSizes(T, k, E, o.BlockM); the workspace may be larger.
//
// A pair whose id lies outside [0, E) is dropped: no bit, no count, −1 in
// ScatterIndx; the sorted arrays then end past TokenOffsRaw[E] in −1
// (GatherIndx) and +0 (GateScal). The ids of a token are expected to be
// distinct, as a router's are; where an expert repeats, the bitmatrix marks
// it once while the counts and indices count every pair.
//
// On device tensors the call runs one kernel when the pairs fit one tile
// (about 4096 pairs: decode and small prefill batches) and three
// otherwise; none waits for the host or allocates, so the call can be
// captured in a CUDA graph.
// Host tensors run the CPU reference, device tensors the kernels, on s
// (nil: the device's default stream). Nothing is written when an argument
// is bad.
func RoutingData(s *cuda.Stream, out RoutingOutputs, ids, weights *tensor.Tensor, o RoutingOptions) error {
	sz, err := routingValidate(s, out, ids, weights, o)
	if err != nil {
		return err
	}
	if !ids.IsDevice() {
		routingReference(out, ids, weights, o)
		return nil
	}
	return routingLaunch(s, out, ids, weights, o, sz)
}

func routingValidate(s *cuda.Stream, out RoutingOutputs, ids, weights *tensor.Tensor, o RoutingOptions) (RoutingSize, error) {
	v := tensor.Validate("moe.RoutingData")
	alignCheckIDs(v, ids)
	if err := v.Err(); err != nil {
		return RoutingSize{}, err
	}
	t, k, e, bm := ids.Dim(0), ids.Dim(1), o.Experts, o.BlockM
	alignCheckExperts(v, "ids", k, "Experts", e)
	v.Check(bm >= 1 && bm <= alignMaxElems, "BlockM", "is %d, want 1 to 2^30", bm)
	v.Optional("weights", weights).Rank(2).DType(tensor.F32).Shape(t, k).Contiguous()
	if err := v.Err(); err != nil {
		return RoutingSize{}, err
	}
	sz := routingSizes(v, "ids", "BlockM", t, k, e, bm)
	n := t * k
	v.Tensor("Bitmatrix", out.Bitmatrix).Rank(2).DType(tensor.I32).Shape(t, sz.Words).Contiguous()
	v.Tensor("Hist", out.Hist).Rank(1).DType(tensor.I32).Shape(e)
	v.Tensor("TokenOffsRaw", out.TokenOffsRaw).Rank(1).DType(tensor.I32).Shape(e + 1)
	v.Tensor("TokenOffsPad", out.TokenOffsPad).Rank(1).DType(tensor.I32).Shape(e + 1)
	v.Tensor("BlockPidMap", out.BlockPidMap).Rank(1).DType(tensor.I32).Shape(sz.MaxTiles)
	v.Tensor("GatherIndx", out.GatherIndx).Rank(1).DType(tensor.I32).Shape(n)
	v.Tensor("ScatterIndx", out.ScatterIndx).Rank(1).DType(tensor.I32).Shape(n)
	if weights != nil {
		v.Tensor("GateScal", out.GateScal).Rank(1).DType(tensor.F32).Shape(n)
	} else {
		v.Check(out.GateScal == nil, "GateScal", "is set without weights to sort")
	}
	alignCheckWorkspace(v, out.Workspace, sz.Workspace)
	if err := v.Err(); err != nil {
		return RoutingSize{}, err
	}
	alignCheckPlaces(v, s, []string{"ids", "weights"}, []*tensor.Tensor{ids, weights},
		[]string{"Bitmatrix", "Hist", "TokenOffsRaw", "TokenOffsPad", "BlockPidMap", "GatherIndx", "ScatterIndx", "GateScal", "Workspace"},
		[]*tensor.Tensor{out.Bitmatrix, out.Hist, out.TokenOffsRaw, out.TokenOffsPad, out.BlockPidMap, out.GatherIndx, out.ScatterIndx,
			out.GateScal, out.Workspace})
	return sz, v.Err()
}

// routingReference is RoutingData on the host.
func routingReference(out RoutingOutputs, ids, weights *tensor.Tensor, o RoutingOptions) {
	e, bm := o.Experts, o.BlockM
	t, k := ids.Dim(0), ids.Dim(1)
	buckets := alignBuckets(ids.Int64s(), nil, e)
	n := len(buckets)
	words := out.Bitmatrix.Dim(1)
	bits := make([]uint32, t*words)
	cnt := make([]int, e)
	for f, b := range buckets {
		if b >= 0 {
			bits[f/k*words+b/32] |= 1 << (b % 32)
			cnt[b]++
		}
	}
	raw, pad := make([]int, e+1), make([]int, e+1)
	for i, c := range cnt {
		raw[i+1] = raw[i] + c
		pad[i+1] = pad[i] + intmath.CeilDiv(c, bm)
	}
	gather, scatter := make([]int64, n), make([]int64, n)
	for p := range gather {
		gather[p] = -1
	}
	var w, g []byte
	if weights != nil {
		w, g = weights.Bytes(), out.GateScal.Bytes()
		clear(g)
	}
	next := append([]int{}, raw[:e]...)
	for f, b := range buckets {
		if b < 0 {
			scatter[f] = -1
			continue
		}
		p := next[b]
		next[b]++
		gather[p], scatter[f] = int64(f), int64(p)
		if w != nil {
			binary.LittleEndian.PutUint32(g[4*p:], binary.LittleEndian.Uint32(w[4*f:]))
		}
	}
	pids := make([]int64, out.BlockPidMap.Dim(0))
	for i := range pids {
		pids[i] = -1
	}
	for i := range e {
		for j := range pad[i+1] - pad[i] {
			pids[pad[i]+j] = int64(int32(uint32(j)<<16 | uint32(i)))
		}
	}
	out.Bitmatrix.SetInt64s(routingInt32s(bits))
	out.Hist.SetInt64s(routingInt64s(cnt))
	out.TokenOffsRaw.SetInt64s(routingInt64s(raw))
	out.TokenOffsPad.SetInt64s(routingInt64s(pad))
	out.BlockPidMap.SetInt64s(pids)
	out.GatherIndx.SetInt64s(gather)
	out.ScatterIndx.SetInt64s(scatter)
}

// routingInt32s returns 32-bit words as the i32 values of their bits.
func routingInt32s(ws []uint32) []int64 {
	out := make([]int64, len(ws))
	for i, w := range ws {
		out[i] = int64(int32(w))
	}
	return out
}

func routingInt64s(xs []int) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = int64(x)
	}
	return out
}

// routingKey is one specialization of routing.cu: the entry and its warps.
type routingKey struct {
	entry string
	warps int
}

var routingFuncs = jit.Funcs[routingKey]{Kernel: func(k routingKey) jit.Kernel {
	return jit.Kernel{File: "moe/routing.cu", Source: alignSource("routing.cu", routingSrc), Entry: k.entry,
		Defines: jit.Defines(map[string]any{"WARPS": k.warps})}
}}

// routingEntries are routing.cu's kernels.
var routingEntries = []string{"routing_fused", "routing_count", "routing_scan", "routing_scatter"}

// preparedRouting lists routing.cu's kernels at the warps pickAlign gives
// on p for 8 to 512 experts.
func preparedRouting(p cuda.Props) []jit.Kernel {
	var ks []jit.Kernel
	seen := map[routingKey]bool{}
	for _, e := range []int{8, 64, 128, 256, 512} {
		for _, entry := range routingEntries {
			k := routingKey{entry, pickAlign(p, 1, 1, e).warps}
			if !seen[k] {
				seen[k] = true
				ks = append(ks, routingFuncs.Kernel(k))
			}
		}
	}
	return ks
}

func routingLaunch(s *cuda.Stream, out RoutingOutputs, ids, weights *tensor.Tensor, o RoutingOptions, sz RoutingSize) error {
	dev := ids.Device()
	if s == nil {
		s = dev.DefaultStream()
	}
	t, k, e, bm := ids.Dim(0), ids.Dim(1), o.Experts, o.BlockM
	c := pickAlign(dev.Props(), t, k, e)
	block := cuda.D1(32 * c.warps)
	w, gammas := alignPtr(weights), alignPtr(out.GateScal)
	get := func(names ...string) ([]*cuda.Function, error) {
		return alignGet(&routingFuncs, dev, s, func(n string) routingKey { return routingKey{n, c.warps} }, names...)
	}
	if c.tiles == 1 {
		fns, err := get("routing_fused")
		if err != nil {
			return err
		}
		return fns[0].Launch(cuda.LaunchConfig{Grid: cuda.D1(1), Block: block, Shared: 8*e + 4*c.warps*e, Stream: s},
			cuda.NewArgs().Ptr(ids.Ptr()).Ptr(w).I32(int32(t)).I32(int32(k)).I32(int32(e)).I32(int32(bm)).
				I32(int32(sz.Words)).I32(int32(sz.MaxTiles)).Ptr(out.Bitmatrix.Ptr()).Ptr(out.Hist.Ptr()).
				Ptr(out.TokenOffsRaw.Ptr()).Ptr(out.TokenOffsPad.Ptr()).Ptr(out.BlockPidMap.Ptr()).
				Ptr(out.GatherIndx.Ptr()).Ptr(out.ScatterIndx.Ptr()).Ptr(gammas))
	}
	fns, err := get("routing_count", "routing_scan", "routing_scatter")
	if err != nil {
		return err
	}
	part, grid := out.Workspace.Ptr(), cuda.D1(c.tiles)
	if err := fns[0].Launch(cuda.LaunchConfig{Grid: grid, Block: block, Shared: 4 * e, Stream: s},
		cuda.NewArgs().Ptr(ids.Ptr()).I32(int32(t)).I32(int32(k)).I32(int32(c.tileTokens)).I32(int32(e)).
			I32(int32(sz.Words)).Ptr(out.Bitmatrix.Ptr()).Ptr(part)); err != nil {
		return err
	}
	if err := fns[1].Launch(cuda.LaunchConfig{Grid: cuda.D1(1), Block: cuda.D1(c.scanBlock), Shared: 8 * e, Stream: s},
		cuda.NewArgs().I32(int32(c.tiles)).I32(int32(e)).I32(int32(bm)).Ptr(part).Ptr(out.Hist.Ptr()).
			Ptr(out.TokenOffsRaw.Ptr()).Ptr(out.TokenOffsPad.Ptr())); err != nil {
		return err
	}
	return fns[2].Launch(cuda.LaunchConfig{Grid: grid, Block: block, Shared: 4 * c.warps * e, Stream: s},
		cuda.NewArgs().Ptr(ids.Ptr()).Ptr(w).I32(int32(t*k)).I32(int32(c.tileTokens*k)).I32(int32(e)).
			I32(int32(sz.MaxTiles)).Ptr(part).Ptr(out.TokenOffsRaw.Ptr()).Ptr(out.TokenOffsPad.Ptr()).
			Ptr(out.BlockPidMap.Ptr()).Ptr(out.GatherIndx.Ptr()).Ptr(out.ScatterIndx.Ptr()).Ptr(gammas))
}
