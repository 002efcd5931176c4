// Package fuzzargs is the machinery the ops' fuzz tests share: it decodes
// the fuzzer's input into the host tensors of one call, remembers every
// allocation they live in, and checks what the call did to those bytes.
//
// The input is a stream of small choices (In): each byte picks one option
// of a few, and a zero byte (also what a short input reads past its end,
// unless In was made to draw the rest at random) picks the plain, valid
// option, so that short inputs make ordinary calls and the fuzzer's
// mutations make the odd ones: other dtypes, ranks and sizes, padded rows,
// arguments that are nil, alias or overlap each other, options out of
// range.
//
// The tensors of a call live in roots (Arena): each in an allocation of its
// own, or as a view into the arena, one shared buffer, at a fuzzed byte
// offset, so that arguments may overlap (after the others, over them, at
// an earlier one's start), or as another argument itself. Every tensor is
// a root or a view of one, so a snapshot of the roots (Snapshot) covers
// every byte the call could write.
//
// The checks: a call that fails must return a non-empty tensor.ArgError of
// the op's package naming one of its arguments and leave every byte of
// every root as it was (CheckError); a call that succeeds may change only
// the bytes of the elements of its outputs (CheckWrites). Whether the call
// must fail, and what it must write, is each op's own model, kept in its
// package; where a model asks whether two arguments overlap it uses
// tensor.Overlap and tensor.Same, as the ops' validators do.
package fuzzargs

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gokittens/kittens/tensor"
)

// In hands out the fuzzer's bytes as small choices. Past their end it reads
// zeros (NewIn), the plain options, or bytes drawn from a generator seeded
// with the input (NewSeededIn).
type In struct {
	b    []byte
	rest *rand.Rand
}

// NewIn decodes data, reading zeros past its end.
func NewIn(data []byte) *In { return &In{b: data} }

// NewSeededIn decodes data, reading past its end bytes drawn from a
// generator seeded with a hash of data, so that every input decodes to
// some call and a short one need not take the plain branches.
func NewSeededIn(data []byte) *In {
	h := fnv.New64a()
	h.Write(data)
	return &In{b: data, rest: tensor.SeededRNG(h.Sum64())}
}

// Byte is the next byte, 0–255.
func (in *In) Byte() int {
	if len(in.b) == 0 {
		if in.rest != nil {
			return int(byte(in.rest.Uint32()))
		}
		return 0
	}
	v := in.b[0]
	in.b = in.b[1:]
	return int(v)
}

// N is a choice in [0, k).
func (in *In) N(k int) int { return in.Byte() % k }

// One is true about once in k: for a zero byte.
func (in *In) One(k int) bool { return in.N(k) == 0 }

// Rare is 0 for most bytes and 1–k for the top k: the odd variant.
func (in *In) Rare(k int) int {
	if b := in.Byte(); b >= 256-k {
		return b - (255 - k)
	}
	return 0
}

// Dim is a dimension of 0–9 (3 for a zero byte), or, for the top len(odd)
// bytes, one of odd.
func (in *In) Dim(odd ...int) int {
	b := in.Byte()
	if b >= 256-len(odd) {
		return odd[b-(256-len(odd))]
	}
	return (b + 3) % 10
}

// Pick is one of vs: vs[0] for a zero byte.
func Pick[T any](in *In, vs ...T) T { return vs[in.N(len(vs))] }

// FloatDTypes are the activation dtypes; OtherDTypes are dtypes that the
// float ops refuse.
var (
	FloatDTypes = []tensor.DType{tensor.BF16, tensor.F16, tensor.F32}
	OtherDTypes = []tensor.DType{tensor.I32, tensor.I64, tensor.F8E4M3, tensor.F8E5M2, tensor.U8, tensor.I8}
)

// DType is bf16, f16 or f32, for the top 16 bytes one of OtherDTypes.
func (in *In) DType() tensor.DType {
	b := in.Byte()
	if b >= 240 {
		return OtherDTypes[b%len(OtherDTypes)]
	}
	return FloatDTypes[b%3]
}

// DTypeLike is mostly x's dtype, else (or for nil x) DType.
func (in *In) DTypeLike(x *tensor.Tensor) tensor.DType {
	if x == nil || in.One(8) {
		return in.DType()
	}
	return x.DType()
}

// GapStrides are row-major strides for shape with a fuzzed gap after some
// of the leading dimensions; a dimension of size 1, which no element steps
// along, now and then gets a small stride of any value.
func (in *In) GapStrides(shape []int) []int {
	s := make([]int, len(shape))
	next := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = next
		if i < len(shape)-1 && in.One(3) {
			s[i] += 1 + in.N(5)
		}
		next = s[i] * max(shape[i], 1)
		if shape[i] == 1 && i < len(shape)-1 && in.One(4) {
			s[i] = 1 + in.N(3)
		}
	}
	return s
}

// PaddedStrides are row-major strides for shape with pad extra elements
// after each innermost row; a stride past int saturates.
func PaddedStrides(shape []int, pad int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		d := max(shape[i], 1)
		if i == len(shape)-1 {
			d += pad
		}
		if acc > math.MaxInt/d {
			acc = math.MaxInt
		} else {
			acc *= d
		}
	}
	return s
}

// root is one allocation the tensors of a call live in, and its bytes at
// the snapshot.
type root struct {
	name   string
	t      *tensor.Tensor
	before []byte
}

// Arena builds the tensors of one call and keeps the allocations they live
// in: roots[0], the shared arena of u8 random bytes, and the tensors made
// with their own storage.
type Arena struct {
	In     *In
	Rand   *rand.Rand       // the generator of the arena's bytes and of Fill
	Made   []*tensor.Tensor // the tensors handed out by Own and At, in order
	roots  []root
	end    int   // arena bytes handed out so far
	starts []int // arena offsets handed out
}

// NewArena starts a call decoded from in, with an arena of size bytes
// filled from a generator of seed.
func NewArena(in *In, size int, seed uint64) *Arena {
	a := &Arena{In: in, Rand: tensor.SeededRNG(seed)}
	arena := tensor.New(tensor.U8, size)
	a.Scramble(arena)
	a.roots = []root{{name: "the arena", t: arena}}
	return a
}

// Own returns a new zeroed tensor of the layout in storage of its own,
// named name in failure messages. The layout must be valid.
func (a *Arena) Own(name string, dt tensor.DType, shape, strides []int) *tensor.Tensor {
	t, err := tensor.NewStrided(dt, shape, strides)
	if err != nil {
		panic(fmt.Sprintf("fuzzargs: %s: %v", name, err))
	}
	a.Adopt(name, t)
	a.Made = append(a.Made, t)
	return t
}

// Adopt makes t, an allocation the caller made (not a view), a root: its
// bytes are snapshot and checked like the others.
func (a *Arena) Adopt(name string, t *tensor.Tensor) {
	a.roots = append(a.roots, root{name: name, t: t})
}

// End is the arena bytes handed out so far: the offset after every view.
func (a *Arena) End() int { return a.end }

// At views the arena from byte off as the layout, or returns nil where
// that does not fit.
func (a *Arena) At(off int, dt tensor.DType, shape, strides []int) *tensor.Tensor {
	arena := a.roots[0].t
	if off < 0 || off > arena.Dim(0) {
		return nil
	}
	sl, err := arena.Slice(0, off, arena.Dim(0))
	if err != nil {
		return nil
	}
	t, err := sl.View(dt, shape, strides)
	if err != nil {
		return nil
	}
	a.end, a.starts = max(a.end, off+t.SpanBytes()), append(a.starts, off)
	a.Made = append(a.Made, t)
	return t
}

// Somewhere views the arena as the layout at a fuzzed offset: after every
// view so far, where an earlier one starts, over the last element or the
// last byte handed out, or at a fuzzed byte. It returns nil where that
// does not fit.
func (a *Arena) Somewhere(dt tensor.DType, shape, strides []int) *tensor.Tensor {
	var off int
	switch a.In.N(5) {
	case 0:
		off = a.end
	case 1:
		if len(a.starts) > 0 {
			off = a.starts[a.In.N(len(a.starts))]
		}
	case 2:
		off = a.end - dt.Size()
	case 3:
		off = a.end - 1
	case 4:
		off = a.In.Byte() * (1 + a.In.N(8))
	}
	return a.At(max(off, 0), dt, shape, strides)
}

// Strided returns a tensor of dt and shape with GapStrides, in storage of
// its own (own is true) or, one time in three, where it fits, a view of
// the arena at a fuzzed byte offset, mostly aligned to dt.
func (a *Arena) Strided(name string, dt tensor.DType, shape []int) (t *tensor.Tensor, own bool) {
	strides := a.In.GapStrides(shape)
	if a.In.One(3) {
		off := a.In.Byte()
		if !a.In.One(8) {
			off -= off % dt.Size()
		}
		if t := a.At(off, dt, shape, strides); t != nil {
			return t, false
		}
	}
	return a.Own(name, dt, shape, strides), true
}

// Place returns a tensor of the layout where the input puts it, of k
// choices: the last nil, the one before alias (if its dtype is dt), the
// two before those after every arena view so far (8-byte aligned), the
// two before those at a fuzzed arena offset; the rest, and a layout that
// does not fit, in storage of its own.
func (a *Arena) Place(name string, dt tensor.DType, shape, strides []int, alias *tensor.Tensor, k int) *tensor.Tensor {
	var t *tensor.Tensor
	switch p := a.In.N(k); {
	case p == k-1:
		return nil
	case p == k-2:
		if alias != nil && alias.DType() == dt {
			return alias
		}
	case p >= k-4:
		t = a.At(a.In.Byte()*(1+a.In.N(4)), dt, shape, strides)
	case p >= k-6:
		t = a.At((a.end+7)&^7, dt, shape, strides)
	}
	if t == nil {
		t = a.Own(name, dt, shape, strides)
	}
	return t
}

// View is base's storage as the layout, nil where that does not fit.
func View(base *tensor.Tensor, dt tensor.DType, shape, strides []int) *tensor.Tensor {
	v, err := base.View(dt, shape, strides)
	if err != nil {
		return nil
	}
	return v
}

// Slice is base.Slice(dim, start, end), nil where that is invalid.
func Slice(base *tensor.Tensor, dim, start, end int) *tensor.Tensor {
	v, err := base.Slice(dim, start, end)
	if err != nil {
		return nil
	}
	return v
}

// Snapshot records the bytes of every root: what CheckError and CheckWrites
// compare with.
func (a *Arena) Snapshot() {
	for i := range a.roots {
		a.roots[i].before = bytes.Clone(a.roots[i].t.Bytes())
	}
}

// where is the root of t, a tensor with elements, and the byte offset of
// its element 0 there (-1 if it lives in none).
func (a *Arena) where(t *tensor.Tensor) (r, off int) {
	for i, rt := range a.roots {
		if d, ok := tensor.Distance(rt.t, t); ok && d >= 0 && d < int64(rt.t.SpanBytes()) {
			return i, int(d)
		}
	}
	return -1, 0
}

// Desc describes t for a failure message, with where it lives.
func (a *Arena) Desc(t *tensor.Tensor) string {
	if t == nil {
		return "nil"
	}
	s := fmt.Sprintf("%v%v strides %v", t.DType(), t.Shape(), t.Strides())
	if r, off := a.where(t); r >= 0 {
		s += fmt.Sprintf(" at %s+%d", a.roots[r].name, off)
	}
	return s
}

// CheckError fails tb (with what) unless err is a tensor.ArgError with a
// message, of an op of package pkg ("pkg.Op"), naming one of names (any
// argument where names is empty), and every byte of every root is as at
// the snapshot.
func (a *Arena) CheckError(tb testing.TB, what string, err error, pkg string, names ...string) {
	tb.Helper()
	var ae *tensor.ArgError
	if !errors.As(err, &ae) || ae.Msg == "" || !strings.HasPrefix(ae.Op, pkg+".") ||
		ae.Arg == "" || len(names) > 0 && !slices.Contains(names, ae.Arg) {
		tb.Fatalf("%s: error %q (%T) is not an ArgError of a %s op naming one of %q", what, err, err, pkg, names)
		return
	}
	a.CheckWrites(tb, what+": after "+err.Error())
}

// CheckWrites fails tb (with what) if a byte of a root changed since the
// snapshot that belongs to no element of outs (nil ones allowed; views of
// an output, such as the rows it may write, narrow what may change).
func (a *Arena) CheckWrites(tb testing.TB, what string, outs ...*tensor.Tensor) {
	tb.Helper()
	writable := make([][]bool, len(a.roots))
	for _, o := range outs {
		if o == nil || o.Numel() == 0 {
			continue
		}
		r, base := a.where(o)
		if r < 0 {
			continue
		}
		if writable[r] == nil {
			writable[r] = make([]bool, len(a.roots[r].before))
		}
		size := o.DType().Size()
		for _, off := range ElemOffsets(o) {
			for k := base + off*size; k < base+(off+1)*size && k < len(writable[r]); k++ {
				writable[r][k] = true
			}
		}
	}
	for i, r := range a.roots {
		for k, b := range r.t.Bytes() {
			if b != r.before[k] && (writable[i] == nil || !writable[i][k]) {
				tb.Fatalf("%s: byte %d of %s changed (%#02x to %#02x), and is no output element", what, k, r.name, r.before[k], b)
				return
			}
		}
	}
}

// ElemOffsets is the storage offset (elements) of each element of t, in
// row-major order.
func ElemOffsets(t *tensor.Tensor) []int {
	n := t.Numel()
	if n == 0 {
		return nil
	}
	shape, strides := t.Shape(), t.Strides()
	idx := make([]int, len(shape))
	offs := make([]int, 0, n)
	for range n {
		off := 0
		for d, i := range idx {
			off += i * strides[d]
		}
		offs = append(offs, off)
		for d := len(idx) - 1; d >= 0; d-- {
			if idx[d]++; idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return offs
}

// ElemBytes is the bytes of t's elements in row-major order, the storage
// of a dense copy (nil for nil).
func ElemBytes(t *tensor.Tensor) []byte {
	if t == nil {
		return nil
	}
	size := t.DType().Size()
	out := make([]byte, 0, t.Numel()*size)
	for _, off := range ElemOffsets(t) {
		out = append(out, t.Bytes()[off*size:(off+1)*size]...)
	}
	return out
}

// DenseCopy is a contiguous copy of t, bit for bit (nil for nil).
func DenseCopy(t *tensor.Tensor) *tensor.Tensor {
	if t == nil {
		return nil
	}
	c := tensor.New(t.DType(), t.Shape()...)
	copy(c.Bytes(), ElemBytes(t))
	return c
}

// ZerosLike is a contiguous zero tensor of t's dtype and shape (nil for
// nil).
func ZerosLike(t *tensor.Tensor) *tensor.Tensor {
	if t == nil {
		return nil
	}
	return tensor.New(t.DType(), t.Shape()...)
}

// NewSeededArena starts a call decoded from NewSeededIn(data): its first two
// bytes seed the generator, the third is skipped (it once chose how the
// arena was filled; read so that stored inputs keep their meaning), and
// the arena holds 4 KiB.
func NewSeededArena(data []byte) *Arena {
	in := NewSeededIn(data)
	a := NewArena(in, 4<<10, uint64(in.Byte())|uint64(in.Byte())<<8)
	in.Byte()
	return a
}

// Scramble fills t's storage with random bytes (NaN payloads and all).
func (a *Arena) Scramble(t *tensor.Tensor) {
	for i := range t.Bytes() {
		t.Bytes()[i] = byte(a.Rand.Uint32())
	}
}

// MaxElems bounds the elements of a Shape.
const MaxElems = 1 << 13

// OddSizes are the larger sizes Size picks now and then.
var OddSizes = []int{10, 15, 16, 17, 31, 33, 64, 127, 130}

// Size is a dimension of 0–9 (0 for a zero byte), for the top 24 bytes one
// of OddSizes.
func (in *In) Size() int {
	b := in.Byte()
	if b >= 232 {
		return OddSizes[b%len(OddSizes)]
	}
	return b % 10
}

// Shape is a shape of rank Sizes, Capped.
func (in *In) Shape(rank int) []int {
	s := make([]int, rank)
	for i := range s {
		s[i] = in.Size()
	}
	return Capped(s)
}

// Capped bounds the elements of s to MaxElems, cutting its dimensions
// past 9 to their last digit from the outermost in; it returns s.
func Capped(s []int) []int {
	n := 1
	for _, d := range s {
		n *= d
	}
	for i := 0; n > MaxElems && i < len(s); i++ {
		if s[i] > 9 {
			n = n / s[i] * (s[i] % 10)
			s[i] %= 10
		}
	}
	return s
}

// Partner returns the output of an elementwise op on x as the input makes
// it, of 16 choices: nil, x itself (3), a view of x's storage with x's
// layout (2) or with other GapStrides (2), where it fits; for the other
// choices, and where x is nil, it returns ok false, and the caller makes
// the output.
func (a *Arena) Partner(x *tensor.Tensor) (y *tensor.Tensor, ok bool) {
	switch m := a.In.N(16); {
	case m == 0:
		return nil, true
	case m <= 3 && x != nil:
		return x, true
	case m <= 5 && x != nil:
		return View(x, x.DType(), x.Shape(), x.Strides()), true
	case m <= 7 && x != nil:
		return View(x, x.DType(), x.Shape(), a.In.GapStrides(x.Shape())), true
	}
	return nil, false
}
