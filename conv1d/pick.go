package conv1d

import (
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/tensor"
)

// shape is what the launch configuration depends on.
type shape struct {
	dim      int  // channels
	tokens   int  // T
	seqs     int  // B
	seqLen   int  // uniform sequence length; 0 for varlen (cu_seqlens)
	elemSize int  // bytes per element
	maxVec   int  // widest channel group every pointer, stride and split allows
	inPlace  bool // output is x: a sequence must stay within one chunk
}

// config is a launch configuration.
type config struct {
	vec       int  // channels per thread
	unroll    int  // tokens loaded before computing
	hints     bool // cache hints on x and y
	minBlocks int  // register cap: this many blocks of maxBlock threads per SM
	threads   int  // threads per block (a multiple of 32)
	chunk     int  // tokens per thread
	ring      int  // rows per bulk-copied stage of x into shared memory; 0: none
	stages    int  // stages of the ring
	evictLast bool // the ring's bulk copies ask L2 to evict their lines last (EVICT_LAST)
}

// key is the kernel specialization c runs.
func (c config) key(dt tensor.DType, width int, silu bool, mode int) kernelKey {
	return kernelKey{dtype: dt, width: width, vec: c.vec, unroll: c.unroll, silu: silu, hints: c.hints, minBlocks: c.minBlocks, mode: mode,
		ring: c.ring, stages: c.stages, evictLast: c.evictLast}
}

// shared is the dynamic shared memory c needs: the ring.
func (c config) shared(elemSize int) int { return c.stages * c.ring * c.threads * c.vec * elemSize }

// Launch bounds, tuned on an H200 (NOTES.md has the sweeps).
const (
	// A thread covers minChunk to maxChunk tokens. The halo re-read is
	// (W−1)/chunk of x; the kernel relies on chunk ≥ W−1 (only chunk 0
	// reads the state).
	maxChunk    = 24
	minChunk    = 8
	maxBlock    = 128
	maxVecBytes = 16 // widest access per thread and token
	// Four channels a thread beat eight in prefill: the fp32 taps and
	// window of eight cost twice the registers, and occupancy matters more
	// than 16-byte accesses.
	vecChannels = 4
	// Prefill keeps unrollSteps tokens in flight a thread under a register
	// cap of minBlocksPerSM blocks an SM: 80 registers, 3–5% faster than
	// the compiler's 110.
	unrollSteps    = 8
	minBlocksPerSM = 6
	// Single-token decode is latency bound: no batch (UNROLL = 1), and the
	// registers that frees go to occupancy, decodeMinBlocks blocks an SM
	// (64 registers, the most that compiles without spilling).
	decodeMinBlocks = 8
	// Decode of up to maxDecodeUnroll tokens a sequence batches them all
	// (UNROLL the next power of two) under the decode cap: spec4 B256 26.5
	// µs against 30.9 with the prefill batch.
	maxDecodeUnroll = 4
	// Single-token decode over a grid at least wideDecodeWaves waves deep
	// (at wideDecodeMinBlocks blocks an SM) moves 16 bytes a thread: half
	// the blocks, each with twice the bytes in flight behind its one index
	// round trip (B256 16.8 µs against 18.6 at four channels; shallow grids
	// gain nothing).
	wideDecodeMinBlocks = 6
	wideDecodeWaves     = 2
	// Prefill streams x through a shared-memory ring of ringStages stages
	// of ringRows rows filled by bulk copies (cp.async.bulk): a chunk of up
	// to ringChunk tokens is wholly in flight as soon as the block starts.
	// maxRingBytes keeps six blocks an SM within shared memory and, with
	// the kernel's static barriers, under the 48 KiB a block gets without
	// opting in. Chunks of 16 beat 24 with the ring.
	ringRows     = 8
	ringStages   = 4
	ringChunk    = 16
	maxRingBytes = 32 << 10
)

// grid returns the number of (sequence, chunk) slots and channel blocks.
func (c config) grid(sh shape) (slots, chanBlocks int) {
	if sh.seqLen > 0 {
		slots = sh.seqs * ((sh.seqLen + c.chunk - 1) / c.chunk)
	} else {
		slots = sh.tokens/c.chunk + sh.seqs
	}
	groups := (sh.dim + c.vec - 1) / c.vec
	return slots, (groups + c.threads - 1) / c.threads
}

// pickConfig chooses the launch configuration:
//
//   - channels a thread: four where the layout allows (else fewer); 16
//     bytes for single-token decode over a deep grid;
//   - tokens in flight: eight under the prefill register cap; decode of up
//     to maxDecodeUnroll tokens, just those under the decode cap;
//   - cache hints: decode of fewer tokens than a batch, not in place;
//   - chunk: the longest up to maxChunk that still gives every SM about
//     eight blocks; in place, the whole sequence;
//   - block width: halved while the grid is under two blocks an SM
//     (decode), so that the work spreads over more SMs;
//   - prefill on Hopper with 16-byte rows: the bulk-copied ring instead of
//     register batches, its copies evict-last when x and y exceed L2.
func pickConfig(props cuda.Props, sh shape) config {
	c := config{vec: min(sh.maxVec, vecChannels), unroll: unrollSteps, minBlocks: minBlocksPerSM, threads: maxBlock, chunk: maxChunk}
	// Cache hints pay for decode (spec4 B256 26.5 µs against 33.4 without)
	// and not for prefill; in place they are not allowed.
	c.hints = sh.seqLen > 0 && sh.seqLen < unrollSteps && !sh.inPlace
	if sh.seqLen > 0 && sh.seqLen <= maxDecodeUnroll {
		c.unroll, c.minBlocks = intmath.NextPow2(sh.seqLen), decodeMinBlocks
	}
	sms := max(props.SMs, 1)
	if wide := min(sh.maxVec, maxVecBytes/sh.elemSize); sh.seqLen == 1 && wide > c.vec {
		blocks := sh.seqs * intmath.CeilDiv(intmath.CeilDiv(sh.dim, wide), maxBlock)
		if blocks >= wideDecodeWaves*wideDecodeMinBlocks*sms {
			c.vec, c.minBlocks = wide, wideDecodeMinBlocks
		}
	}
	groups := (sh.dim + c.vec - 1) / c.vec
	c.threads = min(maxBlock, (groups+31)/32*32)
	blocks := func() int { s, ch := c.grid(sh); return s * ch }
	for c.chunk > minChunk && blocks() < 8*sms {
		c.chunk = max(c.chunk/2, minChunk)
	}
	if sh.inPlace {
		// The halo of a later chunk would read rows an earlier chunk has
		// already overwritten: keep each sequence in one chunk.
		c.chunk = max(sh.seqLen, 1)
	}
	for c.threads > 32 && blocks() < 2*sms {
		c.threads /= 2
	}
	// The ring needs Hopper's bulk copies and 16-byte aligned rows; decode
	// (fewer tokens than a batch) and in-place calls keep the register path.
	if props.Major >= 9 && !sh.inPlace && (sh.seqLen == 0 || sh.seqLen >= unrollSteps) && sh.maxVec*sh.elemSize == maxVecBytes {
		r := c
		r.ring, r.stages, r.chunk = ringRows, ringStages, min(c.chunk, ringChunk)
		if r.shared(sh.elemSize) <= maxRingBytes {
			c = r
		}
	}
	// A ring whose x and y exceed L2 bulk-copies x under an L2 evict-last
	// policy where the device allows it (props.L2EvictLast): 1x32768 254
	// µs against 258.
	xy := 2 * int64(sh.tokens) * int64(sh.dim) * int64(sh.elemSize)
	c.evictLast = props.L2EvictLast && c.ring > 0 && xy > int64(props.L2Bytes)
	return c
}

// pickedKeys lists, without repeats, the specializations pickConfig yields
// on props for shapes (elemSize and maxVec set here: the widest the dtype
// and dim allow) in every dtype, width of widths and activation of silus,
// decode shapes in every decode mode.
func pickedKeys(props cuda.Props, shapes []shape, widths []int, silus []bool) []kernelKey {
	seen := map[kernelKey]bool{}
	var keys []kernelKey
	for _, dt := range floatTypes {
		for _, width := range widths {
			for _, sh := range shapes {
				sh.elemSize = dt.Size()
				for sh.maxVec = maxVecBytes / dt.Size(); sh.dim%sh.maxVec != 0; sh.maxVec /= 2 {
				}
				modes := []int{modeShift}
				if sh.seqLen > 0 {
					modes = append(modes, modeSpec, modeCircular)
				}
				for _, silu := range silus {
					for _, mode := range modes {
						k := pickConfig(props, sh).key(dt, width, silu, mode)
						if !seen[k] {
							seen[k] = true
							keys = append(keys, k)
						}
					}
				}
			}
		}
	}
	return keys
}
