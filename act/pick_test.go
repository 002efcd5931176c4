package act

import (
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/tensor"
)

func TestPickVec(t *testing.T) {
	for _, c := range []struct {
		name string
		p    problem
		want int
	}{
		{"bf16 flat", problem{dtype: tensor.BF16, rows: 1, cols: 1001, x: 256, y: 512}, 8},
		{"f32 flat", problem{dtype: tensor.F32, rows: 1, cols: 7, x: 256, y: 512}, 4},
		{"bf16 rows stride 12", problem{dtype: tensor.BF16, rows: 4, cols: 12, sx: 12, sy: 12, x: 256, y: 512}, 4},
		{"bf16 misaligned pointer", problem{dtype: tensor.BF16, rows: 1, cols: 64, x: 258, y: 512}, 1},
		{"gated halves d=2880", problem{dtype: tensor.BF16, gated: true, rows: 4, cols: 2880, sx: 5760, sy: 2880, x: 256, y: 512}, 8},
		{"gated halves d=100", problem{dtype: tensor.BF16, gated: true, rows: 4, cols: 100, sx: 200, sy: 104, x: 256, y: 512}, 4},
		{"gated halves d=7", problem{dtype: tensor.F16, gated: true, rows: 4, cols: 7, sx: 14, sy: 7, x: 256, y: 512}, 1},
		{"gated interleaved d=20", problem{dtype: tensor.BF16, gated: true, layout: Interleaved, rows: 6, cols: 20, sx: 48, sy: 24, x: 256, y: 512}, 8},
		{"gated one row d=7", problem{dtype: tensor.F32, gated: true, layout: Interleaved, rows: 1, cols: 7, sx: 14, sy: 7, x: 256, y: 512}, 4},
	} {
		if got := pickVec(c.p); got != c.want {
			t.Errorf("%s: pickVec = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestPickLaunch(t *testing.T) {
	h200 := cuda.Props{SMs: 132}
	occ16 := func(block int) int { return 2048 / block }
	wave := 132 * 16 // resident blocks of 128
	for _, c := range []struct {
		name                 string
		props                cuda.Props
		items, unroll, waves int
		occ                  func(int) int
		block, grid          int
	}{
		{"one item", h200, 1, 2, 16, occ16, oneWaveBlock, 1},
		{"4096x256 gated: one wave", h200, 4096 * 32, 1, 0, occ16, oneWaveBlock, 512},
		{"exactly one wave", h200, wave * blockSize, 1, 0, occ16, oneWaveBlock, wave / 2},
		{"just past one wave", h200, wave*blockSize + 1, 1, 0, occ16, blockSize, wave + 1},
		{"no cap", h200, 1 << 30, 1, 0, occ16, blockSize, 1 << 23},
		{"exactly the cap", h200, wave * 16 * blockSize * 2, 2, 16, occ16, blockSize, wave * 16},
		{"past the cap", h200, wave*16*blockSize*2 + 1, 2, 16, occ16, blockSize, wave * 16},
		{"low occupancy", h200, 1 << 30, 1, 4, func(int) int { return 3 }, blockSize, 132 * 3 * 4},
		{"occupancy unknown", h200, 1 << 30, 1, 4, func(int) int { return 0 }, blockSize, 132 * 4},
		{"few SMs", cuda.Props{SMs: 2}, 1 << 24, 1, 16, occ16, blockSize, 2 * 16 * 16},
		{"few SMs, one wave", cuda.Props{SMs: 2}, 4000, 1, 16, occ16, oneWaveBlock, 16},
		{"no SMs reported", cuda.Props{}, 1000, 2, 16, occ16, oneWaveBlock, 2},
		{"no SMs reported, large", cuda.Props{}, 1 << 20, 1, 16, occ16, blockSize, 16 * 16},
	} {
		block, grid := pickLaunch(c.props, c.items, c.unroll, c.waves, c.occ)
		if block != c.block || grid != c.grid {
			t.Errorf("%s: pickLaunch = %d, %d; want %d, %d", c.name, block, grid, c.block, c.grid)
		}
	}
}

// TestPickConfig checks the compile-time choices: the L2 evict-last reads
// for 16-byte reads, in place or not, of a call that moves more than L2
// holds; SINGLE for one item a thread in a grid that covers them (no cap in
// waves) and rows of whole vectors. Without the device's leave
// (L2EvictLast off, the default) no read is hinted.
func TestPickConfig(t *testing.T) {
	h200 := cuda.Props{SMs: 132, L2Bytes: 60 << 20, L2EvictLast: true}
	off := h200
	off.L2EvictLast = false
	for _, c := range []struct {
		name              string
		p                 problem
		evictLast, single bool
	}{
		{"gated 4096x8192 bf16: 201 MB", problem{dtype: tensor.BF16, gated: true, rows: 4096, cols: 8192, sx: 16384, sy: 8192, x: 256, y: 512}, true, true},
		{"gated 16384x256 bf16: 25 MB fit L2", problem{dtype: tensor.BF16, gated: true, rows: 16384, cols: 256, sx: 512, sy: 256, x: 256, y: 512}, false, true},
		{"gated d=100: 4-element vectors", problem{dtype: tensor.BF16, gated: true, rows: 4, cols: 100, sx: 200, sy: 104, x: 256, y: 512}, false, true},
		{"unary 16384x8192 f32: 1 GB", problem{dtype: tensor.F32, rows: 16384, cols: 8192, sx: 8192, sy: 8192, x: 256, y: 512}, true, true},
		{"unary 4096x4096 bf16: 67 MB", problem{dtype: tensor.BF16, rows: 4096, cols: 4096, sx: 4096, sy: 4096, x: 256, y: 512}, true, true},
		{"unary 4096x3848 bf16: just over L2", problem{dtype: tensor.BF16, rows: 4096, cols: 3848, sx: 3848, sy: 3848, x: 256, y: 512}, true, true},
		{"unary 4096x3840 bf16: exactly L2", problem{dtype: tensor.BF16, rows: 4096, cols: 3840, sx: 3840, sy: 3840, x: 256, y: 512}, false, true},
		{"unary 8-byte reads (stride 4100)", problem{dtype: tensor.BF16, rows: 16384, cols: 4096, sx: 4100, sy: 4096, x: 256, y: 512}, false, true},
		{"in place, large", problem{dtype: tensor.BF16, rows: 16384, cols: 8192, sx: 8192, sy: 8192, x: 256, y: 256, inplace: true}, true, true},
		{"unary 1001 wide: a partial vector", problem{dtype: tensor.BF16, rows: 1, cols: 1001, x: 256, y: 512}, false, false},
		{"unary 1001 wide, misaligned: single elements", problem{dtype: tensor.BF16, rows: 1, cols: 1001, x: 258, y: 512}, false, true},
		{"tanh: two items a thread, capped grid", problem{kind: KindTanh, dtype: tensor.BF16, rows: 64, cols: 4096, sx: 4096, sy: 4096, x: 256, y: 512}, false, false},
	} {
		if got := pickConfig(h200, c.p); got.evictLast != c.evictLast || got.single != c.single {
			t.Errorf("%s: evictLast %v, single %v; want %v, %v", c.name, got.evictLast, got.single, c.evictLast, c.single)
		}
		if got := pickConfig(off, c.p); got.evictLast || got.single != c.single {
			t.Errorf("%s, L2EvictLast off: evictLast %v, single %v", c.name, got.evictLast, got.single)
		}
	}
}
