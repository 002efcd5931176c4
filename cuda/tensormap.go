package cuda

import (
	"fmt"
	"runtime"
)

// TensorMap is a CUtensorMap: the 128-byte descriptor the TMA engine reads.
// Pass it to a kernel by value with Args.Map.
type TensorMap struct{ raw [16]uint64 }

// TensorMapType is a CUtensorMapDataType.
type TensorMapType int

// Tensor map element types.
const (
	MapUint8    TensorMapType = 0
	MapUint16   TensorMapType = 1
	MapUint32   TensorMapType = 2
	MapInt32    TensorMapType = 3
	MapInt64    TensorMapType = 5
	MapFloat16  TensorMapType = 6
	MapFloat32  TensorMapType = 7
	MapBFloat16 TensorMapType = 9
)

// Swizzle is a CUtensorMapSwizzle.
type Swizzle int

// Shared-memory swizzle modes.
const (
	SwizzleNone Swizzle = 0
	Swizzle32B  Swizzle = 1
	Swizzle64B  Swizzle = 2
	Swizzle128B Swizzle = 3
)

// TiledMap describes a tiled tensor map. Dims and Box are innermost first;
// Strides (in bytes) has one entry fewer than Dims: the stride of each
// dimension after the innermost.
type TiledMap struct {
	Type    TensorMapType
	Addr    DevicePtr
	Dims    []uint64
	Strides []uint64
	Box     []uint32
	Swizzle Swizzle
}

// EncodeTiled builds a tensor map with cuTensorMapEncodeTiled (no
// interleave, 128-byte L2 promotion, zero fill out of bounds).
func EncodeTiled(m TiledMap) (*TensorMap, error) {
	rank := len(m.Dims)
	if rank < 1 || rank > 5 || len(m.Box) != rank || len(m.Strides) != rank-1 {
		return nil, fmt.Errorf("cuda: tensor map: rank %d needs %d box sizes and %d strides, got %d and %d",
			rank, rank, rank-1, len(m.Box), len(m.Strides))
	}
	if err := Init(); err != nil {
		return nil, err
	}
	tm := new(TensorMap) // 128-byte heap objects are 128-byte aligned
	dims := append([]uint64(nil), m.Dims...)
	strides := append(append([]uint64(nil), m.Strides...), 0)
	box := append([]uint32(nil), m.Box...)
	elem := make([]uint32, rank)
	for i := range elem {
		elem[i] = 1
	}
	r := cuTensorMapEncodeTiled.call(ptr(tm), uintptr(m.Type), uintptr(rank), uintptr(m.Addr),
		ptr(&dims[0]), ptr(&strides[0]), ptr(&box[0]), ptr(&elem[0]),
		0, uintptr(m.Swizzle), 2, 0)
	runtime.KeepAlive(dims)
	runtime.KeepAlive(strides)
	runtime.KeepAlive(box)
	runtime.KeepAlive(elem)
	if err := newError("cuTensorMapEncodeTiled", r); err != nil {
		return nil, err
	}
	return tm, nil
}
