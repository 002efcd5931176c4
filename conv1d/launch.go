package conv1d

import (
	_ "embed"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

//go:embed conv1d.cu
var kernelSrc string

// kernelSpec is one specialization of conv1d.cu.
type kernelSpec struct {
	dtype     tensor.DType
	width     int  // taps W
	vec       int  // channels per thread (VEC·size ≤ 16 bytes)
	unroll    int  // tokens loaded before computing
	silu      bool // SiLU epilogue
	hints     bool // read-once/write-once cache hints on x and y (not in place)
	minBlocks int  // blocks of 128 threads per SM the registers must allow
	mode      int  // decode state rule: modeShift, modeSpec or modeCircular
	ring      int  // rows per bulk-copied stage of x; 0: x through registers
	stages    int  // ring stages (with ring)
	evictLast bool // the ring's bulk copies ask L2 to evict their lines last
}

var cTypes = map[tensor.DType]string{tensor.BF16: "bf16", tensor.F16: "f16", tensor.F32: "float"}

func (k kernelSpec) kernel() jit.Kernel {
	return jit.Kernel{File: "conv1d/conv1d.cu", Source: kernelSrc, Entry: "conv1d_fwd",
		Defines: jit.Defines(map[string]any{"DTYPE": cTypes[k.dtype], "WIDTH": k.width, "VEC": k.vec,
			"UNROLL": k.unroll, "SILU": boolInt(k.silu), "HINTS": boolInt(k.hints), "MINB": k.minBlocks, "MODE": k.mode,
			"RING": k.ring, "STAGES": max(k.stages, 1), "EVICT_LAST": boolInt(k.evictLast)})}
}

var kernels = jit.Funcs[kernelSpec]{Kernel: kernelSpec.kernel}

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

// spec is the kernel specialization c runs.
func (c config) spec(dt tensor.DType, width int, silu bool, mode int) kernelSpec {
	return kernelSpec{dtype: dt, width: width, vec: c.vec, unroll: c.unroll, silu: silu, hints: c.hints, minBlocks: c.minBlocks, mode: mode,
		ring: c.ring, stages: c.stages, evictLast: c.evictLast}
}

// shared is the dynamic shared memory c needs: the ring.
func (c config) shared(elemSize int) int { return c.stages * c.ring * c.threads * c.vec * elemSize }

// tune, when set (tuning tests only), replaces the picked configuration.
var tune func(sh shape, c config) config

// Launch bounds, tuned on an H200 (see NOTES.md beside this file). The halo
// re-read is (W−1)/chunk of x; minChunk keeps chunk ≥ W−1, which the kernel
// relies on (only chunk 0 reads the state). Four channels per thread beat
// eight: the fp32 taps and window of eight channels cost about twice the
// registers, and occupancy matters more than 16-byte accesses here. With
// eight tokens in flight the compiler takes about 110 registers (four
// blocks per SM); capping it at 80 (six blocks) was 3–5% faster, 72 (seven)
// and 94 (five) were slower.
const (
	maxChunk       = 24
	minChunk       = 8
	maxBlock       = 128
	maxVecBytes    = 16 // widest access per thread and token
	vecChannels    = 4  // preferred channels per thread
	unrollSteps    = 8  // tokens in flight per thread in prefill
	minBlocksPerSM = 6
	// Single-token decode needs no batch (UNROLL = 1) and spends the
	// registers that frees on occupancy: a decode wave is latency bound,
	// so more resident blocks mean fewer waves (B = 256: 4096 blocks).
	// Eight blocks (64 registers) is the most that compiles without
	// spilling.
	decodeMinBlocks = 8
	// Decode of a few tokens a sequence (speculative decoding verifies
	// several) batches them all (UNROLL the next power of two) under the
	// same cap, up to maxDecodeUnroll tokens. On an H200, B256 x 8192 with
	// 4 tokens: 30.85 µs with the prefill batch of 8 under 6 blocks, 28.77
	// with 4 under 6, 26.53 with 4 under 8, 28.42 one at a time under 8;
	// B32: 9.34, 8.93, 8.93, 9.57.
	maxDecodeUnroll = 4
	// Single-token decode over a grid at least wideDecodeWaves waves deep
	// (at wideDecodeMinBlocks blocks an SM) moves 16 bytes a thread
	// instead of four channels: half the blocks, each with twice the bytes
	// in flight behind its one index round trip. Eight 16-bit channels need
	// 80 registers (six blocks; a 32-byte spill). On an H200, TestTune, two
	// calls, µs, four channels under 8 blocks against eight under 7, 6 and
	// 5: B256 x 8192 18.59 / 19.87 / 16.77 / 17.15 and 18.40 / 19.78 /
	// 16.58 / 16.99; its circular-buffer form 18.21 / 18.02 / 16.06 /
	// 16.96 and 18.30 / 18.11 / 16.26 / 17.09; B32 6.85 / 6.91 / 7.04 /
	// 6.91 and 6.72 / 6.72 / 6.88 / 6.75 (a shallow grid: left at four).
	wideDecodeMinBlocks = 6
	wideDecodeWaves     = 2
	// Prefill streams x through a shared-memory ring of ringStages stages
	// of ringRows rows, filled by bulk copies (cp.async.bulk): a chunk of
	// up to ringChunk tokens is then wholly in flight as soon as the block
	// starts, and the registers that held a batch of tokens are free.
	// maxRingBytes keeps six blocks per SM (the register cap's count)
	// within shared memory; with the kernel's static barriers (16 bytes a
	// stage) it stays far below the 48 KiB a block gets without opting in,
	// so the launch needs no Function.ReserveShared. Chunks of 16 beat 24
	// with the ring (see NOTES.md).
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

// pickConfig chooses the launch configuration: four channels per thread
// where the layout allows (else fewer; 16 bytes for single-token decode over
// a deep grid); eight tokens in flight per thread;
// cache hints for decode (fewer new tokens than that), and for decode of up
// to maxDecodeUnroll tokens a batch of just those under a tighter register
// cap; the longest
// chunk up to maxChunk that still gives every SM about eight blocks; then
// narrower blocks when the grid is small (decode) so that the work spreads
// over more SMs; and for prefill, where rows are 16-byte aligned, the
// bulk-copied ring instead of register batches.
func pickConfig(props cuda.Props, sh shape) config {
	c := config{vec: min(sh.maxVec, vecChannels), unroll: unrollSteps, minBlocks: minBlocksPerSM, threads: maxBlock, chunk: maxChunk}
	// Cache hints paid off for decode (about 10% at B = 256); in prefill
	// the load hint cost 6% and the store hint changed nothing. In place
	// they are not allowed.
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
	// policy (bulk_load<true> in tile.cuh). On an H200, two rounds
	// (µs, without → with): 1x4096x8192 39.46 → 38.59 and 39.33 → 38.85,
	// 1x32768x8192 257.7 → 253.7 and 257.2 → 254.1, 8 seqs 16384x8192
	// 135.3 → 133.7 and 135.0 → 133.8, split T4096 39.87 → 39.14 and
	// 39.68 → 39.07.
	xy := 2 * int64(sh.tokens) * int64(sh.dim) * int64(sh.elemSize)
	c.evictLast = c.ring > 0 && xy > int64(props.L2Bytes)
	return c
}

// maxGridY is the most blocks a launch may have along y (and z).
const maxGridY = 65535

// gridOf lays out the launch: channel blocks along x, fastest, so that the
// blocks in flight read and write whole rows; slots along y, spilling into z
// past maxGridY (the kernel skips the surplus the rounding adds). The slot
// is then blockIdx.z·gridDim.y + blockIdx.y: no division in the kernel.
func gridOf(slots, chanBlocks int) cuda.Dim3 {
	z := (slots + maxGridY - 1) / maxGridY
	return cuda.Dim3{X: uint32(chanBlocks), Y: uint32((slots + z - 1) / z), Z: uint32(z)}
}

// maxVec is the widest channel group (a power of two, at most 16 bytes)
// that every device access of p allows: channel counts, split points and
// strides divisible by it, base addresses aligned to its size.
func (p *plan) maxVec() int {
	es := p.x.DType().Size()
	for vec := maxVecBytes / es; vec > 1; vec /= 2 {
		ok := p.dim%vec == 0 && p.split[0]%vec == 0 && p.split[1]%vec == 0
		aligned := func(t *tensor.Tensor, strides ...int) {
			if t == nil {
				return
			}
			ok = ok && uint64(t.Ptr())%uint64(vec*es) == 0
			for _, s := range strides {
				ok = ok && t.Stride(s)%vec == 0
			}
		}
		aligned(p.x, 0)
		aligned(p.w)
		aligned(p.bias)
		for _, o := range p.outs {
			aligned(o, 0)
		}
		aligned(p.stateIn, 0, 1)
		aligned(p.stateOut, 0, 1)
		if ok {
			return vec
		}
	}
	return 1
}

func ptrOf(t *tensor.Tensor) cuda.DevicePtr {
	if t == nil {
		return 0
	}
	return t.Ptr()
}

func stridesOf(t *tensor.Tensor) (slot int64, col int32) {
	if t == nil {
		return 0, 0
	}
	return int64(t.Stride(0)), int32(t.Stride(1))
}

// launch runs the kernel for a validated device plan.
func (p *plan) launch(s *cuda.Stream) error {
	dev := p.x.Device()
	if s == nil {
		s = dev.DefaultStream()
	}
	sh := shape{dim: p.dim, tokens: p.tokens, seqs: p.nSeqs, elemSize: p.x.DType().Size(),
		maxVec: p.maxVec(), inPlace: p.inPlace}
	if p.cu == nil {
		sh.seqLen = p.seqLen
	}
	c := pickConfig(dev.Props(), sh)
	if tune != nil {
		c = tune(sh, c)
	}
	fn, err := kernels.Get(dev, s, c.spec(p.x.DType(), p.width, p.silu, p.mode))
	if err != nil {
		return err
	}
	slots, chanBlocks := c.grid(sh)
	outs, os := [3]cuda.DevicePtr{}, [3]int32{}
	for i := range outs {
		o := p.outs[i]
		if o == nil {
			o = p.outs[0] // unused part: split boundaries never reach it
		}
		outs[i], os[i] = o.Ptr(), int32(o.Stride(0))
	}
	inSlot, inCol := stridesOf(p.stateIn)
	outSlot, outCol := stridesOf(p.stateOut)
	seqLen := int32(p.seqLen)
	if p.cu != nil {
		seqLen = 0
	}
	a := cuda.NewArgs().
		Ptr(p.x.Ptr()).I32(int32(p.x.Stride(0))).I32(int32(p.tokens)).I32(int32(p.dim)).
		Ptr(p.w.Ptr()).Ptr(ptrOf(p.bias)).
		Ptr(outs[0]).Ptr(outs[1]).Ptr(outs[2]).I32(os[0]).I32(os[1]).I32(os[2]).
		I32(int32(p.split[0])).I32(int32(p.split[1])).
		Ptr(ptrOf(p.cu)).I32(seqLen).I32(int32(p.nSeqs)).
		Ptr(ptrOf(p.slots)).Ptr(ptrOf(p.hasInit)).
		Ptr(ptrOf(p.stateIn)).I64(inSlot).I32(inCol).
		Ptr(ptrOf(p.stateOut)).I64(outSlot).I32(outCol).
		I32(int32(p.nSlots)).I32(int32(p.stateLen)).I32(int32(c.chunk)).Ptr(ptrOf(p.modeIdx)).Ptr(ptrOf(p.errFlag))
	return fn.Launch(cuda.LaunchConfig{
		Grid:   gridOf(slots, chanBlocks),
		Block:  cuda.D1(c.threads),
		Shared: c.shared(sh.elemSize),
		Stream: s,
	}, a)
}
