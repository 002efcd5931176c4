package tensor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gokittens/kittens/cuda"
)

// Tensor is an n-dimensional array on the host or on one device.
type Tensor struct {
	dtype   DType
	shape   []int
	strides []int // elements; strides[rank-1] == 1

	dev  *cuda.Device   // nil: host
	ptr  cuda.DevicePtr // device storage
	host []byte         // host storage
}

// ContiguousStrides returns row-major strides for shape.
func ContiguousStrides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}

// spanElems is the number of elements between the first and one past the
// last addressed element.
func spanElems(shape, strides []int) int {
	n := 1
	for i, d := range shape {
		if d == 0 {
			return 0
		}
		n += (d - 1) * strides[i]
	}
	return n
}

func checkLayout(shape, strides []int) error {
	if len(shape) != len(strides) {
		return fmt.Errorf("tensor: %d strides for rank %d", len(strides), len(shape))
	}
	for i, d := range shape {
		if d < 0 {
			return fmt.Errorf("tensor: negative dimension in shape %v", shape)
		}
		if strides[i] < 1 {
			return fmt.Errorf("tensor: stride %d of dim %d must be positive", strides[i], i)
		}
	}
	if len(strides) > 0 && strides[len(strides)-1] != 1 {
		return fmt.Errorf("tensor: the last dimension must be contiguous (stride 1), got %d", strides[len(strides)-1])
	}
	for i := 0; i+1 < len(shape); i++ {
		if inner := (shape[i+1]-1)*strides[i+1] + 1; shape[i+1] > 0 && strides[i] < inner {
			return fmt.Errorf("tensor: stride %d of dim %d overlaps dim %d (needs ≥ %d)", strides[i], i, i+1, inner)
		}
	}
	return nil
}

// New returns a zeroed contiguous host tensor.
func New(dt DType, shape ...int) *Tensor {
	t, err := NewStrided(dt, shape, ContiguousStrides(shape))
	if err != nil {
		panic(err) // contiguous strides are always valid for a non-negative shape
	}
	return t
}

// NewStrided returns a zeroed host tensor with the given strides (elements).
func NewStrided(dt DType, shape, strides []int) (*Tensor, error) {
	if dt.Size() == 0 {
		return nil, fmt.Errorf("tensor: invalid dtype %v", dt)
	}
	if err := checkLayout(shape, strides); err != nil {
		return nil, err
	}
	return &Tensor{dtype: dt, shape: append([]int(nil), shape...), strides: append([]int(nil), strides...),
		host: make([]byte, spanElems(shape, strides)*dt.Size())}, nil
}

// Empty allocates a contiguous tensor on dev; its contents are undefined.
func Empty(dev *cuda.Device, dt DType, shape ...int) (*Tensor, error) {
	return EmptyStrided(dev, dt, shape, ContiguousStrides(shape))
}

// EmptyStrided allocates a tensor with the given strides on dev.
func EmptyStrided(dev *cuda.Device, dt DType, shape, strides []int) (*Tensor, error) {
	if dt.Size() == 0 {
		return nil, fmt.Errorf("tensor: invalid dtype %v", dt)
	}
	if err := checkLayout(shape, strides); err != nil {
		return nil, err
	}
	p, err := dev.Alloc(spanElems(shape, strides) * dt.Size())
	if err != nil {
		return nil, err
	}
	return &Tensor{dtype: dt, shape: append([]int(nil), shape...), strides: append([]int(nil), strides...), dev: dev, ptr: p}, nil
}

// Free releases a device tensor's memory; host tensors are left to the GC.
func (t *Tensor) Free() error {
	if t == nil || t.dev == nil || t.ptr == 0 {
		return nil
	}
	err := t.dev.Free(t.ptr)
	t.ptr = 0
	return err
}

// DType returns the element type.
func (t *Tensor) DType() DType { return t.dtype }

// Shape returns the dimensions; do not modify the slice.
func (t *Tensor) Shape() []int { return t.shape }

// Strides returns the strides in elements; do not modify the slice.
func (t *Tensor) Strides() []int { return t.strides }

// Rank returns the number of dimensions.
func (t *Tensor) Rank() int { return len(t.shape) }

// Dim returns dimension i; negative i counts from the end.
func (t *Tensor) Dim(i int) int {
	if i < 0 {
		i += len(t.shape)
	}
	return t.shape[i]
}

// Stride returns the stride of dimension i; negative i counts from the end.
func (t *Tensor) Stride(i int) int {
	if i < 0 {
		i += len(t.strides)
	}
	return t.strides[i]
}

// Numel returns the number of elements.
func (t *Tensor) Numel() int {
	n := 1
	for _, d := range t.shape {
		n *= d
	}
	return n
}

// SpanBytes is the storage the tensor addresses, first to last element.
func (t *Tensor) SpanBytes() int { return spanElems(t.shape, t.strides) * t.dtype.Size() }

// Contiguous reports whether the tensor is dense row-major.
func (t *Tensor) Contiguous() bool {
	c := ContiguousStrides(t.shape)
	for i := range c {
		if t.shape[i] > 1 && c[i] != t.strides[i] {
			return false
		}
	}
	return true
}

// IsDevice reports whether the tensor lives on a device.
func (t *Tensor) IsDevice() bool { return t.dev != nil }

// Device returns the tensor's device, nil for host tensors.
func (t *Tensor) Device() *cuda.Device { return t.dev }

// Ptr returns the device address of element 0.
func (t *Tensor) Ptr() cuda.DevicePtr { return t.ptr }

// Bytes returns a host tensor's storage.
func (t *Tensor) Bytes() []byte { return t.host }

// View returns a tensor sharing t's storage with a new dtype of the same
// size (e.g. u8 bytes read as fp8), shape and strides.
func (t *Tensor) View(dt DType, shape, strides []int) (*Tensor, error) {
	if err := checkLayout(shape, strides); err != nil {
		return nil, err
	}
	if spanElems(shape, strides)*dt.Size() > t.SpanBytes() {
		return nil, errors.New("tensor: view is larger than its storage")
	}
	v := *t
	v.dtype, v.shape, v.strides = dt, append([]int(nil), shape...), append([]int(nil), strides...)
	return &v, nil
}

// ToDevice copies a host tensor to dev, keeping its strides.
func (t *Tensor) ToDevice(dev *cuda.Device) (*Tensor, error) {
	if t.dev != nil {
		return nil, errors.New("tensor: ToDevice of a device tensor")
	}
	d, err := EmptyStrided(dev, t.dtype, t.shape, t.strides)
	if err != nil {
		return nil, err
	}
	if err := dev.CopyHtoD(d.ptr, t.host); err != nil {
		d.Free()
		return nil, err
	}
	return d, nil
}

// ToHost copies a device tensor to the host, keeping its strides (the gap
// between rows comes along too).
func (t *Tensor) ToHost() (*Tensor, error) {
	if t.dev == nil {
		return nil, errors.New("tensor: ToHost of a host tensor")
	}
	h, _ := NewStrided(t.dtype, t.shape, t.strides)
	if err := t.dev.CopyDtoH(h.host, t.ptr); err != nil {
		return nil, err
	}
	return h, nil
}

// CopyFrom copies src's storage into t (same dtype, shape and strides),
// in any direction between host and device.
func (t *Tensor) CopyFrom(src *Tensor) error {
	if t.dtype != src.dtype || fmt.Sprint(t.shape, t.strides) != fmt.Sprint(src.shape, src.strides) {
		return fmt.Errorf("tensor: CopyFrom %v%v into %v%v", src.dtype, src.shape, t.dtype, t.shape)
	}
	switch {
	case t.dev == nil && src.dev == nil:
		copy(t.host, src.host)
		return nil
	case t.dev != nil && src.dev == nil:
		return t.dev.CopyHtoD(t.ptr, src.host)
	case t.dev == nil:
		return src.dev.CopyDtoH(t.host, src.ptr)
	}
	return t.dev.CopyDtoD(t.ptr, src.ptr, t.SpanBytes())
}

// Poison fills a tensor's whole storage with 0xFF bytes: NaN in every float
// dtype, -1 in signed integers. Tests poison outputs before a kernel runs so
// that an element it never wrote cannot pass.
func (t *Tensor) Poison() error {
	if t.dev == nil {
		for i := range t.host {
			t.host[i] = 0xFF
		}
		return nil
	}
	s := t.dev.DefaultStream()
	if err := s.Memset8(t.ptr, 0xFF, t.SpanBytes()); err != nil {
		return err
	}
	return s.Synchronize()
}

// offsets calls fn with the storage offset (in elements) of every element,
// in row-major logical order.
func (t *Tensor) offsets(fn func(i, off int)) {
	n := t.Numel()
	if n == 0 {
		return
	}
	r := len(t.shape)
	if r == 0 {
		fn(0, 0)
		return
	}
	idx := make([]int, r)
	off := 0
	inner := t.shape[r-1]
	for i := 0; i < n; i += inner {
		for j := range inner {
			fn(i+j, off+j)
		}
		for d := r - 2; d >= 0; d-- {
			idx[d]++
			off += t.strides[d]
			if idx[d] < t.shape[d] {
				break
			}
			off -= idx[d] * t.strides[d]
			idx[d] = 0
		}
	}
}

func (t *Tensor) mustHost(what string) {
	if t.dev != nil {
		panic("tensor: " + what + " needs a host tensor; copy it with ToHost first")
	}
}

// get reads element storage offset off as float64.
func (t *Tensor) get(off int) float64 {
	b := t.host
	switch t.dtype {
	case F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[off*4:])))
	case BF16:
		return BF16Value(binary.LittleEndian.Uint16(b[off*2:]))
	case F16:
		return F16Value(binary.LittleEndian.Uint16(b[off*2:]))
	case F8E4M3, F8E5M2:
		return F8Value(t.dtype, b[off])
	case I8:
		return float64(int8(b[off]))
	case U8:
		return float64(b[off])
	case I32:
		return float64(int32(binary.LittleEndian.Uint32(b[off*4:])))
	case I64:
		return float64(int64(binary.LittleEndian.Uint64(b[off*8:])))
	}
	panic("tensor: bad dtype")
}

// set stores v at storage offset off, rounding to the dtype.
func (t *Tensor) set(off int, v float64) {
	b := t.host
	switch t.dtype {
	case F32:
		binary.LittleEndian.PutUint32(b[off*4:], math.Float32bits(float32(v)))
	case BF16:
		binary.LittleEndian.PutUint16(b[off*2:], BF16Bits(v))
	case F16:
		binary.LittleEndian.PutUint16(b[off*2:], F16Bits(v))
	case F8E4M3:
		b[off] = F8E4M3Bits(v)
	case F8E5M2:
		b[off] = F8E5M2Bits(v)
	case I8, U8:
		b[off] = byte(toInt(t.dtype, v))
	case I32:
		binary.LittleEndian.PutUint32(b[off*4:], uint32(toInt(t.dtype, v)))
	case I64:
		binary.LittleEndian.PutUint64(b[off*8:], uint64(toInt(t.dtype, v)))
	default:
		panic("tensor: bad dtype")
	}
}

// Float64s returns a host tensor's elements in row-major order.
func (t *Tensor) Float64s() []float64 {
	t.mustHost("Float64s")
	out := make([]float64, t.Numel())
	t.offsets(func(i, off int) { out[i] = t.get(off) })
	return out
}

// SetFloat64s stores v (row-major, Numel long) into a host tensor, rounding
// each value to the dtype (nearest, ties to even; integers saturate).
func (t *Tensor) SetFloat64s(v []float64) {
	t.mustHost("SetFloat64s")
	if len(v) != t.Numel() {
		panic(fmt.Sprintf("tensor: SetFloat64s of %d values into %d elements", len(v), t.Numel()))
	}
	t.offsets(func(i, off int) { t.set(off, v[i]) })
}

// Int64s returns an integer host tensor's elements exactly.
func (t *Tensor) Int64s() []int64 {
	t.mustHost("Int64s")
	out := make([]int64, t.Numel())
	b := t.host
	t.offsets(func(i, off int) {
		switch t.dtype {
		case I64:
			out[i] = int64(binary.LittleEndian.Uint64(b[off*8:]))
		case I32:
			out[i] = int64(int32(binary.LittleEndian.Uint32(b[off*4:])))
		default:
			out[i] = int64(t.get(off))
		}
	})
	return out
}

// SetInt64s stores integers exactly into an integer host tensor.
func (t *Tensor) SetInt64s(v []int64) {
	t.mustHost("SetInt64s")
	b := t.host
	t.offsets(func(i, off int) {
		switch t.dtype {
		case I64:
			binary.LittleEndian.PutUint64(b[off*8:], uint64(v[i]))
		case I32:
			binary.LittleEndian.PutUint32(b[off*4:], uint32(int32(v[i])))
		default:
			t.set(off, float64(v[i]))
		}
	})
}

// FillNormal fills a host tensor with mean + std·N(0,1) samples, rounded to
// the dtype.
func (t *Tensor) FillNormal(rng *rand.Rand, mean, std float64) {
	t.mustHost("FillNormal")
	t.offsets(func(_, off int) { t.set(off, mean+std*rng.NormFloat64()) })
}

// FillUniform fills a host tensor with samples from [lo, hi), rounded to
// the dtype.
func (t *Tensor) FillUniform(rng *rand.Rand, lo, hi float64) {
	t.mustHost("FillUniform")
	t.offsets(func(_, off int) { t.set(off, lo+(hi-lo)*rng.Float64()) })
}

// Rand returns a host tensor of N(0, std²) samples.
func Rand(rng *rand.Rand, dt DType, std float64, shape ...int) *Tensor {
	t := New(dt, shape...)
	t.FillNormal(rng, 0, std)
	return t
}

// NewRNG returns a generator seeded from the system's entropy: tests draw
// fresh inputs every run and print the seed to reproduce a failure.
func NewRNG() (*rand.Rand, uint64) {
	seed := rand.Uint64()
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seed
}

// SeededRNG returns a generator for a given seed.
func SeededRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }
