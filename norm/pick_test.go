package norm

import (
	"math"
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/intmath"
)

// Simulated devices: an H100-like part and a small one whose 48 KiB of
// shared memory cannot hold a long row.
var (
	propsH100 = cuda.Props{SMs: 132, MaxThreadsPerBlock: 1024, SharedPerBlock: 48 << 10, SharedPerBlockOptin: 227 << 10,
		SharedPerSM: 228 << 10, L2Bytes: 50 << 20, L2EvictLast: true}
	propsSmall = cuda.Props{SMs: 16, MaxThreadsPerBlock: 1024, SharedPerBlock: 48 << 10, SharedPerBlockOptin: 48 << 10,
		SharedPerSM: 64 << 10, L2Bytes: 4 << 20, L2EvictLast: true}
)

func TestPickConfigChoices(t *testing.T) {
	cases := []struct {
		name  string
		props cuda.Props
		shape rowShape
		want  config
	}{
		{"qk-norm 128 bf16: 8 lanes x 2 accesses, 16 rows a block; 34 MB fit L2: no hint", propsH100,
			rowShape{rows: 65536, n: 128, elemSize: 2, vector: true},
			config{vec: 8, perThread: 2, group: 8, threads: 128, bound: 128, grid: 4096, waves: true}},
		{"qk-norm 128 bf16, 16384 rows: one wave at 8 lanes, so 4 lanes x 4 accesses, 32 rows a block", propsH100,
			rowShape{rows: 16384, n: 128, elemSize: 2, vector: true},
			config{vec: 8, perThread: 4, group: 4, threads: 128, bound: 128, grid: 512, waves: true}},
		{"RMSNorm 128 bf16, 4096 rows: 4 lanes would leave an SM too few threads: 8 x 2", propsH100,
			rowShape{rows: 4096, n: 128, elemSize: 2, vector: true},
			config{vec: 8, perThread: 2, group: 8, threads: 128, bound: 128, grid: 256, waves: true}},
		{"L2 forward 64 bf16, 65536 rows: 4 lanes x 2 accesses", propsH100,
			rowShape{rows: 65536, n: 64, elemSize: 2, vector: true},
			config{vec: 8, perThread: 2, group: 4, threads: 128, bound: 128, grid: 2048, waves: true}},
		{"fused RMSNorm 128 bf16: 16 lanes x 1 access; fits L2, hinted all the same", propsH100,
			rowShape{rows: 16384, n: 128, elemSize: 2, fused: true, vector: true},
			config{vec: 8, perThread: 1, group: 16, threads: 128, bound: 128, grid: 2048, waves: true, hint: true}},
		{"fused RMSNorm 1x7168 bf16: latency, 448 threads x 2, hinted", propsH100,
			rowShape{rows: 1, n: 7168, elemSize: 2, fused: true, vector: true},
			config{vec: 8, perThread: 2, threads: 448, bound: 448, grid: 1, waves: true, hint: true}},
		{"LayerNorm 128 bf16: 8 lanes x 2 accesses in waves", propsH100,
			rowShape{rows: 65536, n: 128, elemSize: 2, twoPass: true, vector: true},
			config{vec: 8, perThread: 2, group: 8, threads: 128, bound: 128, grid: 4096, waves: true, onePass: true}},
		{"LayerNorm 128x128 bf16: latency, one access per thread", propsH100,
			rowShape{rows: 128, n: 128, elemSize: 2, twoPass: true, vector: true},
			config{vec: 8, perThread: 1, group: 16, threads: 128, bound: 128, grid: 16, waves: true, onePass: true}},
		{"fused LayerNorm 16384x128 bf16: 17 MB fit L2, 8 lanes x 2", propsH100,
			rowShape{rows: 16384, n: 128, elemSize: 2, twoPass: true, fused: true, vector: true},
			config{vec: 8, perThread: 2, group: 8, threads: 128, bound: 128, grid: 1024, waves: true, onePass: true}},
		{"fused LayerNorm 128 bf16: one access per thread, in waves; 67 MB: hinted", propsH100,
			rowShape{rows: 65536, n: 128, elemSize: 2, twoPass: true, fused: true, vector: true},
			config{vec: 8, perThread: 1, group: 16, threads: 128, bound: 128, grid: 8192, waves: true, hint: true, onePass: true}},
		{"fused LayerNorm 1000 bf16: 4 accesses a thread cover it with 32 lanes", propsH100,
			rowShape{rows: 65536, n: 1000, elemSize: 2, twoPass: true, fused: true, vector: true},
			config{vec: 8, perThread: 4, group: 32, threads: 128, bound: 128, grid: 16384, waves: true, hint: true, onePass: true}},
		{"4096 bf16, 4096 rows (67 MB, over L2): 256 threads x 2, hinted", propsH100,
			rowShape{rows: 4096, n: 4096, elemSize: 2, vector: true},
			config{vec: 8, perThread: 2, threads: 256, bound: 256, grid: 4096, waves: true, hint: true}},
		{"4096 bf16, 16384 rows (268 MB): 256 threads x 2, hinted", propsH100,
			rowShape{rows: 16384, n: 4096, elemSize: 2, vector: true},
			config{vec: 8, perThread: 2, threads: 256, bound: 256, grid: 16384, waves: true, hint: true}},
		{"8192 bf16, 1000 rows: 512 threads x 2; 33 MB fit L2, no hint", propsH100,
			rowShape{rows: 1000, n: 8192, elemSize: 2, vector: true},
			config{vec: 8, perThread: 2, threads: 512, bound: 512, grid: 1000, waves: true}},
		{"L2 backward 256 bf16: three row tensors, 101 MB, hinted", propsH100,
			rowShape{rows: 65536, n: 256, elemSize: 2, cachesTwo: true, vector: true},
			config{vec: 8, perThread: 4, group: 8, threads: 128, bound: 128, grid: 4096, waves: true, hint: true}},
		{"one element rows", propsH100,
			rowShape{rows: 37, n: 1, elemSize: 4, vector: true},
			config{vec: 4, perThread: 1, group: 1, threads: 128, bound: 128, grid: 1, waves: true}},
		{"1000 bf16: a warp per row", propsH100,
			rowShape{rows: 100, n: 1000, elemSize: 2, vector: true},
			config{vec: 8, perThread: 4, group: 32, threads: 128, bound: 128, grid: 25, waves: true}},
		{"7168 bf16: a block of 448 threads x 2 per row", propsH100,
			rowShape{rows: 16384, n: 7168, elemSize: 2, vector: true},
			config{vec: 8, perThread: 2, threads: 448, bound: 448, grid: 16384, waves: true, hint: true}},
		{"fused RMS 7168 bf16: 448 threads x 2 per row, hinted", propsH100,
			rowShape{rows: 16384, n: 7168, elemSize: 2, fused: true, vector: true},
			config{vec: 8, perThread: 2, threads: 448, bound: 448, grid: 16384, waves: true, hint: true}},
		{"fused LayerNorm 7168 bf16: 224 threads x 4 per row, weights reloaded", propsH100,
			rowShape{rows: 16384, n: 7168, elemSize: 2, fused: true, twoPass: true, vector: true},
			config{vec: 8, perThread: 4, threads: 224, bound: 224, grid: 16384, waves: true, reload: true, hint: true, onePass: true}},
		{"LayerNorm 2048 bf16, 4096 rows (34 MB): a resident grid of 128 threads x 2, no hint", propsH100,
			rowShape{rows: 4096, n: 2048, elemSize: 2, twoPass: true, vector: true},
			config{vec: 8, perThread: 2, threads: 128, bound: 512, grid: 132 * 16, prefetch: true, onePass: true}},
		{"LayerNorm 4096 bf16, 4096 rows (67 MB, over L2): a resident grid of 256 threads x 2, hinted", propsH100,
			rowShape{rows: 4096, n: 4096, elemSize: 2, twoPass: true, vector: true},
			config{vec: 8, perThread: 2, threads: 256, bound: 512, grid: 132 * 8, prefetch: true, hint: true, onePass: true}},
		{"LayerNorm 2048 bf16, 16384 rows (134 MB, over twice L2): a block of 64 threads x 4 per row, hinted", propsH100,
			rowShape{rows: 16384, n: 2048, elemSize: 2, twoPass: true, vector: true},
			config{vec: 8, perThread: 4, threads: 64, bound: 64, grid: 16384, waves: true, reload: true, hint: true, onePass: true}},
		{"LayerNorm 2048 f32, 16384 rows: a block of 128 threads x 4 per row, two passes", propsH100,
			rowShape{rows: 16384, n: 2048, elemSize: 4, twoPass: true, vector: true},
			config{vec: 4, perThread: 4, threads: 128, bound: 128, grid: 16384, waves: true, reload: true, hint: true}},
		{"fused RMSNorm 4096 bf16: a block of 256 threads x 2 per row", propsH100,
			rowShape{rows: 4096, n: 4096, elemSize: 2, fused: true, vector: true},
			config{vec: 8, perThread: 2, threads: 256, bound: 256, grid: 4096, waves: true, hint: true}},
		{"LayerNorm 4096 bf16, rows only fill the resident grid: no prefetch", propsH100,
			rowShape{rows: 200, n: 4096, elemSize: 2, twoPass: true, vector: true},
			config{vec: 8, perThread: 2, threads: 256, bound: 512, grid: 200, onePass: true}},
		{"LayerNorm 7168 bf16: a block of 224 threads x 4 per row, weights loaded late", propsH100,
			rowShape{rows: 16384, n: 7168, elemSize: 2, twoPass: true, vector: true},
			config{vec: 8, perThread: 4, threads: 224, bound: 224, grid: 16384, waves: true, reload: true, hint: true, onePass: true}},
		{"fused LayerNorm 4096 bf16: a block of 256 threads x 2 per row", propsH100,
			rowShape{rows: 4096, n: 4096, elemSize: 2, twoPass: true, fused: true, vector: true},
			config{vec: 8, perThread: 2, threads: 256, bound: 256, grid: 4096, waves: true, hint: true, onePass: true}},
		{"fused LayerNorm 8192 bf16: a block of 256 threads x 4 per row, weights loaded late", propsH100,
			rowShape{rows: 16384, n: 8192, elemSize: 2, twoPass: true, fused: true, vector: true},
			config{vec: 8, perThread: 4, threads: 256, bound: 256, grid: 16384, waves: true, reload: true, hint: true, onePass: true}},
		{"LayerNorm 8192 bf16, 32 rows: latency, 512 threads x 2", propsH100,
			rowShape{rows: 32, n: 8192, elemSize: 2, twoPass: true, vector: true},
			config{vec: 8, perThread: 2, threads: 512, bound: 512, grid: 32, waves: true, onePass: true}},
		{"few rows: latency, 512 threads x 2", propsH100,
			rowShape{rows: 32, n: 8192, elemSize: 2, vector: true},
			config{vec: 8, perThread: 2, threads: 512, bound: 512, grid: 32, waves: true}},
		{"one row of 2048: 256 threads x 1", propsH100,
			rowShape{rows: 1, n: 2048, elemSize: 2, vector: true},
			config{vec: 8, perThread: 1, threads: 256, bound: 256, grid: 1, waves: true}},
		{"more rows than SMs: bandwidth, 2 accesses a thread", propsH100,
			rowShape{rows: 133, n: 2048, elemSize: 2, vector: true},
			config{vec: 8, perThread: 2, threads: 128, bound: 128, grid: 133, waves: true}},
		{"16384 bf16: 512 threads x 4", propsH100,
			rowShape{rows: 16384, n: 16384, elemSize: 2, vector: true},
			config{vec: 8, perThread: 4, threads: 512, bound: 512, grid: 16384, waves: true, hint: true}},
		{"L2 backward 1032 bf16: at least two warps", propsSmall,
			rowShape{rows: 500, n: 1032, elemSize: 2, cachesTwo: true, vector: true},
			config{vec: 8, perThread: 4, threads: 64, bound: 64, grid: 500, waves: true}},
		{"2880 bf16 unaligned: scalar accesses, looped", propsH100,
			rowShape{rows: 4, n: 2880, elemSize: 2},
			config{vec: 1, threads: 512, bound: 512, grid: 4, looped: true, cache: true, shared: 2880 * 4}},
		{"2048 bf16 unaligned: 512 threads x 4", propsH100,
			rowShape{rows: 4, n: 2048, elemSize: 2},
			config{vec: 1, perThread: 4, threads: 512, bound: 512, grid: 4, waves: true}},
		{"65536 bf16 cached in shared memory", propsH100,
			rowShape{rows: 3, n: 65536, elemSize: 2, vector: true},
			config{vec: 8, threads: 512, bound: 512, grid: 3, looped: true, cache: true, shared: 128 << 10}},
		{"65536 f32 too big for shared memory: re-read", propsH100,
			rowShape{rows: 1000, n: 65536, elemSize: 4, vector: true},
			config{vec: 4, threads: 512, bound: 512, grid: 132 * 4, looped: true}},
		{"65536 bf16 on a small device: re-read", propsSmall,
			rowShape{rows: 1000, n: 65536, elemSize: 2, vector: true},
			config{vec: 8, threads: 512, bound: 512, grid: 16 * 4, looped: true}},
		{"4097 f32 scalar, cached, small device", propsSmall,
			rowShape{rows: 1000, n: 4097, elemSize: 4},
			config{vec: 1, threads: 512, bound: 512, grid: 16 * 3, looped: true, cache: true, shared: 4097 * 4}},
		{"4097 bf16 scalar: one word per cached element", propsSmall,
			rowShape{rows: 1000, n: 4097, elemSize: 2},
			config{vec: 1, threads: 512, bound: 512, grid: 16 * 3, looped: true, cache: true, shared: 4097 * 4}},
		{"L2 backward 20000 f32 caches dy and y", propsH100,
			rowShape{rows: 1000, n: 20000, elemSize: 4, cachesTwo: true, vector: true},
			config{vec: 4, threads: 512, bound: 512, grid: 132, looped: true, cache: true, shared: 20000 * 8}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := pickConfig(c.props, c.shape); got != c.want {
				t.Errorf("pickConfig = %+v, want %+v", got, c.want)
			}
			off, want := c.props, c.want
			off.L2EvictLast, want.hint = false, false
			if got := pickConfig(off, c.shape); got != want {
				t.Errorf("L2EvictLast off: pickConfig = %+v, want %+v", got, want)
			}
		})
	}
}

// TestPickConfigLayerNormStrides: 3000 LayerNorm rows of 1040, the shape
// normtest's TestLayerNormStridingGrid checks on the GPU, take the resident,
// row-striding grid that prefetches the next row, in every dtype.
func TestPickConfigLayerNormStrides(t *testing.T) {
	for _, dt := range activationDTypes {
		c := pickConfig(propsH100, rowShape{rows: 3000, n: 1040, elemSize: dt.Size(), twoPass: true, vector: true})
		if !c.prefetch || c.waves || c.looped {
			t.Errorf("%v: %+v does not stride with prefetch", dt, c)
		}
	}
}

// TestPickConfigInvariants sweeps row lengths, dtypes and alignments on both
// simulated devices: every configuration must cover the row, fit the block
// limits and never ask for more shared memory than the device has.
func TestPickConfigInvariants(t *testing.T) {
	var ns []int
	for n := 1; n <= 300; n++ {
		ns = append(ns, n)
	}
	for n := 301; n <= 140_000; n = n*9/8 + 1 {
		ns = append(ns, n, n+1)
	}
	ns = append(ns, 32768, 65536, 131072)
	for _, props := range []cuda.Props{propsH100, propsSmall} {
		for _, size := range []int{2, 4} {
			for _, fp32 := range []bool{false, true} {
				for _, two := range []bool{false, true} {
					for _, vector := range []bool{false, true} {
						for _, n := range ns {
							for _, rows := range []int{1, 7, 1000, 100_000} {
								s := rowShape{rows: rows, n: n, elemSize: size, heldFP32: fp32, cachesTwo: two, twoPass: fp32,
									fused: two, vector: vector}
								checkConfig(t, props, s, pickConfig(props, s))
							}
						}
					}
				}
			}
		}
	}
}

// TestPickConfigStaticShared sweeps, one element apart, the row lengths
// whose looped row cache comes within norm.cu's static Scratch (at most
// staticSharedUsed) of the 48 KiB a block gets without opting in: bf16 rows
// of about 24,000 to 24,576 elements, f32 rows and 4-byte-an-element caches
// of about 12,000 to 12,288, L2 backward's two-row caches down to 6,000.
// Every config must keep its static and dynamic shared memory within what
// the device allows a block. On the H100-like device some need the opt-in
// only because of the static part; that the launch opts in for them
// (cuda.Function.ReserveShared counts the static part) takes a GPU to check.
func TestPickConfigStaticShared(t *testing.T) {
	for _, props := range []cuda.Props{propsH100, propsSmall} {
		optIn := 0 // configs that need the opt-in only because of the static part
		for _, size := range []int{2, 4} {
			for _, fp32 := range []bool{false, true} {
				for _, two := range []bool{false, true} {
					for _, vector := range []bool{false, true} {
						for n := 6000; n <= 24700; n++ {
							s := rowShape{rows: 1000, n: n, elemSize: size, heldFP32: fp32, cachesTwo: two, twoPass: fp32,
								fused: two, vector: vector}
							c := pickConfig(props, s)
							checkConfig(t, props, s, c)
							if c.shared <= props.SharedPerBlock && c.shared+staticSharedUsed > props.SharedPerBlock {
								optIn++
							}
						}
					}
				}
			}
		}
		if props.SharedPerBlockOptin > props.SharedPerBlock && optIn == 0 {
			t.Errorf("no row length swept needs the opt-in (%d of %d bytes) for the static part alone",
				props.SharedPerBlock, props.SharedPerBlockOptin)
		}
	}
}

func checkConfig(t *testing.T, p cuda.Props, s rowShape, c config) {
	t.Helper()
	fail := func(why string) { t.Fatalf("%+v on %d SMs/%d B: %+v: %s", s, p.SMs, p.SharedPerBlockOptin, c, why) }
	switch {
	case c.vec != 1 && c.vec*s.elemSize != 16:
		fail("access is neither one element nor 16 bytes")
	case c.vec != 1 && !s.vector:
		fail("vector access on unaligned rows")
	case c.threads <= 0 || c.threads%32 != 0 || c.threads > c.bound || c.bound > p.MaxThreadsPerBlock:
		fail("block size")
	case c.grid < 1 || c.grid > max(s.rows, 1):
		fail("grid")
	case c.shared < 0 || c.shared+staticSharedUsed > p.SharedPerBlockOptin:
		fail("too much shared memory")
	case !c.cache && c.shared != 0:
		fail("shared memory without a cache")
	case c.hint && (!(c.waves || c.prefetch) || c.vec == 1 || c.looped):
		fail("L2 hint off the one-row-per-group and prefetching paths")
	case c.onePass != (s.twoPass && s.elemSize == 2 && !c.looped):
		fail("one-pass statistics off 16-bit LayerNorm in registers")
	}
	accesses := intmath.CeilDiv(s.n, c.vec)
	if c.looped {
		if c.cache && c.shared != accesses*s.cacheBytesPerAccess(c.vec) {
			fail("cache size")
		}
		return
	}
	threadsPerRow := c.group
	if c.group == 0 {
		threadsPerRow = c.threads
	} else if c.group&(c.group-1) != 0 || c.group > 32 || c.threads%c.group != 0 {
		fail("group")
	}
	if threadsPerRow*c.perThread < accesses {
		fail("registers do not cover the row")
	}
	if c.perThread < 1 || c.perThread > maxPerThread {
		fail("accesses per thread")
	}
	if c.prefetch && c.grid*c.threads/threadsPerRow >= s.rows {
		fail("prefetch where no group meets a second row")
	}
	if c.waves && (c.prefetch || c.grid*c.threads/threadsPerRow < s.rows) {
		fail("waves whose grid does not give every row its own group")
	}
	if c.waves && c.group == 0 && c.grid != s.rows {
		fail("waves of a block per row whose grid is not the rows (FULL kernels drop the row check)")
	}
}

// TestKernelKeyFull checks which specializations issue a row's loads
// without conditions (full), which form x·w early and which tie the row's
// sum to the weights.
func TestKernelKeyFull(t *testing.T) {
	cases := []struct {
		name             string
		k                kernelKey
		rows, n          int
		full, early, tie bool
	}{
		{"LayerNorm 7168: 224 threads x 4 accesses cover the row",
			kernelKey{op: opLayer, weight: weightPlain, bias: true}, 4096, 7168, true, false, false},
		{"RMSNorm 7168: a block per row forms x·w early, tied to the weights",
			kernelKey{op: opRMS, weight: weightPlain}, 4096, 7168, true, true, true},
		{"fused RMSNorm of one row of 2048: one access a thread, tied",
			kernelKey{op: opRMS, add: addRounded, weight: weightPlain}, 1, 2048, true, true, true},
		{"RMSNorm 128: groups form x·w early and go without conditions, untied",
			kernelKey{op: opRMS, weight: weightPlain}, 65536, 128, true, true, false},
		{"L2Norm 64: no weights", kernelKey{op: opRMS}, 65536, 64, true, false, false},
		{"RMSNorm 120: the last lane of 8 holds one access of two",
			kernelKey{op: opRMS, weight: weightPlain}, 8500, 120, false, true, false},
		{"RMSNorm 7000: the last thread holds one access of two",
			kernelKey{op: opRMS, weight: weightPlain}, 4096, 7000, false, true, true},
		{"LayerNorm 127: the last access is partial",
			kernelKey{op: opLayer, weight: weightPlain, bias: true}, 65, 127, false, false, false},
		{"LayerNorm 2880: 192 threads x 2 accesses overrun 360",
			kernelKey{op: opLayer, weight: weightPlain, bias: true}, 4096, 2880, false, false, false},
		{"looped rows", kernelKey{op: opLayer, weight: weightPlain, bias: true}, 3, 65536, false, false, false},
	}
	for _, tc := range cases {
		c := pickConfig(propsH100, rowShape{rows: tc.rows, n: tc.n, elemSize: 2, twoPass: tc.k.op == opLayer,
			fused: tc.k.add != addNone, vector: true})
		k := tc.k.withConfig(c, tc.n)
		if k.full != tc.full || k.early != tc.early || k.tie != tc.tie {
			t.Errorf("%s: %+v gives full %v, early %v, tie %v; want %v, %v, %v", tc.name, c, k.full, k.early, k.tie, tc.full, tc.early, tc.tie)
		}
	}
}

// TestKernelKeyRows checks which launches withRows specializes on their
// rows: 32-bit offsets up to the last element a spare group could index,
// compile-time rows only where every row tensor is contiguous, no row checks
// only where the groups cover the rows, and the weights tied only to RMS
// rows.
func TestKernelKeyRows(t *testing.T) {
	rms, l2, layer := kernelKey{op: opRMS, weight: weightPlain}, kernelKey{op: opRMS}, kernelKey{op: opLayer, weight: weightPlain, bias: true}
	const big = 1 << 24 // rows of 128 that reach 2^31 elements; the picker serves them in groups of 8 lanes, 16 rows a block
	cases := []struct {
		name    string
		k       kernelKey
		rows, n int
		strides []int64 // y, residual output, x, second input (0: absent)
		off32   bool
		ncols   int
		exact   bool
		tie     bool
	}{
		{"L2Norm 65536x128", l2, 65536, 128, []int64{128, 0, 128, 0}, true, 128, true, false},
		{"RMSNorm 65536x128: tied", rms, 65536, 128, []int64{128, 0, 128, 0}, true, 128, true, true},
		{"LayerNorm 65536x128: untied", layer, 65536, 128, []int64{128, 0, 128, 0}, true, 128, true, false},
		{"RMSNorm of 65537 rows: the last block has spare groups", rms, 65537, 128, []int64{128, 0, 128, 0}, true, 128, false, false},
		{"strided x: row length from the arguments", rms, 4096, 128, []int64{128, 0, 136, 0}, true, 0, true, true},
		{"L2 backward, y strided", kernelKey{op: opL2Backward}, 4096, 128, []int64{128, 0, 128, 200}, true, 0, true, false},
		{"the grid's rows x 128 + 128 = 2^31 - 1920", l2, big - 16, 128, []int64{128, 0, 128, 0}, true, 128, true, false},
		{"the grid's rows x 128 + 128 = 2^31 + 128", l2, big, 128, []int64{128, 0, 128, 0}, false, 128, true, false},
		{"spare groups count: 2^31 + 128 again", l2, big - 15, 128, []int64{128, 0, 128, 0}, false, 128, false, false},
		{"one row of the widest stride", l2, 1, 128, []int64{128, 0, math.MaxInt, 0}, false, 0, false, false},
		{"groups of four lanes keep the run-time form", rms, 16384, 128, []int64{128, 0, 128, 0}, false, 0, false, false},
		{"a block per row keeps the run-time form", rms, 4096, 7168, []int64{7168, 0, 7168, 0}, false, 0, false, true},
	}
	for _, tc := range cases {
		c := pickConfig(propsH100, rowShape{rows: tc.rows, n: tc.n, elemSize: 2, twoPass: tc.k.op == opLayer,
			cachesTwo: tc.k.op == opL2Backward, vector: true})
		k := tc.k.withConfig(c, tc.n).withRows(c, tc.rows, tc.n, tc.strides)
		if k.off32 != tc.off32 || k.ncols != tc.ncols || k.exact != tc.exact || k.tie != tc.tie {
			t.Errorf("%s: %+v gives off32 %v, ncols %d, exact %v, tie %v; want %v, %d, %v, %v", tc.name, c,
				k.off32, k.ncols, k.exact, k.tie, tc.off32, tc.ncols, tc.exact, tc.tie)
		}
	}
}
