package topk

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strings"
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/tensor"
)

// poisoned reports whether every byte of t is still 0xFF.
func poisoned(t *tensor.Tensor) bool {
	for _, b := range t.Bytes() {
		if b != 0xFF {
			return false
		}
	}
	return true
}

func TestValidation(t *testing.T) {
	type args struct {
		values, indices, x *tensor.Tensor
		k                  int
	}
	good := func() args {
		return args{tensor.New(tensor.F32, 4, 3), tensor.New(tensor.I64, 4, 3), tensor.Rand(tensor.SeededRNG(1), tensor.F32, 1, 4, 16), 3}
	}
	cases := []struct {
		name, arg string
		edit      func(a *args)
	}{
		{"k zero", "k", func(a *args) { a.k = 0 }},
		{"k negative", "k", func(a *args) { a.k = -2 }},
		{"k above N", "k", func(a *args) {
			a.k = 17
			a.values, a.indices = tensor.New(tensor.F32, 4, 17), tensor.New(tensor.I64, 4, 17)
		}},
		{"k above MaxK", "k", func(a *args) {
			a.k, a.x = MaxK+1, tensor.New(tensor.F32, 1, MaxK+8)
			a.values, a.indices = tensor.New(tensor.F32, 1, MaxK+1), tensor.New(tensor.I64, 1, MaxK+1)
		}},
		{"x nil", "x", func(a *args) { a.x = nil }},
		{"x rank 3", "x", func(a *args) { a.x = tensor.New(tensor.F32, 2, 2, 16) }},
		{"x dtype i32", "x", func(a *args) { a.x = tensor.New(tensor.I32, 4, 16) }},
		{"x rows too long", "x", func(a *args) { // zero rows: no storage
			a.x, a.values, a.indices = tensor.New(tensor.BF16, 0, maxN+1), tensor.New(tensor.BF16, 0, 3), tensor.New(tensor.I64, 0, 3)
		}},
		{"values nil", "values", func(a *args) { a.values = nil }},
		{"values rank 1", "values", func(a *args) { a.values = tensor.New(tensor.F32, 12) }},
		{"values short rows", "values", func(a *args) { a.values = tensor.New(tensor.F32, 4, 2) }},
		{"values too few rows", "values", func(a *args) { a.values = tensor.New(tensor.F32, 3, 3) }},
		{"values dtype", "values", func(a *args) { a.values = tensor.New(tensor.BF16, 4, 3) }},
		{"indices rank 3", "indices", func(a *args) { a.indices = tensor.New(tensor.I64, 1, 4, 3) }},
		{"indices shape", "indices", func(a *args) { a.indices = tensor.New(tensor.I32, 4, 4) }},
		{"indices dtype f32", "indices", func(a *args) { a.indices = tensor.New(tensor.F32, 4, 3) }},
		{"indices dtype u8", "indices", func(a *args) { a.indices = tensor.New(tensor.U8, 4, 3) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := good()
			c.edit(&a)
			for _, o := range []*tensor.Tensor{a.values, a.indices} {
				if o != nil {
					o.Poison()
				}
			}
			err := TopK(nil, a.values, a.indices, a.x, a.k)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), "argument "+c.arg+":") {
				t.Errorf("error %q does not name argument %s", err, c.arg)
			}
			for _, o := range []*tensor.Tensor{a.values, a.indices} {
				if o != nil && !poisoned(o) {
					t.Errorf("an output was written: %v", err)
				}
			}
		})
	}
}

func TestOverlap(t *testing.T) {
	x := tensor.Rand(tensor.SeededRNG(2), tensor.F32, 1, 4, 16)
	before := append([]byte(nil), x.Bytes()...)
	values, err := x.View(tensor.F32, []int{4, 3}, []int{16, 1})
	if err != nil {
		t.Fatal(err)
	}
	err = TopK(nil, values, tensor.New(tensor.I32, 4, 3), x, 3)
	if err == nil || !strings.Contains(err.Error(), "argument values:") {
		t.Fatalf("got %v, want an overlap error on values", err)
	}
	if string(before) != string(x.Bytes()) {
		t.Error("x was written")
	}
}

func TestZeroRows(t *testing.T) {
	err := TopK(nil, tensor.New(tensor.BF16, 0, 4), tensor.New(tensor.I32, 0, 4), tensor.New(tensor.BF16, 0, 9), 4)
	if err != nil {
		t.Fatal(err)
	}
	// The longest row is accepted (TestValidation refuses one element more).
	err = TopK(nil, tensor.New(tensor.BF16, 0, 4), tensor.New(tensor.I32, 0, 4), tensor.New(tensor.BF16, 0, maxN), 4)
	if err != nil {
		t.Fatal(err)
	}
}

// TestReference checks the CPU reference on hand-made rows.
func TestReference(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	negZero := math.Copysign(0, -1)
	cases := []struct {
		name string
		row  []float64
		neg  []int // elements stored as a negative NaN with a payload
		k    int
		want []int
	}{
		{"distinct", []float64{0.5, -1, 3, 2}, nil, 2, []int{2, 3}},
		{"ties lower index first", []float64{1, 5, 2, 5, 5, 2}, nil, 4, []int{1, 3, 4, 2}},
		{"NaN above inf, NaNs by index", []float64{1, 3, nan, 3, -inf, inf, negZero, 0, nan, 2}, []int{8}, 10,
			[]int{2, 8, 5, 1, 3, 9, 0, 6, 7, 4}},
		{"zeros tie", []float64{0, negZero, -1, negZero, 0}, nil, 4, []int{0, 1, 3, 4}},
		{"all equal", []float64{7, 7, 7, 7, 7}, nil, 3, []int{0, 1, 2}},
		{"all -inf", []float64{-inf, -inf, -inf}, nil, 3, []int{0, 1, 2}},
		{"k = 1", []float64{-3, -2, -2.5}, nil, 1, []int{1}},
	}
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
		for _, c := range cases {
			t.Run(dt.String()+"/"+c.name, func(t *testing.T) {
				n := len(c.row)
				x := tensor.New(dt, 1, n)
				x.SetFloat64s(c.row)
				size := dt.Size()
				for _, j := range c.neg {
					putBits(x.Bytes()[j*size:], dt)
				}
				values, indices := tensor.New(dt, 1, c.k), tensor.New(tensor.I64, 1, c.k)
				if err := TopK(nil, values, indices, x, c.k); err != nil {
					t.Fatal(err)
				}
				got := indices.Int64s()
				for i, w := range c.want {
					if got[i] != int64(w) {
						t.Fatalf("indices %v, want %v", got, c.want)
					}
					if gb, wb := values.Bytes()[i*size:][:size], x.Bytes()[w*size:][:size]; string(gb) != string(wb) {
						t.Errorf("value %d: bits %x, want %x", i, gb, wb)
					}
				}
			})
		}
	}
}

// putBits stores a negative NaN with a payload in dtype dt at b.
func putBits(b []byte, dt tensor.DType) {
	if dt == tensor.F32 {
		binary.LittleEndian.PutUint32(b, 0xffc00001)
		return
	}
	binary.LittleEndian.PutUint16(b, map[tensor.DType]uint16{tensor.BF16: 0xffc1, tensor.F16: 0xfe01}[dt])
}

// TestReferenceIndices32 checks the i32 indices path of the reference on a
// strided input.
func TestReferenceIndices32(t *testing.T) {
	x, err := tensor.NewStrided(tensor.F16, []int{2, 5}, []int{8, 1})
	if err != nil {
		t.Fatal(err)
	}
	x.SetFloat64s([]float64{1, 2, 3, 4, 5, 5, 4, 3, 2, 1})
	values, indices := tensor.New(tensor.F16, 2, 2), tensor.New(tensor.I32, 2, 2)
	if err := TopK(nil, values, indices, x, 2); err != nil {
		t.Fatal(err)
	}
	if got, want := indices.Int64s(), []int64{4, 3, 0, 1}; !slices.Equal(got, want) {
		t.Errorf("indices %v, want %v", got, want)
	}
	if got, want := values.Float64s(), []float64{5, 4, 5, 4}; !slices.Equal(got, want) {
		t.Errorf("values %v, want %v", got, want)
	}
}

var (
	propsH200  = cuda.Props{Name: "H200", Major: 9, SMs: 132, MaxThreadsPerBlock: 1024, SharedPerBlock: 48 << 10, SharedPerBlockOptin: 227 << 10, SharedPerSM: 228 << 10}
	propsSmall = cuda.Props{Name: "small", Major: 8, SMs: 16, MaxThreadsPerBlock: 1024, SharedPerBlock: 48 << 10, SharedPerBlockOptin: 48 << 10, SharedPerSM: 48 << 10}
)

func TestPickConfig(t *testing.T) {
	cases := []struct {
		props               cuda.Props
		m, n, k             int
		dt                  tensor.DType
		aligned             bool
		algo                algo
		vec, chunks, clustr int
	}{
		{propsH200, 4096, 128, 8, tensor.F32, true, algoWarp, 4, 1, 0},
		{propsH200, 4096, 1024, 32, tensor.F32, true, algoWarp, 4, 8, 0},
		{propsH200, 4096, 1024, 32, tensor.BF16, true, algoWarp, 8, 4, 0},
		{propsH200, 33, 1000, 32, tensor.F16, false, algoWarp, 1, 32, 0},
		{propsH200, 8, 8, 8, tensor.F32, true, algoWarp, 4, 1, 0},
		{propsH200, 8, 1000, 33, tensor.F32, true, algoRadix, 4, 0, 1},
		{propsH200, 1, 128000, 50, tensor.F32, true, algoRadix, 4, 0, 8},
		{propsH200, 64, 151936, 20, tensor.F32, true, algoRadix, 4, 0, 2},
		{propsH200, 64, 201088, 50, tensor.BF16, false, algoRadix, 1, 0, 2},
		{propsH200, 1024, 201088, 50, tensor.F32, true, algoRadix, 4, 0, 1},
		{propsSmall, 1, 201088, 20, tensor.F32, true, algoRadix, 4, 0, 8},
		{propsSmall, 4, 201088, 20, tensor.F32, true, algoRadix, 4, 0, 4},
		{propsSmall, 1, 5000, 1024, tensor.F32, true, algoRadix, 4, 0, 1},
	}
	for _, c := range cases {
		got := pickConfig(c.props, c.m, c.n, c.k, c.dt, c.aligned)
		if got.Algo != c.algo || got.Vec != c.vec || got.Chunks != c.chunks || got.Cluster != c.clustr {
			t.Errorf("%s %dx%d k=%d %v aligned=%v: got %+v, want %v vec %d chunks %d cluster %d",
				c.props.Name, c.m, c.n, c.k, c.dt, c.aligned, got, c.algo, c.vec, c.chunks, c.clustr)
		}
	}
}

// TestPickConfigInvariants sweeps shapes on both simulated devices and checks
// what the kernels rely on.
func TestPickConfigInvariants(t *testing.T) {
	for _, p := range []cuda.Props{propsH200, propsSmall} {
		for _, m := range []int{1, 3, 64, 4096} {
			for _, n := range []int{1, 7, 32, 129, 1000, 1024, 1025, 4097, 100003, 151936, 262144} {
				for _, k := range []int{1, 8, 32, 33, 50, 1000, 1024, 4096} {
					if k > n {
						continue
					}
					for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
						for _, al := range []bool{false, true} {
							checkInvariants(t, p, m, n, k, dt, al)
						}
					}
				}
			}
		}
	}
	// The longest row: the kernel's 32-bit index arithmetic must not wrap.
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
		for _, al := range []bool{false, true} {
			checkInvariants(t, propsH200, 1, maxN, 50, dt, al)
		}
	}
}

func checkInvariants(t *testing.T, p cuda.Props, m, n, k int, dt tensor.DType, al bool) {
	t.Helper()
	c := pickConfig(p, m, n, k, dt, al)
	where := func() string { return p.Name + " " + dt.String() }
	wantVec := 1
	if al {
		wantVec = 16 / dt.Size()
	}
	if c.Vec != wantVec {
		t.Fatalf("%s m=%d n=%d k=%d: vec %d, want %d", where(), m, n, k, c.Vec, wantVec)
	}
	if c.Algo == algoWarp {
		if n > warpMaxN || k > warpMaxK || c.Chunks*32*c.Vec < n || c.Chunks&(c.Chunks-1) != 0 {
			t.Fatalf("%s m=%d n=%d k=%d: bad warp config %+v", where(), m, n, k, c)
		}
		return
	}
	ok := c.Cluster >= 1 && c.Cluster <= maxCluster && c.Cluster*c.Slice >= n && c.Slice%c.Vec == 0 &&
		c.SortLen >= k && c.SortLen&(c.SortLen-1) == 0 && c.IdxBits%8 == 0 && c.IdxBits >= bits.Len(uint(n-1)) &&
		c.Cap >= 0 && c.Threads >= radixBins && c.GridY >= 1 && c.GridY <= 65535 &&
		c.Shared+staticShared <= p.SharedPerBlockOptin && c.Shared+staticShared+reservedShared <= p.SharedPerSM &&
		c.Subs >= 1 && c.Subs&(c.Subs-1) == 0 && c.Subs <= c.Threads/32 &&
		c.Shared == c.SortLen*8+c.Cap*8+(2+c.Subs)*radixBins*4 &&
		// radix.cu's int slice end lo+slice and next load group start
		c.Cluster*c.Slice <= math.MaxInt32 && n-1+c.Threads*c.Vec*radixUnroll <= math.MaxInt32
	if !ok {
		t.Fatalf("%s m=%d n=%d k=%d: bad radix config %+v", where(), m, n, k, c)
	}
}

// TestDeviceMix needs a GPU: a device input with host outputs is refused and
// nothing is written.
func TestDeviceMix(t *testing.T) {
	dev := gputest.Device(t)
	x, err := tensor.Rand(tensor.SeededRNG(3), tensor.F32, 1, 4, 16).ToDevice(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Free()
	values, indices := tensor.New(tensor.F32, 4, 3), tensor.New(tensor.I32, 4, 3)
	values.Poison()
	indices.Poison()
	err = TopK(nil, values, indices, x, 3)
	if err == nil || !strings.Contains(err.Error(), "argument values:") {
		t.Fatalf("got %v, want a location error on values", err)
	}
	if !poisoned(values) || !poisoned(indices) {
		t.Error("an output was written")
	}
}

// TestNeedClusters: the radix kernel's clusters need compute capability
// 9.0; elsewhere TopK and Prepare give an error that says so.
func TestNeedClusters(t *testing.T) {
	if err := needClusters(propsH200); err != nil {
		t.Errorf("H200: %v", err)
	}
	p := cuda.Props{Name: "A100", Major: 8}
	err := needClusters(p)
	if err == nil || !strings.Contains(err.Error(), "compute capability 9.0 or later); A100 is 8.0") {
		t.Errorf("A100: %v", err)
	}
}
