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

// kernelKey is what softmax.cu is compiled for.
type kernelKey struct {
	DType tensor.DType
	Vec   int // elements per vector access
	NVec  int // vectors per thread per tile
	Group int // lanes per row, 0: the whole block (and its cluster)
	MaxT  int // launch bound
	// Prefetch makes blocks persistent: each walks several units and loads
	// the next while it reduces the current one. Only configs without a
	// cluster and with room in registers for the second tile use it.
	Prefetch bool
	// Bulk selects softmax_bulk: each block of a row's cluster copies its
	// share of the row into a ring of shared-memory slots with bulk copies.
	Bulk bool
	// EvictLast: the 16-byte and bulk reads of x carry an L2 evict-last
	// policy (Cache::last loads and bulk copies, EVICT_LAST).
	EvictLast bool
	// Full: each block's (or lane group's) share of a row is exactly its
	// register tile, so the tile's loads go without conditions (FULL).
	Full bool
	// Lane groups only, from the launch's rows (see withRows): Off32, row
	// offsets in int (OFF32); NCols, the row length and both row strides
	// (NCOLS; 0: from the arguments); Exact, no row past the last in any
	// unit (EXACT); Once, one unit a block (ONCE).
	Off32       bool
	NCols       int
	Exact, Once bool
}

// kernels holds softmax_fwd and softmax_bulk per specialization and device.
var kernels = jit.Funcs[kernelKey]{Kernel: kernelKey.kernel}

// kernel describes the kernel k selects.
func (k kernelKey) kernel() jit.Kernel {
	entry, defines := "softmax_fwd", map[string]any{"DTYPE": k.DType, "VEC": k.Vec, "NVEC": k.NVec, "GROUP": k.Group,
		"MAXT": k.MaxT, "PREFETCH": k.Prefetch, "EVICT_LAST": k.EvictLast, "FULL": k.Full,
		"OFF32": k.Off32, "NCOLS": k.NCols, "EXACT": k.Exact, "ONCE": k.Once}
	if k.Bulk {
		entry, defines = "softmax_bulk", map[string]any{"DTYPE": k.DType, "VEC": k.Vec, "MAXT": k.MaxT, "BULK": true,
			"EVICT_LAST": k.EvictLast}
	}
	return jit.Kernel{File: "softmax/softmax.cu", Source: source, Entry: entry, Defines: jit.Defines(defines)}
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

// run launches config c on stream s: it specializes c on the rows
// (withRows), caps a resident or prefetching grid by occupancy, and takes
// ONCE where the final grid gives each unit a block.
func run(s *cuda.Stream, y, x *tensor.Tensor, scale float32, c config) error {
	dev, m, n := x.Device(), x.Dim(0), x.Dim(1)
	if c.Grid > math.MaxInt32 {
		return fmt.Errorf("softmax.Softmax: %d rows need %d blocks, more than a grid holds", m, c.Grid)
	}
	c = c.withRows(m, n, int64(x.Stride(0)), int64(y.Stride(0)))
	fn, err := kernels.Get(dev, s, c.kernelKey)
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
		if fn, err = kernels.Get(dev, s, c.kernelKey); err != nil {
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
