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
	fused     bool // a residual is added: two rows read and two written
	vector    bool // every row start is 16-byte aligned: 16-byte accesses
}

// bytesMoved is what one launch reads and writes of the row tensors: x and
// y, plus the residual and its output where fused, plus y where L2 backward
// reads it.
func (s rowShape) bytesMoved() int64 {
	tensors := 2
	if s.fused {
		tensors += 2
	}
	if s.cachesTwo {
		tensors++
	}
	return int64(tensors) * int64(s.rows) * int64(s.n) * int64(s.elemSize)
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
	waves     bool // a group (or block) per row: the grid covers the rows, is not lowered to one resident wave, and norm_rows serves one row per group
	reload    bool // norm_rows loads weights and biases for each row where they are used, not once into registers
	hint      bool // 16-byte row reads carry an L2 evict-last policy (HINT in norm.cu)
	onePass   bool // 16-bit LayerNorm statistics in one pass around a shift (ONEPASS in norm.cu)
}

// Tuning constants of the picker. A register-resident row keeps at most
// maxPerThread accesses per thread in at most maxBlockThreads threads
// (16 Ki bf16 or 8 Ki f32 elements with 16-byte accesses; more accesses per
// thread made LayerNorm spill under the 128-register cap); rows of up to
// subWarpAccesses accesses (1024 bf16 elements) go to sub-warp groups so that
// no barrier is needed. residentThreads is what one SM keeps resident.
// LayerNorm rows of up to layerStrideAccesses accesses (4 Ki bf16) take a
// resident, row-striding grid of layerStridePerThread accesses a thread
// where the launch moves up to layerStrideL2Multiple times what L2 holds;
// longer rows and larger launches a block per row.
const (
	subWarpAccesses       = 128
	layerStrideAccesses   = 512
	layerStrideL2Multiple = 2
	layerStridePerThread  = 2
	subWarpBlock          = 128
	maxPerThread          = 4
	maxBlockThreads       = 512
	loopedThreads         = 512
	latencyThreads        = 512
	residentThreads       = 2048
	staticSharedUsed      = 1024 // norm.cu's static shared memory (the largest Scratch: LayerNorm's)
	narrowFillThreads     = 256  // threads an SM must get from groups of 4 lanes before one-read narrow rows take them
)

// pickConfig chooses the path and launch shape for a row shape on a device,
// by the row's accesses A (⌈N/vec⌉; 16-byte accesses where every row is
// aligned):
//
//	A ≤ 128                       groups of up to 32 lanes, several rows a warp, in waves
//	A ≤ 512, LayerNorm of x
//	  alone, rows > SMs, ≤ 2·L2   a resident grid striding over the rows, prefetching
//	A ≤ 2048                      a block per row, in waves
//	longer                        norm_rows_looped, the row cached in shared memory where it fits
//
// It is a pure function of its arguments and never asks for more shared
// memory than p allows a block (the cache is dropped instead). A striding
// grid is an upper bound from the threads an SM holds: the launcher lowers
// it to what the compiled kernel's occupancy allows, so that no block waits
// for a second wave. Waves give each group (or block) one row and compile
// norm_rows for that (WAVES in norm.cu), which drops the row loop's
// bookkeeping. Prefetching the next row is on only where a group meets
// several rows.
func pickConfig(p cuda.Props, s rowShape) config {
	c := config{vec: 1}
	if s.vector {
		c.vec = 16 / s.elemSize
	}
	accesses := intmath.CeilDiv(s.n, c.vec)
	sms := max(p.SMs, 1)
	switch {
	case accesses <= subWarpAccesses:
		// A lane holds one access for every 8 of the row, up to 4, and the
		// group is the power of two of lanes that covers the row; blocks of
		// 128 threads, in waves (l2norm_fwd 262144x128: 36.7 µs against
		// 40.6 for a striding grid, H200). Serving several rows a group
		// (Triton's XBLOCK) tied at best; see NOTES.md.
		c.perThread = 1
		for _, pt := range []int{2, 4} {
			if pt <= accesses/8 {
				c.perThread = pt
			}
		}
		// Fused RMS rows, fused LayerNorm rows that outgrow L2 and LayerNorm
		// rows too few to fill the SMs hold as few accesses a lane as 32
		// lanes allow (fused_add_rmsnorm 128x128: 4.24 µs against 4.36 with
		// two).
		few := intmath.CeilDiv(s.rows*intmath.NextPow2(accesses), subWarpBlock) <= sms
		if (s.fused && (!s.twoPass || s.bytesMoved() > int64(p.L2Bytes))) || (s.twoPass && few) {
			c.perThread = 1
			for intmath.CeilDiv(accesses, c.perThread) > 32 {
				c.perThread *= 2
			}
		}
		// One-read rows (RMSNorm, L2 forward) go down to groups of 4 lanes
		// with more accesses a lane (fewer shuffles a byte) while the rows
		// still give every SM narrowFillThreads threads, and from 2 accesses
		// to 4 only where the 8-lane groups fit in one wave of resident
		// threads (rmsnorm 16384x128: 6.91 -> 6.66 µs, H200).
		for !s.fused && !s.twoPass && !s.cachesTwo && c.perThread < maxPerThread {
			lanes := accesses / c.perThread // a row's lanes now; half of them after doubling
			if lanes/2 < 4 || s.rows*(lanes/2) < sms*narrowFillThreads ||
				(c.perThread > 1 && s.rows*lanes > sms*residentThreads) {
				break
			}
			c.perThread *= 2
		}
		c.group = intmath.NextPow2(intmath.CeilDiv(accesses, c.perThread))
		c.threads, c.bound = subWarpBlock, subWarpBlock
		c.waves = true
		c.grid = intmath.CeilDiv(s.rows, c.threads/c.group)
	case accesses <= layerStrideAccesses && s.twoPass && !s.fused && s.rows > sms &&
		s.bytesMoved() <= layerStrideL2Multiple*int64(p.L2Bytes):
		// LayerNorm of x alone in launches of up to twice L2: a resident
		// grid that loads the next row during this one's reductions, two
		// accesses a thread (layernorm 4096x4096: 21.4 µs against 23.1 for a
		// block per row, H200). Larger launches do better with a block per
		// row and the hint (the next case).
		c.perThread = layerStridePerThread
		c.threads = max(intmath.RoundUp(intmath.CeilDiv(accesses, c.perThread), 32), 64)
		c.bound = maxBlockThreads
		c.grid = min(s.rows, sms*residentThreads/c.threads)
		c.prefetch = s.rows > c.grid
	case accesses <= maxPerThread*maxBlockThreads:
		// A block per row: the hardware starts a block as another drains,
		// which keeps more loads in flight than a striding grid (rmsnorm
		// 16384x8192: 132 µs against 143, H200). Accesses a thread:
		//
		//	rows ≤ SMs (decode)            fewest in up to latencyThreads threads: latency-bound
		//	fused LayerNorm ≤ 4 Ki bf16    2
		//	other LayerNorm                4, weights and biases loaded per row where used
		//	one reduction, ≤ 8 Ki bf16     2 (RMSNorm, fused or not, L2 forward)
		//	the rest                       4
		//
		// Loading LayerNorm's weights per row frees their registers through
		// the loads and reductions, for more blocks an SM.
		c.perThread = maxPerThread
		switch {
		case s.rows <= sms:
			c.perThread = min(intmath.CeilDiv(accesses, latencyThreads), maxPerThread)
		case s.twoPass && s.fused && accesses <= layerStrideAccesses:
			c.perThread = 2
		case s.twoPass:
			c.reload = true
		case !s.cachesTwo && accesses <= 2*maxBlockThreads:
			c.perThread = 2
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
	// The L2 evict-last hint, where the device allows it
	// (p.L2EvictLast), on 16-byte row reads where each group serves one row
	// or the grid prefetches, and the launch moves more than L2 holds
	// (rmsnorm 16384x8192: 134.1 -> 129.3 µs, H200); where the data fit it
	// loses a little, but on fused RMS rows, which take it at any size.
	c.hint = p.L2EvictLast && (c.waves || c.prefetch) && c.vec > 1 && (s.bytesMoved() > int64(p.L2Bytes) || (s.fused && !s.twoPass))
	c.onePass = s.twoPass && s.elemSize == 2 && !c.looped
	return c
}
