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
// Special values need no special handling: a NaN anywhere in a row makes
// the whole row NaN, a row of −inf gives NaN (0/0) and +inf gives NaN
// (inf − inf); these are values v, so a row of the lowest finite f32 or bf16
// value scaled by 2 is a row of −inf. A row with some −inf values and a
// finite one (a masked row) is a distribution with zeros at the −inf
// values. N = 1 gives 1 for every finite v. M = 0 or N = 0 does nothing.
//
// On the device, short rows (up to 512 bf16 or 256 f32 elements when rows
// are 16-byte aligned) are shared by a few lanes of a warp, many rows per
// block; longer rows take a block, or a thread-block cluster of up to 8
// blocks whose partial maxima and sums meet in distributed shared memory.
// On Hopper, rows of at least 16 KiB (2 MiB in all) whose starts are 16-byte
// aligned and whose length is a whole number of 16 bytes are copied into the
// shared memory of their block or cluster (up to 16 blocks) with bulk
// asynchronous copies, reduced there and written from there, so x is read
// once at any length that fits the cluster's shared memory (about 1.8 MB a
// row on an H200); with many long rows, one wave of resident clusters walks
// them, each loading its next rows while it writes one. Elsewhere x is read
// once while a row's share fits the registers of its block (up to 131,072
// bf16 or 65,536 f32 elements over a cluster); longer rows take two passes,
// the second mostly served from L2. Prepare compiles the kernels of common
// calls ahead of time.
package softmax

import (
	"math"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

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

// preparedCalls are the [M, N] calls Prepare compiles for, in every dtype.
var preparedCalls = [][2]int{
	{4096, 128}, {16384, 128}, {65536, 128}, // attention-head and router scores
	{4096, 4096}, {16384, 8192}, // hidden-size rows
	{16, 32768}, {256, 32768}, {16, 131072}, {256, 131072}, {16, 262144}, {256, 262144}, // long rows
	{64, 151936}, // a sampling batch over a vocabulary
}

// Prepare compiles, in parallel, the kernels Softmax takes on dev for
// contiguous, 16-byte aligned rows of 128 elements (attention-head and
// router scores) at 4096 to 65536 rows, of 4096 and 8192 (hidden sizes), of
// 32768 to 262144 at 16 and 256 rows, and of a 151,936 vocabulary at 64
// rows, in bf16, f16 and f32. Calling it once at start-up keeps NVRTC out
// of the first calls; any kernel it skips is compiled on first use. A nil
// dev is an error.
func Prepare(dev *cuda.Device) error {
	v := tensor.Validate("softmax.Prepare")
	v.Check(dev != nil, "dev", "is nil")
	if err := v.Err(); err != nil {
		return err
	}
	seen := map[kernelKey]bool{}
	var ks []jit.Kernel
	for _, c := range prepared(dev.Props()) {
		if !seen[c.kernelKey] {
			seen[c.kernelKey] = true
			ks = append(ks, kernels.Kernel(c.kernelKey))
		}
	}
	return jit.Prepare(dev, ks)
}

// prepared lists the launches Prepare compiles for on p: preparedCalls in
// every dtype, specialized on their rows as run specializes them, and lane
// groups also with ONCE, which run takes where occupancy leaves the grid
// uncapped (known only once the kernel is built).
func prepared(p cuda.Props) []config {
	var cs []config
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16, tensor.F32} {
		for _, mn := range preparedCalls {
			m, n := mn[0], mn[1]
			c := pickConfig(p, m, n, dt, 16/dt.Size()).withRows(m, n, int64(n), int64(n))
			cs = append(cs, c)
			if c.oneUnitEach(m) {
				c.Once = true
				cs = append(cs, c)
			}
		}
	}
	return cs
}
