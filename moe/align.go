package moe

import (
	_ "embed"
	"slices"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

var (
	//go:embed align_sort.cuh
	alignSortSrc string
	//go:embed align.cu
	alignSrc string
)

const (
	// alignMaxExperts is the most experts AlignBlockSize and RoutingData
	// take: per-warp counts of that many experts in shared memory leave
	// room for 8 warps a block within the 48 KiB every device gives one.
	alignMaxExperts = 1024
	// alignMaxElems bounds the pairs, the sorted positions and the
	// bitmatrix words: the kernels index them, and step past them by a
	// grid's threads, in int.
	alignMaxElems = 1 << 30
	// alignTilePairs is about how many pairs a block of the count and
	// scatter kernels takes: its per-expert partials, E a tile, then cost an
	// eighth of the pairs' own reads at E = 512.
	alignTilePairs = 4096
	// alignMaxWarps is the most warps a block of the sort has: the fused
	// kernel walks 4096 pairs as 16 runs of 256.
	alignMaxWarps = 16
)

// AlignOptions say how AlignBlockSize groups and pads the pairs.
type AlignOptions struct {
	// Experts is E, the number of experts: ids lie in [0, E), and
	// 1 ≤ k ≤ E ≤ 1024.
	Experts int
	// BlockSize is bs, the grouped GEMM's block of rows (its BLOCK_SIZE_M:
	// 16, 32, 64 or 128 in practice), 1 ≤ bs ≤ 2^30.
	BlockSize int
	// ExpertMap, when set, is an i32 [E] map for expert parallelism: entry
	// e is expert e's id on this rank, or −1 where expert e lives on
	// another rank (any value outside [0, E) counts as −1).
	ExpertMap *tensor.Tensor
}

// AlignOutputs are what AlignBlockSize writes, all i32 and sized by
// AlignSizes, and its scratch.
type AlignOutputs struct {
	// SortedTokenIDs [AlignSize.SortedTokenIDs]: the flat indices f of the
	// pairs, grouped by expert and padded with T·k.
	SortedTokenIDs *tensor.Tensor
	// ExpertIDs [AlignSize.ExpertIDs]: the expert of each block.
	ExpertIDs *tensor.Tensor
	// NumTokensPostPad [1]: the padded total.
	NumTokensPostPad *tensor.Tensor
	// Workspace: at least AlignSize.Workspace elements of scratch, whose
	// contents AlignBlockSize neither reads nor keeps (nil where that size
	// is 0; the host path does not use it).
	Workspace *tensor.Tensor
}

// AlignSize is the number of elements of AlignBlockSize's buffers for one
// shape: the bounds that hold for every routing of it.
type AlignSize struct {
	// SortedTokenIDs is S = T·k + min(E, T·k)·(bs − 1), rounded up to a
	// multiple of bs: every expert with pairs pads fewer than bs.
	SortedTokenIDs int
	// ExpertIDs is S / bs.
	ExpertIDs int
	// Workspace is the scratch of the three-kernel path, taken when the
	// pairs do not fit one block's tile of about 4096 pairs; 0 otherwise.
	Workspace int
}

// AlignSizes returns the buffer sizes of AlignBlockSize for T tokens of k
// experts each out of E, padded to blocks of bs, so that a caller can
// allocate them once for a shape. It returns an error for arguments
// AlignBlockSize would refuse: T < 0, k < 1, k > E, E > 1024, bs outside
// [1, 2^30], or sizes past 2^30 elements.
func AlignSizes(tokens, k, experts, blockSize int) (AlignSize, error) {
	v := tensor.Validate("moe.AlignSizes")
	v.Check(tokens >= 0, "tokens", "is %d, want ≥ 0", tokens)
	alignCheckExperts(v, "k", k, "experts", experts)
	v.Check(blockSize >= 1 && blockSize <= alignMaxElems, "blockSize", "is %d, want 1 to 2^30", blockSize)
	if err := v.Err(); err != nil {
		return AlignSize{}, err
	}
	sz, ok := alignSizes(tokens, k, experts, blockSize)
	v.Check(ok, "tokens", "%d tokens of %d experts padded to blocks of %d need more than the %d elements the kernels index",
		tokens, k, blockSize, alignMaxElems)
	return sz, v.Err()
}

// alignCheckExperts checks 1 ≤ k ≤ E ≤ alignMaxExperts, naming the
// arguments as given.
func alignCheckExperts(v *tensor.Validator, kArg string, k int, eArg string, e int) {
	v.Check(e >= 1 && e <= alignMaxExperts, eArg, "is %d, want 1 to %d experts", e, alignMaxExperts)
	v.Check(k >= 1, kArg, "gives k = %d experts a token, want k ≥ 1", k)
	v.Check(k <= e, kArg, "gives k = %d experts a token, more than the E = %d experts", k, e)
}

// alignPairs returns T·k, and false where it exceeds alignMaxElems.
func alignPairs(t, k int) (int, bool) {
	if t > alignMaxElems/k {
		return 0, false
	}
	return t * k, true
}

// alignSizes computes AlignSizes for valid T, k, E and bs (1 ≤ bs ≤
// alignMaxElems); false where a size exceeds alignMaxElems.
func alignSizes(t, k, e, bs int) (AlignSize, bool) {
	n, ok := alignPairs(t, k)
	if !ok {
		return AlignSize{}, false
	}
	s := intmath.RoundUp(n+min(e, n)*(bs-1), bs)
	if s > alignMaxElems {
		return AlignSize{}, false
	}
	sz := AlignSize{SortedTokenIDs: s, ExpertIDs: s / bs}
	if tiles := alignTiles(t, k); tiles > 1 {
		sz.Workspace = 2*e + 1 + tiles*e
	}
	return sz, true
}

// alignTileTokens is the tokens of one tile of the sort: whole tokens, about
// alignTilePairs pairs.
func alignTileTokens(k int) int { return max(1, alignTilePairs/k) }

// alignTiles is the number of tiles of T tokens of k pairs: 1 for T = 0,
// where the fused kernel writes the empty result.
func alignTiles(t, k int) int { return max(1, intmath.CeilDiv(t, alignTileTokens(k))) }

// AlignBlockSize groups the (token, slot) pairs of ids by expert and pads
// each expert's group to a multiple of the block size, as vLLM's
// moe_align_block_size does, so that a grouped GEMM gives each block of
// BlockSize rows exactly one expert.
//
// ids is [T, k] i32, contiguous: the experts of each token. Pair (t, j) has
// the flat index f = t·k + j, and numel = T·k. With cnt[e] the pairs of
// expert e, bs = o.BlockSize and off[e] = Σ_{e' < e} ⌈cnt[e']/bs⌉·bs:
//
//   - out.SortedTokenIDs holds expert e's pairs at [off[e], off[e] +
//     cnt[e]), in ascending f, and numel at every other position (the rest
//     of each expert's padded range, and everything past the padded total):
//     a GEMM knows padding as f ≥ numel.
//   - out.ExpertIDs[b] is the expert of positions [b·bs, (b + 1)·bs), and 0
//     for the blocks past the padded total.
//   - out.NumTokensPostPad[0] is the padded total, Σ ⌈cnt[e]/bs⌉·bs.
//
// The buffers are i32 of exactly the sizes AlignSizes(T, k, E, bs) gives,
// which bound every routing of the shape; the workspace may be larger.
// The order within an expert is ascending f, so the result is
// deterministic.
//
// A pair whose id lies outside [0, E) is dropped: it appears nowhere. With
// o.ExpertMap, pairs are grouped by the local id the map gives their
// expert, and the pairs of experts the map marks −1 (any entry outside [0,
// E)) are dropped as well: a rank's buffers then hold only the pairs its
// experts take, ExpertIDs holds local ids and never −1, and the padding
// value stays T·k.
//
// On device tensors the call runs one kernel when the pairs fit one tile
// (about 4096 pairs: decode and small prefill batches) and three
// otherwise; none waits for the host or allocates, so the call can be
// captured in a CUDA graph.
// Host tensors run the CPU reference, device tensors the kernels, on s
// (nil: the device's default stream). Nothing is written when an argument
// is bad.
func AlignBlockSize(s *cuda.Stream, out AlignOutputs, ids *tensor.Tensor, o AlignOptions) error {
	sz, err := alignValidate(s, out, ids, o)
	if err != nil {
		return err
	}
	if !ids.IsDevice() {
		alignReference(out, ids, o)
		return nil
	}
	return alignLaunch(s, out, ids, o, sz)
}

func alignValidate(s *cuda.Stream, out AlignOutputs, ids *tensor.Tensor, o AlignOptions) (AlignSize, error) {
	v := tensor.Validate("moe.AlignBlockSize")
	alignCheckIDs(v, ids)
	if err := v.Err(); err != nil {
		return AlignSize{}, err
	}
	t, k, e, bs := ids.Dim(0), ids.Dim(1), o.Experts, o.BlockSize
	alignCheckExperts(v, "ids", k, "Experts", e)
	v.Check(bs >= 1 && bs <= alignMaxElems, "BlockSize", "is %d, want 1 to 2^30", bs)
	v.Optional("ExpertMap", o.ExpertMap).Rank(1).DType(tensor.I32).Shape(e)
	if err := v.Err(); err != nil {
		return AlignSize{}, err
	}
	sz, ok := alignSizes(t, k, e, bs)
	v.Check(ok, "ids", "has shape %v: padded to blocks of %d, more than the %d elements the kernels index",
		ids.Shape(), bs, alignMaxElems)
	v.Tensor("SortedTokenIDs", out.SortedTokenIDs).Rank(1).DType(tensor.I32).Shape(sz.SortedTokenIDs)
	v.Tensor("ExpertIDs", out.ExpertIDs).Rank(1).DType(tensor.I32).Shape(sz.ExpertIDs)
	v.Tensor("NumTokensPostPad", out.NumTokensPostPad).Rank(1).DType(tensor.I32).Shape(1)
	alignCheckWorkspace(v, out.Workspace, sz.Workspace)
	if err := v.Err(); err != nil {
		return AlignSize{}, err
	}
	ins := []*tensor.Tensor{ids, o.ExpertMap}
	outs := []*tensor.Tensor{out.SortedTokenIDs, out.ExpertIDs, out.NumTokensPostPad, out.Workspace}
	alignCheckPlaces(v, s, []string{"ids", "ExpertMap"}, ins,
		[]string{"SortedTokenIDs", "ExpertIDs", "NumTokensPostPad", "Workspace"}, outs)
	return sz, v.Err()
}

// alignCheckIDs checks ids: [T, k] i32, contiguous.
func alignCheckIDs(v *tensor.Validator, ids *tensor.Tensor) {
	v.Tensor("ids", ids).Rank(2).DType(tensor.I32).Contiguous()
}

// alignCheckWorkspace checks a workspace of at least n i32 elements (nil
// allowed where n is 0).
func alignCheckWorkspace(v *tensor.Validator, ws *tensor.Tensor, n int) {
	if n == 0 && ws == nil {
		return
	}
	v.Tensor("Workspace", ws).Rank(1).DType(tensor.I32)
	if ws != nil && v.Err() == nil {
		v.Check(ws.Dim(0) >= n, "Workspace", "has %d elements, want at least %d", ws.Dim(0), n)
	}
}

// alignCheckPlaces checks that the inputs and outputs (nil ones skipped)
// share one location with s, that no output overlaps an input or another
// output, and that device tensors can be indexed in int32.
func alignCheckPlaces(v *tensor.Validator, s *cuda.Stream, inNames []string, ins []*tensor.Tensor, outNames []string, outs []*tensor.Tensor) {
	v.SameLocation(s, slices.Concat(inNames, outNames), slices.Concat(ins, outs)...)
	for i, o := range outs {
		for j, in := range ins {
			v.NoOverlap(outNames[i], o, inNames[j], in)
		}
		for j := range i {
			v.NoOverlap(outNames[i], o, outNames[j], outs[j])
		}
		if o != nil && o.IsDevice() {
			v.Tensor(outNames[i], o).Int32Indexable()
		}
	}
}

// alignReference is AlignBlockSize on the host.
func alignReference(out AlignOutputs, ids *tensor.Tensor, o AlignOptions) {
	e, bs := o.Experts, o.BlockSize
	var emap []int64
	if o.ExpertMap != nil {
		emap = o.ExpertMap.Int64s()
	}
	buckets := alignBuckets(ids.Int64s(), emap, e)
	numel := len(buckets)
	cnt := make([]int, e)
	for _, b := range buckets {
		if b >= 0 {
			cnt[b]++
		}
	}
	off := make([]int, e+1)
	for i, c := range cnt {
		off[i+1] = off[i] + intmath.RoundUp(c, bs)
	}
	sorted := make([]int64, out.SortedTokenIDs.Dim(0))
	for i := range sorted {
		sorted[i] = int64(numel)
	}
	next := append([]int{}, off[:e]...)
	for f, b := range buckets {
		if b >= 0 {
			sorted[next[b]] = int64(f)
			next[b]++
		}
	}
	experts := make([]int64, out.ExpertIDs.Dim(0))
	for i := range e {
		for j := off[i] / bs; j < off[i+1]/bs; j++ {
			experts[j] = int64(i)
		}
	}
	out.SortedTokenIDs.SetInt64s(sorted)
	out.ExpertIDs.SetInt64s(experts)
	out.NumTokensPostPad.SetInt64s([]int64{int64(off[e])})
}

// alignBuckets returns the bucket of every pair: its id, through emap when
// not nil, or −1 where it is dropped (outside [0, e) before or after the
// map).
func alignBuckets(ids, emap []int64, e int) []int {
	out := make([]int, len(ids))
	for f, id := range ids {
		if id >= 0 && id < int64(e) && emap != nil {
			id = emap[id]
		}
		out[f] = -1
		if id >= 0 && id < int64(e) {
			out[f] = int(id)
		}
	}
	return out
}

// alignConfig is the launch shape of the sort, for both ops.
type alignConfig struct {
	warps      int // warps a block of the fused, count and scatter kernels
	tileTokens int // tokens a tile
	tiles      int // tiles: blocks of the count and scatter kernels; 1: the fused kernel alone
	scanBlock  int // threads of the scan kernel
}

// alignShared is the shared memory of the fused kernels (the largest of
// the sort's) with w warps and e experts: per-warp counts, offsets and
// counts (or packed u64 offsets), and the scan's warp totals.
func alignShared(w, e int) int { return 4*w*e + 8*(e+1) + 256 }

// pickAlign is the sort's launch shape for T tokens of k pairs among E
// experts on a device with props p: the most warps, up to alignMaxWarps,
// whose per-warp counts fit p's shared memory a block (the 48 KiB every
// device gives holds 16 warps up to E = 512, 8 at E = 1024, and one warp
// needs 12.3 KiB at most); fixed tiles of whole tokens.
func pickAlign(p cuda.Props, t, k, e int) alignConfig {
	budget := p.SharedPerBlock
	if budget <= 0 {
		budget = 48 << 10
	}
	w := alignMaxWarps
	for w > 1 && alignShared(w, e) > budget {
		w /= 2
	}
	return alignConfig{warps: w, tileTokens: alignTileTokens(k), tiles: alignTiles(t, k), scanBlock: min(1024, intmath.RoundUp(e, 32))}
}

// alignKey is one specialization of align.cu: the entry and its warps.
type alignKey struct {
	entry string
	warps int
}

var alignFuncs = jit.Funcs[alignKey]{Kernel: func(k alignKey) jit.Kernel {
	return jit.Kernel{File: "moe/align.cu", Source: alignSource("align.cu", alignSrc), Entry: k.entry,
		Defines: jit.Defines(map[string]any{"WARPS": k.warps})}
}}

// alignSource prepends align_sort.cuh to a kernel's text, with #line marks
// so that compiler messages name the right file and line.
func alignSource(name, kernel string) string {
	return "#line 1 \"moe/align_sort.cuh\"\n" + alignSortSrc + "#line 1 \"moe/" + name + "\"\n" + kernel
}

// alignEntries are align.cu's kernels.
var alignEntries = []string{"align_fused", "align_count", "align_scan", "align_scatter"}

// preparedAlign lists align.cu's kernels at the warps pickAlign gives on p
// for 8 to 512 experts.
func preparedAlign(p cuda.Props) []jit.Kernel {
	var ks []jit.Kernel
	seen := map[alignKey]bool{}
	for _, e := range []int{8, 64, 128, 256, 512} {
		for _, entry := range alignEntries {
			k := alignKey{entry, pickAlign(p, 1, 1, e).warps}
			if !seen[k] {
				seen[k] = true
				ks = append(ks, alignFuncs.Kernel(k))
			}
		}
	}
	return ks
}

// alignPtr is t's device address, 0 for a nil t.
func alignPtr(t *tensor.Tensor) cuda.DevicePtr {
	if t == nil {
		return 0
	}
	return t.Ptr()
}

// alignGet builds the kernels of the entries names (key gives each one's
// specialization) on dev for launches on s, all before any launches.
func alignGet[K comparable](funcs *jit.Funcs[K], dev *cuda.Device, s *cuda.Stream, key func(entry string) K, names ...string) ([]*cuda.Function, error) {
	fns := make([]*cuda.Function, len(names))
	for i, n := range names {
		fn, err := funcs.Get(dev, s, key(n))
		if err != nil {
			return nil, err
		}
		fns[i] = fn
	}
	return fns, nil
}

func alignLaunch(s *cuda.Stream, out AlignOutputs, ids *tensor.Tensor, o AlignOptions, sz AlignSize) error {
	dev := ids.Device()
	if s == nil {
		s = dev.DefaultStream()
	}
	t, k, e, bs := ids.Dim(0), ids.Dim(1), o.Experts, o.BlockSize
	c := pickAlign(dev.Props(), t, k, e)
	numel, block := int32(t*k), cuda.D1(32*c.warps)
	emap := alignPtr(o.ExpertMap)
	get := func(names ...string) ([]*cuda.Function, error) {
		return alignGet(&alignFuncs, dev, s, func(n string) alignKey { return alignKey{n, c.warps} }, names...)
	}
	if c.tiles == 1 {
		fns, err := get("align_fused")
		if err != nil {
			return err
		}
		return fns[0].Launch(cuda.LaunchConfig{Grid: cuda.D1(1), Block: block, Shared: 4 * (c.warps*e + 2*e + 1), Stream: s},
			cuda.NewArgs().Ptr(ids.Ptr()).Ptr(emap).I32(numel).I32(int32(e)).I32(int32(bs)).I32(int32(sz.SortedTokenIDs)).
				Ptr(out.SortedTokenIDs.Ptr()).Ptr(out.ExpertIDs.Ptr()).Ptr(out.NumTokensPostPad.Ptr()))
	}
	fns, err := get("align_count", "align_scan", "align_scatter")
	if err != nil {
		return err
	}
	tile, ws := int32(c.tileTokens*k), out.Workspace.Ptr()
	grid := cuda.D1(c.tiles)
	if err := fns[0].Launch(cuda.LaunchConfig{Grid: grid, Block: block, Shared: 4 * e, Stream: s},
		cuda.NewArgs().Ptr(ids.Ptr()).Ptr(emap).I32(numel).I32(tile).I32(int32(e)).Ptr(ws)); err != nil {
		return err
	}
	if err := fns[1].Launch(cuda.LaunchConfig{Grid: cuda.D1(1), Block: cuda.D1(c.scanBlock), Shared: 4 * e, Stream: s},
		cuda.NewArgs().I32(int32(c.tiles)).I32(int32(e)).I32(int32(bs)).Ptr(ws).Ptr(out.NumTokensPostPad.Ptr())); err != nil {
		return err
	}
	return fns[2].Launch(cuda.LaunchConfig{Grid: grid, Block: block, Shared: 4 * c.warps * e, Stream: s},
		cuda.NewArgs().Ptr(ids.Ptr()).Ptr(emap).I32(numel).I32(tile).I32(int32(e)).I32(int32(bs)).I32(int32(sz.SortedTokenIDs)).
			Ptr(ws).Ptr(out.SortedTokenIDs.Ptr()).Ptr(out.ExpertIDs.Ptr()))
}
