package topk

import (
	"math/bits"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/tensor"
)

// algo is one of the two kernels.
type algo int

const (
	// algoWarp keeps a row in one warp's registers (N ≤ warpMaxN, k ≤ 32).
	algoWarp algo = iota
	// algoRadix runs a byte-wise radix select with a cluster of blocks per row.
	algoRadix
)

func (a algo) String() string {
	if a == algoWarp {
		return "warp"
	}
	return "radix"
}

const (
	warpMaxN       = 1024  // longest row the warp kernel holds in registers
	warpMaxK       = 32    // one survivor per lane
	warpsPerBlock  = 4     // rows per block of the warp kernel
	radixBins      = 256   // one byte per pass
	radixUnroll    = 4     // 16-byte loads in flight per thread
	maxCluster     = 8     // the portable cluster size (MAX_CLUSTER in radix.cu)
	minSlice       = 4096  // fewest elements a cluster block should scan
	maxBufEntries  = 16384 // most candidate buffer entries
	reservedShared = 1024  // shared memory the system keeps per block
	staticShared   = 256   // the radix kernel's static shared memory, rounded up
)

// config is what the picker decides for one call.
type config struct {
	Algo algo
	Vec  int // elements per load: 16/size when rows are 16-byte aligned, else 1

	// warp kernel
	Chunks int // VEC-element chunks per lane (a power of two)
	Warps  int // rows per block

	// radix kernel
	Threads int // block size
	Cluster int // blocks per row
	Slice   int // elements per block (a multiple of Vec)
	Cap     int // candidate buffer entries
	SortLen int // survivor list length: a power of two ≥ k
	Subs    int // sub-histograms the warps spread their counts over (a power of two)
	IdxBits int // index bits of the composite: a multiple of 8
	Shared  int // dynamic shared memory bytes
	GridY   int // rows in flight (rows beyond loop)
}

// pickConfig chooses the kernel and its configuration for rows of length n,
// k outputs per row and m rows on a device with properties p. aligned says
// whether every row of x starts on a 16-byte boundary. It never asks for more
// shared memory than p allows.
func pickConfig(p cuda.Props, m, n, k int, dt tensor.DType, aligned bool) config {
	vec := 1
	if aligned {
		vec = 16 / dt.Size()
	}
	if n <= warpMaxN && k <= warpMaxK {
		return config{Algo: algoWarp, Vec: vec, Chunks: intmath.NextPow2(intmath.CeilDiv(n, 32*vec)), Warps: warpsPerBlock}
	}
	c := config{Algo: algoRadix, Vec: vec, Threads: 1024}
	if p.MaxThreadsPerBlock > 0 && p.MaxThreadsPerBlock < c.Threads {
		c.Threads = 512
	}
	// One 1024-thread block fills a multiprocessor's registers, so the
	// resident blocks are about one per SM: spread small batches over a
	// cluster per row, as far as the slices stay long enough to be worth it.
	perRow := max(1, p.SMs/max(m, 1))
	perRow = min(perRow, maxCluster, max(1, n/minSlice))
	c.Cluster = intmath.PrevPow2(perRow)
	c.Slice = intmath.RoundUp(intmath.CeilDiv(n, c.Cluster), vec)
	c.SortLen = intmath.NextPow2(max(k, 2))
	c.IdxBits = intmath.RoundUp(max(bits.Len(uint(n-1)), 1), 8)

	budget := p.SharedPerBlockOptin
	if budget <= 0 {
		budget = p.SharedPerBlock
	}
	if p.SharedPerSM > 0 {
		budget = min(budget, p.SharedPerSM-reservedShared)
	}
	budget -= staticShared
	// One histogram for all warps: per-warp sub-histograms measured no faster
	// on an H200 (1, 4 and 32 tried), so contention is not what limits a pass.
	c.Subs = 1
	fixed := c.SortLen*8 + (2+c.Subs)*radixBins*4
	c.Cap = max(0, min(maxBufEntries, (budget-fixed)/8))
	c.Shared = fixed + c.Cap*8
	c.GridY = min(m, 65535)
	return c
}

// warpKey is the warp kernel's specialization for config c.
func (c config) warpKey(dt, it tensor.DType) warpKey {
	return warpKey{dt, it, c.Vec, c.Chunks, c.Warps}
}

// radixKey is the radix kernel's specialization for config c.
func (c config) radixKey(dt, it tensor.DType) radixKey { return radixKey{dt, it, c.Vec, c.Threads} }

// maxRadixK is the largest k whose survivor list fits the shared memory
// every device gives a block (48 KiB) next to the histograms.
const maxRadixK = 4096
