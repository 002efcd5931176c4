package tensor

import (
	"bytes"
	"math"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
)

// heapAllocated returns the bytes the program has allocated so far.
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// FuzzReadNPY feeds arbitrary bytes to ReadNPY. It must return an error or a
// tensor, never panic, and allocate no more than the input holds plus the
// fixed allowances for a header and a direct read (npyMaxHeader,
// npyDirectRead): a shape larger than the data is an error, not a huge
// allocation. Reading with the input's length known, as LoadNPY does, gives
// the same result. A tensor it returns is contiguous, holds the last bytes
// it read, and comes back from WriteNPY and ReadNPY with the same dtype,
// shape and bytes.
func FuzzReadNPY(f *testing.F) {
	rng := SeededRNG(3)
	for _, l := range []struct {
		dt             DType
		shape, strides []int
	}{
		{F32, []int{}, []int{}},
		{F16, []int{5}, []int{1}},
		{BF16, []int{2, 3}, []int{4, 1}},
		{F8E4M3, []int{3, 1, 2}, []int{2, 2, 1}},
		{I8, []int{0, 4}, []int{4, 1}},
		{U8, []int{4, 0}, []int{1, 1}},
		{I32, []int{2, 2}, []int{2, 1}},
		{I64, []int{1, 1, 2}, []int{2, 2, 1}},
	} {
		x, err := NewStrided(l.dt, l.shape, l.strides)
		if err != nil {
			f.Fatal(err)
		}
		x.FillNormal(rng, 0, 10)
		var buf bytes.Buffer
		if err := WriteNPY(&buf, x); err != nil {
			f.Fatal(err)
		}
		b := buf.Bytes()
		f.Add(b)
		f.Add(b[:len(b)-1]) // data cut short
		f.Add(b[:20])       // header cut short
	}
	data := make([]byte, 16)
	for _, h := range []string{
		"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }\n",
		"{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }\n",
		"{'descr': '<u1', 'fortran_order': False, 'shape': (16), }\n",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }\n",
		"{'descr': '<i8', 'fortran_order': False, 'shape': (0, 4611686018427387904, 4), }\n",
	} {
		f.Add(npyFile(1, h, data))
	}
	f.Add(npyFile(2, "{'shape': (4,), 'fortran_order': False, 'descr': '<i4'}", data))
	f.Add(npyFile(3, `{"descr": "|i1", "fortran_order": False, "shape": (2,8)}`, data))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		before := heapAllocated()
		x, err := ReadNPY(r)
		if got, limit := heapAllocated()-before, uint64(npyMaxHeader+npyDirectRead+4*len(in)+1<<16); got > limit {
			t.Fatalf("ReadNPY of %d bytes allocated %d bytes, more than %d", len(in), got, limit)
		}
		y, errKnown := readNPY(bytes.NewReader(in), int64(len(in)))
		if (err == nil) != (errKnown == nil) {
			t.Fatalf("ReadNPY: %v; with the length known: %v", err, errKnown)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "tensor: ReadNPY: ") {
				t.Fatalf("error %q does not name ReadNPY", err)
			}
			return
		}
		end := len(in) - r.Len()
		if !x.Contiguous() || !bytes.HasSuffix(in[:end], x.Bytes()) || len(x.Bytes()) != x.Numel()*x.DType().Size() {
			t.Fatalf("read %v%v strides %v, %d bytes, not the last of the %d it read", x.DType(), x.Shape(), x.Strides(), len(x.Bytes()), end)
		}
		if y.DType() != x.DType() || !slices.Equal(y.Shape(), x.Shape()) || !bytes.Equal(y.Bytes(), x.Bytes()) {
			t.Fatalf("with the length known: %v%v, without: %v%v", y.DType(), y.Shape(), x.DType(), x.Shape())
		}
		var buf bytes.Buffer
		if err := WriteNPY(&buf, x); err != nil {
			t.Fatalf("WriteNPY of %v%v: %v", x.DType(), x.Shape(), err)
		}
		z, err := ReadNPY(&buf)
		if err != nil {
			t.Fatalf("reading back %v%v: %v", x.DType(), x.Shape(), err)
		}
		if z.DType() != x.DType() || !slices.Equal(z.Shape(), x.Shape()) || !bytes.Equal(z.Bytes(), x.Bytes()) || buf.Len() != 0 {
			t.Fatalf("round trip of %v%v gave %v%v (%d bytes left)", x.DType(), x.Shape(), z.DType(), z.Shape(), buf.Len())
		}
	})
}

// fuzzArgs hands out the values a fuzz input encodes, a byte each; past the
// end of the input every byte is 0.
type fuzzArgs []byte

func (a *fuzzArgs) byte() byte {
	if len(*a) == 0 {
		return 0
	}
	b := (*a)[0]
	*a = (*a)[1:]
	return b
}

// fuzzExtremes are the values of the top 16 bytes in fuzzArgs.int.
var fuzzExtremes = [16]int{
	-1 << 62, -1 << 31, -1 << 40, math.MinInt,
	7, 64, 255, 1 << 16,
	1<<31 - 1, 1 << 31, 1 << 40, 1 << 59,
	1 << 62, math.MaxInt / 2, math.MaxInt - 1, math.MaxInt,
}

// int reads -3 to 12, an index or size of a small tensor or just past one,
// or for bytes 0xF0 and up one of fuzzExtremes.
func (a *fuzzArgs) int() int {
	b := a.byte()
	if b >= 0xF0 {
		return fuzzExtremes[b-0xF0]
	}
	return int(b%16) - 3
}

// dtype reads any DType value, Invalid and unknown ones included.
func (a *fuzzArgs) dtype() DType { return DType(a.byte() % byte(len(dtypeInfo)+1)) }

// layout reads a rank and as many dims, then strides: the contiguous
// strides of the shape, or raw values.
func (a *fuzzArgs) layout() (shape, strides []int) {
	shape = make([]int, a.byte()%5)
	for i := range shape {
		shape[i] = a.int()
	}
	if a.byte()%2 == 0 {
		return shape, ContiguousStrides(shape)
	}
	strides = make([]int, len(shape))
	for i := range strides {
		strides[i] = a.int()
	}
	return shape, strides
}

// fuzzFill gives every byte of x's storage, gaps included, a value that
// depends on where it is and on seed, never 0xFF.
func fuzzFill(x *Tensor, seed byte) {
	for i := range x.Bytes() {
		x.Bytes()[i] = byte(i*7+int(seed)) % 0xFF
	}
}

// inside checks that v, a view of x, reads all its elements from inside x's
// storage, and returns the offset of v's element 0 in x's bytes (0 when v
// has no elements).
func inside(t *testing.T, x, v *Tensor) int {
	t.Helper()
	v.Float64s()    // reads every element
	elementBytes(v) // indexes every element's bytes in v's span
	if v.SpanBytes() == 0 {
		return 0
	}
	d, ok := Distance(x, v)
	if !ok || d < 0 || d+int64(v.SpanBytes()) > int64(x.SpanBytes()) {
		t.Fatalf("view %v%v strides %v: %d bytes at offset %d (%v) of a storage of %d",
			v.DType(), v.Shape(), v.Strides(), v.SpanBytes(), d, ok, x.SpanBytes())
	}
	return int(d)
}

// FuzzViews builds a small host tensor x (any dtype, rank 0 to 4, dims 0 to
// 6, rows padded) and applies a fuzzed sequence of View, Slice, Poison and
// CopyFrom to it or the views it made, and NewStrided, with arguments that
// include negative and huge values. Each call returns an error and leaves
// x's storage as it was, or succeeds: a view's elements lie inside x's
// storage and read back; Poison fills with 0xFF what its doc says (a view's
// elements, an owner's whole span) and nothing else; CopyFrom gives the
// destination the source's bytes from before the call, even where the two
// share storage; NewStrided allocates exactly the span.
func FuzzViews(f *testing.F) {
	// Each input is the tensor (rank, dtype index, dims, row pads) then ops
	// (op, args); an int argument v is the byte v+3.
	f.Add([]byte("\x02\x00\x03\x04\x02" + "\x01\x04\x04\x06" + "\x02"))                         // f32 [3 4] rows padded by 2; Slice(1, 1, 3); Poison
	f.Add([]byte("\x03\x02\x02\x03\x02\x01\x00" + "\x00\x07\x01\x09\x00" + "\x01\x03\x04\x07")) // bf16 [2 3 2]; View(u8, [6]); Slice(0, 1, 4)
	f.Add([]byte("\x02\x05\x04\x03\x01" + "\x03\x03\x04\x06\x05" + "\x04\x05"))                 // i8 [4 3]; rows 1-2 from rows 2-3; from a fresh i8
	f.Add([]byte("\x00\x06" + "\x05\x07\x02\x05\x04\x01\xfc\x04"))                              // NewStrided(u8, [2 1], [1<<62 1])
	f.Fuzz(func(t *testing.T, prog []byte) {
		in := fuzzArgs(prog)
		shape := make([]int, in.byte()%5)
		strides := make([]int, len(shape))
		dt := allDTypes[int(in.byte())%len(allDTypes)]
		for i := range shape {
			shape[i] = int(in.byte() % 7)
		}
		for i := len(shape) - 1; i >= 0; i-- {
			strides[i] = 1
			if i < len(shape)-1 { // dim i's rows padded by 0 to 2 elements
				strides[i] = strides[i+1]*max(shape[i+1], 1) + int(in.byte()%3)
			}
		}
		x, err := NewStrided(dt, shape, strides)
		if err != nil {
			t.Fatalf("NewStrided(%v, %v, %v): %v", dt, shape, strides, err)
		}
		fuzzFill(x, 1)
		cur := x // the tensor the next op works on: x or a view of it
		for op := 0; op < 16 && len(in) > 0; op++ {
			before := slices.Clone(x.Bytes())
			want := before // what x holds after a call that succeeds
			var err error
			switch in.byte() % 6 {
			case 0:
				dt := in.dtype()
				shape, strides := in.layout()
				var v *Tensor
				if v, err = cur.View(dt, shape, strides); err == nil {
					inside(t, x, v)
					cur = v
				}
			case 1:
				var v *Tensor
				if v, err = cur.Slice(in.int(), in.int(), in.int()); err == nil {
					inside(t, x, v)
					cur = v
				}
			case 2:
				at := inside(t, x, cur)
				want = slices.Clone(before)
				for i, w := range elementBytes(cur) {
					if w || cur == x {
						want[at+i] = 0xFF
					}
				}
				err = cur.Poison()
			case 3: // copy between two slices of the same size along one dim
				dim, start, end, from := in.int(), in.int(), in.int(), in.int()
				dst, derr := cur.Slice(dim, start, end)
				src, serr := cur.Slice(dim, from, from+end-start)
				if derr != nil || serr != nil {
					break
				}
				at, srcBytes := inside(t, x, dst), slices.Clone(src.Bytes())
				want = slices.Clone(before)
				for i, w := range elementBytes(dst) {
					if w {
						want[at+i] = srcBytes[i]
					}
				}
				if err = dst.CopyFrom(src); err != nil {
					t.Fatalf("CopyFrom between slices of one layout: %v", err)
				}
			case 4: // copy from a tensor of cur's layout and maybe another dtype
				dt := allDTypes[int(in.byte())%len(allDTypes)]
				src, serr := NewStrided(dt, cur.Shape(), cur.Strides())
				if serr != nil {
					t.Fatalf("NewStrided(%v, %v, %v): %v", dt, cur.Shape(), cur.Strides(), serr)
				}
				fuzzFill(src, 2)
				if err = cur.CopyFrom(src); (err == nil) != (dt == cur.DType()) {
					t.Fatalf("CopyFrom %v into %v: %v", dt, cur.DType(), err)
				}
				if err == nil {
					at := inside(t, x, cur)
					want = slices.Clone(before)
					for i, w := range elementBytes(cur) {
						if w || cur == x {
							want[at+i] = src.Bytes()[i]
						}
					}
				}
			case 5:
				dt := in.dtype()
				shape, strides := in.layout()
				if n, err := checkLayout(dt, shape, strides); err == nil && n > 1<<20 {
					break // valid, but too large to allocate for every input
				}
				var y *Tensor
				if y, err = NewStrided(dt, shape, strides); err == nil {
					if len(y.Bytes()) != y.SpanBytes() || len(y.Float64s()) != y.Numel() {
						t.Fatalf("NewStrided(%v, %v, %v): %d bytes for a span of %d", dt, shape, strides, len(y.Bytes()), y.SpanBytes())
					}
					elementBytes(y)
				}
			}
			if err != nil {
				want = before
			}
			if !bytes.Equal(x.Bytes(), want) {
				t.Fatalf("op %d on %v%v strides %v (err %v): storage\n%x\nwant\n%x", op, cur.DType(), cur.Shape(), cur.Strides(), err, x.Bytes(), want)
			}
		}
	})
}
