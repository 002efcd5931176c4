// Package topk selects the k largest elements of each row, as torch.topk(x,
// k, dim=-1) with largest=True and sorted=True.
//
// Two kernels share the work. Short rows (N ≤ 1024, k ≤ 32: MoE routing) go
// to a kernel that holds a row in one warp's registers and finds the k-th
// largest key by a bitwise radix search; longer rows, or larger k (vocabulary
// sampling), go to a byte-wise radix select run by a cluster of blocks per
// row. Both compare order-preserving integer keys, so the result is exact: see
// TopK for the order.
package topk

import (
	_ "embed"
	"fmt"
	"math"
	"slices"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

// MaxK is the largest k TopK accepts.
const MaxK = maxRadixK

// maxN is the longest row TopK accepts. The radix kernel indexes a row with
// 32-bit ints, and before comparing them with N it forms a block's slice end
// (lo + slice ≤ N + maxCluster·8 − 1, slices being rounded up to whole
// vectors of up to 8 elements) and the start of a thread's next group of
// loads (up to N − 1 + 1024 threads · 8 elements · radixUnroll). The margin
// keeps both below 2^31; without it they wrap and the kernel skips or
// misreads the end of the row.
const maxN = math.MaxInt32 - maxCluster*8 - 1024*8*radixUnroll

var (
	//go:embed common.cuh
	commonSrc string
	//go:embed warp.cu
	warpSrc string
	//go:embed radix.cu
	radixSrc string
)

// TopK writes the k largest elements of each row of x into values and their
// column indices into indices, both in descending order of value.
//
// x is [M, N] f32, bf16 or f16 (its row stride may exceed N); values is
// [M, k] with x's dtype; indices is [M, k] i32 or i64 (the indices tensor's
// dtype chooses). 1 ≤ k ≤ min(N, MaxK), and N ≤ 2^31 − 2^15 − 65 (the
// kernel indexes rows with 32-bit ints). On the device, x, values and
// indices must each span at most 2^31 − 1 elements, and rows that the warp
// kernel does not take (N > 1024 or k > 32) need thread-block clusters
// (compute capability 9.0 or later; elsewhere TopK returns an error saying
// so, before anything runs). Zero rows is a no-op.
//
// The order is torch's: NaN ranks above every number (+inf included), −inf
// and +inf are ordinary values, and equal values, NaNs among themselves and
// −0 with +0, are ordered by lower index first. Values are copies of input
// elements, bit for bit (a NaN keeps its payload, a −0 its sign).
//
// Host tensors run the CPU reference, device tensors the kernel, on s (nil:
// the device's default stream). Nothing is written when an argument is bad.
func TopK(s *cuda.Stream, values, indices, x *tensor.Tensor, k int) error {
	if err := validate(s, values, indices, x, k); err != nil {
		return err
	}
	if x.Dim(0) == 0 {
		return nil
	}
	if !x.IsDevice() {
		reference(values, indices, x, k)
		return nil
	}
	return launch(s, values, indices, x, k)
}

func validate(s *cuda.Stream, values, indices, x *tensor.Tensor, k int) error {
	v := tensor.Validate("topk.TopK")
	v.Tensor("x", x).Rank(2).DType(tensor.F32, tensor.BF16, tensor.F16)
	if err := v.Err(); err != nil {
		return err
	}
	m, n := x.Dim(0), x.Dim(1)
	v.Check(n <= maxN, "x", "has rows of %d elements, more than the %d the kernel can index", n, maxN)
	v.Check(k >= 1, "k", "is %d, want k ≥ 1", k)
	v.Check(k <= n, "k", "is %d, more than the row length %d", k, n)
	v.Check(k <= MaxK, "k", "is %d, more than the largest supported k %d", k, MaxK)
	v.Tensor("values", values).Rank(2).Shape(m, k).DTypeOf(x)
	v.Tensor("indices", indices).Rank(2).Shape(m, k).DType(tensor.I32, tensor.I64)
	if err := v.Err(); err != nil {
		return err
	}
	v.SameLocation(s, []string{"x", "values", "indices"}, x, values, indices)
	v.NoOverlap("values", values, "x", x)
	v.NoOverlap("indices", indices, "x", x)
	v.NoOverlap("indices", indices, "values", values)
	if x.IsDevice() {
		v.Tensor("x", x).Int32Indexable()
		v.Tensor("values", values).Int32Indexable()
		v.Tensor("indices", indices).Int32Indexable()
	}
	return v.Err()
}

// warpKey is one specialization of warp.cu: value and index dtypes,
// elements per load, VEC-element chunks per lane, rows per block.
type warpKey struct {
	dt, it             tensor.DType
	vec, chunks, warps int
}

// radixKey is one specialization of radix.cu: value and index dtypes,
// elements per load, threads per block.
type radixKey struct {
	dt, it       tensor.DType
	vec, threads int
}

var (
	warpFuncs = jit.Funcs[warpKey]{Kernel: func(k warpKey) jit.Kernel {
		return jit.Kernel{File: "topk/warp.cu", Source: source("warp.cu", warpSrc), Entry: "topk_warp",
			Defines: jit.Defines(map[string]any{"DTYPE": k.dt, "IDX": k.it, "VEC": k.vec, "CHUNKS": k.chunks, "WPB": k.warps})}
	}}
	radixFuncs = jit.Funcs[radixKey]{Kernel: func(k radixKey) jit.Kernel {
		return jit.Kernel{File: "topk/radix.cu", Source: source("radix.cu", radixSrc), Entry: "topk_radix",
			Defines: jit.Defines(map[string]any{"DTYPE": k.dt, "IDX": k.it, "VEC": k.vec, "THREADS": k.threads, "UNROLL": radixUnroll, "MATCH": 0, "FASTKEY": 1})}
	}}
)

// Prepare compiles, in parallel, the kernels topk uses most: for every
// value and index dtype, on rows that start 16-byte aligned, the warp
// kernel at the sizes of MoE routing (64 to 1024 experts, k ≤ 32) and the
// radix kernel. Calling it once at start-up keeps NVRTC out of the first
// calls; any kernel it skips is compiled on first use. A nil dev is an
// error. Before compute capability 9.0 it compiles the warp kernels and
// returns the error TopK gives for rows that need the radix kernel.
func Prepare(dev *cuda.Device) error {
	v := tensor.Validate("topk.Prepare")
	v.Check(dev != nil, "dev", "is nil")
	if err := v.Err(); err != nil {
		return err
	}
	props := dev.Props()
	noClusters := needClusters(props)
	warps, radixes := prepared(props)
	var ks []jit.Kernel
	for _, k := range warps {
		ks = append(ks, warpFuncs.Kernel(k))
	}
	if noClusters == nil {
		for _, k := range radixes {
			ks = append(ks, radixFuncs.Kernel(k))
		}
	}
	if err := jit.Prepare(dev, ks); err != nil {
		return err
	}
	return noClusters
}

// prepared lists the specializations Prepare compiles on a device with
// props: those pickConfig gives 16-byte-aligned rows of 64 to 1024
// elements (k = 8) and of 151936 (k = 50), 64 rows, every value and index
// dtype.
func prepared(props cuda.Props) (warps []warpKey, radixes []radixKey) {
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
		for _, it := range []tensor.DType{tensor.I32, tensor.I64} {
			for _, n := range []int{64, 128, 256, 512, 1024, 151936} {
				k := 8
				if n > warpMaxN {
					k = 50
				}
				c := pickConfig(props, 64, n, k, dt, true)
				if c.Algo == algoWarp {
					warps = append(warps, c.warpKey(dt, it))
				} else {
					radixes = append(radixes, c.radixKey(dt, it))
				}
			}
		}
	}
	return slices.Compact(warps), slices.Compact(radixes)
}

// needClusters returns nil where props' device runs thread-block clusters
// (compute capability 9.0 or later), which the radix kernel needs, and the
// error TopK and Prepare give otherwise.
func needClusters(props cuda.Props) error {
	if props.Major >= 9 {
		return nil
	}
	return fmt.Errorf("topk: rows longer than %d or k above %d take the radix kernel, which needs thread-block clusters "+
		"(compute capability 9.0 or later); %s is %d.%d", warpMaxN, warpMaxK, props.Name, props.Major, props.Minor)
}

// source prepends common.cuh to a kernel's text, with #line marks so that
// compiler messages name the right file and line.
func source(name, kernel string) string {
	return "#line 1 \"topk/common.cuh\"\n" + commonSrc + "#line 1 \"topk/" + name + "\"\n" + kernel
}

// aligned reports whether every row of x starts on a 16-byte boundary.
func aligned(x *tensor.Tensor) bool {
	size := x.DType().Size()
	return uint64(x.Ptr())%16 == 0 && (x.Dim(0) <= 1 || x.Stride(0)*size%16 == 0)
}

func launch(s *cuda.Stream, values, indices, x *tensor.Tensor, k int) error {
	dev := x.Device()
	if s == nil {
		s = dev.DefaultStream()
	}
	m, n := x.Dim(0), x.Dim(1)
	props := dev.Props()
	c := pickConfig(props, m, n, k, x.DType(), aligned(x))
	var (
		fn  *cuda.Function
		cfg cuda.LaunchConfig
		err error
	)
	if c.Algo == algoWarp {
		fn, err = warpFuncs.Get(dev, s, c.warpKey(x.DType(), indices.DType()))
		cfg = cuda.LaunchConfig{Grid: cuda.D1(intmath.CeilDiv(m, c.Warps)), Block: cuda.D1(32 * c.Warps), Stream: s}
	} else if err = needClusters(props); err == nil {
		fn, err = radixFuncs.Get(dev, s, c.radixKey(x.DType(), indices.DType()))
		if err == nil {
			err = fn.ReserveShared(c.Shared)
		}
		cfg = cuda.LaunchConfig{Grid: cuda.Dim3{X: uint32(c.Cluster), Y: uint32(c.GridY), Z: 1}, Block: cuda.D1(c.Threads),
			Shared: c.Shared, Stream: s, Cluster: cuda.Dim3{X: uint32(c.Cluster), Y: 1, Z: 1}}
	}
	if err != nil {
		return err
	}
	a := cuda.NewArgs().Ptr(x.Ptr()).I64(int64(x.Stride(0))).
		Ptr(values.Ptr()).I64(int64(values.Stride(0))).
		Ptr(indices.Ptr()).I64(int64(indices.Stride(0))).
		I32(int32(m)).I32(int32(n)).I32(int32(k))
	if c.Algo == algoRadix {
		a.I32(int32(c.IdxBits)).I32(int32(c.Slice)).I32(int32(c.Cap)).I32(int32(c.SortLen)).I32(int32(c.Subs))
	}
	return fn.Launch(cfg, a)
}
