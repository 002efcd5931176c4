package norm

import (
	_ "embed"
	"fmt"
	"sync"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

//go:embed norm.cu
var normSource string

// kernelKey is one specialization of norm.cu.
type kernelKey struct {
	dtype     tensor.DType
	op        opKind
	add       addMode
	weight    weightMode
	bias      bool
	vec       int
	even      bool // N is a multiple of vec > 1: every access is whole
	full      bool // norm_rows: the row's loads go without conditions (see withConfig)
	early     bool // norm_rows forms RMSNorm's x·w before the reduction (see withConfig)
	tie       bool // norm_rows' first sum waits for the weights (see withConfig)
	perThread int
	group     int
	bound     int
	prefetch  bool
	waves     bool // norm_rows: each group (or block) serves one row
	looped    bool
	cache     bool
	reload    bool
	hint      bool
	onePass   bool
	pad       bool // rows are zero-padded past n
	stats     bool // rstd or mean is written
	off32     bool // row offsets fit in int32 (see withRows)
	ncols     int  // the row length and every row stride, fixed at compile time; 0: from the arguments
	exact     bool // the groups cover the rows exactly: no row checks
}

// withConfig is k specialized for launch configuration c on rows of n.
//
// early: norm_rows forms RMSNorm's x·w before the row's reduction where the
// weights sit in registers (not reloaded per row) and a thread holds at
// most two accesses. With four (blocks of many long rows) it lost on an
// H200: rmsnorm 4096x4096 +1.7%, rmsnorm_pad 4096x2880 +4.4%.
//
// tie: a block that reduces one early row makes its first sum wait for the
// weights (TIE in norm.cu): ptxas otherwise issued their loads late, after
// the row's sums and its residual store or next to the barrier, where
// their latency added to the row's (SASS of fused_add_rmsnorm 1x2048: the
// weight load 78 instructions after the row's data were first used).
// Groups of lanes keep their own order: tied, rmsnorm 128x128 ran 1.8%
// slower.
//
// full: every lane of a row holds perThread whole accesses of it (n is a
// multiple of the accesses its lanes hold), so that norm_rows issues the
// row's loads without a condition each, back to back; each condition had
// been a branch of its own between them (four at layernorm 4096x7168). A
// block that owns a row in waves drops the row's condition too. kittens
// bench, six rounds alternating with the build before, each process's draw
// of the two speeds taken out (the median offset of its unchanged one- and
// 32-row RMS cases), µs (H200 / H100): layernorm 1x7168 4.94 -> 4.76 /
// 5.18 -> 4.97, 32x8192 5.23 -> 5.04 / 5.46 -> 5.26, 4096x7168 34.79 ->
// 33.46 / 44.62 -> 44.36, 4096x8192 38.06 -> 37.24 / 49.69 -> 49.44,
// 16384x2048 38.01 -> 37.46 / 49.74 -> 49.57; fused_add_layernorm 4096x4096
// 36.74 -> 36.11 / level; fused_add_rmsnorm 16384x128 8.63 -> 8.47 / 10.45
// -> 10.36; the rest within 1% either way (l2norm_fwd 65536x64 8.38 ->
// 8.42 / 10.27 -> 10.38, layernorm 4096x128 4.56 -> 4.60 / level). Where a
// block reduces one early row, full came with tie in the twenty-eighth
// session: alone, ptxas, free of the branches, had moved the weight loads
// next to the barrier (H200: rmsnorm 4096x7168 31.68 -> 34.46 µs,
// 16384x7168 112.93 -> 121.76, rmsnorm_pad 4096x2880 16.32 -> 17.22). Tied
// and full against neither, seven rounds alternating, each process's draw
// taken out (H200, µs): fused_add_rmsnorm 1x2048 4.26 -> 4.16, 32x2048
// 4.44 -> 4.32, 1x4096 4.42 -> 4.33, 32x4096 4.59 -> 4.49, 1x7168 4.84 ->
// 4.61, 32x7168 5.07 -> 4.90, 1x8192 4.90 -> 4.76; rmsnorm 4096x2048 13.19
// -> 12.70, 4096x4096 20.46 -> 20.18, 4096x8192 36.03 -> 35.65, 32x7168
// 4.67 -> 4.55, 1x7168, 1x8192 and 32x8192 1.1-1.6%; rmsnorm 1x2048 4.04
// -> 4.10; the rest within 1% (the tie alone gained less: fused_add_rmsnorm
// 1x7168 4.84 -> 4.83). Groups of lanes keep the row condition: with the
// last row read in its place by the spare groups, rmsnorm 16384x128 ran
// 7.31 -> 7.44 µs and layernorm 16384x128 7.62 -> 7.70 on the H100 (7.20
// and 7.58 with the condition), though neither shape has a spare group.
// (Where the groups cover the rows exactly, withRows drops the condition
// at compile time.)
func (k kernelKey) withConfig(c config, n int) kernelKey {
	k.vec, k.even, k.perThread, k.group, k.bound = c.vec, c.vec > 1 && n%c.vec == 0, c.perThread, c.group, c.bound
	k.prefetch, k.waves, k.looped, k.cache, k.reload = c.prefetch, c.waves && !c.looped, c.looped, c.cache, c.reload
	k.hint, k.onePass = c.hint, c.onePass
	k.early = !c.looped && k.op == opRMS && k.weight != weightNone && !c.reload && c.perThread <= 2
	lanes := c.group
	if lanes == 0 {
		lanes = c.threads
	}
	k.tie = k.early && c.group == 0
	k.full = !c.looped && (c.vec == 1 || k.even) && intmath.CeilDiv(n, c.vec) == lanes*c.perThread
	return k
}

// compiledGroup is the fewest lanes of a group that withRows specializes.
const compiledGroup = 8

// withRows specializes k, built for configuration c, further on the
// launch's rows: rows of n elements whose tensors (y, the residual output, x,
// the second input; 0 for an absent one) have the given row strides. It
// takes groups of lanes in waves (the sub-warp path) toward the form of
// torch.compile's (Triton's) kernels, whose sizes are constants: 32-bit row
// offsets where every offset the grid forms fits in int32 (OFF32), the row
// length and strides as constants where the rows are contiguous (NCOLS),
// and no row checks where the groups cover the rows exactly (EXACT). Tied
// to the weights (TIE) too, RMS rows then keep their weight loads beside
// the row's. The row's loads then issue after 16 instructions instead of
// 33 (l2norm_fwd 65536x128, nvcc 11.8); Inductor's come after 17.
//
// kittens bench, the build before and this one alternating six rounds in
// one device call, each run's draw of the launch floor taken out (the median
// offset of the unchanged one- and 32-row cases), µs, H200 / H100:
// l2norm_bwd 65536x64 10.78 -> 10.64 / 13.34 -> 13.12, 65536x256 27.99 ->
// 27.56 / 38.17 -> 37.61; l2norm_fwd 65536x256 20.28 -> 20.06 / 26.95 ->
// 26.69; fused_add_rmsnorm 4096x128 5.65 -> 5.48 / 6.13 -> 5.99, 16384x128
// 8.55 -> 8.29 / 10.37 -> 10.14; fused_add_layernorm 16384x128 8.78 -> 8.55
// / 10.55 -> 10.28; layernorm 128x128 4.22 -> 4.07 / 4.43 -> 4.30; the
// other shapes of groups of 8 lanes or more from 1.5% faster to 0.5% slower
// (rmsnorm 128x128 on the H200, 4.04 -> 4.06). Untied, RMS rows lost
// (rmsnorm 65536x128 12.75 -> 13.13 on the H200: ptxas moved the weight
// loads after the row's sums); tied, LayerNorm rows gave up their gain (H100
// layernorm 4096x128 4.82 -> 4.92, 65536x128 15.98 -> 16.10). Groups of four
// lanes keep the run-time form: specialized, the two shapes that fill one
// wave ran slower on both GPUs (rmsnorm 16384x128 6.53 -> 6.74 / 7.29 ->
// 7.60, l2norm_fwd 65536x64 8.46 -> 8.65 / 10.31 -> 10.32; the SASS shows
// nothing that explains it), and the one that does not gained less than 1%.
func (k kernelKey) withRows(c config, rows, n int, strides []int64) kernelKey {
	if c.looped || !c.waves || c.group < compiledGroup {
		return k
	}
	perBlock := c.threads / c.group
	covered := int64(c.grid) * int64(perBlock) // rows the grid's groups index, past the end included
	contiguous, widest := true, int64(0)
	for _, st := range strides {
		if st != 0 {
			contiguous = contiguous && st == int64(n)
			widest = max(widest, st)
		}
	}
	k.off32 = intmath.FitsInt32(covered, widest, int64(n))
	if contiguous {
		k.ncols = n
	}
	k.exact = rows%perBlock == 0
	k.tie = k.tie || (k.exact && k.op == opRMS && k.weight != weightNone && !k.reload)
	return k
}

var cTypes = map[tensor.DType]string{tensor.BF16: "bf16", tensor.F16: "f16", tensor.F32: "float"}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// kernel describes the specialization as a jit.Kernel.
func (k kernelKey) kernel() jit.Kernel {
	entry := "norm_rows"
	if k.looped {
		entry = "norm_rows_looped"
	}
	return jit.Kernel{
		File:   "norm/norm.cu",
		Source: normSource,
		Entry:  entry,
		Defines: jit.Defines(map[string]any{
			"DTYPE": cTypes[k.dtype], "KIND": int(k.op), "ADD": int(k.add), "WEIGHT": int(k.weight),
			"BIAS": b2i(k.bias), "VEC": k.vec, "EVEN": b2i(k.even), "FULL": b2i(k.full), "EARLY": b2i(k.early), "VPT": max(k.perThread, 1), "GROUP": k.group,
			"PREFETCH": b2i(k.prefetch), "WAVES": b2i(k.waves), "LOOPED": b2i(k.looped), "CACHE": b2i(k.cache),
			"THREADS": k.bound, "RELOAD": b2i(k.reload), "HINT": b2i(k.hint),
			"ONEPASS": b2i(k.onePass), "PAD": b2i(k.pad), "STATS": b2i(k.stats), "TIE": b2i(k.tie),
			"OFF32": b2i(k.off32), "NCOLS": k.ncols, "EXACT": b2i(k.exact),
		}),
	}
}

var kernels = jit.Funcs[kernelKey]{Kernel: kernelKey.kernel}

// vectorOK reports whether every row of every row tensor starts 16-byte
// aligned, and the weight and bias too, so that 16-byte accesses apply.
func (j *job) vectorOK() bool {
	vec := 16 / j.x.DType().Size()
	for _, t := range []*tensor.Tensor{j.y, j.residualOut, j.x, j.x2} {
		if t != nil && (t.Ptr()%16 != 0 || (t.Dim(0) > 1 && t.Stride(0)%vec != 0)) {
			return false
		}
	}
	for _, t := range []*tensor.Tensor{j.w, j.b} {
		if t != nil && t.Ptr()%16 != 0 {
			return false
		}
	}
	return true
}

func (j *job) shape() rowShape {
	return rowShape{rows: j.rows(), n: j.n(), elemSize: j.x.DType().Size(), heldFP32: j.add == addFP32,
		cachesTwo: j.op == opL2Backward, twoPass: j.op == opLayer, fused: j.add != addNone, vector: j.vectorOK()}
}

func (j *job) key(c config) kernelKey {
	k := kernelKey{dtype: j.x.DType(), op: j.op, add: j.add, weight: j.weight, bias: j.b != nil,
		pad: j.nOut > j.n(), stats: j.rstd != nil || j.mean != nil}.withConfig(c, j.n())
	return k.withRows(c, j.rows(), j.n(), []int64{rowStride(j.y), rowStride(j.residualOut), rowStride(j.x), rowStride(j.x2)})
}

func ptrOf(t *tensor.Tensor) cuda.DevicePtr {
	if t == nil {
		return 0
	}
	return t.Ptr()
}

func rowStride(t *tensor.Tensor) int64 {
	if t == nil {
		return 0
	}
	return int64(t.Stride(0))
}

// occupancyKey is one launch shape of one compiled kernel.
type occupancyKey struct {
	fn              *cuda.Function
	threads, shared int
}

var (
	occupancyMu sync.RWMutex
	occupancy   = map[occupancyKey]int{}
)

// residentBlocks is how many blocks of fn fit on an SM at once, asked of the
// driver once per launch shape; 0 when the driver cannot say.
func residentBlocks(fn *cuda.Function, threads, shared int) int {
	k := occupancyKey{fn, threads, shared}
	occupancyMu.RLock()
	n, ok := occupancy[k]
	occupancyMu.RUnlock()
	if ok {
		return n
	}
	n, err := fn.MaxActiveBlocksPerSM(threads, shared)
	if err != nil {
		n = 0
	}
	occupancyMu.Lock()
	occupancy[k] = n
	occupancyMu.Unlock()
	return n
}

// launch runs a validated job on its device.
func (j *job) launch(s *cuda.Stream) error {
	return j.launchWith(s, pickConfig(j.x.Device().Props(), j.shape()))
}

// launchWith runs a validated job with a given configuration. Unless the
// configuration asks for waves, the grid is lowered to what is resident at
// once, so that the row-striding blocks never wait for a second wave.
func (j *job) launchWith(s *cuda.Stream, c config) error {
	dev := j.x.Device()
	props := dev.Props()
	fn, err := kernels.Get(dev, s, j.key(c))
	if err != nil {
		return err
	}
	if err := fn.ReserveShared(c.shared); err != nil {
		return fmt.Errorf("norm: reserving %d bytes of dynamic shared memory: %w", c.shared, err)
	}
	if perSM := residentBlocks(fn, c.threads, c.shared); perSM > 0 && !c.waves {
		c.grid = min(c.grid, props.SMs*perSM)
	}
	args := cuda.NewArgs().
		Ptr(ptrOf(j.y)).Ptr(ptrOf(j.residualOut)).Ptr(ptrOf(j.x)).Ptr(ptrOf(j.x2)).
		Ptr(ptrOf(j.w)).Ptr(ptrOf(j.b)).
		Ptr(ptrOf(j.rstd)).Ptr(ptrOf(j.mean)).Ptr(ptrOf(j.rstdIn)).
		I32(int32(j.rows())).I32(int32(j.n())).I32(int32(j.nOut)).
		I64(rowStride(j.y)).I64(rowStride(j.residualOut)).I64(rowStride(j.x)).I64(rowStride(j.x2)).
		F32(float32(j.eps)).F32(float32(j.denom)).F32(float32(1 / j.denom))
	return fn.Launch(cuda.LaunchConfig{Grid: cuda.D1(c.grid), Block: cuda.D1(c.threads), Shared: c.shared, Stream: s}, args)
}
