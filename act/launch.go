package act

import (
	_ "embed"
	"fmt"
	"math"
	"math/bits"
	"sync"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

//go:embed act.cu
var actSrc string

// maxCols is the longest input row the kernels index with int: a column
// plus a vector width must not overflow. A gated op's input row is 2d wide,
// and act.cu forms input columns in int: 2i for output i when interleaved,
// and i·s + offset in the scalar tail (s = 2, or s = 1 with the offset d for
// halves). That tail runs only in rows that end in a partial vector, which
// pickVec never gives halves, but the bound does not lean on it.
const maxCols = math.MaxInt32 - 64

// blockSize is the threads per block of a grid that takes more than one
// wave of resident blocks: 128 measured best or level with 256 and 512 on
// every large benchmark shape (unary ops 1% slower at 256). A grid that fits
// in one wave takes oneWaveBlock threads a block instead: half the blocks
// to launch, level to 1% faster at 4096x256 (three H200 runs: silu_and_mul
// 6.34-6.62 µs at 128, 6.37-6.56 at 256; gelu_and_mul 6.59-6.75 and
// 6.56-6.69).
const (
	blockSize    = 128
	oneWaveBlock = 256
)

// tuning is the launch shape of one activation, from sweeps on an H200 (see
// tune_test.go): the items a thread takes per pass, unary and gated, and
// the grid cap in waves of resident blocks, beyond which the kernel's
// grid-stride loop takes over (0: no cap, one pass). Every activation with
// cheap math runs best with one item per thread (one 16-byte load in
// flight for unary ops, two for gated: gate and up) and no cap; two or four
// items measured 1-10% slower, also with the registers capped at 32 to keep
// full occupancy (then up to 45% slower: the loads no longer overlap), and
// so did 8-byte items, twice the threads (2-25%). Only tanh, whose
// accurate tanhf is far costlier than the others' math, keeps two gated
// items per thread and a capped grid. Unary tanh, TestSweep, mean of two
// passes (µs, capped at 16 waves against one item a thread over the whole
// grid, 128-thread blocks): H200 16384x8192 133.6 against 138.2, 4096x14336
// 62.6 against 63.2; on an H100 the other way, 184.4 against 182.0 and 83.4
// against 82.9 (and 181.0 and 82.3 with 512-thread blocks). The H200 picks.
//
// What was measured (H200, bf16, median of 100 launches, the previous
// kernel timed in the same runs; µs before → after). The GELUs had been
// slowed by their own code, not by memory: ≈ 29 SASS instructions an
// element (address math included) and, at the two items per thread they
// were tuned to, 64 registers (half occupancy). Now ≈ 19 (a degree-5 erfc
// fit for 16-bit outputs, words widened and narrowed two elements at a
// time) and 32 registers at one item: gelu_and_mul 4096x256 7.04-7.17 →
// 6.56-6.66, 65536x256 31.1-31.3 → 27.9-28.1, 131072x256 57.1 → 50.4-50.7,
// 4096x8192 57.2 → 50.4-50.6, 4096x28672 173.1-174.0 → 165.1-166.7 (≈ the
// copy rate); gelu_tanh 4096x14336 64.5 → 60.2-60.7 (the 16-wave cap
// dropped). A compile-time gated layout (one straight path per kernel
// instead of six behind run-time branches) gained at small sizes:
// silu_and_mul 4096x256 6.56 → 6.34-6.43, swiglu 4096x2880 21.0-21.1 →
// 20.8-20.9. silu is level; silu_and_mul at ≥ 100 MB stays 0.3-1.8% behind
// the previous kernel (65536x256 27.5-27.6 → 28.0-28.1, 4096x28672
// 164.9-165.1 → 165.3-165.5), a gap the SASS does not explain.
type tuning struct{ unaryUnroll, gatedUnroll, waves int }

// unroll is the items a thread takes per pass, gated or unary.
func (t tuning) unroll(gated bool) int {
	if gated {
		return t.gatedUnroll
	}
	return t.unaryUnroll
}

// oneItem reports whether a thread takes one item and the grid covers them
// all (no cap in waves): SINGLE, where the rows are whole vectors too.
func (t tuning) oneItem(gated bool) bool { return t.unroll(gated) == 1 && t.waves == 0 }

var tunings = [numKinds]tuning{
	KindSiLU:     {1, 1, 0},
	KindGELU:     {1, 1, 0},
	KindGELUTanh: {1, 1, 0},
	KindReLU:     {1, 1, 0},
	KindTanh:     {1, 2, 16},
}

// spec is one specialization of act.cu.
type spec struct {
	gated  bool
	kind   Kind
	dtype  tensor.DType
	vec    int // elements per access
	unroll int // items per thread per pass
	// evictLast: 16-byte reads carry an L2 evict-last policy (EVICT_LAST).
	evictLast bool
	// Gated only: where gate and up are, and whether the SwiGLU terms and
	// clamps apply (compile-time in the kernel: one straight path each).
	layout gatedLayout
	full   bool
	// single: one whole item a thread and a grid that covers them all
	// (SINGLE in act.cu: no loop, no scalar tail).
	single bool
}

// gatedLayout is act.cu's LAYOUT.
type gatedLayout int

const (
	layoutHalves          gatedLayout = iota // which half is the gate: the offsets
	layoutInterGateFirst                     // interleaved, gate at 2i
	layoutInterGateSecond                    // interleaved, gate at 2i + 1
)

var cTypes = map[tensor.DType]string{tensor.BF16: "bf16", tensor.F16: "f16", tensor.F32: "float"}

func (k spec) kernel() jit.Kernel {
	entry := "act_unary"
	if k.gated {
		entry = "act_gated"
	}
	return jit.Kernel{File: "act/act.cu", Source: actSrc, Entry: entry, Defines: jit.Defines(map[string]any{
		"ELEM": cTypes[k.dtype], "ACT": int(k.kind), "VEC": k.vec, "UNROLL": k.unroll,
		"LAYOUT": int(k.layout), "FULL": b2i(k.full), "EVICT_LAST": b2i(k.evictLast), "SINGLE": b2i(k.single),
	})}
}

var kernels = jit.Funcs[spec]{Kernel: spec.kernel}

// Prepare compiles, in parallel, the kernels act uses most: every
// activation and dtype, unary and plain gated (halves), at the full 16-byte
// width (with and without the L2 evict-last reads of large calls, and for
// rows that end in a partial vector) and at width 1 (for sizes and strides
// that allow nothing wider), and SwiGLU in both layouts. Calling it once at
// start-up keeps NVRTC out of the first calls; any kernel it skips is
// compiled on first use.
func Prepare(dev *cuda.Device) error {
	var ks []jit.Kernel
	for _, sp := range prepared() {
		ks = append(ks, sp.kernel())
	}
	return jit.Prepare(dev, ks)
}

// prepared lists the specializations Prepare compiles.
func prepared() []spec {
	var sps []spec
	for kind := range numKinds {
		for _, dt := range floatTypes {
			for _, vec := range []int{16 / dt.Size(), 1} {
				t := tunings[kind]
				g := spec{gated: true, kind: kind, dtype: dt, vec: vec, unroll: t.unroll(true), single: t.oneItem(true)}
				sps = append(sps, spec{kind: kind, dtype: dt, vec: vec, unroll: t.unroll(false), single: t.oneItem(false)}, g)
				if kind == KindSiLU {
					g.full = true
					sps = append(sps, g) // SwiGLU, halves
					g.layout = layoutInterGateFirst
					sps = append(sps, g) // SwiGLU, interleaved
				}
			}
		}
	}
	// The list as it stood: each 16-byte one again with the hint, and again
	// without SINGLE, for rows that end in a partial vector.
	for _, sp := range sps {
		if sp.vec*sp.dtype.Size() == 16 {
			if sp.single {
				sp.single = false
				sps = append(sps, sp)
				sp.single = true
			}
			sp.evictLast = true
			sps = append(sps, sp)
		}
	}
	return sps
}

// problem is one validated device call in rows form: rows of cols outputs
// (d for gated ops), row strides in elements.
type problem struct {
	kind       Kind
	dtype      tensor.DType
	rows, cols int
	sx, sy     int
	x, y       cuda.DevicePtr
	inplace    bool // unary with y == x

	gated        bool
	layout       Layout
	gateSecond   bool
	limit        float64 // 0: none
	alpha, upAdd float64
}

// config is how a problem is launched.
type config struct {
	vec       int  // elements per access
	unroll    int  // items per thread per pass
	evictLast bool // 16-byte reads ask L2 to evict their lines last
	single    bool // one whole item a thread, the grid covers them (see spec)
	block     int  // threads per block
	grid      int  // blocks
}

// items is the number of work items at vector width vec.
func (p problem) items(vec int) int { return p.rows * ((p.cols + vec - 1) / vec) }

// inCols is the length of an input row: cols, or 2·cols (2d) for gated ops.
func (p problem) inCols() int {
	if p.gated {
		return 2 * p.cols
	}
	return p.cols
}

// checkSize rejects a problem too large for the kernels' indexing at vector
// width vec: input rows longer than maxCols, or more than MaxInt32 items.
func (p problem) checkSize(op string, vec int) error {
	v := tensor.Validate(op)
	v.Check(p.inCols() <= maxCols, "x", "has rows of %d elements, more than the kernel's %d", p.inCols(), maxCols)
	v.Check(p.items(vec) <= math.MaxInt32, "x", "has %d rows of %d elements: too many for one launch", p.rows, p.inCols())
	return v.Err()
}

// bytes is what p moves through memory: each input read once, each output
// written once.
func (p problem) bytes() int64 {
	per := int64(2) // x and y
	if p.gated {
		per = 3 // gate, up and y
	}
	return per * int64(p.rows) * int64(p.cols) * int64(p.dtype.Size())
}

// pickVec returns the widest access, at most 16 bytes, that every address
// the kernel forms at full width is aligned to.
func pickVec(p problem) int {
	size := p.dtype.Size()
	v := 16 / size
	fits := func(v int) bool {
		if uint64(p.x)%uint64(v*size) != 0 || uint64(p.y)%uint64(v*size) != 0 {
			return false
		}
		if p.rows > 1 && (p.sx%v != 0 || p.sy%v != 0) {
			return false
		}
		// Halves: the second half starts d elements into the row.
		return !p.gated || p.layout == Interleaved || p.cols%v == 0
	}
	for v > 1 && !fits(v) {
		v /= 2
	}
	return v
}

// pickLaunch sizes the grid for items work items taken unroll at a time,
// at most waves waves of resident blocks (0: no cap); occ gives the
// resident blocks per multiprocessor at a block size. A grid that fits in
// one wave of blockSize blocks is launched with oneWaveBlock threads a
// block.
func pickLaunch(props cuda.Props, items, unroll, waves int, occ func(block int) int) (block, grid int) {
	resident := func(block int) int { return max(props.SMs, 1) * max(occ(block), 1) }
	block = blockSize
	grid = intmath.CeilDiv(items, block*unroll)
	if grid <= resident(block) {
		block = oneWaveBlock
		grid = intmath.CeilDiv(items, block*unroll)
	}
	if waves > 0 {
		grid = min(grid, resident(block)*waves)
	}
	return block, max(grid, 1)
}

// baseConfig returns the compile-time half of p's configuration on a
// device of props: the vector width, the items per thread per pass, the L2
// evict-last reads (load16_evict_last in kittens.cuh), and SINGLE.
//
// The evict-last reads are taken where the reads are 16 bytes and the call
// moves more than L2 holds. On an H200, bf16, two rounds (µs, without →
// with): silu 16384x8192 129.7 → 127.4 and 129.5 → 127.5 (in place 129.7 →
// 128.7 and 129.6 → 128.5), 4096x14336 60.1 → 59.4 and 59.9 → 59.5;
// gelu_tanh 16384x8192 129.7 → 128.1 and 129.4 → 128.2; silu_and_mul
// 4096x28672 165.3 → 164.2 and 165.3 → 164.4; gelu_and_mul 4096x28672
// 165.3 → 164.4 twice; the 71-101 MB gated cases within the spread (swiglu
// 4096x2880 20.8 → 20.6 and 20.7 → 20.8).
//
// SINGLE is taken where every item is whole and a thread takes one
// (pickLaunch then covers them all). H200, TestSweep at the picked block
// size, the loop kernel against SINGLE in the same calls, two calls of two
// passes (µs): silu_and_mul 4096x256 6.21-6.27 → 6.05-6.08, 16384x256
// 10.72-10.75 → 10.53-10.56, 65536x256 27.84-27.90 → 27.71-27.74;
// gelu_and_mul 4096x256 6.40-6.43 → 6.08-6.14, 16384x256 10.72-10.82 →
// 10.53-10.59, 65536x256 27.84-27.97 → 27.78. A row length fixed at compile
// time, as torch.compile's kernels have, took another 0.03-0.06 µs off the
// 4096-row shapes; not taken, since it compiles a kernel per width.
func baseConfig(props cuda.Props, p problem) config {
	t := tunings[p.kind]
	c := config{vec: pickVec(p), unroll: t.unroll(p.gated)}
	c.evictLast = c.vec*p.dtype.Size() == 16 && p.bytes() > int64(props.L2Bytes)
	c.single = t.oneItem(p.gated) && p.cols%c.vec == 0
	return c
}

func (p problem) spec(c config) spec {
	sp := spec{gated: p.gated, kind: p.kind, dtype: p.dtype, vec: c.vec, unroll: c.unroll, evictLast: c.evictLast,
		single: c.single}
	if p.gated {
		sp.full = p.full()
		switch {
		case p.layout == Halves:
			sp.layout = layoutHalves
		case p.gateSecond:
			sp.layout = layoutInterGateSecond
		default:
			sp.layout = layoutInterGateFirst
		}
	}
	return sp
}

// full reports whether a gated problem needs the SwiGLU terms or clamps.
func (p problem) full() bool { return p.limit > 0 || p.alpha != 1 || p.upAdd != 0 }

// offsets returns where a gated problem's gate and up sit in a row: column
// i·s + gOff and i·s + uOff, s = 1 for halves and 2 when interleaved.
func (p problem) offsets() (gOff, uOff int) {
	gOff, uOff = 0, p.cols
	if p.layout == Interleaved {
		uOff = 1
	}
	if p.gateSecond {
		gOff, uOff = uOff, gOff
	}
	return gOff, uOff
}

// occupancy caches resident blocks per multiprocessor by kernel and block size.
var occupancy sync.Map // occKey → int

type occKey struct {
	fn    *cuda.Function
	block int
}

func blocksPerSM(fn *cuda.Function, block int) int {
	k := occKey{fn, block}
	if n, ok := occupancy.Load(k); ok {
		return n.(int)
	}
	n, err := fn.MaxActiveBlocksPerSM(block, 0)
	if err != nil || n < 1 {
		n = 1 // the launch itself will report a real problem
	}
	occupancy.Store(k, n)
	return n
}

// run launches p on dev with the picked configuration.
func run(op string, s *cuda.Stream, dev *cuda.Device, p problem) error {
	c := baseConfig(dev.Props(), p)
	if err := p.checkSize(op, c.vec); err != nil {
		return err
	}
	fn, err := kernels.Get(dev, s, p.spec(c))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	c.block, c.grid = pickLaunch(dev.Props(), p.items(c.vec), c.unroll, tunings[p.kind].waves,
		func(block int) int { return blocksPerSM(fn, block) })
	if s == nil {
		s = dev.DefaultStream()
	}
	if err := p.launch(s, fn, c); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// launch queues fn (the kernel of p.spec(c)) with configuration c.
func (p problem) launch(s *cuda.Stream, fn *cuda.Function, c config) error {
	perRow := intmath.CeilDiv(p.cols, c.vec)
	mul, shr := divider(uint32(perRow))
	a := cuda.NewArgs().Ptr(p.y).Ptr(p.x).I32(int32(p.cols)).I64(int64(p.sy)).I64(int64(p.sx)).
		U32(uint32(perRow)).U32(mul).U32(shr).U32(uint32(p.rows * perRow))
	if !p.gated {
		nc := int32(1)
		if p.inplace {
			nc = 0
		}
		a.I32(nc)
	} else {
		limit := float32(math.Inf(1))
		if p.limit > 0 {
			limit = float32(p.limit)
		}
		gOff, uOff := p.offsets()
		a.I32(int32(gOff)).I32(int32(uOff)).F32(limit).F32(float32(p.alpha)).F32(float32(p.upAdd))
	}
	return fn.Launch(cuda.LaunchConfig{Grid: cuda.D1(c.grid), Block: cuda.D1(c.block), Stream: s}, a)
}

// divider returns the multiplier and shift that divide by d ≥ 2 without a
// division: n/d = (n·mul >> 32) >> shr for every n < 2^31. With l =
// ⌈log2 d⌉ and mul = ⌈2^(31+l)/d⌉ (which fits in 32 bits), n·mul/2^(31+l)
// exceeds n/d by less than n/2^(31+l) < 2^−l ≤ 1/d, too little to reach the
// next integer. d = 1 is special-cased by the kernel (mul would not fit).
func divider(d uint32) (mul, shr uint32) {
	if d < 2 {
		return 0, 0
	}
	l := uint32(bits.Len32(d - 1)) // ⌈log2 d⌉
	p := 31 + l
	return uint32((uint64(1)<<p + uint64(d) - 1) / uint64(d)), p - 32
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}
