package act

import (
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/intmath"
)

// blockSize is the threads per block of a grid that takes more than one
// wave of resident blocks: 128 measured best or level with 256 and 512 on
// every large benchmark shape. A grid that fits in one wave takes
// oneWaveBlock threads a block instead: half the blocks to launch, level to
// 1% faster at 4096x256.
const (
	blockSize    = 128
	oneWaveBlock = 256
)

// tuning is the launch shape of one activation, from TestSweep: the items
// a thread takes per pass, unary and gated, and the grid cap in waves of
// resident blocks beyond which the kernel's grid-stride loop takes over
// (0: no cap, one pass).
type tuning struct{ unaryUnroll, gatedUnroll, waves int }

// tunings: every activation with cheap math runs best with one item a
// thread and no cap (one 16-byte load in flight for unary ops, two for
// gated); more items, or 8-byte ones, measured 1-25% slower. Only tanh,
// whose accurate tanhf costs far more, keeps two gated items a thread and a
// 16-wave cap (unary 16384x8192 on an H200: 133.6 against 138.2 µs).
var tunings = [numKinds]tuning{
	KindSiLU:     {1, 1, 0},
	KindGELU:     {1, 1, 0},
	KindGELUTanh: {1, 1, 0},
	KindReLU:     {1, 1, 0},
	KindTanh:     {1, 2, 16},
}

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

// config is how a problem is launched.
type config struct {
	vec       int  // elements per access
	unroll    int  // items per thread per pass
	evictLast bool // 16-byte reads ask L2 to evict their lines last
	single    bool // one whole item a thread, the grid covers them (see kernelKey)
	block     int  // threads per block
	grid      int  // blocks
}

// pickConfig returns the compile-time half of p's configuration on a
// device of props: the vector width (pickVec), the items per thread per
// pass (tunings), and two choices:
//   - evict-last reads where the device allows them (props.L2EvictLast),
//     the reads are 16 bytes and the call moves more than L2 holds: about
//     1% faster (silu 16384x8192 129.7 → 127.4 µs on an H200);
//   - SINGLE where every item is whole and a thread takes one (pickLaunch
//     then covers them all): no loop and no tail, 2-5% faster on the
//     gated 4096x256 shapes.
func pickConfig(props cuda.Props, p problem) config {
	t := tunings[p.kind]
	c := config{vec: pickVec(p), unroll: t.unroll(p.gated)}
	c.evictLast = props.L2EvictLast && c.vec*p.dtype.Size() == 16 && p.bytes() > int64(props.L2Bytes)
	c.single = t.oneItem(p.gated) && p.cols%c.vec == 0
	return c
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
