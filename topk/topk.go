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
	"math"

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
// (compute capability 9.0 or later; elsewhere the kernel does not compile
// and TopK returns that error). Zero rows is a no-op.
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
		if s != nil && s.Device() != x.Device() {
			v.Failf("s", "is a stream of device %d but the tensors are on device %d", s.Device().Ordinal, x.Device().Ordinal)
		}
	}
	return v.Err()
}

// warpSpec and radixSpec are the kernels' specializations.
type warpSpec struct {
	dt, it             tensor.DType
	vec, chunks, warps int
}

type radixSpec struct {
	dt, it       tensor.DType
	vec, threads int
}

var cType = map[tensor.DType]string{tensor.F32: "float", tensor.BF16: "bf16", tensor.F16: "f16", tensor.I32: "i32", tensor.I64: "i64"}

var (
	warpFuncs = jit.Funcs[warpSpec]{Kernel: func(s warpSpec) jit.Kernel {
		return jit.Kernel{File: "topk/warp.cu", Source: source("warp.cu", warpSrc), Entry: "topk_warp",
			Defines: jit.Defines(map[string]any{"DTYPE": cType[s.dt], "IDX": cType[s.it], "VEC": s.vec, "CHUNKS": s.chunks, "WPB": s.warps})}
	}}
	radixFuncs = jit.Funcs[radixSpec]{Kernel: func(s radixSpec) jit.Kernel {
		return jit.Kernel{File: "topk/radix.cu", Source: source("radix.cu", radixSrc), Entry: "topk_radix",
			Defines: jit.Defines(map[string]any{"DTYPE": cType[s.dt], "IDX": cType[s.it], "VEC": s.vec, "THREADS": s.threads, "UNROLL": radixUnroll, "MATCH": 0, "FASTKEY": 1})}
	}}
)

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
	c := pickConfig(dev.Props(), m, n, k, x.DType(), aligned(x))
	var (
		fn  *cuda.Function
		cfg cuda.LaunchConfig
		err error
	)
	if c.Algo == algoWarp {
		fn, err = warpFuncs.Get(dev, s, warpSpec{x.DType(), indices.DType(), c.Vec, c.Chunks, c.Warps})
		cfg = cuda.LaunchConfig{Grid: cuda.D1(intmath.CeilDiv(m, c.Warps)), Block: cuda.D1(32 * c.Warps), Stream: s}
	} else {
		fn, err = radixFuncs.Get(dev, s, radixSpec{x.DType(), indices.DType(), c.Vec, c.Threads})
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
