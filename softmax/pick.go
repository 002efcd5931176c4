package softmax

import (
	"math"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/tensor"
)

// Limits of the register path (softmax_fwd). A thread keeps at most
// maxRowBytes of its row (32 bf16 or 16 f32 values, held as fp32) in
// registers, scalarElems when rows are not 16-byte aligned, and issues about
// inflightBytes of loads before it uses the first one; with the kernel's cap
// of 64 registers a thread, more spills. Blocks of at most preferThreads
// threads leave room for several blocks per SM; larger ones are used only
// when a row needs them.
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

// config is one launch: the kernel's specialization (kernelKey) and its
// grid.
type config struct {
	kernelKey
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

// pickConfig chooses the launch for m rows of n elements of dtype dt,
// accessed vec elements at a time (the widest access the alignment of x and
// y allows, see vecWidth). It never fails:
//
//	rows                                                  path (picker)
//	on Hopper, 16-byte aligned, ≥ 16 KiB, ≥ 2 MiB in all  softmax_bulk (pickBulk), where a chunk fits shared memory
//	up to 32 lanes' register tiles                        softmax_fwd, a lane group a row (pickRegister)
//	longer                                                softmax_fwd, a block or cluster a row, streamed in two
//	                                                      passes where a block's share outgrows its registers
//
// Where the device allows it (p.L2EvictLast), reads of x ask L2 to evict
// their lines last where they are 16 bytes wide (vec·size; bulk copies
// always are) and x and y together exceed L2 (bf16
// 16384x8192 on an H200: 134.4 → 130.0 µs).
func pickConfig(p cuda.Props, m, n int, dt tensor.DType, vec int) config {
	c, ok := pickBulk(p, m, n, dt, vec)
	if !ok {
		c = pickRegister(p, m, n, dt, vec)
	}
	c.EvictLast = p.L2EvictLast && vec*dt.Size() == 16 && 2*int64(m)*int64(n)*int64(dt.Size()) > int64(p.L2Bytes)
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

	// Short rows: a group of lanes of one warp per row, many rows per block,
	// blocks halved (down to minBlock) until there are two per SM.
	if g := intmath.CeilDiv(vecs, nv0); g <= 32 {
		g = intmath.NextPow2(g)
		block := smallBlock
		for block > minBlock && intmath.CeilDiv(m, block/g) < 2*sms {
			block /= 2
		}
		block = min(block, maxT)
		c := config{kernelKey: kernelKey{DType: dt, Vec: vec, NVec: intmath.CeilDiv(vecs, g), Group: g, Prefetch: true}, Block: block, Cluster: 1, Chunk: n}
		c.MaxT = smallBlock
		c.Full = c.tilesHoldRow(n)
		c.Grid = intmath.CeilDiv(m, block/g)
		return c
	}

	// Long rows: one block per row when there are rows enough to fill the
	// GPU, else a cluster of blocks per row. Rows that fit a block take a
	// persistent, prefetching grid (4096×4096 bf16 on an H200: 21.9 µs in
	// 256-thread blocks of 2 vectors a thread, 26.6 with a block per row and
	// no prefetch). A lone block may take up to maxT threads; blocks of a
	// cluster stay at preferThreads, so that two share an SM (blocks of 1024
	// threads in clusters were slower: their loads stop at the cluster
	// barrier and nothing else on the SM fills the gap).
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
	c := config{kernelKey: kernelKey{DType: dt, Vec: vec, NVec: nv0}, Cluster: cl, Chunk: share * vec}
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
	// FULL where the tiles hold the row exactly (16x32768 bf16 on an H200:
	// 6.78 → 6.54 µs), but not where a block prefetches its next row: freed
	// of the branches, ptxas hoists those loads, whose use lies past the
	// block's barrier, up to the barrier, which lost.
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
// memory once cut into the ring's pieces. The rules, each with the figure
// that set it (µs on an H200, BenchmarkSweep; NOTES.md has what lost):
//
//   - Many rows (at least one per SM): the fewest blocks a row, a power of
//     two up to the portable 8, whose chunks stay within bulkTarget.
//     Clusters of 3, 5 or 6 fit fewer at once (256×131072 f32: 80.0 with 4
//     blocks a row, 87.2 with 3).
//   - Many rows, chunks up to smallChunk: a cluster per row, many blocks an
//     SM, 16 KiB pieces; the hardware's scheduling beats resident blocks
//     walking rows (16384×8192 bf16: 134.3, 155.9 resident).
//   - Many rows, larger chunks: one wave of resident clusters (waveGrid) of
//     one block an SM, 512 consumer threads, 32 KiB pieces and a ring that
//     fills the SM's shared memory, so the next row streams in while one is
//     written (256×262144 f32: 158.0, 183.7 with a cluster per two rows;
//     256×262144 bf16: 88.0, 100.0 with 16 KiB pieces).
//   - Few rows: a cluster of 1 or 2 blocks where it fits and gives every SM
//     at most one block and most SMs one (64×151936 bf16: 19.7 with 2 blocks
//     a row, 22.5 with 8); otherwise the fewest blocks (a power of two)
//     whose chunks stay within fewTarget, widened, up to 16 blocks on
//     Hopper, while the rows leave SMs idle (beyond 8 only while each keeps
//     bulkWideElems elements; 16×262144 f32: 18.8 with 16, 20.3 with 8).
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
	c := config{kernelKey: kernelKey{DType: dt, Vec: vec, NVec: 1, MaxT: bulkThreads + 32, Bulk: true}}
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

// withRows specializes a lane-group config c on the launch's m rows of n
// elements with row strides ldx and ldy, as torch.compile's (Triton's)
// kernels take their sizes as constants: no row checks where the units
// hold whole rows (EXACT), 32-bit row offsets where every offset the units
// index fits in int32 (OFF32), and the row length and strides as constants
// where both tensors are contiguous (NCOLS; the streaming code then
// compiles away). Once the grid is final, oneUnitEach says whether it is
// the units, one a block (ONCE: no row loop, no prefetch of a next unit).
// 4096x128 bf16 on an H200: 4.40 → 4.16 µs.
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
