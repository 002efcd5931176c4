package norm

import (
	_ "embed"
	"fmt"
	"sync"

	"github.com/gokittens/kittens/cuda"
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
}

// withConfig is k specialized for launch configuration c on rows of n.
func (k kernelKey) withConfig(c config, n int) kernelKey {
	k.vec, k.even, k.perThread, k.group, k.bound = c.vec, c.vec > 1 && n%c.vec == 0, c.perThread, c.group, c.bound
	k.prefetch, k.waves, k.looped, k.cache, k.reload = c.prefetch, c.waves && !c.looped, c.looped, c.cache, c.reload
	k.hint, k.onePass = c.hint, c.onePass
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
			"BIAS": b2i(k.bias), "VEC": k.vec, "EVEN": b2i(k.even), "VPT": max(k.perThread, 1), "GROUP": k.group,
			"PREFETCH": b2i(k.prefetch), "WAVES": b2i(k.waves), "LOOPED": b2i(k.looped), "CACHE": b2i(k.cache),
			"THREADS": k.bound, "RELOAD": b2i(k.reload), "HINT": b2i(k.hint),
			"ONEPASS": b2i(k.onePass), "PAD": b2i(k.pad), "STATS": b2i(k.stats),
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
	return kernelKey{dtype: j.x.DType(), op: j.op, add: j.add, weight: j.weight, bias: j.b != nil,
		pad: j.nOut > j.n(), stats: j.rstd != nil || j.mean != nil}.withConfig(c, j.n())
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
