package topk

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gokittens/kittens/internal/fuzzargs"
	"github.com/gokittens/kittens/tensor"
)

// fuzzSpecials are the bits of a quiet NaN, a negative NaN with a payload,
// a signalling NaN, +inf, -inf and -0 in each float dtype.
var fuzzSpecials = map[tensor.DType][6]uint64{
	tensor.F32:  {0x7fc00000, 0xffc00001, 0x7f800001, 0x7f800000, 0xff800000, 0x80000000},
	tensor.BF16: {0x7fc0, 0xffc1, 0x7f81, 0x7f80, 0xff80, 0x8000},
	tensor.F16:  {0x7e00, 0xfe01, 0x7c01, 0x7c00, 0xfc00, 0x8000},
}

// fuzzValue stores at b one element of dtype dt chosen by c: small integers
// (many ties), ±0, ±inf, NaNs of either sign with payloads, or random bits.
func fuzzValue(b []byte, dt tensor.DType, c int, rng *rand.Rand) {
	var bits uint64
	switch c % 16 {
	case 8, 9, 10, 11, 12, 13:
		bits = fuzzSpecials[dt][c%16-8]
	case 14, 15:
		bits = rng.Uint64()
	default:
		v := tensor.New(dt, 1)
		v.SetFloat64s([]float64{float64(c%16) - 4})
		copy(b, v.Bytes())
		return
	}
	var w [8]byte
	binary.LittleEndian.PutUint64(w[:], bits)
	copy(b, w[:dt.Size()])
}

// rankedBefore is TopK's documented order, written independently of
// rankCompare: NaN above everything, then larger values, and among equal
// values (−0 equal to +0) and among NaNs the lower index.
func rankedBefore(va float64, ia int, vb float64, ib int) bool {
	na, nb := math.IsNaN(va), math.IsNaN(vb)
	switch {
	case na != nb:
		return na
	case !na && va != vb:
		return va > vb
	}
	return ia < ib
}

// FuzzTopK calls TopK on the CPU path with fuzzed shapes, dtypes, ranks, k,
// row strides, nil tensors and outputs that alias or overlap x or each
// other in one buffer, and rows full of ties, ±0, ±inf and NaNs. It checks
// that no call panics; that an error is a non-empty tensor.ArgError, comes
// exactly when an argument is bad, and leaves every byte of every buffer as
// it was; and that a success writes only the elements of values and
// indices, with the documented result: the k first of each row in torch's
// order, indices in range, values bit-exact copies of x.
func FuzzTopK(f *testing.F) {
	// The bytes read, in order: m, n, k, k's variant, x's dtype and its
	// variant, values' and indices' dtype variants (indices' dtype before
	// its variant), then per tensor (x, values, indices) its shape variant,
	// row padding, placement (fuzzargs.Arena.Place: for an arena offset a
	// byte and its scale), then an RNG seed and one byte per element of x.
	f.Add([]byte{0, 4, 2})
	f.Add([]byte{7, 1, 1})                                                               // zero rows: a no-op
	f.Add([]byte{1, 3, 2, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 12, 4, 0, 0, 0, 0, 0})       // values overlapping x in one buffer
	f.Add([]byte{0, 2, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 14})                          // values is x
	f.Add([]byte{9, 6, 8, 0, 2, 0, 0, 1, 0, 0, 1, 11, 0, 2, 10, 0, 3, 11, 7, 0, 0, 0, 8, // padded rows in one buffer
		9, 8, 9, 13, 0, 4, 4, 10, 11, 12, 14, 15, 9, 8, 13, 4, 4, 4, 4, 4, 4}) // ties, ±0, ±inf, NaNs
	f.Add([]byte{8, 252, 40, 0})               // a 1025-long row
	f.Add([]byte{9, 2, 0, 240})                // k = 0
	f.Add([]byte{9, 2, 0, 0, 0, 0, 0, 0, 241}) // indices of dtype f16
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzargs.NewIn(data)
		a := fuzzargs.NewArena(in, 1<<15, uint64(len(data)))
		m, n := in.Dim(33, 130), in.Dim(33, 130, 1025, 4100, 0, 1)
		if n > 1000 {
			m = min(m, 2)
		}
		k := 1 + in.N(max(min(n, MaxK), 1))
		switch in.Rare(16) {
		case 1:
			k = 0
		case 2:
			k = -1 - in.Byte()
		case 3:
			k = n + 1
		case 4:
			k = MaxK + 1
		case 5:
			k = math.MaxInt
		case 6:
			k = math.MinInt
		case 7:
			k = min(n, MaxK)
		}
		floats := []tensor.DType{tensor.F32, tensor.BF16, tensor.F16}
		others := []tensor.DType{tensor.I32, tensor.I64, tensor.U8, tensor.F8E4M3, tensor.I8}
		xdt := floats[in.N(3)]
		if o := in.Rare(16); o > 0 {
			xdt = others[o%len(others)]
		}
		vdt := xdt
		if o := in.Rare(16); o > 0 {
			vdt = append(floats, others...)[o%8]
		}
		idt := []tensor.DType{tensor.I32, tensor.I64}[in.N(2)]
		if o := in.Rare(16); o > 0 {
			idt = append(floats, others...)[o%8]
		}
		kk := k // the output width actually allocated
		if k < 0 || k > MaxK+1 {
			kk = 1
		}
		shape := func(rows, cols int) []int {
			switch in.Rare(16) {
			case 1:
				return []int{rows * cols}
			case 2:
				return []int{}
			case 3:
				return []int{1, rows, cols}
			case 4:
				return []int{rows, cols, 1}
			case 5:
				return []int{rows + 1, cols}
			case 6:
				return []int{rows, cols + 1}
			case 7:
				return []int{max(rows-1, 0), cols}
			case 8:
				return []int{rows, max(cols-1, 0)}
			}
			return []int{rows, cols}
		}
		// A tensor with rows padded by 0, 1 or 3 elements, placed by the input.
		place := func(name string, dt tensor.DType, shape []int, alias *tensor.Tensor) *tensor.Tensor {
			strides := fuzzargs.PaddedStrides(shape, fuzzargs.Pick(in, 0, 0, 1, 3))
			return a.Place(name, dt, shape, strides, alias, 16)
		}
		x := place("x", xdt, shape(m, n), nil)
		values := place("values", vdt, shape(m, kk), x)
		indices := place("indices", idt, shape(m, kk), x)
		rng := rand.New(rand.NewPCG(uint64(len(data)), uint64(in.Byte())))
		if x != nil {
			size := xdt.Size()
			xb := x.Bytes()
			for off := 0; off+size <= len(xb); off += size {
				fuzzValue(xb[off:], xdt, in.Byte(), rng)
			}
		}
		for _, o := range []*tensor.Tensor{values, indices} {
			if o != nil && !tensor.Same(o, x) {
				o.Poison()
			}
		}

		if x != nil && x.Rank() == 2 {
			m, n = x.Dim(0), x.Dim(1)
		}
		valid := x != nil && values != nil && indices != nil &&
			x.Rank() == 2 && slices.Contains(floats, xdt) && n <= maxN && k >= 1 && k <= min(n, MaxK) &&
			slices.Equal(values.Shape(), []int{x.Dim(0), k}) && vdt == xdt &&
			slices.Equal(indices.Shape(), []int{x.Dim(0), k}) && (idt == tensor.I32 || idt == tensor.I64) &&
			!tensor.Overlap(values, x) && !tensor.Overlap(indices, x) && !tensor.Overlap(indices, values)

		a.Snapshot()
		err := TopK(nil, values, indices, x, k)
		what := fmt.Sprintf("x %s, values %s, indices %s, k %d", a.Desc(x), a.Desc(values), a.Desc(indices), k)
		fatalf := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("%s: %s", what, fmt.Sprintf(format, args...))
		}
		if err != nil {
			if valid {
				fatalf("valid call refused: %v", err)
			}
			a.CheckError(t, what, err, "topk", "x", "values", "indices", "k")
			return
		}
		if !valid {
			fatalf("invalid call accepted")
		}
		a.CheckWrites(t, what+", success", values, indices)

		xv, idx := x.Float64s(), indices.Int64s()
		size := xdt.Size()
		for r := range m {
			row := xv[r*n : (r+1)*n]
			sel := make([]bool, n)
			for i := range k {
				j := idx[r*k+i]
				if j < 0 || j >= int64(n) || sel[j] {
					fatalf("row %d: indices %v out of range or repeated", r, idx[r*k:(r+1)*k])
				}
				sel[j] = true
				got := values.Bytes()[(r*values.Stride(0)+i)*size:][:size]
				want := x.Bytes()[(r*x.Stride(0)+int(j))*size:][:size]
				if !bytes.Equal(got, want) {
					fatalf("row %d: value %d is %x, not x[%d] = %x", r, i, got, j, want)
				}
				if i > 0 && !rankedBefore(row[idx[r*k+i-1]], int(idx[r*k+i-1]), row[j], int(j)) {
					fatalf("row %d: indices %v out of order (x[%d] = %v, x[%d] = %v)", r, idx[r*k:(r+1)*k],
						idx[r*k+i-1], row[idx[r*k+i-1]], j, row[j])
				}
			}
			last := int(idx[r*k+k-1])
			for j := range n {
				if !sel[j] && rankedBefore(row[j], j, row[last], last) {
					fatalf("row %d: x[%d] = %v is left out but ranks before x[%d] = %v (indices %v)",
						r, j, row[j], last, row[last], idx[r*k:(r+1)*k])
				}
			}
		}
	})
}
