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

// kernelKey is one specialization of act.cu.
type kernelKey struct {
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

// kernel is k's specialization of act.cu. ACT is the Kind's number (its
// String is the name).
func (k kernelKey) kernel() jit.Kernel {
	entry := "act_unary"
	if k.gated {
		entry = "act_gated"
	}
	return jit.Kernel{File: "act/act.cu", Source: actSrc, Entry: entry, Defines: jit.Defines(map[string]any{
		"ELEM": k.dtype, "ACT": int(k.kind), "VEC": k.vec, "UNROLL": k.unroll,
		"LAYOUT": int(k.layout), "FULL": k.full, "EVICT_LAST": k.evictLast, "SINGLE": k.single,
	})}
}

var kernels = jit.Funcs[kernelKey]{Kernel: kernelKey.kernel}

// Prepare compiles, in parallel, the kernels act uses most: every
// activation and dtype, unary and plain gated (halves), at the full 16-byte
// width (also for rows that end in a partial vector, and with the L2
// evict-last reads of large calls where dev allows them) and at width 1 (for sizes and strides
// that allow nothing wider), and SwiGLU in both layouts. Calling it once at
// start-up keeps NVRTC out of the first calls; any kernel it skips is
// compiled on first use. A nil dev is an error.
func Prepare(dev *cuda.Device) error {
	v := tensor.Validate("act.Prepare")
	v.Check(dev != nil, "dev", "is nil")
	if err := v.Err(); err != nil {
		return err
	}
	var ks []jit.Kernel
	for _, k := range prepared(dev.Props().L2EvictLast) {
		ks = append(ks, k.kernel())
	}
	return jit.Prepare(dev, ks)
}

// prepared lists the specializations Prepare compiles, with the evict-last
// reads' where evictLast.
func prepared(evictLast bool) []kernelKey {
	var keys []kernelKey
	for kind := range numKinds {
		for _, dt := range floatTypes {
			for _, vec := range []int{16 / dt.Size(), 1} {
				t := tunings[kind]
				g := kernelKey{gated: true, kind: kind, dtype: dt, vec: vec, unroll: t.unroll(true), single: t.oneItem(true)}
				keys = append(keys, kernelKey{kind: kind, dtype: dt, vec: vec, unroll: t.unroll(false), single: t.oneItem(false)}, g)
				if kind == KindSiLU {
					g.full = true
					keys = append(keys, g) // SwiGLU, halves
					g.layout = layoutInterGateFirst
					keys = append(keys, g) // SwiGLU, interleaved
				}
			}
		}
	}
	// Each 16-byte one again without SINGLE (rows that end in a partial
	// vector), and again with the evict-last reads.
	for _, k := range keys {
		if k.vec*k.dtype.Size() == 16 {
			if k.single {
				k.single = false
				keys = append(keys, k)
				k.single = true
			}
			if evictLast {
				k.evictLast = true
				keys = append(keys, k)
			}
		}
	}
	return keys
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

// items is the number of work items at vector width vec.
func (p problem) items(vec int) int { return p.rows * intmath.CeilDiv(p.cols, vec) }

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

// key returns the specialization that launches p with configuration c.
func (p problem) key(c config) kernelKey {
	k := kernelKey{gated: p.gated, kind: p.kind, dtype: p.dtype, vec: c.vec, unroll: c.unroll, evictLast: c.evictLast,
		single: c.single}
	if p.gated {
		k.full = p.full()
		switch {
		case p.layout == Halves:
			k.layout = layoutHalves
		case p.gateSecond:
			k.layout = layoutInterGateSecond
		default:
			k.layout = layoutInterGateFirst
		}
	}
	return k
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
	c := pickConfig(dev.Props(), p)
	if err := p.checkSize(op, c.vec); err != nil {
		return err
	}
	fn, err := kernels.Get(dev, s, p.key(c))
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

// launch queues fn (the kernel of p.key(c)) with configuration c.
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
