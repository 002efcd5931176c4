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
// most two accesses (with four it lost: rmsnorm_pad 4096x2880 +4.4%, H200).
//
// tie: a block that reduces one early row makes its first sum wait for the
// weights (TIE in norm.cu); ptxas otherwise issues their loads late, after
// the row's sums or next to the barrier, where their latency adds to the
// row's. Groups of lanes keep their own order (tied, rmsnorm 128x128 ran
// 1.8% slower).
//
// full: every lane of a row holds perThread whole accesses (n is a
// multiple of the accesses its lanes hold), so that norm_rows issues the
// row's loads back to back, without a branch each (layernorm 4096x7168:
// 34.8 -> 33.5 µs, H200); a block that owns a row in waves drops the row's
// condition too. Where a block reduces one early row, full needs tie:
// without it ptxas moved the weight loads next to the barrier. Groups of
// lanes keep the row condition (withRows drops it at compile time where the
// groups cover the rows exactly).
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
// the second input; 0 for an absent one) have the given row strides.
// Groups of at least compiledGroup lanes in waves take the form of
// torch.compile's (Triton's) kernels, whose sizes are constants: 32-bit row
// offsets where every offset the grid forms fits in int32 (OFF32), the row
// length and strides as constants where the rows are contiguous (NCOLS), no
// row checks where the groups cover the rows exactly (EXACT), and RMS rows
// tied to their weights (TIE; untied, ptxas moved the weight loads after
// the row's sums, and LayerNorm rows lose with the tie). The row's loads
// then issue after 16 instructions instead of 33 (l2norm_fwd 65536x128).
// Groups of four lanes keep the run-time form: specialized, the shapes that
// fill one wave ran slower (see NOTES.md).
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
			"DTYPE": k.dtype, "KIND": int(k.op), "ADD": int(k.add), "WEIGHT": int(k.weight),
			"BIAS": k.bias, "VEC": k.vec, "EVEN": k.even, "FULL": k.full, "EARLY": k.early, "VPT": max(k.perThread, 1), "GROUP": k.group,
			"PREFETCH": k.prefetch, "WAVES": k.waves, "LOOPED": k.looped, "CACHE": k.cache,
			"THREADS": k.bound, "RELOAD": k.reload, "HINT": k.hint,
			"ONEPASS": k.onePass, "PAD": k.pad, "STATS": k.stats, "TIE": k.tie,
			"OFF32": k.off32, "NCOLS": k.ncols, "EXACT": k.exact,
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

// variant is the part of the kernel key the job's op, options and
// optional tensors fix, before the launch configuration.
func (j *job) variant() kernelKey {
	return kernelKey{dtype: j.x.DType(), op: j.op, add: j.add, weight: j.weight, bias: j.b != nil,
		pad: j.nOut > j.n(), stats: j.rstd != nil || j.mean != nil}
}

// shape is what the variant k's launch configuration depends on, for rows
// of n whose starts are 16-byte aligned where vector is set.
func (k kernelKey) shape(rows, n int, vector bool) rowShape {
	return rowShape{rows: rows, n: n, elemSize: k.dtype.Size(), heldFP32: k.add == addFP32,
		cachesTwo: k.op == opL2Backward, twoPass: k.op == opLayer, fused: k.add != addNone, vector: vector}
}

// forLaunch is the variant k specialized for configuration c on rows of n
// with the given row strides (see withRows).
func (k kernelKey) forLaunch(c config, rows, n int, strides []int64) kernelKey {
	return k.withConfig(c, n).withRows(c, rows, n, strides)
}

func (j *job) shape() rowShape { return j.variant().shape(j.rows(), j.n(), j.vectorOK()) }

func (j *job) key(c config) kernelKey {
	return j.variant().forLaunch(c, j.rows(), j.n(),
		[]int64{rowStride(j.y), rowStride(j.residualOut), rowStride(j.x), rowStride(j.x2)})
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

// Prepare compiles, in parallel, the kernels norm uses most on dev: those
// of bf16 calls on contiguous rows without the optional outputs,
//
//	ops                                          row lengths              rows
//	RMSNorm, LayerNorm and their FusedAdd forms  2048, 4096, 7168, 8192   1, 32, 4096, 16384
//	the same, L2Norm, L2NormBackward             64, 128, 256             128, 4096, 16384, 65536, 262144
//	RMSNorm, FusedAddRMSNorm with PadTo 256      2880                     1, 4096, 16384
//
// Calling it once at start-up keeps NVRTC out of the first calls; any
// other kernel is compiled on first use. A nil dev is an error.
func Prepare(dev *cuda.Device) error {
	if dev == nil {
		return &tensor.ArgError{Op: "norm.Prepare", Arg: "dev", Msg: "is nil"}
	}
	keys := prepared(dev.Props())
	ks := make([]jit.Kernel, len(keys))
	for i, k := range keys {
		ks[i] = k.kernel()
	}
	return jit.Prepare(dev, ks)
}

// preparedCalls are the calls Prepare compiles for: a variant (the kernel
// key an op and its options fix) on rows of each width, each number of rows.
type preparedCalls struct {
	v            kernelKey
	padTo        int
	widths, rows []int
}

var preparedShapes = func() []preparedCalls {
	rms := kernelKey{op: opRMS, weight: weightPlain}
	fusedRMS := kernelKey{op: opRMS, add: addRounded, weight: weightPlain}
	layer := kernelKey{op: opLayer, weight: weightPlain, bias: true}
	fusedLayer := kernelKey{op: opLayer, add: addRounded, weight: weightPlain, bias: true}
	hidden, tokens := []int{2048, 4096, 7168, 8192}, []int{1, 32, 4096, 16384}
	heads, headRows := []int{64, 128, 256}, []int{128, 4096, 16384, 65536, 262144}
	var out []preparedCalls
	for _, v := range []kernelKey{rms, fusedRMS, layer, fusedLayer} {
		out = append(out, preparedCalls{v, 0, hidden, tokens}, preparedCalls{v, 0, heads, headRows})
	}
	rmsPad, fusedPad := rms, fusedRMS
	rmsPad.pad, fusedPad.pad, fusedPad.add = true, true, addFP32
	gptOSS := []int{1, 4096, 16384}
	return append(out, preparedCalls{kernelKey{op: opRMS}, 0, heads, headRows},
		preparedCalls{kernelKey{op: opL2Backward}, 0, heads, headRows},
		preparedCalls{rmsPad, 256, []int{2880}, gptOSS}, preparedCalls{fusedPad, 256, []int{2880}, gptOSS})
}()

// prepared lists the specializations Prepare compiles on a device of props p.
func prepared(p cuda.Props) []kernelKey {
	seen := map[kernelKey]bool{}
	var out []kernelKey
	for _, sh := range preparedShapes {
		v := sh.v
		v.dtype = tensor.BF16
		for _, n := range sh.widths {
			nOut := n
			if sh.padTo > 0 {
				nOut = intmath.RoundUp(n, sh.padTo)
			}
			var res, x2 int64 // the residual output's and the second input's strides
			if v.add != addNone {
				res, x2 = int64(n), int64(n)
			}
			if v.op == opL2Backward {
				x2 = int64(n)
			}
			for _, rows := range sh.rows {
				c := pickConfig(p, v.shape(rows, n, true))
				k := v.forLaunch(c, rows, n, []int64{int64(nOut), res, int64(n), x2})
				if !seen[k] {
					seen[k] = true
					out = append(out, k)
				}
			}
		}
	}
	return out
}
