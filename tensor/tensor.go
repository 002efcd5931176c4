package tensor

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"

	"github.com/gokittens/kittens/cuda"
)

// Tensor is an n-dimensional array on the host or on one device.
//
// Its layout is a shape and strides in elements: element (i₀, …, iₙ₋₁) lives
// at storage offset Σ iₖ·strides[k] from element 0. The last stride is 1,
// every stride is positive, and the dimensions nest in row-major order: the
// stride of each dimension longer than 1 is at least the span of the
// dimensions after it, so no two elements share storage. A row stride
// larger than the row leaves a gap that belongs to the tensor's storage but
// holds no element.
type Tensor struct {
	dtype   DType
	shape   []int
	strides []int // elements; strides[rank-1] == 1

	dev  *cuda.Device   // nil: host
	ptr  cuda.DevicePtr // device storage: address of element 0
	host []byte         // host storage from element 0; may run past the span in a view
	view bool           // shares another tensor's storage; Free leaves it alone
}

// ContiguousStrides returns row-major strides for shape. A dimension of
// size 0 counts as 1, as in PyTorch, so the strides are valid (positive)
// for empty shapes too. A stride that would overflow int is math.MaxInt
// instead: valid for an empty shape, which addresses no element, and too
// large for any other shape, which NewStrided reports (and New panics on).
func ContiguousStrides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		if d := max(shape[i], 1); acc > math.MaxInt/d {
			acc = math.MaxInt
		} else {
			acc *= d
		}
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

// maxLayoutBytes bounds the bytes of a layout: Go's runtime allocates less
// than 2⁴⁸ bytes on 64-bit Linux and Windows (asked for more, make panics),
// and no device holds that much.
const maxLayoutBytes = min(math.MaxInt, 1<<48-1)

// tooLarge is checkLayout's error for a layout of maxLayoutBytes or more.
func tooLarge(shape, strides []int) error {
	return fmt.Errorf("tensor: shape %v with strides %v is too large: a tensor spans at most %s", shape, strides, byteSize(maxLayoutBytes))
}

// checkLayout validates a layout of dtype dt (see Tensor) and returns the
// bytes it spans.
func checkLayout(dt DType, shape, strides []int) (int, error) {
	if dt.Size() == 0 {
		return 0, fmt.Errorf("tensor: invalid dtype %v", dt)
	}
	if len(shape) != len(strides) {
		return 0, fmt.Errorf("tensor: %d strides for rank %d", len(strides), len(shape))
	}
	for i, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("tensor: negative dimension in shape %v", shape)
		}
		if strides[i] < 1 {
			return 0, fmt.Errorf("tensor: stride %d of dim %d must be positive", strides[i], i)
		}
	}
	if r := len(strides); r > 0 && strides[r-1] != 1 {
		return 0, fmt.Errorf("tensor: the last dimension must be contiguous (stride 1), got %d", strides[r-1])
	}
	if slices.Contains(shape, 0) {
		return 0, nil
	}
	// Walk inwards-out: span is the extent of the dimensions after i.
	span := 1
	for i := len(shape) - 1; i >= 0; i-- {
		d := shape[i]
		if d == 1 {
			continue
		}
		if strides[i] < span {
			return 0, fmt.Errorf("tensor: stride %d of dim %d overlaps the %d elements the dims after it span (shape %v, strides %v)",
				strides[i], i, span, shape, strides)
		}
		if strides[i] > (math.MaxInt-span)/(d-1) {
			return 0, tooLarge(shape, strides)
		}
		span += (d - 1) * strides[i]
	}
	if span > maxLayoutBytes/dt.Size() {
		return 0, tooLarge(shape, strides)
	}
	return span * dt.Size(), nil
}

// New returns a zeroed contiguous host tensor, for shapes the caller
// knows to be valid. It panics where NewStrided returns an error: on an
// invalid dtype, a negative dimension, a shape of 2⁴⁸ bytes or more, or one
// larger than the machine's memory. Empty(nil, ...) makes the same tensor,
// with an error instead.
func New(dt DType, shape ...int) *Tensor {
	t, err := NewStrided(dt, shape, ContiguousStrides(shape))
	if err != nil {
		panic(err)
	}
	return t
}

// NewStrided returns a zeroed host tensor with the given strides (elements).
// The storage covers the span from element 0 to the last element, gaps
// between rows included. Storage larger than the machine's physical memory
// is an error, not an allocation that would end the process.
func NewStrided(dt DType, shape, strides []int) (*Tensor, error) {
	n, err := checkLayout(dt, shape, strides)
	if err != nil {
		return nil, err
	}
	if err := checkHost(dt, shape, n); err != nil {
		return nil, err
	}
	return &Tensor{dtype: dt, shape: slices.Clone(shape), strides: slices.Clone(strides), host: make([]byte, n)}, nil
}

// Empty allocates a contiguous tensor on dev; its contents are undefined.
// A nil dev gives a zeroed host tensor, so that Empty(x.Device(), ...)
// makes a tensor where x lives.
func Empty(dev *cuda.Device, dt DType, shape ...int) (*Tensor, error) {
	return EmptyStrided(dev, dt, shape, ContiguousStrides(shape))
}

// EmptyStrided allocates a tensor with the given strides on dev (on the
// host, zeroed, when dev is nil).
func EmptyStrided(dev *cuda.Device, dt DType, shape, strides []int) (*Tensor, error) {
	if dev == nil {
		return NewStrided(dt, shape, strides)
	}
	n, err := checkLayout(dt, shape, strides)
	if err != nil {
		return nil, err
	}
	p, err := dev.Alloc(n)
	if err != nil {
		return nil, err
	}
	return &Tensor{dtype: dt, shape: slices.Clone(shape), strides: slices.Clone(strides), dev: dev, ptr: p}, nil
}

// Free releases a device tensor's memory; host tensors are left to the GC.
// Views (View, Slice) do not own their storage: Free on one does nothing,
// and the storage stays valid until the tensor that allocated it is freed.
func (t *Tensor) Free() error {
	if t == nil || t.dev == nil || t.ptr == 0 || t.view {
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

// Dim returns the size of dimension i; a negative i counts from the end
// (Dim(-1) is the last dimension). It returns no error, so that it reads
// inline in shape checks and arithmetic; as with a slice index, an i
// outside [-Rank, Rank) is the caller's bug, and panics with a message
// that names i and the rank. Code that takes a dimension index from its
// input checks it against Rank first.
func (t *Tensor) Dim(i int) int { return t.shape[t.axis("Dim", i)] }

// Stride returns the stride of dimension i, in elements; i is read as
// Dim reads it, and panics where Dim does.
func (t *Tensor) Stride(i int) int { return t.strides[t.axis("Stride", i)] }

// axis returns dimension index i of t (negative: from the end) as an index
// into the shape, and panics for one out of range; what names the method.
func (t *Tensor) axis(what string, i int) int {
	r := len(t.shape)
	switch {
	case r == 0:
		panic(fmt.Sprintf("tensor: %s(%d) of a rank-0 tensor, which has no dimensions", what, i))
	case i < -r || i >= r:
		panic(fmt.Sprintf("tensor: %s(%d) of a rank-%d tensor: the index must lie in [-%d, %d)", what, i, r, r, r))
	case i < 0:
		return i + r
	}
	return i
}

// Numel returns the number of elements.
func (t *Tensor) Numel() int {
	n := 1
	for _, d := range t.shape {
		n *= d
	}
	return n
}

// SpanBytes is the storage the tensor addresses, first to last element
// (gaps between rows included; 0 when the tensor has no elements).
func (t *Tensor) SpanBytes() int { return spanElems(t.shape, t.strides) * t.dtype.Size() }

// Contiguous reports whether the tensor is dense row-major. Strides of
// dimensions of size 1 do not matter, and a tensor without elements is
// contiguous.
func (t *Tensor) Contiguous() bool {
	if t.Numel() == 0 {
		return true
	}
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

// Bytes returns a host tensor's storage from element 0 to the last element
// (SpanBytes long, gaps between rows included). Writes go to the tensor.
func (t *Tensor) Bytes() []byte { return t.host[:t.SpanBytes()] }

// View returns a tensor sharing t's storage from element 0 with a new
// dtype, shape and strides: u8 bytes read as fp8, a [rows, cols] f32 read
// as [rows, cols·4] u8, a contiguous tensor reshaped. The view must fit in
// t's span, and on a device element 0 must be aligned for dt (a slice of
// bf16 at an odd element cannot be read as f32: kernels would fault on
// the address). Writes through either are seen by the other.
func (t *Tensor) View(dt DType, shape, strides []int) (*Tensor, error) {
	n, err := checkLayout(dt, shape, strides)
	if err != nil {
		return nil, err
	}
	if t.dev != nil && uint64(t.ptr)%uint64(dt.Size()) != 0 {
		return nil, fmt.Errorf("tensor: view as %v at device address %#x, which is not %d-byte aligned", dt, t.ptr, dt.Size())
	}
	if n > t.SpanBytes() {
		return nil, fmt.Errorf("tensor: view of %d bytes (%v%v, strides %v) is larger than the %d bytes of its storage",
			n, dt, shape, strides, t.SpanBytes())
	}
	v := *t
	v.dtype, v.shape, v.strides, v.view = dt, slices.Clone(shape), slices.Clone(strides), true
	return &v, nil
}

// Slice returns the view of t with dimension dim restricted to
// [start, end): the same strides, element 0 moved to index start. A column
// slice of a matrix has a row stride larger than its row; Overlap tells
// disjoint column slices of one matrix apart.
func (t *Tensor) Slice(dim, start, end int) (*Tensor, error) {
	if dim < 0 || dim >= len(t.shape) {
		return nil, fmt.Errorf("tensor: Slice of dim %d of a rank-%d tensor", dim, len(t.shape))
	}
	if start < 0 || end < start || end > t.shape[dim] {
		return nil, fmt.Errorf("tensor: Slice [%d, %d) of dim %d of size %d", start, end, dim, t.shape[dim])
	}
	v := *t
	v.shape, v.strides, v.view = slices.Clone(t.shape), slices.Clone(t.strides), true
	v.shape[dim] = end - start
	if v.Numel() == 0 {
		v.host = t.host[:0]
		return &v, nil
	}
	off := start * t.strides[dim] * t.dtype.Size()
	if t.dev == nil {
		v.host = t.host[off:]
	} else {
		v.ptr += cuda.DevicePtr(off)
	}
	return &v, nil
}

// ToDevice copies a host tensor to dev, keeping its strides. A nil dev
// is an error (cuda.ErrNilDevice): Empty's nil for the host does not apply.
func (t *Tensor) ToDevice(dev *cuda.Device) (*Tensor, error) {
	switch {
	case t == nil:
		return nil, errors.New("tensor: ToDevice of a nil tensor")
	case dev == nil:
		return nil, fmt.Errorf("tensor: ToDevice: %w", cuda.ErrNilDevice)
	case t.dev != nil:
		return nil, errors.New("tensor: ToDevice of a device tensor")
	}
	d, err := EmptyStrided(dev, t.dtype, t.shape, t.strides)
	if err != nil {
		return nil, err
	}
	if err := dev.CopyHtoD(d.ptr, t.Bytes()); err != nil {
		d.Free()
		return nil, err
	}
	return d, nil
}

// ToHost copies a device tensor to the host, keeping its strides (the gap
// between rows comes along too).
func (t *Tensor) ToHost() (*Tensor, error) {
	switch {
	case t == nil:
		return nil, errors.New("tensor: ToHost of a nil tensor")
	case t.dev == nil:
		return nil, errors.New("tensor: ToHost of a host tensor")
	}
	h, err := NewStrided(t.dtype, t.shape, t.strides)
	if err != nil {
		return nil, err
	}
	if err := t.dev.CopyDtoH(h.host, t.ptr); err != nil {
		return nil, err
	}
	return h, nil
}

// CopyFrom copies src into t (same dtype, shape and strides), in any
// direction between host and device, and returns once the copy is done. A
// tensor that owns its storage, or has no gaps between its rows, takes
// src's whole storage span in one copy, gaps included; a view with gaps (a
// column Slice) takes its elements only, since its gaps belong to other
// tensors. Where the two share storage (overlapping slices of one tensor),
// src is first copied aside, so that t gets src's values from before the
// call.
func (t *Tensor) CopyFrom(src *Tensor) error { return t.CopyFromOn(nil, src) }

// CopyFromOn is CopyFrom queued on stream s (nil: CopyFrom itself, on the
// device's default stream, waited for). A copy between two device tensors
// returns at once and may be captured into a CUDA graph. Host memory is
// pageable, so a copy to or from the host returns only once the host bytes
// have been read or written, and cannot be captured; neither can an
// overlapping copy, which waits for s before it frees the copy it took
// aside.
func (t *Tensor) CopyFromOn(s *cuda.Stream, src *Tensor) error {
	switch {
	case t == nil:
		return errors.New("tensor: CopyFrom into a nil tensor")
	case src == nil:
		return errors.New("tensor: CopyFrom of a nil tensor")
	}
	if t.dtype != src.dtype || !slices.Equal(t.shape, src.shape) || !slices.Equal(t.strides, src.strides) {
		return fmt.Errorf("tensor: CopyFrom %v%v (strides %v) into %v%v (strides %v)",
			src.dtype, src.shape, src.strides, t.dtype, t.shape, t.strides)
	}
	wait := s == nil
	if dev := cmp.Or(t.dev, src.dev); wait && dev != nil {
		s = dev.DefaultStream()
	}
	var aside *Tensor
	if Overlap(t, src) && !Same(t, src) {
		// Copied a run at a time, t's first rows could overwrite src's
		// later rows before they are read.
		var err error
		if aside, err = EmptyStrided(src.dev, src.dtype, src.shape, src.strides); err != nil {
			return err
		}
		defer aside.Free()
		if err := aside.CopyFromOn(s, src); err != nil {
			return err
		}
		src, wait = aside, true // aside is freed on return
	}
	err := t.writeRanges(func(off, n int) error {
		dst, from := t.ptr+cuda.DevicePtr(off), src.ptr+cuda.DevicePtr(off)
		switch {
		case t.dev == nil && src.dev == nil:
			copy(t.host[off:off+n], src.host[off:off+n])
			return nil
		case src.dev == nil:
			return s.CopyHtoD(dst, src.host[off:off+n])
		case t.dev == nil:
			return s.CopyDtoH(t.host[off:off+n], from)
		}
		return s.CopyDtoD(dst, from, n)
	})
	if err == nil && wait && s != nil {
		err = s.Synchronize()
	}
	return err
}

// Poison fills a tensor's elements with 0xFF bytes: NaN in every float
// dtype, -1 in signed integers, 255 in U8. Tests poison outputs before a
// kernel runs so that an element it never wrote cannot pass. A tensor that
// owns its storage, or has no gaps, is filled over its whole span, gaps
// included; a view with gaps (a column Slice) has its elements filled only,
// since its gaps belong to other tensors. A device tensor is poisoned on
// the default stream, which is then synchronized.
func (t *Tensor) Poison() error {
	if t.dev == nil {
		return t.writeRanges(func(off, n int) error {
			for i := range t.host[off : off+n] {
				t.host[off+i] = 0xFF
			}
			return nil
		})
	}
	s := t.dev.DefaultStream()
	if err := t.writeRanges(func(off, n int) error { return s.Memset8(t.ptr+cuda.DevicePtr(off), 0xFF, n) }); err != nil {
		return err
	}
	return s.Synchronize()
}

// writeRanges calls fn with the byte offset and length of each stretch of
// storage that a whole-tensor write may touch: the whole span for a tensor
// that owns its storage or has no gaps, else each run of elements that lie
// next to each other (a row, in a column Slice), so that a view never
// writes the gaps that belong to other tensors.
func (t *Tensor) writeRanges(fn func(off, n int) error) error {
	size := t.dtype.Size()
	if !t.view || t.Contiguous() {
		return fn(0, t.SpanBytes())
	}
	start, end := 0, -1 // the current run of element offsets, [start, end)
	var err error
	t.offsets(func(_, off int) {
		switch {
		case err != nil:
		case off == end:
			end++
		default:
			if end >= 0 {
				err = fn(start*size, (end-start)*size)
			}
			start, end = off, off+1
		}
	})
	if err == nil && end >= 0 {
		err = fn(start*size, (end-start)*size)
	}
	return err
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

// Int64s returns a host tensor's elements in row-major order, exactly for
// integer dtypes. Float elements are rounded half away from zero and
// saturated to the int64 range; NaN reads as 0.
func (t *Tensor) Int64s() []int64 {
	t.mustHost("Int64s")
	out := make([]int64, t.Numel())
	b := t.host
	t.offsets(func(i, off int) {
		switch t.dtype {
		case I64:
			out[i] = int64(binary.LittleEndian.Uint64(b[off*8:]))
		default:
			out[i] = toInt(I64, t.get(off)) // exact for the narrower integers
		}
	})
	return out
}

// SetInt64s stores v (row-major, Numel long) into a host tensor: exactly
// where the dtype holds the value; integer dtypes saturate to their range;
// float dtypes round the integer once, to nearest with ties to even, as
// SetFloat64s rounds a float64 (no double rounding through float64 for
// values beyond 2⁵³).
func (t *Tensor) SetInt64s(v []int64) {
	t.mustHost("SetInt64s")
	if len(v) != t.Numel() {
		panic(fmt.Sprintf("tensor: SetInt64s of %d values into %d elements", len(v), t.Numel()))
	}
	b := t.host
	t.offsets(func(i, off int) {
		switch t.dtype {
		case I64:
			binary.LittleEndian.PutUint64(b[off*8:], uint64(v[i]))
		case I32:
			binary.LittleEndian.PutUint32(b[off*4:], uint32(clampInt(I32, v[i])))
		case I8, U8:
			b[off] = byte(clampInt(t.dtype, v[i]))
		default:
			t.set(off, roundOddFloat64(v[i]))
		}
	})
}

// roundOddFloat64 converts v to float64, rounding to odd where v needs more
// than float64's 53 significant bits: the bits past the 53rd are dropped,
// and the 53rd is set if any of them was 1. Rounding the result once more,
// to nearest, into a format of at most 51 significant bits (every float
// dtype) gives what rounding v directly would: float64(v) rounds to
// nearest, and a second rounding of that can differ (2⁶⁰+2⁵²+1 would become
// 2⁶⁰+2⁵², a tie that bf16 rounds down to 2⁶⁰, though v is above it).
func roundOddFloat64(v int64) float64 {
	u := uint64(v)
	if v < 0 {
		u = -u // math.MinInt64 gives 2⁶³, as wanted
	}
	shift := bits.Len64(u) - 53
	if shift <= 0 {
		return float64(v) // exact
	}
	m := u >> shift
	if u&(1<<shift-1) != 0 {
		m |= 1
	}
	f := math.Ldexp(float64(m), shift) // both steps exact: m < 2⁵³
	if v < 0 {
		f = -f
	}
	return f
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

// Rand returns a host tensor of N(0, std²) samples. It panics where New
// does.
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

// benchFillElems bounds the random host data RandDevice draws.
const benchFillElems = 1 << 16

// RandDevice allocates a contiguous device tensor of N(mean, std²) values,
// quickly enough for benchmark-sized tensors: one block of up to 64 Ki
// random values is drawn on the host and repeated over the tensor by
// doubling device-to-device copies. The values are not independent draws
// (use FillNormal and ToDevice for that); benchmarks need real, non-zero
// data at full size, not statistics.
func RandDevice(dev *cuda.Device, rng *rand.Rand, dt DType, mean, std float64, shape ...int) (*Tensor, error) {
	if dev == nil {
		return nil, fmt.Errorf("tensor: RandDevice: %w", cuda.ErrNilDevice)
	}
	t, err := Empty(dev, dt, shape...)
	if err != nil {
		return nil, err
	}
	span := t.SpanBytes()
	if span == 0 {
		return t, nil
	}
	h := New(dt, min(span/dt.Size(), benchFillElems))
	h.FillNormal(rng, mean, std)
	err = dev.CopyHtoD(t.ptr, h.Bytes())
	for done := len(h.Bytes()); err == nil && done < span; done *= 2 {
		err = dev.CopyDtoD(t.ptr+cuda.DevicePtr(done), t.ptr, min(done, span-done))
	}
	if err != nil {
		t.Free()
		return nil, err
	}
	return t, nil
}
