package moe

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/fuzzargs"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

// permuteH200 is an H200's properties, as the pickers read them.
var permuteH200 = cuda.Props{Name: "H200", Major: 9, SMs: 132, MaxThreadsPerBlock: 1024, SharedPerBlock: 48 << 10,
	SharedPerBlockOptin: 227 << 10, SharedPerSM: 228 << 10}

// permuteHost is a host tensor of dt with shape holding v.
func permuteHost(dt tensor.DType, v []float64, shape ...int) *tensor.Tensor {
	t := tensor.New(dt, shape...)
	t.SetFloat64s(v)
	return t
}

// TestPermuteReference checks the copy by hand: rows of x in idx's order,
// zero rows for padding (T·k and −1), bit for bit.
func TestPermuteReference(t *testing.T) {
	x := permuteHost(tensor.BF16, []float64{1, 2, 3, 4, 5, 6}, 2, 3) // T = 2, k = 2: f = 0..3
	bits := x.Bytes()
	bits[0], bits[1] = 0x81, 0xff // x[0, 0]: a negative NaN with a payload, copied as it is
	idx := permuteHost(tensor.I32, []float64{3, 0, 4, 1, -1, 2}, 6)
	y := tensor.New(tensor.BF16, 6, 3)
	y.Poison()
	if err := Permute(nil, y, nil, x, idx, 2, PermuteOptions{}); err != nil {
		t.Fatal(err)
	}
	r0, r1, zero := bits[0:6], bits[6:12], make([]byte, 6)
	want := slices.Concat(r1, r0, zero, r0, zero, r1)
	if !bytes.Equal(y.Bytes(), want) {
		t.Errorf("y bytes % x, want % x", y.Bytes(), want)
	}

	// With a count of 4, rows 4 and 5 keep their bytes.
	y.Poison()
	count := permuteHost(tensor.I32, []float64{4}, 1)
	if err := Permute(nil, y, nil, x, idx, 2, PermuteOptions{Count: count}); err != nil {
		t.Fatal(err)
	}
	want = slices.Concat(r1, r0, zero, r0, bytes.Repeat([]byte{0xff}, 12))
	if !bytes.Equal(y.Bytes(), want) {
		t.Errorf("with count 4: y bytes % x, want % x", y.Bytes(), want)
	}
}

// TestPermuteQuantizeReference checks the fp8 rows by hand: the scale is
// amax/448 in fp32, values x/scale rounded to nearest even; zero rows,
// rows too small for a scale, rows with NaN or an infinity, padding.
func TestPermuteQuantizeReference(t *testing.T) {
	tiny := math.SmallestNonzeroFloat32
	x := permuteHost(tensor.F32, []float64{
		1, -2, 0.001, -0.5, // amax 2
		0, math.Copysign(0, -1), 0, 0, // zeros
		tiny, -tiny, 0, 3 * tiny, // amax/448 rounds to 0
		1, math.NaN(), 2, 3, // NaN
		-1, math.Inf(-1), 2, 3, // −inf
	}, 5, 4)
	idx := permuteHost(tensor.I32, []float64{0, 1, 2, 3, 4, 5, -7}, 7) // k = 1: row 5 and −7 are padding
	y := tensor.New(tensor.F8E4M3, 7, 4)
	scales := tensor.New(tensor.F32, 7)
	if err := Permute(nil, y, scales, x, idx, 1, PermuteOptions{}); err != nil {
		t.Fatal(err)
	}
	s0 := float32(2) / 448
	nan := math.Float32frombits(0x7fc00000)
	wantScales := []float32{s0, 0, 0, nan, nan, 0, 0}
	for p, got := range scales.Float64s() {
		if w := wantScales[p]; math.Float32bits(float32(got)) != math.Float32bits(w) {
			t.Errorf("scale %d: %g, want %g", p, got, w)
		}
	}
	want := []byte{
		tensor.F8E4M3Bits(float64(1 / s0)), 0xfe, tensor.F8E4M3Bits(float64(float32(0.001) / s0)), tensor.F8E4M3Bits(float64(-0.5 / s0)),
		0, 0x80, 0, 0,
		0, 0x80, 0, 0,
		0x7f, 0x7f, 0x7f, 0x7f,
		0x7f, 0x7f, 0x7f, 0x7f,
		0, 0, 0, 0,
		0, 0, 0, 0,
	}
	if !bytes.Equal(y.Bytes(), want) {
		t.Errorf("y bytes % x, want % x", y.Bytes(), want)
	}
	if got := tensor.F8Value(tensor.F8E4M3, y.Bytes()[0]); got != 224 {
		t.Errorf("1/scale = %g, want 224", got)
	}
}

// TestUnpermuteReference checks the combine by hand: weights, dropped
// slots (−1 and past P), no weights, no positions.
func TestUnpermuteReference(t *testing.T) {
	y := permuteHost(tensor.F32, []float64{1, 2, 10, 20, 100, 200, math.NaN(), math.NaN()}, 4, 2)
	pos := permuteHost(tensor.I32, []float64{2, 0, -1, 1, 3 + 1, 2}, 3, 2) // T = 3, k = 2
	w := permuteHost(tensor.F32, []float64{0.5, 2, 9, 0.25, 9, 1}, 3, 2)
	out := tensor.New(tensor.F32, 3, 2)
	if err := Unpermute(nil, out, y, pos, w, 2); err != nil {
		t.Fatal(err)
	}
	want := []float64{0.5*100 + 2*1, 0.5*200 + 2*2, 0.25 * 10, 0.25 * 20, 100, 200}
	if got := out.Float64s(); !slices.Equal(got, want) {
		t.Errorf("out %v, want %v", got, want)
	}
	if err := Unpermute(nil, out, y, pos, nil, 2); err != nil {
		t.Fatal(err)
	}
	want = []float64{101, 202, 10, 20, 100, 200}
	if got := out.Float64s(); !slices.Equal(got, want) {
		t.Errorf("without w: out %v, want %v", got, want)
	}
	flat := permuteHost(tensor.F32, []float64{1, 2, 3, 4}, 4, 1)
	one := tensor.New(tensor.F32, 2, 1)
	if err := Unpermute(nil, one, flat, nil, permuteHost(tensor.F32, []float64{1, 2, 3, 4}, 2, 2), 2); err != nil {
		t.Fatal(err)
	}
	if got := one.Float64s(); !slices.Equal(got, []float64{1 + 2*2, 3*3 + 4*4}) {
		t.Errorf("without pos: out %v, want [5 25]", got)
	}
}

// permuteBad is one bad call: the argument its ArgError must name, and the
// call.
type permuteBad struct {
	name, arg string
	call      func() error
}

// TestPermuteBadArguments: every bad argument is an ArgError naming it,
// and nothing is written.
func TestPermuteBadArguments(t *testing.T) {
	x := tensor.New(tensor.BF16, 4, 8)
	idx := permuteHost(tensor.I32, []float64{0, 1, 2, 3, 4, 5, 6, 7}, 8)
	y := tensor.New(tensor.BF16, 8, 8)
	y8 := tensor.New(tensor.F8E4M3, 8, 8)
	scales := tensor.New(tensor.F32, 8)
	count := tensor.New(tensor.I32, 1)
	buf := tensor.New(tensor.BF16, 16, 8)
	inBuf, err1 := buf.Slice(0, 0, 4)
	outBuf, err2 := buf.Slice(0, 2, 10)
	scalesOverY, err3 := y8.View(tensor.F32, []int{8}, []int{1})
	buf2 := tensor.New(tensor.F32, 6, 8)
	outOverY, err4 := buf2.Slice(0, 0, 2)
	yUnderOut, err5 := buf2.Slice(0, 1, 5)
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		t.Fatal(err)
	}
	none := PermuteOptions{}
	perm := func(y, scales, x, idx *tensor.Tensor, k int, o PermuteOptions) func() error {
		return func() error { return Permute(nil, y, scales, x, idx, k, o) }
	}
	yOut := tensor.New(tensor.F32, 2, 8)
	yRows := tensor.New(tensor.F32, 4, 8)
	pos := permuteHost(tensor.I32, []float64{0, 1, 2, 3}, 2, 2)
	w := tensor.New(tensor.F32, 2, 2)
	unperm := func(out, y, pos, w *tensor.Tensor, k int) func() error {
		return func() error { return Unpermute(nil, out, y, pos, w, k) }
	}
	cases := []permuteBad{
		{"nil x", "x", perm(y, nil, nil, idx, 2, none)},
		{"x of i32", "x", perm(y, nil, tensor.New(tensor.I32, 4, 8), idx, 2, none)},
		{"x of rank 3", "x", perm(y, nil, tensor.New(tensor.BF16, 1, 4, 8), idx, 2, none)},
		{"idx of i64", "idx", perm(y, nil, x, tensor.New(tensor.I64, 8), 2, none)},
		{"idx of rank 2", "idx", perm(y, nil, x, tensor.New(tensor.I32, 2, 4), 2, none)},
		{"k = 0", "k", perm(y, nil, x, idx, 0, none)},
		{"T·k past int32", "k", perm(y, nil, x, idx, math.MaxInt32/2, none)},
		{"y with fewer rows than idx", "y", perm(tensor.New(tensor.BF16, 7, 8), nil, x, idx, 2, none)},
		{"y narrower than x", "y", perm(tensor.New(tensor.BF16, 8, 4), nil, x, idx, 2, none)},
		{"y of another dtype", "y", perm(tensor.New(tensor.F16, 8, 8), nil, x, idx, 2, none)},
		{"fp8 y without scales", "scales", perm(y8, nil, x, idx, 2, none)},
		{"scales too short", "scales", perm(y8, tensor.New(tensor.F32, 7), x, idx, 2, none)},
		{"scales of bf16", "scales", perm(y8, tensor.New(tensor.BF16, 8), x, idx, 2, none)},
		{"scales without fp8", "scales", perm(y, scales, x, idx, 2, none)},
		{"count of i64", "o.Count", perm(y, nil, x, idx, 2, PermuteOptions{Count: tensor.New(tensor.I64, 1)})},
		{"count of two", "o.Count", perm(y, nil, x, idx, 2, PermuteOptions{Count: tensor.New(tensor.I32, 2)})},
		{"y over x", "y", perm(outBuf, nil, inBuf, idx, 2, none)},
		{"scales over y", "scales", perm(y8, scalesOverY, x, idx, 2, none)},

		{"unpermute: nil out", "out", unperm(nil, yRows, pos, w, 2)},
		{"unpermute: out of i32", "out", unperm(tensor.New(tensor.I32, 2, 8), yRows, pos, w, 2)},
		{"unpermute: y of fp8", "y", unperm(yOut, tensor.New(tensor.F8E4M3, 4, 8), pos, w, 2)},
		{"unpermute: y narrower than out", "y", unperm(yOut, tensor.New(tensor.F32, 4, 4), pos, w, 2)},
		{"unpermute: pos of i64", "pos", unperm(yOut, yRows, tensor.New(tensor.I64, 2, 2), w, 2)},
		{"unpermute: pos of the wrong length", "pos", unperm(yOut, yRows, tensor.New(tensor.I32, 5), w, 2)},
		{"unpermute: pos [k, T]", "pos", unperm(yOut, yRows, tensor.New(tensor.I32, 1, 4), w, 2)},
		{"unpermute: w of bf16", "w", unperm(yOut, yRows, pos, tensor.New(tensor.BF16, 2, 2), 2)},
		{"unpermute: w of the wrong shape", "w", unperm(yOut, yRows, pos, tensor.New(tensor.F32, 2, 3), 2)},
		{"unpermute: no pos and y not T·k rows", "y", unperm(yOut, tensor.New(tensor.F32, 5, 8), nil, w, 2)},
		{"unpermute: k = 0", "k", unperm(yOut, yRows, pos, w, 0)},
		{"unpermute: out over y", "out", unperm(outOverY, yUnderOut, pos, w, 2)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			outs := []*tensor.Tensor{y, y8, scales, count, buf, yOut, buf2}
			before := make([][]byte, len(outs))
			for i, o := range outs {
				o.Poison()
				before[i] = slices.Clone(o.Bytes())
			}
			err := c.call()
			var ae *tensor.ArgError
			if !errors.As(err, &ae) || ae.Arg != c.arg {
				t.Fatalf("got %v, want an ArgError on %s", err, c.arg)
			}
			for i, o := range outs {
				if !bytes.Equal(o.Bytes(), before[i]) {
					t.Errorf("tensor %d written: %v", i, err)
				}
			}
		})
	}
}

// TestPermuteLocations: tensors on the host and the device in one call,
// or a stream of another device, are ArgErrors before anything runs (GPU).
func TestPermuteLocations(t *testing.T) {
	dev := gputest.Device(t)
	x, err1 := tensor.Empty(dev, tensor.BF16, 4, 64)
	idx, err2 := permuteHost(tensor.I32, []float64{0, 1, 2, 3, 4, 5, 6, 7}, 8).ToDevice(dev)
	y, err3 := tensor.Empty(dev, tensor.BF16, 8, 64)
	out, err4 := tensor.Empty(dev, tensor.BF16, 4, 64)
	defer x.Free()
	defer idx.Free()
	defer y.Free()
	defer out.Free()
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		t.Fatal(err)
	}
	other := (&cuda.Device{Ordinal: dev.Ordinal + 1}).DefaultStream()
	hostX := tensor.New(tensor.BF16, 4, 64)
	cases := []permuteBad{
		{"x on the host", "x", func() error { return Permute(nil, y, nil, hostX, idx, 2, PermuteOptions{}) }},
		{"count on the host", "o.Count", func() error {
			return Permute(nil, y, nil, x, idx, 2, PermuteOptions{Count: tensor.New(tensor.I32, 1)})
		}},
		{"stream of another device", "s", func() error { return Permute(other, y, nil, x, idx, 2, PermuteOptions{}) }},
		{"unpermute: y on the host", "y", func() error { return Unpermute(nil, out, tensor.New(tensor.BF16, 8, 64), nil, nil, 2) }},
		{"unpermute: stream of another device", "s", func() error { return Unpermute(other, out, y, nil, nil, 2) }},
	}
	for _, c := range cases {
		var ae *tensor.ArgError
		if err := c.call(); !errors.As(err, &ae) || ae.Arg != c.arg {
			t.Errorf("%s: %v, want an ArgError on %s", c.name, err, c.arg)
		}
	}
}

// TestPickPermute checks the launch shapes as rules: small rows take a
// power of two of lanes and several rows a block, long rows a block of up
// to 512 threads and four accesses each, one pass where it covers the row.
func TestPickPermute(t *testing.T) {
	cases := []struct {
		h, vec              int
		lanes, threads, vpt int
		fits                bool
	}{
		{1, 1, 1, 128, 1, true},
		{8, 8, 1, 128, 1, true},
		{96, 8, 4, 128, 3, true},
		{1024, 8, 32, 128, 4, true},
		{2048, 8, 64, 64, 4, true},
		{4096, 8, 128, 128, 4, true},
		{7168, 8, 224, 224, 4, true},
		{7168, 4, 448, 448, 4, true},
		{40000, 4, 512, 512, 4, false},
		{201, 1, 64, 64, 4, true},
		{0, 8, 1, 128, 1, true},
	}
	for _, c := range cases {
		got := pickPermute(permuteH200, c.h, c.vec)
		want := permuteConfig{vec: c.vec, vpt: c.vpt, lanes: c.lanes, threads: c.threads, fits: c.fits}
		if got != want {
			t.Errorf("h %d vec %d: %+v, want %+v", c.h, c.vec, got, want)
		}
		if got.lanes*got.vpt*got.vec < c.h && got.fits {
			t.Errorf("h %d vec %d: fits but covers %d", c.h, c.vec, got.lanes*got.vpt*got.vec)
		}
	}
	small := permuteH200
	small.MaxThreadsPerBlock = 256
	if got := pickPermute(small, 40000, 4); got.lanes != 256 || got.threads != 256 {
		t.Errorf("256-thread device: %+v", got)
	}
}

// TestPermuteVec: 16-byte accesses of the widest dtype where H and every
// row start allow, narrower otherwise.
func TestPermuteVec(t *testing.T) {
	rows := func(dt tensor.DType, n, h, stride int) *tensor.Tensor {
		r, err := tensor.NewStrided(dt, []int{n, h}, []int{stride, 1})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	cases := []struct {
		name string
		h    int
		ts   []*tensor.Tensor
		want int
	}{
		{"bf16", 64, []*tensor.Tensor{rows(tensor.BF16, 4, 64, 64), rows(tensor.BF16, 8, 64, 64)}, 8},
		{"bf16 to fp8", 64, []*tensor.Tensor{rows(tensor.BF16, 4, 64, 64), rows(tensor.F8E4M3, 8, 64, 64)}, 8},
		{"bf16 to f32", 64, []*tensor.Tensor{rows(tensor.BF16, 4, 64, 64), rows(tensor.F32, 8, 64, 64)}, 4},
		{"H of 2 mod 4", 254, []*tensor.Tensor{rows(tensor.F16, 4, 254, 254), rows(tensor.F8E4M3, 8, 254, 254)}, 2},
		{"odd H", 201, []*tensor.Tensor{rows(tensor.F32, 4, 201, 201)}, 1},
		{"stride of 3 mod 4", 256, []*tensor.Tensor{rows(tensor.BF16, 4, 256, 259), rows(tensor.BF16, 8, 256, 256)}, 1},
		{"one row, any stride", 256, []*tensor.Tensor{rows(tensor.BF16, 1, 256, 259)}, 8},
	}
	for _, c := range cases {
		// Host tensors have no device address: Ptr is 0, aligned.
		if got := permuteVec(c.h, c.ts...); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// TestPreparedPermute: Prepare's kernels cover every dtype and hidden
// size, and the fp8 permute only from compute capability 8.9 on.
func TestPreparedPermute(t *testing.T) {
	fp8 := func(ks []jit.Kernel) int {
		n := 0
		for _, k := range ks {
			if slices.Contains(k.Defines, "QUANT=1") {
				n++
			}
		}
		return n
	}
	n := len(permuteFloats) * len(permutePreparedH)
	if ks := preparedPermute(permuteH200); len(ks) != 3*n || fp8(ks) != n {
		t.Errorf("H200: %d kernels, %d fp8; want %d, %d", len(ks), fp8(ks), 3*n, n)
	}
	a100 := permuteH200
	a100.Major, a100.Minor = 8, 0
	if ks := preparedPermute(a100); len(ks) != 2*n || fp8(ks) != 0 {
		t.Errorf("A100: %d kernels, %d fp8; want %d, 0", len(ks), fp8(ks), 2*n)
	}
}

// TestPermuteKernelsCompile compiles, with NVRTC alone, the specializations
// the picker yields for both kernels over every dtype pair, rows from 1 to
// 40000 elements, vectors from 16 bytes down to one element, and those
// Prepare names (see gputest.CompileAll).
func TestPermuteKernelsCompile(t *testing.T) {
	ks := preparedPermute(permuteH200)
	seen := map[string]bool{}
	for _, k := range ks {
		seen[k.String()] = true
	}
	add := func(k jit.Kernel) {
		if !seen[k.String()] {
			seen[k.String()] = true
			ks = append(ks, k)
		}
	}
	for _, in := range permuteFloats {
		for _, h := range []int{1, 96, 1000, 7168, 40000} {
			for _, vec := range []int{1, 2, 16 / in.Size()} {
				if h%vec != 0 {
					continue
				}
				cfg := pickPermute(permuteH200, h, vec)
				add(permuteFuncs.Kernel(permuteKey{in, in, cfg}))
				add(permuteFuncs.Kernel(permuteKey{in, tensor.F8E4M3, cfg}))
				for _, out := range permuteFloats {
					if vec*out.Size() <= 16 {
						add(unpermuteFuncs.Kernel(unpermuteKey{in, out, cfg}))
					}
				}
			}
		}
	}
	gputest.CompileAll(t, ks)
}

// permuteRejects is why the docs reject a Permute call, or "".
func permuteRejects(y, scales, x, idx *tensor.Tensor, k int, o PermuteOptions) string {
	is := func(t *tensor.Tensor, dt tensor.DType, shape ...int) bool {
		return t != nil && t.DType() == dt && slices.Equal(t.Shape(), shape)
	}
	switch {
	case x == nil || x.Rank() != 2 || !slices.Contains(permuteFloats, x.DType()):
		return "x is no float matrix"
	case idx == nil || idx.Rank() != 1 || idx.DType() != tensor.I32 || !idx.Contiguous():
		return "idx is no contiguous i32 vector"
	case y == nil || y.Rank() != 2:
		return "y is no matrix"
	case k < 1 || x.Dim(0) > math.MaxInt32/k:
		return "k is out of range"
	case !slices.Equal(y.Shape(), []int{idx.Dim(0), x.Dim(1)}):
		return "y is not [P, H]"
	case y.DType() != x.DType() && y.DType() != tensor.F8E4M3:
		return "y's dtype is neither x's nor f8e4m3"
	case y.DType() == tensor.F8E4M3 && (!is(scales, tensor.F32, idx.Dim(0)) || !scales.Contiguous()):
		return "f8e4m3 y without contiguous f32 scales [P]"
	case y.DType() != tensor.F8E4M3 && scales != nil:
		return "scales without f8e4m3 y"
	case o.Count != nil && !is(o.Count, tensor.I32, 1):
		return "o.Count is no i32 [1]"
	}
	outs := []*tensor.Tensor{y, scales}
	ins := []*tensor.Tensor{x, idx, o.Count}
	for _, out := range outs {
		for _, in := range ins {
			if tensor.Overlap(out, in) {
				return "an output overlaps an input"
			}
		}
	}
	if tensor.Overlap(scales, y) {
		return "scales overlaps y"
	}
	return ""
}

// permuteFuzzSeeds are the inputs FuzzPermute starts from: a plain bf16
// copy, an fp8 call, a count, y over x in the arena, k = 0.
var permuteFuzzSeeds = [][]byte{
	{},
	{1, 1, 4, 6, 0, 0},
	{0, 1, 2, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0},
	{2, 0, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0, 0},
	{0, 0, 3, 3, 4},
}

// FuzzPermute calls Permute on host tensors made from the input: dtypes,
// ranks and sizes, padded rows, arguments that are nil, alias or overlap in
// one arena, k and counts of any value, idx holding any values. It checks
// that the call never panics; that it fails exactly where the doc says,
// with an ArgError naming an argument and every byte as it was; that a
// success writes only the elements of y's and scales' rows before the
// count; and that each such row is, as documented, x's row idx[p]/k bit
// for bit, zeros for padding, or that row quantized: scale amax/448 in
// fp32, x/scale rounded to e4m3, zeros of x's signs for a scale of 0, NaN
// throughout for a row with a NaN or an infinity.
func FuzzPermute(f *testing.F) {
	for i, s := range permuteFuzzSeeds {
		f.Add(s, uint64(i))
	}
	f.Fuzz(func(t *testing.T, prog []byte, seed uint64) {
		a := fuzzargs.NewArena(fuzzargs.NewIn(prog), 1<<15, seed)
		in := a.In
		dt := fuzzargs.Pick(in, tensor.BF16, tensor.F16, tensor.F32)
		quant := in.One(2)
		tokens, h, p := in.Dim(70), in.Dim(70, 1025), in.Dim(70, 300)
		k := fuzzargs.Pick(in, 1, 2, 3, 8, 0, -1, math.MaxInt32, math.MinInt)
		ydt := dt
		if quant {
			ydt = tensor.F8E4M3
		}
		x := a.Arg("x", dt, tokens, h)
		idx := a.Arg("idx", tensor.I32, p)
		y := a.Arg("y", ydt, p, h)
		var scales *tensor.Tensor
		if quant != in.One(16) {
			scales = a.Arg("scales", tensor.F32, p)
		}
		var o PermuteOptions
		if in.One(4) {
			o.Count = a.Arg("o.Count", tensor.I32, 1)
		}
		a.Fill()
		what := fmt.Sprintf("Permute(y %s, scales %s, x %s, idx %s, k %d, count %s)",
			a.Desc(y), a.Desc(scales), a.Desc(x), a.Desc(idx), k, a.Desc(o.Count))
		why := permuteRejects(y, scales, x, idx, k, o)
		xs, xb, ids := fuzzargs.Values(x), fuzzargs.ElemBytes(x), []int64(nil)
		if why == "" {
			ids = idx.Int64s()
		}
		rows := len(ids)
		if why == "" && o.Count != nil {
			rows = int(min(max(o.Count.Int64s()[0], 0), int64(rows)))
		}
		err := Permute(nil, y, scales, x, idx, k, o)
		if err != nil {
			if why == "" {
				t.Fatalf("%s: error %v, but the docs take the call", what, err)
			}
			a.CheckError(t, what, err, "moe", "y", "scales", "x", "idx", "k", "o.Count")
			return
		}
		if why != "" {
			t.Fatalf("%s: no error, but the docs reject it (%s)", what, why)
		}
		written := []*tensor.Tensor{fuzzargs.Slice(y, 0, 0, rows)}
		if scales != nil {
			written = append(written, fuzzargs.Slice(scales, 0, 0, rows))
		}
		a.CheckWrites(t, what, written...)
		h, quant = x.Dim(1), y.DType() == tensor.F8E4M3 // as built, not as meant
		if rows == 0 || h == 0 {
			return
		}
		yb := fuzzargs.ElemBytes(y)
		var ss []float64
		if scales != nil {
			ss = scales.Float64s()
		}
		size := y.DType().Size()
		for r, f := range ids[:rows] {
			got := yb[r*h*size:][:h*size]
			want := make([]byte, h*size)
			scale := float32(0)
			if live := f >= 0 && f < int64(x.Dim(0)*k); live && !quant {
				copy(want, xb[int(f)/k*h*size:])
			} else if live {
				row := xs[int(f)/k*h:][:h]
				amax, special := 0.0, false
				for _, v := range row {
					amax = math.Max(amax, math.Abs(v))
					special = special || math.IsNaN(v) || math.IsInf(v, 0)
				}
				scale = float32(amax) / 448
				for c, v := range row {
					switch {
					case special:
						want[c] = 0x7f
					case scale == 0:
						want[c] = tensor.F8E4M3Bits(math.Copysign(0, v))
					default:
						want[c] = tensor.F8E4M3Bits(float64(float32(v) / scale))
					}
				}
				if special {
					scale = float32(math.NaN())
				}
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: row %d (f = %d) holds % x, want % x", what, r, f, got, want)
			}
			if quant && !fuzzargs.SameValues([]float64{ss[r]}, []float64{float64(scale)}) {
				t.Fatalf("%s: scale %d (f = %d) is %g, want %g", what, r, f, ss[r], scale)
			}
		}
	})
}

// unpermuteRejects is why the docs reject an Unpermute call, or "".
func unpermuteRejects(out, y, pos, w *tensor.Tensor, k int) string {
	floats := func(t *tensor.Tensor) bool {
		return t != nil && t.Rank() == 2 && slices.Contains(permuteFloats, t.DType())
	}
	switch {
	case !floats(out):
		return "out is no float matrix"
	case !floats(y):
		return "y is no float matrix"
	case pos != nil && (pos.Rank() != 1 && pos.Rank() != 2 || pos.DType() != tensor.I32 || !pos.Contiguous()):
		return "pos is no contiguous i32 tensor of rank 1 or 2"
	case k < 1 || out.Dim(0) > math.MaxInt32/k:
		return "k is out of range"
	case y.Dim(1) != out.Dim(1):
		return "y's rows are not H long"
	}
	tk := out.Dim(0) * k
	switch {
	case pos == nil && y.Dim(0) != tk:
		return "no pos and y is not [T·k, H]"
	case pos != nil && pos.Rank() == 1 && pos.Dim(0) != tk:
		return "pos is not [T·k]"
	case pos != nil && pos.Rank() == 2 && !slices.Equal(pos.Shape(), []int{out.Dim(0), k}):
		return "pos is not [T, k]"
	case w != nil && (w.DType() != tensor.F32 || !slices.Equal(w.Shape(), []int{out.Dim(0), k}) || !w.Contiguous()):
		return "w is no contiguous f32 [T, k]"
	case tensor.Overlap(out, y) || tensor.Overlap(out, pos) || tensor.Overlap(out, w):
		return "out overlaps an input"
	}
	return ""
}

// FuzzUnpermute calls Unpermute on host tensors made from the input, as
// FuzzPermute calls Permute, with pos and w present or nil and holding any
// values. A success must write only out's elements, and each must be the
// documented sum, in slot order, over the slots whose position lies in
// [0, P), of weight times row (weight 1 without w; row f without pos),
// rounded once to out's dtype.
func FuzzUnpermute(f *testing.F) {
	for i, s := range permuteFuzzSeeds {
		f.Add(s, uint64(i))
	}
	f.Fuzz(func(t *testing.T, prog []byte, seed uint64) {
		a := fuzzargs.NewArena(fuzzargs.NewIn(prog), 1<<15, seed)
		in := a.In
		tokens, h, p := in.Dim(70), in.Dim(70, 1025), in.Dim(70, 300)
		k := fuzzargs.Pick(in, 1, 2, 3, 8, 0, -1, math.MaxInt32, math.MinInt)
		out := a.Arg("out", fuzzargs.Pick(in, tensor.BF16, tensor.F16, tensor.F32), tokens, h)
		y := a.Arg("y", fuzzargs.Pick(in, tensor.BF16, tensor.F16, tensor.F32), p, h)
		var pos, w *tensor.Tensor
		switch in.N(3) {
		case 0:
			pos = a.Arg("pos", tensor.I32, tokens*max(k, 0))
		case 1:
			pos = a.Arg("pos", tensor.I32, tokens, max(k, 0))
		}
		if !in.One(3) {
			w = a.Arg("w", tensor.F32, tokens, max(k, 0))
		}
		a.Fill()
		what := fmt.Sprintf("Unpermute(out %s, y %s, pos %s, w %s, k %d)", a.Desc(out), a.Desc(y), a.Desc(pos), a.Desc(w), k)
		why := unpermuteRejects(out, y, pos, w, k)
		ys, ws, ps := fuzzargs.Values(y), fuzzargs.Values(w), []int64(nil)
		if why == "" && pos != nil {
			ps = pos.Int64s()
		}
		err := Unpermute(nil, out, y, pos, w, k)
		if err != nil {
			if why == "" {
				t.Fatalf("%s: error %v, but the docs take the call", what, err)
			}
			a.CheckError(t, what, err, "moe", "out", "y", "pos", "w", "k")
			return
		}
		if why != "" {
			t.Fatalf("%s: no error, but the docs reject it (%s)", what, why)
		}
		a.CheckWrites(t, what, out)
		tokens, h = out.Dim(0), out.Dim(1)
		if tokens == 0 || h == 0 {
			return
		}
		want := make([]float64, tokens*h)
		for f := range tokens * k {
			pf, wf := int64(f), 1.0
			if ps != nil {
				pf = ps[f]
			}
			if pf < 0 || pf >= int64(y.Dim(0)) {
				continue
			}
			if ws != nil {
				wf = ws[f]
			}
			for c := range h {
				want[f/k*h+c] += wf * ys[int(pf)*h+c]
			}
		}
		for i, v := range want {
			want[i] = tensor.Round(out.DType(), v)
		}
		if got := out.Float64s(); !fuzzargs.SameValues(got, want) {
			t.Fatalf("%s: out is %v, want %v", what, got, want)
		}
	})
}
