package norm

import (
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/intmath"
)

// rowShape is what the launch configuration depends on.
type rowShape struct {
	rows, n   int
	elemSize  int  // bytes of the storage dtype
	heldFP32  bool // the normalized value is an fp32 sum (the pad kernel's add)
	cachesTwo bool // the looped path also caches a second row (y, for L2 backward)
	twoPass   bool // two reductions per row (LayerNorm)
	vector    bool // every row start is 16-byte aligned: 16-byte accesses
}

// cacheBytesPerAccess is what norm_rows_looped parks in shared memory per
// access: sizeof(Held), plus sizeof(Access) for the second row. An Access
// is at least one 32-bit word.
func (s rowShape) cacheBytesPerAccess(vec int) int {
	access := intmath.RoundUp(vec*s.elemSize, 4)
	held := access
	if s.heldFP32 {
		held = vec * 4
	}
	if s.cachesTwo {
		held += access
	}
	return held
}

// config is one launch of norm.cu.
type config struct {
	vec       int  // elements per access: 16/elemSize, or 1
	perThread int  // accesses a thread holds in registers (norm_rows)
	group     int  // threads per row, ≤ 32; 0 = the whole block owns a row
	threads   int  // block size
	bound     int  // __launch_bounds__ of the specialization
	grid      int  // blocks; the kernel strides over the rows
	prefetch  bool // norm_rows loads the next row before reducing the current one
	looped    bool // norm_rows_looped: rows longer than registers hold
	cache     bool // looped rows parked in shared memory
	shared    int  // dynamic shared memory bytes
	waves     bool // one block per row: the grid is not lowered to one resident wave
}

// Tuning constants of the picker. A register-resident row keeps at most
// maxPerThread accesses per thread in at most maxBlockThreads threads
// (16 Ki bf16 or 8 Ki f32 elements with 16-byte accesses; more accesses per
// thread made LayerNorm spill under the 128-register cap); rows of up to
// subWarpAccesses accesses (1024 bf16 elements) go to sub-warp groups so that
// no barrier is needed. residentThreads is what one SM keeps resident.
const (
	subWarpAccesses  = 128
	subWarpBlock     = 256
	subWarpWaveBlock = 128
	twoPassThreads   = 256
	maxPerThread     = 4
	maxBlockThreads  = 512
	loopedThreads    = 512
	latencyThreads   = 512
	residentThreads  = 2048
	staticSharedUsed = 256 // norm.cu's static shared memory (block_sum scratch), rounded up
)

// pickConfig chooses the path and launch shape for a row shape on a device.
// It is a pure function of its arguments; it never asks for more shared
// memory than p allows a block (the cache is dropped instead). The grid is
// an upper bound from the threads an SM holds; the launcher lowers it to
// what the compiled kernel's occupancy allows, so that every block of the
// row-striding grid is resident at once (no second wave), unless the config
// asks for waves (a block per row or per few rows). Prefetching the next row
// is on only where the grid strides (a group meets several rows).
func pickConfig(p cuda.Props, s rowShape) config {
	c := config{vec: 1}
	if s.vector {
		c.vec = 16 / s.elemSize
	}
	accesses := intmath.CeilDiv(s.n, c.vec)
	sms := max(p.SMs, 1)
	switch {
	case accesses <= subWarpAccesses:
		// Several rows per warp: each thread holds up to 4 accesses; the group
		// is the power of two that covers the row.
		c.perThread = 1
		for _, pt := range []int{2, 4} {
			if pt <= accesses/8 {
				c.perThread = pt
			}
		}
		// LayerNorm keeps a resident grid of 256-thread blocks that strides
		// over the rows and prefetches the next; the one-reduction ops launch
		// a 128-thread block for every 128/group rows instead: on an H200,
		// l2norm 262144x128 bf16 36.7 µs against 40.6, rmsnorm 65536x128
		// 13.3 against 13.6, fused_add_rmsnorm 21.7 against 22.1.
		c.group = intmath.NextPow2(intmath.CeilDiv(accesses, c.perThread))
		c.threads, c.bound = subWarpBlock, subWarpBlock
		if !s.twoPass {
			c.threads, c.bound, c.waves = subWarpWaveBlock, subWarpWaveBlock, true
		}
		rowsPerBlock := c.threads / c.group
		c.grid = intmath.CeilDiv(s.rows, rowsPerBlock)
		if !c.waves {
			c.grid = min(c.grid, sms*residentThreads/c.threads)
			c.prefetch = s.rows > c.grid*rowsPerBlock
		}
	case accesses <= maxPerThread*maxBlockThreads && s.twoPass:
		// LayerNorm's two reductions per row prefer a resident grid that
		// strides over the rows and loads the next row during them: on an
		// H200, 16384x8192 bf16 took 148 µs against 177 µs with a block
		// per row. Blocks of at most 256 threads (faster barriers), as few
		// accesses per thread as allow that.
		c.perThread = maxPerThread
		for _, pt := range []int{1, 2} {
			if intmath.CeilDiv(accesses, pt) <= twoPassThreads {
				c.perThread = pt
				break
			}
		}
		c.threads = intmath.RoundUp(intmath.CeilDiv(accesses, c.perThread), 32)
		c.bound = maxBlockThreads
		c.grid = min(s.rows, sms*max(1, residentThreads/c.threads))
		c.prefetch = s.rows > c.grid
	case accesses <= maxPerThread*maxBlockThreads:
		// One block per row, every row its own block: the hardware starts a
		// new block as an old one drains, which kept more loads in flight than
		// a resident, row-striding grid with prefetch. Four accesses per
		// thread (fewest threads to a row) measured best on an H200:
		// rmsnorm 16384x8192 bf16 132 µs against 143 µs for the striding
		// grid with 512 threads, 16384x4096 68.7 against 76.3 µs
		// (BenchmarkSweep).
		//
		// When the rows do not fill the SMs (decode, a handful of tokens) the
		// time is latency, not bandwidth: the fewest accesses per thread in
		// blocks of up to latencyThreads. 1x2048 bf16: 4.38 µs with 256
		// threads x 1 against 4.83 µs with 64 x 4; 32x4096: 4.77 against
		// 5.15 µs; 1x8192: 4.99 µs with 512 x 2 against 5.15 with 256 x 4
		// (an empty kernel: 3.30 µs on the same H200).
		c.perThread = maxPerThread
		if s.rows <= sms {
			c.perThread = min(intmath.CeilDiv(accesses, latencyThreads), maxPerThread)
		}
		c.threads = max(intmath.RoundUp(intmath.CeilDiv(accesses, c.perThread), 32), 64)
		c.bound = c.threads
		c.grid, c.waves = s.rows, true
	default:
		c.looped = true
		c.threads, c.bound = loopedThreads, loopedThreads
		cacheBytes := accesses * s.cacheBytesPerAccess(c.vec)
		perSM := residentThreads / c.threads
		if cacheBytes+staticSharedUsed <= p.SharedPerBlockOptin {
			c.cache, c.shared = true, cacheBytes
			perSM = max(1, min(perSM, p.SharedPerSM/(cacheBytes+staticSharedUsed+1024)))
		}
		c.grid = min(s.rows, sms*perSM)
	}
	c.grid = max(c.grid, 1)
	return c
}
