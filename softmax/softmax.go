// Package softmax computes the row softmax of a matrix on the GPU, with a
// CPU reference behind the same call.
//
// Softmax(s, y, x, o) sets, for every row i of x [M, N],
//
//	y[i, j] = exp(v[i, j] − max_k v[i, k]) / Σ_k exp(v[i, k] − max_k v[i, k]),  v = x·Scale
//
// in fp32 on the GPU and float64 on the host, and rounds once to the output
// dtype. Both paths take v = x·Scale as an fp32 product, so one past the
// fp32 range is ±inf (as in torch.softmax(x * scale) for f32 and bf16 x).
// x and y are bf16, f16 or f32 (the same dtype), rank 2, with the last
// dimension contiguous; row strides may exceed N. y may be x itself (in
// place), but must not otherwise share storage with it.
//
// Special values follow the spec (kernels-a §3.1), with no special handling:
// a NaN anywhere in a row makes the whole row NaN, a row of −inf gives NaN
// (0/0) and +inf gives NaN (inf − inf); these are values v, so a row of the
// lowest finite f32 or bf16 value scaled by 2 is a row of −inf. N = 1 gives
// 1 for every finite v. M = 0 or N = 0 does nothing.
//
// On the device, short rows (up to 512 bf16 or 256 f32 elements when rows
// are 16-byte aligned) are shared by a few lanes of a warp, many rows per
// block; longer rows take a block, or a thread-block cluster of up to 8
// blocks whose partial maxima and sums meet in distributed shared memory.
// On Hopper, rows of at least 16 KiB (2 MiB in all) whose starts are 16-byte
// aligned and whose length is a whole number of 16 bytes are copied into the
// shared memory of their block or cluster (up to 16 blocks) with bulk
// asynchronous copies, reduced there and written from there: x is read
// once at any length that fits the cluster's shared memory (about 1.8 MB a
// row on an H200). With many long rows, one wave of resident clusters (as
// many as the driver says fit at once) walks them, each loading its next
// rows while it writes one. Elsewhere, while a row's share fits the registers of its block (up
// to 131,072 bf16 or 65,536 f32 elements over a cluster), x is read once;
// longer rows take two passes, the second mostly served from L2. Short
// rows, and rows that take one block and at most 32 bytes of x a thread,
// run on persistent blocks that load their next rows while reducing the
// current ones.
package softmax

import (
	_ "embed"
	"fmt"
	"math"
	"sync"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

//go:embed softmax.cu
var source string

// Options tune Softmax.
type Options struct {
	// Scale multiplies x before the softmax (a temperature's inverse, or
	// 1/√d for attention scores); 0 means 1. It must be finite. Both paths
	// round x·Scale to fp32, so a Scale that is not a power of two adds up
	// to half an fp32 ulp of |x·Scale| to each exponent, and a product past
	// the fp32 range is ±inf.
	Scale float32
}

// Bounds on the shape, so that the kernels' int arithmetic cannot overflow.
// maxCols bounds N. maxRows bounds M: the short-row kernels round M up to
// whole units of up to 256 rows (rows + per − 1), and a persistent grid
// steps a unit index past the last by up to its blocks, a few per SM; the
// margin covers both. (Where every row has its own block or cluster, a row
// index steps by M, which would overflow past 2^30 rows; those rows are over
// 256 elements, so that many would take 512 GiB, more than a device holds.)
const (
	maxCols = 1 << 30
	maxRows = math.MaxInt32 - 1<<16
)

// Softmax sets y to the row softmax of x·o.Scale (see the package doc).
// Host tensors run the CPU reference, device tensors the kernel on stream s
// (nil: the device's default stream). Nothing is written on error.
func Softmax(s *cuda.Stream, y, x *tensor.Tensor, o Options) error {
	v := tensor.Validate("softmax.Softmax")
	v.Tensor("x", x).Rank(2).DType(tensor.BF16, tensor.F16, tensor.F32)
	v.Tensor("y", y).Rank(2).ShapeOf(x).DTypeOf(x)
	v.SameLocation(s, []string{"y", "x"}, y, x)
	v.NoOverlapUnlessSame("y", y, "x", x)
	v.Check(!math.IsNaN(float64(o.Scale)) && !math.IsInf(float64(o.Scale), 0), "Scale", "is %v, want a finite value", o.Scale)
	if err := v.Err(); err != nil {
		return err
	}
	v.Check(x.Dim(0) <= maxRows, "x", "has %d rows, more than the kernel's %d", x.Dim(0), maxRows)
	v.Check(x.Dim(1) <= maxCols, "x", "has %d columns, more than the kernel's %d", x.Dim(1), maxCols)
	if x.IsDevice() && s != nil && s.Device() != x.Device() {
		v.Failf("s", "is a stream of device %d but x is on device %d", s.Device().Ordinal, x.Device().Ordinal)
	}
	if err := v.Err(); err != nil {
		return err
	}
	scale := o.Scale
	if scale == 0 {
		scale = 1
	}
	if x.Dim(0) == 0 || x.Dim(1) == 0 {
		return nil
	}
	if !x.IsDevice() {
		reference(y, x, float64(scale))
		return nil
	}
	return launch(s, y, x, scale)
}

// kernels holds softmax_fwd per specialization and device.
var kernels = jit.Funcs[spec]{Kernel: func(sp spec) jit.Kernel {
	entry := "softmax_fwd"
	if sp.Bulk {
		entry = "softmax_bulk"
	}
	return jit.Kernel{File: "softmax/softmax.cu", Source: source, Entry: entry, Defines: sp.defines()}
}}

// defines specializes softmax.cu.
func (sp spec) defines() []string {
	if sp.Bulk {
		return jit.Defines(map[string]any{"DTYPE": sp.dtypeName(), "VEC": sp.Vec, "MAXT": sp.MaxT, "BULK": 1,
			"EVICT_LAST": b2i(sp.EvictLast)})
	}
	return jit.Defines(map[string]any{"DTYPE": sp.dtypeName(), "VEC": sp.Vec, "NVEC": sp.NVec, "GROUP": sp.Group,
		"MAXT": sp.MaxT, "PREFETCH": b2i(sp.Prefetch), "EVICT_LAST": b2i(sp.EvictLast), "FULL": b2i(sp.Full),
		"OFF32": b2i(sp.Off32), "NCOLS": sp.NCols, "EXACT": b2i(sp.Exact), "ONCE": b2i(sp.Once)})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func launch(s *cuda.Stream, y, x *tensor.Tensor, scale float32) error {
	dev := x.Device()
	if s == nil {
		s = dev.DefaultStream()
	}
	m, n := x.Dim(0), x.Dim(1)
	vec := vecWidth(x.DType().Size(), []uint64{uint64(x.Ptr()), uint64(y.Ptr())}, []int{x.Stride(0), y.Stride(0)}, m)
	return run(s, y, x, scale, pickConfig(dev.Props(), m, n, x.DType(), vec))
}

type occKey struct {
	fn                   *cuda.Function
	block, smem, cluster int
}

// occ caches occupancy by function and launch shape.
var occ sync.Map

// occupancy returns how many blocks of fn fit on one SM at once (cluster
// 0), or how many clusters of cluster blocks fit the GPU at once.
func occupancy(fn *cuda.Function, block, smem, cluster int) (int, error) {
	k := occKey{fn, block, smem, cluster}
	if v, ok := occ.Load(k); ok {
		return v.(int), nil
	}
	var n int
	var err error
	if cluster == 0 {
		n, err = fn.MaxActiveBlocksPerSM(block, smem)
	} else {
		n, err = fn.MaxActiveClusters(cuda.LaunchConfig{Grid: cuda.D1(cluster), Block: cuda.D1(block), Shared: smem, Cluster: cuda.D1(cluster)})
	}
	if err != nil {
		return 0, err
	}
	occ.Store(k, n)
	return n, nil
}

// run launches softmax_fwd with config c on stream s.
func run(s *cuda.Stream, y, x *tensor.Tensor, scale float32, c config) error {
	dev, m, n := x.Device(), x.Dim(0), x.Dim(1)
	if c.Grid > math.MaxInt32 {
		return fmt.Errorf("softmax.Softmax: %d rows need %d blocks, more than a grid holds", m, c.Grid)
	}
	c = c.withRows(m, n, int64(x.Stride(0)), int64(y.Stride(0)))
	fn, err := kernels.Get(dev, s, c.spec)
	if err != nil {
		return err
	}
	if c.Bulk {
		if err := prepareBulk(fn, c); err != nil {
			return err
		}
		if c.Resident {
			w, err := wave(fn, dev.Props(), c)
			if err != nil {
				return err
			}
			c.Grid = min(c.Grid, waveGrid(m, c.Cluster, w))
		}
	}
	if c.Prefetch {
		occ, err := occupancy(fn, c.Block, c.Smem, 0)
		if err != nil {
			return err
		}
		c.Grid = min(c.Grid, max(1, occ)*dev.Props().SMs)
	}
	if c.oneUnitEach(m) {
		c.Once = true
		if fn, err = kernels.Get(dev, s, c.spec); err != nil {
			return err
		}
	}
	cfg := cuda.LaunchConfig{Grid: cuda.D1(c.Grid), Block: cuda.D1(c.Block), Shared: c.Smem, Stream: s}
	if c.Cluster > 1 {
		cfg.Cluster = cuda.D1(c.Cluster)
	}
	args := cuda.NewArgs().Ptr(x.Ptr()).Ptr(y.Ptr()).I32(int32(m)).I32(int32(n)).
		I64(int64(x.Stride(0))).I64(int64(y.Stride(0))).I32(int32(c.Chunk)).F32(scale)
	if c.Bulk {
		args.I32(int32(c.Piece)).I32(int32(c.Slots))
	}
	return fn.Launch(cfg, args)
}

// nonPortable holds the functions allowed clusters over the portable 8
// blocks so far.
var nonPortable sync.Map

// wave is how many clusters of the bulk config c fit the GPU at once (blocks
// when c has no cluster). A cluster's blocks share a GPC, so this can be
// fewer than the SMs' room over the cluster size: only the driver knows.
func wave(fn *cuda.Function, p cuda.Props, c config) (int, error) {
	if c.Cluster <= 1 {
		n, err := occupancy(fn, c.Block, c.Smem, 0)
		return max(1, n*p.SMs), err
	}
	n, err := occupancy(fn, c.Block, c.Smem, c.Cluster)
	return max(1, n), err
}

// prepareBulk makes fn launchable with c.Smem bytes of dynamic shared
// memory, and allows its cluster when it is over the portable 8 blocks, once
// per function.
func prepareBulk(fn *cuda.Function, c config) error {
	if err := fn.ReserveShared(c.Smem); err != nil {
		return fmt.Errorf("softmax.Softmax: reserving %d bytes of dynamic shared memory: %w", c.Smem, err)
	}
	if c.Cluster > maxCluster {
		if _, ok := nonPortable.Load(fn); !ok {
			if err := fn.SetAttribute(cuda.FuncNonPortableClusterOK, 1); err != nil {
				return fmt.Errorf("softmax.Softmax: allowing clusters of %d blocks: %w", c.Cluster, err)
			}
			nonPortable.Store(fn, true)
		}
	}
	return nil
}
