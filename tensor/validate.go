package tensor

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gokittens/kittens/cuda"
)

// ArgError is a bad argument to an op, found before anything ran. Its
// message reads "op: argument arg: msg" ("op: msg" without an argument).
type ArgError struct {
	Op, Arg, Msg string
}

// Error formats the problem with the op and argument names.
func (e *ArgError) Error() string {
	if e.Arg == "" {
		return e.Op + ": " + e.Msg
	}
	return e.Op + ": argument " + e.Arg + ": " + e.Msg
}

// Validator checks an op's arguments and keeps the first problem. Every op
// validates everything before it launches or writes anything:
//
//	v := tensor.Validate("norm.RMSNorm")
//	v.Tensor("x", x).Rank(2).DType(tensor.BF16, tensor.F16, tensor.F32)
//	v.Tensor("y", y).ShapeOf(x).DTypeOf(x)
//	v.SameLocation(s, []string{"y", "x"}, y, x)
//	if err := v.Err(); err != nil { return err }
//
// Checks after the first failure do nothing, so a chain never reads a nil
// tensor: the first problem is the one reported.
type Validator struct {
	op  string
	err error
}

// Validate starts validating the arguments of op.
func Validate(op string) *Validator { return &Validator{op: op} }

// Err returns the first problem found, or nil.
func (v *Validator) Err() error { return v.err }

// Failf records a problem with arg unless one is already recorded.
func (v *Validator) Failf(arg, format string, a ...any) {
	if v.err == nil {
		v.err = &ArgError{Op: v.op, Arg: arg, Msg: fmt.Sprintf(format, a...)}
	}
}

// Check records msg against arg when ok is false.
func (v *Validator) Check(ok bool, arg, format string, a ...any) {
	if !ok {
		v.Failf(arg, format, a...)
	}
}

// Arg checks one tensor argument.
type Arg struct {
	v    *Validator
	name string
	t    *Tensor
}

// Tensor starts checks on a required tensor.
func (v *Validator) Tensor(name string, t *Tensor) *Arg {
	a := &Arg{v: v, name: name, t: t}
	if t == nil {
		v.Failf(name, "is nil")
		a.t = nil
	}
	return a
}

// Optional starts checks on a tensor that may be nil; checks on a nil
// optional tensor pass.
func (v *Validator) Optional(name string, t *Tensor) *Arg { return &Arg{v: v, name: name, t: t} }

func (a *Arg) ok() bool { return a.t != nil && a.v.err == nil }

// Rank requires the given number of dimensions.
func (a *Arg) Rank(r ...int) *Arg {
	if a.ok() && !slices.Contains(r, a.t.Rank()) {
		a.v.Failf(a.name, "has rank %d (shape %v), want rank %v", a.t.Rank(), a.t.shape, r)
	}
	return a
}

// DType requires one of the given dtypes.
func (a *Arg) DType(ds ...DType) *Arg {
	if a.ok() && !slices.Contains(ds, a.t.dtype) {
		a.v.Failf(a.name, "has dtype %v, want one of %v", a.t.dtype, ds)
	}
	return a
}

// DTypeOf requires the same dtype as other.
func (a *Arg) DTypeOf(other *Tensor) *Arg {
	if a.ok() && other != nil && a.t.dtype != other.dtype {
		a.v.Failf(a.name, "has dtype %v, want %v like the input", a.t.dtype, other.dtype)
	}
	return a
}

// Shape requires exactly this shape; a negative entry matches any size,
// and the error writes it as "any": "has shape [4 6], want [any 5]".
func (a *Arg) Shape(s ...int) *Arg {
	if !a.ok() {
		return a
	}
	match := len(s) == len(a.t.shape)
	for i := 0; match && i < len(s); i++ {
		match = s[i] < 0 || s[i] == a.t.shape[i]
	}
	if !match {
		a.v.Failf(a.name, "has shape %v, want %s", a.t.shape, wantShape(s))
	}
	return a
}

// wantShape formats a shape that Shape requires as %v formats a shape,
// with "any" for each entry that matches any size.
func wantShape(s []int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range s {
		if i > 0 {
			b.WriteByte(' ')
		}
		if d < 0 {
			b.WriteString("any")
		} else {
			b.WriteString(strconv.Itoa(d))
		}
	}
	b.WriteByte(']')
	return b.String()
}

// ShapeOf requires other's shape.
func (a *Arg) ShapeOf(other *Tensor) *Arg {
	if other != nil {
		return a.Shape(other.shape...)
	}
	return a
}

// Contiguous requires dense row-major storage.
func (a *Arg) Contiguous() *Arg {
	if a.ok() && !a.t.Contiguous() {
		a.v.Failf(a.name, "must be contiguous (strides %v for shape %v)", a.t.strides, a.t.shape)
	}
	return a
}

// Int32Indexable requires every element offset to fit in int32, for
// kernels that index with 32-bit integers.
func (a *Arg) Int32Indexable() *Arg {
	if a.ok() && spanElems(a.t.shape, a.t.strides) > math.MaxInt32 {
		a.v.Failf(a.name, "spans %d elements, more than the kernel's int32 indexing allows", spanElems(a.t.shape, a.t.strides))
	}
	return a
}

// OnDevice requires a device tensor.
func (a *Arg) OnDevice() *Arg {
	if a.ok() && !a.t.IsDevice() {
		a.v.Failf(a.name, "is a host tensor where a device tensor is needed")
	}
	return a
}

// SameLocation requires all non-nil tensors to be on the host, or all on the
// same device, and s, when not nil and the tensors are on a device, to be a
// stream of that device. names[i] names ts[i] in the error.
func (v *Validator) SameLocation(s *cuda.Stream, names []string, ts ...*Tensor) {
	name := func(i int) string {
		if i < len(names) {
			return names[i]
		}
		return fmt.Sprintf("#%d", i)
	}
	first := -1
	for i, t := range ts {
		switch {
		case t == nil:
		case first < 0:
			first = i
		case t.dev != ts[first].dev:
			v.Failf(name(i), "is on %s but %s is on %s", where(t), name(first), where(ts[first]))
		}
	}
	if first >= 0 && s != nil && ts[first].dev != nil && s.Device() != ts[first].dev {
		v.Failf("s", "is a stream of device %d but %s is on device %d", s.Device().Ordinal, name(first), ts[first].dev.Ordinal)
	}
}

func where(t *Tensor) string {
	if t.dev == nil {
		return "the host"
	}
	return fmt.Sprintf("device %d", t.dev.Ordinal)
}

// Overlap reports whether two tensors may share storage. Each tensor is
// taken as rows: the steps along its outermost dimension (once dimensions
// that step over exactly the next are merged), each row the span of the
// dimensions inside it, or one row, its whole span, where its elements
// fill the span. Where both step by the same row stride (or either has one
// row), they overlap exactly where a row of one meets a row of the other,
// so the column slices of one buffer that serving engines pass (the q, k
// and v of a fused qkv) are disjoint. Otherwise it compares the two storage
// spans (SpanBytes), which is conservative: a gap inside one tensor's span
// may hold the other's elements. It never reports disjoint tensors that
// share an element. Tensors without elements overlap nothing.
func Overlap(a, b *Tensor) bool {
	if a == nil || b == nil || a.dev != b.dev {
		return false
	}
	na, nb := a.SpanBytes(), b.SpanBytes()
	if na == 0 || nb == 0 || !overlapRange(a.base(), na, b.base(), nb) {
		return false
	}
	ra, sa, wa := a.rows()
	rb, sb, wb := b.rows()
	stride := sa
	switch {
	case ra == 1:
		stride = sb
	case rb > 1 && sa != sb:
		return true
	}
	// Row i of a is [i·stride, i·stride + wa) from a's base, row j of b
	// [d + j·stride, d + j·stride + wb): they meet where -wb < d + k·stride
	// < wa for k = j - i, which takes every value from 1 - ra to rb - 1.
	d := int64(b.base()) - int64(a.base())
	kmin := max(floorDiv(-wb-d, stride)+1, 1-ra)
	kmax := min(ceilDiv(wa-d, stride)-1, rb-1)
	return kmin <= kmax
}

// rows describes t, a tensor with elements, as n rows of w bytes each,
// stride bytes apart. Its dimensions longer than 1 are merged first where
// one steps over exactly the next (a [B, L, C] batch of whole sequences is
// [B·L, C]); then the outermost gives the rows, each as wide as the span
// of the dimensions inside it, or, where one dimension is left (the
// elements fill the span), t is one row.
func (t *Tensor) rows() (n, stride, w int64) {
	rows, step := 0, 0 // the merged outermost dimension, 0 until one is found
	for i, d := range t.shape {
		switch {
		case d == 1:
		case rows == 0:
			rows, step = d, t.strides[i]
		case step == d*t.strides[i]:
			rows, step = rows*d, t.strides[i]
		default:
			size := int64(t.dtype.Size())
			return int64(rows), int64(step) * size, int64(spanElems(t.shape[i:], t.strides[i:])) * size
		}
	}
	return 1, 1, int64(t.SpanBytes())
}

// floorDiv and ceilDiv round a / b (b > 0) down and up.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }

// Distance returns the bytes from a's element 0 to b's, for two tensors with
// elements in one memory (the host, or one device), and false otherwise. For
// views of one buffer it is the offset between them.
func Distance(a, b *Tensor) (int64, bool) {
	if a == nil || b == nil || a.dev != b.dev || a.SpanBytes() == 0 || b.SpanBytes() == 0 {
		return 0, false
	}
	return int64(b.base()) - int64(a.base()), true
}

// base is the address of element 0 (on its device, or on the host) of a
// tensor with elements.
func (t *Tensor) base() uintptr {
	if t.dev == nil {
		return addr(&t.host[0])
	}
	return uintptr(t.ptr)
}

// Same reports whether two tensors are the same storage with the same
// dtype and layout (an in-place call). Strides of dimensions of size 1 do
// not matter, as no element steps along them. Tensors without storage are
// never the same.
func Same(a, b *Tensor) bool {
	if a == nil || b == nil || a.dev != b.dev || a.dtype != b.dtype || !slices.Equal(a.shape, b.shape) {
		return false
	}
	for i, n := range a.shape {
		if n > 1 && a.strides[i] != b.strides[i] {
			return false
		}
	}
	return a.SpanBytes() > 0 && a.base() == b.base()
}

func overlapRange(a uintptr, na int, b uintptr, nb int) bool {
	return na > 0 && nb > 0 && a < b+uintptr(nb) && b < a+uintptr(na)
}

// NoOverlap requires out not to share storage with in.
func (v *Validator) NoOverlap(outName string, out *Tensor, inName string, in *Tensor) {
	if Overlap(out, in) {
		v.Failf(outName, "overlaps %s; in-place use is not allowed here", inName)
	}
}

// NoOverlapUnlessSame requires out and in to be either disjoint or exactly
// the same tensor (an in-place call).
func (v *Validator) NoOverlapUnlessSame(outName string, out *Tensor, inName string, in *Tensor) {
	if Overlap(out, in) && !Same(out, in) {
		v.Failf(outName, "partly overlaps %s; it must be disjoint from it or exactly the same tensor", inName)
	}
}

// ValuesForCheck returns the values of t, an index or position tensor that
// op checks before it launches: read from a host tensor as it is; copied
// back from a device tensor after everything queued on s (nil: the
// device's default stream), which waits for s. A stream being captured into
// a CUDA graph cannot wait, so there it is an ArgError on arg that says to
// set skip, the option that does without the check.
func ValuesForCheck(s *cuda.Stream, t *Tensor, op, arg, skip string) ([]int64, error) {
	if !t.IsDevice() {
		return t.Int64s(), nil
	}
	if capturing, err := s.Capturing(); err != nil {
		return nil, err
	} else if capturing {
		return nil, &ArgError{Op: op, Arg: arg, Msg: "is on the device and checked on the host, which waits for the stream " +
			"and cannot be captured in a CUDA graph: set " + skip}
	}
	if s == nil {
		s = t.Device().DefaultStream()
	}
	h, err := NewStrided(t.dtype, t.shape, t.strides)
	if err != nil {
		return nil, err
	}
	if err := h.CopyFromOn(s, t); err != nil {
		return nil, err
	}
	if err := s.Synchronize(); err != nil {
		return nil, err
	}
	return h.Int64s(), nil
}
