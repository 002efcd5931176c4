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

// pickConfig chooses the path and launch shape for a row shape on a device.
// It is a pure function of its arguments; it never asks for more shared
// memory than p allows a block (the cache is dropped instead). The grid is
// an upper bound from the threads an SM holds; the launcher lowers it to
// what the compiled kernel's occupancy allows, so that every block of the
// row-striding grid is resident at once (no second wave), unless the config
// asks for waves (a block per row or per few rows). Prefetching the next row
// is on only where the grid strides (a group meets several rows). Waves also
// compile norm_rows for one row per group (WAVES in norm.cu), which drops
// the row loop's bookkeeping. With that, whole accesses where N allows
// (EVEN), the row loaded before the weights and a one-barrier block sum,
// these latency-bound shapes took on an H200 (kittens bench, before and
// after in the same run, two runs): rmsnorm 16384x128 bf16 7.33 -> 6.85
// and 7.14 -> 7.04 µs, 32x7168 5.28 -> 4.86 and 5.15 -> 5.06;
// fused_add_rmsnorm 16384x128 9.18 -> 9.02 and 9.28 -> 9.02, 1x8192 5.63
// -> 5.22 and 5.50 -> 5.34.
func pickConfig(p cuda.Props, s rowShape) config {
	c := config{vec: 1}
	if s.vector {
		c.vec = 16 / s.elemSize
	}
	accesses := intmath.CeilDiv(s.n, c.vec)
	sms := max(p.SMs, 1)
	switch {
	case accesses <= subWarpAccesses:
		// Several rows per warp: each thread holds up to 4 accesses (one for
		// every 8 of the row); the group is the power of two that covers the
		// row. Blocks of 128 threads, a block for every 128/group rows. (Until
		// round 3, LayerNorm of one row read kept a resident grid that strided
		// over the rows and prefetched the next.) On an H200: l2norm 262144x128 bf16 36.7 µs against
		// 40.6 for the striding grid, rmsnorm 65536x128 13.3 against 13.6,
		// fused_add_rmsnorm 21.7 against 22.1; layernorm 65536x128 13.95
		// µs striding against 15.10 in waves and 14.46 with 256-thread
		// blocks. With one-row (WAVES) kernels the sweep still puts 8 lanes
		// x 2 accesses in 128-thread blocks first or within noise: rmsnorm
		// 16384x128 6.82 µs against 6.85-7.42, fused_add_rmsnorm 16384x128
		// 8.86 against 8.90-9.57.
		//
		// LayerNorm holds as few accesses per thread as a group of 32 lanes
		// allows where fused rows outgrow L2 (two rows read: 65536x128
		// 20.80 µs against 21.18 with two; at 16384x128 two won, 9.18
		// against 9.44) or the rows are too few to fill the SMs (128x128:
		// 4.51 µs against 4.58).
		//
		// With the one-row (WAVES) kernels and one-pass statistics,
		// LayerNorm of one row read also goes in waves now (H200, same run,
		// waves against the striding grid with prefetch): 4096x128 4.99 µs
		// against 5.18 and 5.22, 16384x128 7.17 against 7.23 and 7.26,
		// 65536x128 13.22 against 13.22 and 13.47.
		//
		// Tried and lost: each group serving R rows in waves (R = 2, 4, 8;
		// all R rows' loads issued before the R interleaved reductions, as
		// Triton's XBLOCK does), in blocks of 64, 128 and 256 with 8 or 16
		// lanes a row. H200, best R against best one-row config in the same
		// sweep: rmsnorm 65536x128 R=2 12.96, R=4 13.12, R=8 13.41 µs
		// against 12.77; 4096x128 4.96, 5.18, 5.82 against 4.83; layernorm
		// 65536x128 13.41, 14.34, 16.48 against 13.15; fused_add_rmsnorm
		// 65536x128 20.80 (R=2) against 20.86; l2norm_bwd 262144x128 49.70
		// (R=2) against 49.73; l2norm_fwd 262144x256 66.85 against 66.72.
		// Ties at best for R=2, losses beyond; the code was removed.
		c.perThread = 1
		for _, pt := range []int{2, 4} {
			if pt <= accesses/8 {
				c.perThread = pt
			}
		}
		//
		// Fused RMS rows (one reduction) do too: fused_add_rmsnorm 128x128
		// 4.24 µs with one access a thread against 4.36 with two, 65536x128
		// 20.58 against 20.62 (H200, two sweeps, after the norm.cu changes
		// of the fifth session).
		few := intmath.CeilDiv(s.rows*intmath.NextPow2(accesses), subWarpBlock) <= sms
		if (s.fused && (!s.twoPass || s.bytesMoved() > int64(p.L2Bytes))) || (s.twoPass && few) {
			c.perThread = 1
			for intmath.CeilDiv(accesses, c.perThread) > 32 {
				c.perThread *= 2
			}
		}
		// One-read rows (rmsnorm, L2 forward) go down to groups of 4 lanes,
		// twice the accesses a thread, where the rows still give every SM
		// narrowFillThreads threads: fewer shuffles and instructions a byte.
		// From 2 accesses to 4 only where the 8-lane groups fit in one wave
		// of resident threads. kittens bench, three rounds alternating, µs
		// (H200 / H100): rmsnorm 16384x128 6.91-7.04 -> 6.66-6.78 /
		// 7.58-7.78 -> 7.39-7.55, l2norm_fwd 65536x64 (1 access to 2)
		// 9.02-9.22 -> 8.54-8.74 / 10.56-10.72 -> 10.24-10.40; 262144x64
		// level. Beyond one wave 4 accesses gained nothing (rmsnorm
		// 65536x128 12.93-13.09 -> 13.18-13.28 / 16.16-16.29 ->
		// 16.10-16.13, l2norm_fwd 65536x128 12.86-13.12 -> 13.25-13.38 /
		// level), nor where 4 lanes leave an SM too few threads
		// (BenchmarkSweep, rmsnorm 4096x128: H200 4.93-4.99 against
		// 4.70-4.74, H100 5.06-5.15 against 4.96-5.02).
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
		// LayerNorm of one row read, rows of up to 4 Ki bf16, in launches of
		// up to twice L2: a resident grid that strides over the rows and
		// loads the next row during this one's reductions, two accesses per
		// thread, as many blocks as the SMs hold (the launcher lowers the
		// grid to the kernel's occupancy), with the hint where the launch
		// outgrows L2. Until the sixth session it held four accesses a
		// thread in a grid sized for the 128-register cap (four 128-thread
		// blocks an SM at 4096 wide), no hint. On an H200, two sweeps, the
		// new shape against the old: 4096x4096 21.38 and 21.38 µs against
		// 21.86 and 22.37 (22.14-22.40 in kittens bench); 4096x2048 13.47
		// and 13.63 against 14.30 (14.02-14.14). Two accesses in the old,
		// smaller grid lost (4096x4096 24.70-25.09), and four accesses in
		// the larger grid tied (22.24-22.30). kittens bench, old and new
		// alternating, three rounds: 4096x4096 22.27-22.43 -> 21.54-21.63,
		// 4096x2048 14.02-14.14 -> 13.47-13.60; the other LayerNorm shapes
		// unchanged. Earlier, with four: bf16 4096x4096 (67
		// MB) 22.27 and 22.34 µs against 23.10 for a block per row with the
		// late weight loads, the hint and one-pass statistics (22.66 at best
		// for a block per row); before those, 16384x2048 40.2 against 53.8
		// with one access a thread and 42.1 with a block per row
		// (BenchmarkSweep). Larger launches gain more from the hint and a
		// block per row (the next case): 16384x2048 (134 MB) 38.08 and 38.40
		// µs against 39.04 and 39.07 here, 16384x4096 68.77 against 73.12
		// and 74.62. A warp per row (8 or 16 accesses a lane, weights loaded
		// late, no barrier; in waves or striding, one- or two-pass, with or
		// without the hint) lost at both widths: 39.14 µs at best at
		// 16384x2048, 75.55 at 16384x4096. Prefetching is on wherever a
		// block meets a second row.
		c.perThread = layerStridePerThread
		c.threads = max(intmath.RoundUp(intmath.CeilDiv(accesses, c.perThread), 32), 64)
		c.bound = maxBlockThreads
		c.grid = min(s.rows, sms*residentThreads/c.threads)
		c.prefetch = s.rows > c.grid
	case accesses <= maxPerThread*maxBlockThreads:
		// One block per row, every row its own block: the hardware starts a
		// new block as an old one drains, which kept more loads in flight than
		// a resident, row-striding grid with prefetch. Four accesses per
		// thread (fewest threads to a row) measured best on an H200:
		// rmsnorm 16384x8192 bf16 132 µs against 143 µs for the striding
		// grid with 512 threads, 16384x4096 68.7 against 76.3 µs
		// (BenchmarkSweep). LayerNorm's longer rows load the weights and
		// biases where they are used, so that they hold no registers through
		// the loads and reductions: layernorm 16384x7168 131.5 µs against
		// 139.4 for the striding grid (160.0 without the late loads),
		// 16384x8192 141.9 against 144.5, fused_add_layernorm 16384x8192
		// 267.0 against 273.3 with two accesses a thread. Fused rows of up
		// to 4 Ki bf16 hold two accesses a thread instead:
		// fused_add_layernorm 4096x4096 38.9 µs against 40.1 with four,
		// fused_add_rmsnorm 4096x4096 36.10 against 36.80 (twice), with
		// the hint.
		//
		// When the rows do not fill the SMs (decode, a handful of tokens) the
		// time is latency, not bandwidth: the fewest accesses per thread in
		// blocks of up to latencyThreads. 1x2048 bf16: 4.38 µs with 256
		// threads x 1 against 4.83 µs with 64 x 4; 32x4096: 4.77 against
		// 5.15 µs; 1x8192: 4.99 µs with 512 x 2 against 5.15 with 256 x 4
		// (an empty kernel: 3.30 µs on the same H200).
		//
		// Rows of one reduction (RMSNorm, fused or not, and L2 forward) of
		// up to 8 Ki bf16 (blocks of up to maxBlockThreads) hold two
		// accesses a thread too, with the hint as below (where the launch
		// outgrows L2, and on fused rows always). Until the twenty-sixth
		// session, rows of up to 4 Ki bf16 in launches of up to four L2s
		// held two without the hint (in the eighth session's sweeps the
		// hint lost with two accesses) and all others four with it. torch.compile's looped reduction (512
		// threads a row, 8-byte reads, the row read again from L2) was then
		// 1-2% ahead at 7168 and 8192 wide. kittens bench, old and new
		// alternating four times, µs (H200 / H100): rmsnorm 16384x2048
		// 36.77-37.06 -> 36.16-36.26 / 49.60-50.08 -> 49.18-49.54, 4096x4096
		// 21.41-21.57 -> 20.58-20.77 / 27.33-27.65 -> 26.82-27.17,
		// 16384x4096 68.10-68.35 -> 66.59-66.72 / 93.76-94.27 ->
		// 93.31-93.50, 4096x7168 32.90-33.12 -> 31.65-31.78 / 44.10-44.70
		// -> 43.36-43.68, 16384x7168 114.14-114.40 -> 112.99-113.31 /
		// 159.87-160.22 -> 158.78-159.14, 4096x8192 36.61-37.02 ->
		// 36.13-36.38 / 50.05-50.18 -> 49.28-49.63, 16384x8192
		// 129.38-129.66 -> 128.96-129.06 / 181.89-182.11 -> 181.22-181.41,
		// rmsnorm_pad 16384x2880 50.50-51.14 -> 49.86-50.14 / 69.92-70.14 ->
		// 69.57-69.82; the launches that fit L2 (4096x2048, rmsnorm_pad
		// 4096x2880) kept their configs. Fused RMS rows of 4-8 Ki bf16 took
		// two accesses too (they had four): fused_add_rmsnorm 4096x7168
		// 60.06-60.51 -> 59.78-60.06 / 82.56-82.88 -> 82.50-82.66,
		// 16384x7168 223.55-224.00 -> 222.30-222.78 / 314.11-314.50 ->
		// 313.70-313.86, 4096x8192 68.00-68.22 -> 67.71-68.03 / level,
		// 16384x8192 254.88-255.36 -> 253.98-254.40 / 358.11-358.59 ->
		// 357.82-358.24 (four rounds each).
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
	// The L2 evict-last hint on row reads (norm.cu) where each block or group
	// serves one row (waves) and the launch moves more than L2 holds. On an
	// H200, in one run: rmsnorm 16384x8192 bf16 134.1 -> 129.3 µs, 16384x4096
	// 70.2 -> 67.9, 4096x4096 21.4 -> 21.2, l2norm_fwd 262144x256 69.3 ->
	// 67.7, layernorm 16384x8192 (with one-pass statistics) 135.0 -> 130.1.
	// Where the data fit in L2 it lost a little (rmsnorm 16384x128 6.78 ->
	// 6.94 µs), and so it did on the resident, row-striding LayerNorm grids
	// of four accesses a thread (layernorm 16384x2048 38.5 -> 39.5, 4096x4096
	// 22.1 -> 22.7, 65536x128 13.4 -> 13.8) except at 16384x4096 (74.4 ->
	// 72.0); their fuller grids of two accesses gain from it (4096x4096 21.66
	// -> 21.38 µs), so the striding grids that prefetch take it too.
	// L2 backward without the hint won in BenchmarkSweep (l2norm_bwd
	// 65536x256 27.68 µs against 28.19 and 28.29) but lost in kittens bench
	// (base, new, base, new in one run: 65536x256 28.00, 28.19, 28.19,
	// 28.32 µs; 262144x256 96.42, 97.25, 96.51, 97.15), so it keeps it.
	//
	// Fused RMS rows take it whatever their size: on the H200 (two sweeps)
	// fused_add_rmsnorm 1x7168 4.91 µs against 5.03, 32x7168 5.15 against
	// 5.31, 16384x128 (one access a thread) 8.64 against 8.78.
	c.hint = (c.waves || c.prefetch) && c.vec > 1 && (s.bytesMoved() > int64(p.L2Bytes) || (s.fused && !s.twoPass))
	c.onePass = s.twoPass && s.elemSize == 2 && !c.looped
	return c
}
