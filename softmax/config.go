package softmax

import (
	"github.com/gokittens/kittens/internal/intmath"

	"github.com/gokittens/kittens/cuda"
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
}

// pickConfig chooses the launch for m rows of n elements of dtype dt,
// accessed vec elements at a time (the widest access the alignment of x and
// y allows, see vecWidth). It never fails: rows too long for the register
// tiles of a block (or of a cluster, on GPUs that have clusters) stream.
// Its shared memory is a few hundred bytes, under any device's limit.
func pickConfig(p cuda.Props, m, n int, dt tensor.DType, vec int) config {
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
		c.Grid = intmath.CeilDiv(m, block/g)
		return c
	}

	// Long rows: one block per row when there are rows enough to fill the
	// GPU, else a cluster of blocks per row. A lone block may take up to
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
	c.Grid = m * cl
	c.Smem = scratchStats * statBytes
	return c
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
