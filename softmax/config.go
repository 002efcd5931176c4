package softmax

import (
	"math"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/tensor"
)

// Limits of the picker. A thread keeps at most maxRowBytes of its row (32
// bf16 or 16 f32 values, held as fp32) in registers, scalarElems when rows
// are not 16-byte aligned, and issues about inflightBytes of loads before
// it uses the first one; with the kernel's cap of 64 registers a thread,
// more spills. Blocks of at most preferThreads threads leave room for
// several blocks per SM; larger ones are used only when a row needs them.
const (
	maxRowBytes   = 64
	scalarElems   = 8
	inflightBytes = 32
	preferThreads = 512
	maxCluster    = 8 // the portable cluster size on Hopper
	smallBlock    = 256
	minBlock      = 64
	scratchStats  = 66 // twice (32 warp partials + the block's partial for its cluster)
	statBytes     = 8
)

// config is one launch of softmax_fwd: the kernel's specialization (spec)
// and its grid.
type config struct {
	spec
	Block   int  // threads per block
	Cluster int  // blocks per row (1: no cluster)
	Chunk   int  // columns per block of a cluster (a multiple of Vec)
	Grid    int  // blocks when each takes one unit; capped by occupancy when Prefetch is set
	Smem    int  // dynamic shared memory, bytes
	Stream  bool // a block's share exceeds its register tile: two passes over x
	Piece   int  // bulk: vectors (16 bytes) per slot of the ring
	Slots   int  // bulk: slots of the ring
	// Resident (bulk) makes Grid an upper bound: run launches one wave of
	// clusters, as many as fit the GPU at once, each walking its rows.
	Resident bool
}

// spec is what the kernel is compiled for.
type spec struct {
	DType tensor.DType
	Vec   int // elements per vector access
	NVec  int // vectors per thread per tile
	Group int // lanes per row, 0: the whole block (and its cluster)
	MaxT  int // launch bound
	// Prefetch makes blocks persistent: each walks several units and loads
	// the next while it reduces the current one. Only configs without a
	// cluster and with room in registers for the second tile use it.
	Prefetch bool
	// Bulk selects softmax_bulk: each block of a row's cluster copies its
	// share of the row into a ring of shared-memory slots with bulk copies.
	Bulk bool
	// EvictLast: the 16-byte and bulk reads of x carry an L2 evict-last
	// policy (load16_evict_last in kittens.cuh, bulk_load<true> in tile.cuh).
	EvictLast bool
	// Full: each block's (or lane group's) share of a row is exactly its
	// register tile, so the tile's loads go without conditions (FULL).
	Full bool
	// Lane groups only, from the launch's rows (see withRows): Off32, row
	// offsets in int (OFF32); NCols, the row length and both row strides
	// (NCOLS; 0: from the arguments); Exact, no row past the last in any
	// unit (EXACT); Once, one unit a block (ONCE).
	Off32       bool
	NCols       int
	Exact, Once bool
}

// pickConfig chooses the launch for m rows of n elements of dtype dt,
// accessed vec elements at a time (the widest access the alignment of x and
// y allows, see vecWidth). It never fails: rows that suit bulk copies take
// softmax_bulk when their chunk fits the device's shared memory (read from
// p, never over it); others take softmax_fwd, whose rows too long for the
// register tiles of a block (or of a cluster, on GPUs that have clusters)
// stream, with a few hundred bytes of shared memory.
//
// Reads of x ask L2 to evict their lines last where they are 16 bytes wide
// (vec·size; bulk copies always are) and x and y together exceed L2. On an
// H200, two rounds (µs, without → with): bf16 4096x4096 21.70 → 21.18 and
// 21.89 → 21.15, 16384x8192 134.4 → 130.0 and 134.4 → 130.3 (in place
// 137.1 → 131.7 and 137.0 → 131.6; register path); 256x131072 bf16
// 43.84 → 42.56 and 43.49 → 42.59, 256x262144 bf16 84.93 → 82.56 and
// 84.74 → 82.88, 256x32768 f32 22.27 → 21.86 and 22.53 → 21.89,
// 256x131072 f32 79.58 → 76.74 and 79.87 → 77.50, 256x262144 f32 162.0 →
// 148.5 and 157.6 → 151.5 (bulk path).
func pickConfig(p cuda.Props, m, n int, dt tensor.DType, vec int) config {
	c, ok := pickBulk(p, m, n, dt, vec)
	if !ok {
		c = pickRegister(p, m, n, dt, vec)
	}
	c.EvictLast = vec*dt.Size() == 16 && 2*int64(m)*int64(n)*int64(dt.Size()) > int64(p.L2Bytes)
	return c
}

// pickRegister chooses a softmax_fwd launch: rows held in registers, or
// streamed through them in two passes.
func pickRegister(p cuda.Props, m, n int, dt tensor.DType, vec int) config {
	size := dt.Size()
	maxT := min(max(p.MaxThreadsPerBlock, 32), 1024) &^ 31
	sms := max(p.SMs, 1)
	// Vectors for ~32 B in flight; narrower accesses (unaligned rows) keep
	// at most scalarElems elements, since each holds a register of its own
	// while in flight.
	nv0, nvMax := inflightBytes/(vec*size), maxRowBytes/(vec*size)
	if vec*size < 16 {
		nv0 = max(1, min(nv0, scalarElems/vec))
		nvMax = nv0
	}
	vecs := intmath.CeilDiv(n, vec) // vectors per row

	// Short rows: a group of lanes of one warp per row, many rows per block.
	if g := intmath.CeilDiv(vecs, nv0); g <= 32 {
		g = intmath.NextPow2(g)
		block := smallBlock
		for block > minBlock && intmath.CeilDiv(m, block/g) < 2*sms {
			block /= 2
		}
		block = min(block, maxT)
		c := config{spec: spec{DType: dt, Vec: vec, NVec: intmath.CeilDiv(vecs, g), Group: g, Prefetch: true}, Block: block, Cluster: 1, Chunk: n}
		c.MaxT = smallBlock
		// FULL (see below): 4096x128 bf16 4.73 -> 4.60 / 4.96 -> 4.87,
		// 65536x128 13.16 -> 13.10 / 16.47 -> 16.33 µs.
		c.Full = c.tilesHoldRow(n)
		c.Grid = intmath.CeilDiv(m, block/g)
		return c
	}

	// Long rows: one block per row when there are rows enough to fill the
	// GPU, else a cluster of blocks per row. Rows that fit a block take a
	// persistent, prefetching grid: on an H200, 4096×4096 bf16 ran 21.9 µs
	// in 256-thread blocks of 2 vectors a thread, against 24.1 with 128
	// threads × 4 vectors, 22.6 with 512 × 1, 26.6–27.7 with a block per
	// row and no prefetch (norm's choice for its one reduction) and 26.2 on
	// the bulk path. An exp2 polynomial on the FMA pipe for 1, 2 or 3 of
	// each vector's 8 elements, to unload the MUFU unit, tied or lost: 22.2,
	// 22.6, 23.0 against 22.2. A lone block may take up to
	// maxT threads; blocks of a cluster stay at preferThreads, so that two
	// share an SM (blocks of 1024 threads in clusters measured slower: their
	// loads stop at the cluster barrier and nothing else on the SM fills
	// the gap).
	cmax := 1
	if p.Major >= 9 {
		cmax = maxCluster
	}
	cl := 1
	if m < sms {
		cl = intmath.CeilDiv(sms, m)
	}
	cl = min(cl, max(1, vecs/(4*32*nv0))) // leave each block at least 4 warps of work
	rowBytes := n * size
	live := min(m, sms*(2048/maxT)) * rowBytes // rows in flight when each block streams one
	switch {
	case cl == 1 && vecs <= maxT*nvMax:
		// The row fits one block.
	case cl == 1 && 3*live <= 2*p.L2Bytes:
		// One block per row streams it; the second pass reads from L2.
	default:
		cl = max(cl, intmath.CeilDiv(vecs, preferThreads*nvMax))
	}
	cl = min(cl, cmax)
	share := intmath.CeilDiv(vecs, cl) // vectors per block
	limit := preferThreads
	if cl == 1 {
		limit = maxT
	}
	c := config{spec: spec{DType: dt, Vec: vec, NVec: nv0}, Cluster: cl, Chunk: share * vec}
	if cl == 1 {
		c.Chunk = n
	}
	threads := intmath.CeilDiv(share, c.NVec)
	for threads > preferThreads && c.NVec < nvMax {
		c.NVec++
		threads = intmath.CeilDiv(share, c.NVec)
	}
	if threads > min(limit, maxT) { // the share does not fit the tiles: stream it
		c.NVec, threads, c.Stream = nv0, min(limit, maxT), true
	}
	c.Block = min(max(intmath.CeilDiv(threads, 32)*32, 32), maxT)
	c.MaxT = launchBound(c.Block)
	c.Prefetch = cl == 1 && !c.Stream && c.NVec*c.Vec*size <= maxRowBytes/2
	// FULL where the tiles hold the row exactly: the loads go without a
	// condition each, back to back (kittens bench, eight rounds alternating,
	// each process's draw of the two speeds taken out, µs, H200 / H100):
	// 16x32768 bf16 (clusters of 4) 6.78 -> 6.54 / 7.30 -> 7.08. Not where a
	// block prefetches its next row: freed of the branches, ptxas moved
	// those loads, whose use lies past the block's barrier, up to the
	// barrier (H200 4096x4096 21.44 -> 21.58, as rmsnorm's early weights in
	// norm/launch.go).
	c.Full = c.tilesHoldRow(n) && !c.Prefetch
	c.Grid = m * cl
	c.Smem = scratchStats * statBytes
	return c
}

// tilesHoldRow reports whether every block's (or lane group's) share of a
// row of n is exactly its register tile, so that no load of the tile runs
// past the row (FULL in softmax.cu).
func (c config) tilesHoldRow(n int) bool {
	lanes := c.Block
	if c.Group > 0 {
		lanes = c.Group
	}
	return !c.Stream && n == c.Cluster*c.Chunk && c.Chunk == lanes*c.NVec*c.Vec
}

// Limits of the bulk path (softmax_bulk).
const (
	bulkHead       = 1024      // shared bytes before the ring: mbarriers and merge scratch (kBulkHead)
	maxSlots       = 28        // kMaxSlots
	bulkMinRow     = 16 << 10  // rows of fewer bytes stay on the register path
	bulkMinBytes   = 2 << 20   // and so do inputs of fewer bytes: launch latency rules there
	bulkTarget     = 128 << 10 // many rows: the largest chunk a cluster is widened to avoid
	smallChunk     = 64 << 10  // many rows: chunks up to this take a cluster per row, larger ones a resident wave
	smallPiece     = 16 << 10  // bytes per bulk copy (and slot) of chunks up to smallChunk
	bigPiece       = 32 << 10  // and of larger chunks
	fewTarget      = 64 << 10  // few rows: the largest chunk a cluster is widened to avoid
	fewBigPieces   = 8         // few rows: pieces of a chunk over fewTarget
	smallThreads   = 256       // the most consumer threads of a chunk up to 64 KiB
	bulkMinChunk   = 16 << 10  // the smallest chunk a cluster is widened to when rows are few
	bulkWideElems  = 16384     // and the fewest elements a chunk keeps in a cluster over 8 blocks
	bulkThreads    = 512       // the most consumer threads of a block (the producer warp comes on top)
	bulkMinThreads = 128
	bulkVecsPerThr = 8 // vectors of its chunk a thread handles, before the block grows
	maxBulkCluster = 16
	smReserve      = 1 << 10 // shared memory the driver reserves per block
)

// pickBulk chooses a softmax_bulk launch where the device has bulk copies
// (Hopper and later), every row of x and y starts 16-byte aligned (vec is a
// whole 16 bytes), rows are a whole number of vectors, at least bulkMinRow
// bytes long and bulkMinBytes in all, and a chunk fits a block's shared
// memory once cut into the ring's pieces. Measured on an H200
// (BenchmarkConfigs; µs, one run):
//
// Many rows (at least one per SM) take the fewest blocks a row (a power of
// two, at most the portable 8) whose chunks stay within bulkTarget. Chunks
// over smallChunk take one wave of resident clusters (waveGrid) of one block
// an SM, 512 consumer threads, 32 KiB pieces, and a ring that fills the SM's
// shared memory, so that the next row streams in while one is merged and
// written: 256×262144 f32 158.0 (8 blocks a row; 183.7 before, with a
// cluster per two rows and as many pieces as slots), 256×131072 bf16 45.3
// (2 blocks), 256×262144 bf16 88.0 (4 blocks), 256×32768 f32 22.3 (1
// block). 16 KiB pieces ran those at 162.1, 50.1, 100.0 and 23.1, 8 KiB ones
// slower still (216.4 for 256×262144 f32 in 6-block clusters): a piece's
// copy, not its bytes, seems to be what is limited in flight. Clusters of 3,
// 5 or 6 blocks lost: only 39, 22 and 17 fit at once (117, 110, 102 SMs),
// where 2 fill all 132 SMs and 4 or 8 fill 120 (256×131072 f32: 87.2 with
// 3 blocks a row, 80.0 with 4). Smaller chunks take a cluster per row and
// many blocks an SM, whose hardware scheduling beat resident blocks walking
// rows: 16384×8192 bf16 134.3 (16 KiB chunks; 155.9 with six resident blocks
// an SM), 256×32768 bf16 16.7 (16 KiB pieces; 17.1 with 32 KiB).
//
// Fewer rows take a cluster each. Where a cluster of 1 or 2 blocks fits
// (its ring too) and gives every SM at most one block and most SMs one,
// that cluster takes it (64×151936 bf16: 19.7 with 2 blocks a row, 22.5
// with 8, 24.9 with 4, whose 256 blocks load some SMs twice); otherwise the
// fewest blocks (a power of two) whose chunks stay within fewTarget, widened
// (up to 16 blocks on Hopper) while the rows leave SMs idle (beyond 8 blocks
// only while each keeps bulkWideElems elements): 16×262144 f32 18.8 (16
// blocks a row; 20.3 before), 16×262144 bf16 14.3 (16.2 before).
//
// A cluster that walks two or more of the few rows, with a ring deep enough
// that the next row streams in while one is written, lost at every size
// (sixteenth session, two rounds, µs, the picker first): 64×151936 bf16
// 19.0–19.3 against 31.1–31.3 (4 blocks, 2 rows each), 26.2 and 38.1 (8
// blocks, 4 rows, a ring of 2 or 4 chunks) and 36.0–36.2 (16 blocks, 8
// rows); 16×262144 f32 18.6–18.8 against 26.1–26.8 (16 blocks, 2 rows);
// 16×262144 bf16 13.3–13.4 against 16.2–16.5. Likely causes, not measured:
// where a block's ring takes more than half an SM's shared memory, 32
// clusters of 4 and 8 of 16 are more than fit at once (29 and 7), so the
// last wait for a second wave; where it takes less, two blocks may share
// an SM and leave others idle.
//
// Tried and lost in a later round (µs, the picker first): rings
// deeper against the chunk, one block an SM holding half the chunk (3.5
// chunks in the ring instead of 1.75): 256×131072 f32 82.0 against 94.5
// (8 blocks a row), 256×262144 bf16 84.7 against 100.5, 256×32768 f32
// 22.4 against 27.2 (2 blocks a row); clusters of 16 fit 7 at once at one
// block an SM and 14 at two (256×262144 f32 162.7 against 199.2 and
// 161.0). An exp2 polynomial on the FMA pipe for 1 to 4 of each vector's 8
// bf16 elements tied or lost: 256×262144 bf16 85.6 against 85.9, 86.9,
// 89.1, 93.5; Nsight Compute showed the bulk kernel waiting on data (long
// scoreboard), not on its MUFU unit. 16 KiB pieces for 256×262144 f32 ran
// 157.6 against 162.7 in one run and 161.9 against 161.4 in another: within
// the run-to-run spread, not taken.
//
// A cluster's blocks must share a GPC, so a resident wave leaves SMs idle:
// Nsight Compute put 256×262144 bf16 on 116 of 132 SMs (29 clusters of 4,
// 9 rows each where 7.8 would do) and its DRAM at 70% of peak, and f32 on
// 120 (15 clusters of 8, 18 rows). Groups of consecutive blocks of a
// cooperative grid that meet in a per-stream global workspace (a release
// of the pair and its tag, an acquire on the peers') fill the SMs evenly
// but lost in the sixth session, at equal grids too: 256×262144 f32 174.3
// with 16 groups of 8 against 158.3 with 15 clusters, bf16 90.3 (32
// groups of 4) against 85.1, 256×131072 bf16 48.1 against 43.9 (64 groups
// or clusters of 2 either way); fence-free tagged 64-bit words did no
// better (3040 against 2988 GB/s). A row's exchange through L2 costs more
// than DSMEM's, and each row waits for it.
//
// What holds the long rows back (seventh session, ablations of the picked
// configs, each a define that breaks the result; µs, bf16 256×262144 then
// f32 256×262144; a same-size copy takes about 67 and 129): the picker
// 82.6–83.2 and 145.5–147.7; without the cluster exchange 78.1 and 145.0;
// the fold without ex2 78.9 and 145.2; the emit without ex2 79.6 and
// 145.9; a plain copy through the ring (no fold, no exchange, no ex2) 75.4
// and 140.3, 89% and 92% of the copy; that ring without its stores 43.0
// and 73.1. So the ring's row-by-row flow, not the arithmetic or the merge,
// keeps these shapes under 95% of a copy. Freeing each slot once folded and
// reading x again to write y (from L2, it was hoped) lost at every cluster
// size from 1 to 8 and 16 or 32 KiB pieces: bf16 108–135, f32 205–234
// (55–63% of the copy); the second read mostly misses L2.
//
// That ceiling is not the ring's: it is any grid of one resident block an
// SM that streams its own share (ninth session, a stand-alone CUDA probe
// copying 128 MiB on an H200, two rounds, GB/s read + written; the driver's
// copy of the same buffers 3825–3918). One block of 256–1024 threads an
// SM, each with its own contiguous share: through registers 3310–3553,
// through a bulk-copy ring with 16-byte stores 3490–3581, through the ring
// with bulk stores 3456–3508, through a cp.async ring 3595; the same with
// two blocks an SM 3445–3563, four 3425–3498; one block an SM taking 32 or
// 64 KiB pieces in turn (piece g to block g mod 132) 3582–3608. Reads alone
// through any of them ran 3729–3998. Only many short blocks came near the
// driver's copy: 4096 blocks of 32 KiB each, 3718–3737 (96%). A row that
// needs a cluster's shared memory keeps its blocks for the whole row, so
// these shapes stay near 90% of a copy unless the merge of a row's blocks
// moves out of shared memory, which lost (above).
//
// Three designs built of short blocks lost too (tenth session, the same
// probe's harness on an H200, µs; the driver's copy of the same bytes, then
// this picker's time from BENCH.md, in brackets). Blocks of one 32 KiB
// chunk each: (1) stats blocks publishing a chunk's (max, sum) under a
// release-tagged word, and write blocks, dispatched a lag later, that merge
// the row's partials and read their chunk again: f32 256×262144 152.8 at
// best (131–133; 149.8), bf16 87.3 (67–69; 82.9). With the second read taken
// out (wrong results), 130.8: the traffic reaches the copy, but a chunk
// read a lag of 1024 blocks (32 MiB) earlier mostly misses L2 (191), and
// shorter lags leave write blocks waiting for their stats. (2) Each block
// keeping its chunk in registers while the row's blocks exchange through
// global memory: 184–201. (3) One short-lived cluster a row holding it in
// registers, merged through DSMEM: f32 172.7, 256×131072 81.3 (69; 77.5),
// 256×32768 24.9 (22; 21.8); bf16 128.9, 54.8 (37–38; 42.7), 17.1 (12;
// 16.2).
func pickBulk(p cuda.Props, m, n int, dt tensor.DType, vec int) (config, bool) {
	size := dt.Size()
	if p.Major < 9 || vec*size != 16 || n%vec != 0 || n*size < bulkMinRow || int64(m)*int64(n*size) < bulkMinBytes {
		return config{}, false
	}
	vecs, sms := n/vec, max(p.SMs, 1)
	chunk := func(cl int) int { return intmath.CeilDiv(vecs, cl) * 16 } // bytes
	// fit returns c where its ring fits a block's shared memory, and false
	// where it does not: a chunk that fits can still overflow once it is cut
	// into pieces of whole vectors, each rounded up.
	fit := func(c config) (config, bool) {
		if c.Smem-bulkHead > maxChunk(p, 1) {
			return config{}, false
		}
		return c, true
	}
	threads := func(cl, most int) int {
		return min(max(intmath.RoundUp(intmath.CeilDiv(chunk(cl)/16, bulkVecsPerThr), 32), bulkMinThreads), most)
	}
	if m >= sms {
		cl := 1
		for cl < maxCluster && chunk(cl) > min(bulkTarget, maxChunk(p, 1)) {
			cl *= 2
		}
		switch {
		case chunk(cl) > maxChunk(p, 1):
			return config{}, false
		case chunk(cl) <= smallChunk:
			return fit(bulkConfig(p, m, n, dt, cl, intmath.CeilDiv(chunk(cl), smallPiece), 0, threads(cl, smallThreads), 1))
		}
		return fit(withRing(p, bulkConfig(p, m, n, dt, cl, intmath.CeilDiv(chunk(cl), bigPiece), 0, bulkThreads, 0), 1))
	}
	for cl := 1; cl <= 2; cl++ {
		if chunk(cl) <= maxChunk(p, 1) && m*cl <= sms && 2*m*cl > sms {
			if c, ok := fit(bulkConfig(p, m, n, dt, cl, max(1, chunk(cl)/bigPiece), 0, threads(cl, bulkThreads), 1)); ok {
				return c, true
			}
		}
	}
	cl, target := 1, min(fewTarget, maxChunk(p, 1))
	for cl < maxCluster && chunk(cl) > target {
		cl *= 2
	}
	widest := maxCluster
	if p.Major == 9 {
		widest = maxBulkCluster // non-portable, but every Hopper part runs it
	}
	for cl < widest && m*cl < sms && chunk(2*cl) >= bulkMinChunk && (cl < maxCluster || chunk(2*cl)/size >= bulkWideElems) {
		cl *= 2
	}
	if chunk(cl) > maxChunk(p, 1) {
		return config{}, false
	}
	if chunk(cl) > fewTarget {
		return fit(bulkConfig(p, m, n, dt, cl, fewBigPieces, 0, bulkThreads, 1))
	}
	return fit(bulkConfig(p, m, n, dt, cl, intmath.CeilDiv(chunk(cl), bigPiece), 0, threads(cl, smallThreads), 1))
}

// maxChunk is the largest ring (bytes) a bulk block may hold on p when
// perSM of them share an SM.
func maxChunk(p cuda.Props, perSM int) int {
	return min(p.SharedPerBlockOptin, p.SharedPerSM/max(perSM, 1)-smReserve) - bulkHead
}

// withRing gives c's blocks as many slots (at most maxSlots) as fit when
// perSM of them share an SM, and never fewer than a chunk's pieces.
func withRing(p cuda.Props, c config, perSM int) config {
	pieces := intmath.CeilDiv(c.Chunk/c.Vec, c.Piece)
	c.Slots = max(pieces, min(maxSlots, maxChunk(p, perSM)/(c.Piece*16)))
	c.Smem = bulkHead + c.Slots*c.Piece*16
	return c
}

// bulkConfig is the softmax_bulk launch with cl blocks per row, each
// splitting its chunk into pieces copies, with slots slots in its ring (at
// least the pieces of a chunk; 0: just those), threads threads, and each
// cluster walking rowsPer rows (0: one wave of clusters, see waveGrid).
func bulkConfig(p cuda.Props, m, n int, dt tensor.DType, cl, pieces, slots, threads, rowsPer int) config {
	vec := 16 / dt.Size()
	c := config{spec: spec{DType: dt, Vec: vec, NVec: 1, MaxT: bulkThreads + 32, Bulk: true}}
	c.Cluster = cl
	c.Chunk = intmath.CeilDiv(n/vec, cl) * vec
	pieces = max(1, min(pieces, c.Chunk/vec, maxSlots))
	c.Piece = intmath.CeilDiv(c.Chunk/vec, pieces)
	pieces = intmath.CeilDiv(c.Chunk/vec, c.Piece)
	c.Slots = max(pieces, min(slots, maxSlots))                                  // a row's pieces are all resident while it is reduced
	c.Block = min(threads, c.MaxT-32, max(p.MaxThreadsPerBlock-32, 32)&^31) + 32 // and the producer warp
	c.Resident = rowsPer <= 0
	c.Grid = min(intmath.CeilDiv(m, max(rowsPer, 1)), math.MaxInt32/cl) * cl // clusters walk the rows past the grid
	c.Smem = bulkHead + c.Slots*c.Piece*16
	return c
}

// waveGrid is the grid of a Resident bulk config for m rows when clusters
// clusters of cl blocks fit the GPU at once: each cluster walks
// ceil(m/clusters) rows, and there are just enough clusters for that, so
// that no cluster of the wave idles at the end while others walk one row
// more than it.
func waveGrid(m, cl, clusters int) int {
	rowsPer := intmath.CeilDiv(m, max(clusters, 1))
	return min(intmath.CeilDiv(m, rowsPer), math.MaxInt32/cl) * cl
}

// launchBound rounds a block size up to one of the few launch bounds the
// kernel is compiled for, so that block sizes share compilations.
func launchBound(block int) int {
	switch {
	case block <= 256:
		return 256
	case block <= 512:
		return 512
	}
	return 1024
}

// vecWidth is the widest vector (elements, a power of two, at most 16
// bytes) that every row of x and y starts aligned to.
func vecWidth(size int, addrs []uint64, strides []int, rows int) int {
	v := 16 / size
	for v > 1 {
		ok := true
		for i, a := range addrs {
			ok = ok && a%uint64(v*size) == 0 && (rows <= 1 || strides[i]%v == 0)
		}
		if ok {
			break
		}
		v /= 2
	}
	return v
}

// dtypeName is the device type of dt in softmax.cu.
func (sp spec) dtypeName() string {
	switch sp.DType {
	case tensor.F32:
		return "float"
	case tensor.F16:
		return "f16"
	}
	return "bf16"
}

// withRows specializes a lane-group config c on the launch's m rows of n
// elements with row strides ldx and ldy, toward the form of torch.compile's
// (Triton's) kernels, whose sizes are constants (as norm's groups are; see
// norm.kernelKey.withRows): no row checks where the units hold whole rows
// (EXACT), 32-bit row offsets where every offset the units index fits in
// int32 (OFF32), and the row length and strides as constants where both
// tensors are contiguous (NCOLS; the streaming code then compiles away).
// Once the grid is final, oneUnitEach says whether it is the units, one a
// block (ONCE: no row loop, no prefetch of a next unit). SASS of 4096x128
// bf16 (nvcc 11.8): the first load after 15 instructions instead of 56,
// 312 in all instead of 1211.
//
// kittens bench, the build before and this one alternating seven rounds in
// one device call, each run's draw taken out (the median offset of the
// unchanged 16- and 256-row cases), µs, H200 / H100: 4096x128 4.40 -> 4.16
// / 4.76 -> 4.55, 16384x128 6.84 -> 6.40 / 7.61 -> 7.39, 65536x128 (a
// striding grid: no ONCE) 12.94 -> 12.80 / 16.18 -> 15.88. The unchanged
// cases moved by -3.3% to +1.1% on the H200 (that machine's draws spread
// 0.13-0.82 µs) and by -0.8% to +0.3% on the H100.
func (c config) withRows(m, n int, ldx, ldy int64) config {
	if c.Group == 0 || c.Bulk || c.Stream {
		return c
	}
	per := c.Block / c.Group
	c.Exact = m%per == 0
	c.Off32 = intmath.FitsInt32(int64(intmath.CeilDiv(m, per)*per), max(ldx, ldy), int64(n))
	if ldx == int64(n) && ldy == int64(n) {
		c.NCols = n
	}
	return c
}

// oneUnitEach reports whether a lane-group config's final grid (capped by
// occupancy where it prefetches) gives each of m rows' units a block of its
// own, so that it may take ONCE.
func (c config) oneUnitEach(m int) bool {
	return c.Group > 0 && !c.Bulk && !c.Stream && c.Grid == intmath.CeilDiv(m, c.Block/c.Group)
}
