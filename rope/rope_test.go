package rope

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/tensor"
)

// mustCache is CosSinCache(dt, maxPos, r, 10⁴) for arguments a test knows
// to be good.
func mustCache(dt tensor.DType, maxPos, r int) *tensor.Tensor {
	c, err := CosSinCache(dt, maxPos, r, 1e4)
	if err != nil {
		panic(err)
	}
	return c
}

// cosSinTables returns Rope's cos and sin tables [rows, r/2] of dt: the
// column halves of mustCache, as views.
func cosSinTables(dt tensor.DType, rows, r int) (cos, sin *tensor.Tensor) {
	c := mustCache(dt, rows, r)
	cos, err1 := c.Slice(1, 0, r/2)
	sin, err2 := c.Slice(1, r/2, r)
	if err := errors.Join(err1, err2); err != nil {
		panic(err)
	}
	return cos, sin
}

// spreadPositions returns n int64 positions spread over [0, maxPos) in no
// order: 7919·t mod maxPos.
func spreadPositions(n, maxPos int) *tensor.Tensor {
	p := make([]int64, n)
	for t := range p {
		p[t] = int64(7919 * t % maxPos)
	}
	pos := tensor.New(tensor.I64, n)
	pos.SetInt64s(p)
	return pos
}

// qkArgs are RotateQK arguments on the host, valid unless a test edits them.
type qkArgs struct {
	q, k, pos, cache *tensor.Tensor
	o                Options
}

func newQK(dt tensor.DType, t, hq, hk, d, r, maxPos int) *qkArgs {
	rng := tensor.SeededRNG(1)
	return &qkArgs{
		q: tensor.Rand(rng, dt, 1, t, hq, d), k: tensor.Rand(rng, dt, 1, t, hk, d),
		pos: spreadPositions(t, maxPos), cache: mustCache(tensor.F32, maxPos, r),
		o: Options{RotaryDim: r},
	}
}

func (a *qkArgs) run() error { return RotateQK(nil, a.q, a.k, a.pos, a.cache, a.o) }

// onDevice copies q, k, positions and the cache to dev, freed when t ends.
func (a *qkArgs) onDevice(t *testing.T, dev *cuda.Device) []*tensor.Tensor {
	t.Helper()
	var ds []*tensor.Tensor
	for _, h := range []*tensor.Tensor{a.q, a.k, a.pos, a.cache} {
		d, err := h.ToDevice(dev)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Free() })
		ds = append(ds, d)
	}
	return ds
}

// bhsdArgs are Rope arguments on the host.
type bhsdArgs struct {
	y, x, cos, sin *tensor.Tensor
	o              Options
}

func newBHSD(dt tensor.DType, b, h, s, d, r int) *bhsdArgs {
	rng := tensor.SeededRNG(2)
	cos, sin := cosSinTables(tensor.F32, s, r)
	return &bhsdArgs{y: tensor.New(dt, b, h, s, d), x: tensor.Rand(rng, dt, 1, b, h, s, d), cos: cos, sin: sin, o: Options{RotaryDim: r}}
}

func (a *bhsdArgs) run() error { return Rope(nil, a.y, a.x, a.cos, a.sin, a.o) }

func TestValidation(t *testing.T) {
	qk := func(edit func(a *qkArgs)) func() (func() error, []*tensor.Tensor) {
		return func() (func() error, []*tensor.Tensor) {
			a := newQK(tensor.BF16, 5, 4, 2, 16, 8, 32)
			edit(a)
			return a.run, []*tensor.Tensor{a.q, a.k}
		}
	}
	bhsd := func(edit func(a *bhsdArgs)) func() (func() error, []*tensor.Tensor) {
		return func() (func() error, []*tensor.Tensor) {
			a := newBHSD(tensor.F16, 2, 3, 5, 16, 16)
			edit(a)
			return a.run, []*tensor.Tensor{a.y, a.x}
		}
	}
	cases := []struct {
		name  string
		setup func() (func() error, []*tensor.Tensor)
		want  string
	}{
		{"qk nil q", qk(func(a *qkArgs) { a.q = nil }), "argument q: is nil"},
		{"qk q rank", qk(func(a *qkArgs) { a.q = tensor.New(tensor.BF16, 5, 64) }), "argument q: has rank 2"},
		{"qk q dtype", qk(func(a *qkArgs) { a.q = tensor.New(tensor.I32, 5, 4, 16) }), "argument q: has dtype i32"},
		{"qk k tokens", qk(func(a *qkArgs) { a.k = tensor.New(tensor.BF16, 6, 2, 16) }), "argument k: has shape [6 2 16]"},
		{"qk k head dim", qk(func(a *qkArgs) { a.k = tensor.New(tensor.BF16, 5, 2, 8) }), "argument k: has shape [5 2 8]"},
		{"qk k dtype", qk(func(a *qkArgs) { a.k = tensor.New(tensor.F16, 5, 2, 16) }), "argument k: has dtype f16"},
		{"qk odd head dim", qk(func(a *qkArgs) { a.q, a.k, a.o.RotaryDim = tensor.New(tensor.BF16, 5, 4, 7), nil, 0 }), "head dim 7 must be even"},
		{"qk zero head dim", qk(func(a *qkArgs) { a.q, a.k, a.o.RotaryDim = tensor.New(tensor.BF16, 5, 4, 0), nil, 0 }), "argument q: head dim 0 must be positive"},
		{"qk odd rotary dim", qk(func(a *qkArgs) { a.o.RotaryDim = 5 }), "rotary dim 5 must be positive and even"},
		{"qk negative rotary dim", qk(func(a *qkArgs) { a.o.RotaryDim = -2 }), "rotary dim -2 must be positive"},
		{"qk rotary dim over head dim", qk(func(a *qkArgs) { a.o.RotaryDim = 18 }), "rotary dim 18 exceeds the head dim 16"},
		{"qk style", qk(func(a *qkArgs) { a.o.Style = 7 }), "unknown style"},
		{"qk head dim past the limit", qk(func(a *qkArgs) {
			a.q, a.k, a.o.RotaryDim = tensor.New(tensor.BF16, 5, 1, maxHeadDim+2), nil, 8
		}), fmt.Sprintf("argument q: head dim %d exceeds %d", maxHeadDim+2, maxHeadDim)},
		{"qk positions dtype", qk(func(a *qkArgs) { a.pos = tensor.New(tensor.F32, 5) }), "argument positions: has dtype f32"},
		{"qk positions length", qk(func(a *qkArgs) { a.pos = tensor.New(tensor.I64, 4) }), "argument positions: has shape [4]"},
		{"qk cache width", qk(func(a *qkArgs) { a.cache = mustCache(tensor.F32, 32, 16) }), "argument cosSin: has shape [32 16], want ["},
		{"qk cache dtype", qk(func(a *qkArgs) { a.cache = mustCache(tensor.F16, 32, 8) }), "argument cosSin: has dtype f16"},
		{"qk empty cache", qk(func(a *qkArgs) { a.cache = mustCache(tensor.F32, 0, 8) }), "argument cosSin: has no rows"},
		{"qk position past cache", qk(func(a *qkArgs) { a.pos.SetInt64s([]int64{0, 3, 32, 1, 2}) }), "positions[2] = 32 is outside the cos/sin cache [0, 32)"},
		{"qk negative position", qk(func(a *qkArgs) { a.pos.SetInt64s([]int64{0, 3, 4, 1, -1}) }), "positions[4] = -1 is outside"},
		{"qk int32 position past cache", qk(func(a *qkArgs) {
			a.pos = tensor.New(tensor.I32, 5)
			a.pos.SetInt64s([]int64{40, 0, 0, 0, 0})
		}), "positions[0] = 40 is outside"},
		{"qk k is q", qk(func(a *qkArgs) { a.k = a.q }), "argument k: overlaps q"},
		{"qk k is a head of q", qk(func(a *qkArgs) {
			qkv := tensor.New(tensor.BF16, 5, 4, 16)
			a.q, _ = qkv.Slice(1, 0, 4)
			a.k, _ = qkv.Slice(1, 3, 4)
		}), "argument k: overlaps q"},
		{"bhsd nil x", bhsd(func(a *bhsdArgs) { a.x = nil }), "argument x: is nil"},
		{"bhsd x rank", bhsd(func(a *bhsdArgs) { a.x = tensor.New(tensor.F16, 2, 15, 16) }), "argument x: has rank 3"},
		{"bhsd y shape", bhsd(func(a *bhsdArgs) { a.y = tensor.New(tensor.F16, 2, 3, 6, 16) }), "argument y: has shape [2 3 6 16]"},
		{"bhsd y dtype", bhsd(func(a *bhsdArgs) { a.y = tensor.New(tensor.BF16, 2, 3, 5, 16) }), "argument y: has dtype bf16"},
		{"bhsd odd head dim", bhsd(func(a *bhsdArgs) {
			a.x, a.y, a.o.RotaryDim = tensor.New(tensor.F16, 2, 3, 5, 9), tensor.New(tensor.F16, 2, 3, 5, 9), 0
		}), "head dim 9 must be even"},
		{"bhsd zero head dim", bhsd(func(a *bhsdArgs) {
			a.x, a.y, a.o.RotaryDim = tensor.New(tensor.F16, 2, 3, 0, 0), tensor.New(tensor.F16, 2, 3, 0, 0), 0
		}), "argument x: head dim 0 must be positive"},
		{"bhsd odd rotary dim", bhsd(func(a *bhsdArgs) { a.o.RotaryDim = 3 }), "rotary dim 3 must be positive and even"},
		{"bhsd rotary dim over head dim", bhsd(func(a *bhsdArgs) { a.o.RotaryDim = 20 }), "rotary dim 20 exceeds"},
		{"bhsd cos rows", bhsd(func(a *bhsdArgs) { a.cos, a.sin = cosSinTables(tensor.F32, 4, 16) }), "argument cos: has 4 rows for sequence length 5"},
		{"bhsd cos width", bhsd(func(a *bhsdArgs) { a.cos, a.sin = cosSinTables(tensor.F32, 5, 8) }), "argument cos: has shape [5 4], want ["},
		{"bhsd cos dtype", bhsd(func(a *bhsdArgs) { a.cos, a.sin = cosSinTables(tensor.BF16, 5, 16) }), "argument cos: has dtype bf16"},
		{"bhsd sin dtype", bhsd(func(a *bhsdArgs) { _, a.sin = cosSinTables(tensor.F16, 5, 16) }), "argument sin: has dtype f16"},
		{"bhsd y partly overlaps x", bhsd(func(a *bhsdArgs) {
			buf := tensor.New(tensor.F16, 2*3*5*16+40)
			a.y, _ = buf.View(tensor.F16, []int{2, 3, 5, 16}, []int{240, 80, 16, 1})
			a.x, _ = buf.View(tensor.F16, []int{2, 3, 5, 16}, []int{241, 80, 16, 1})
		}), "argument y: partly overlaps x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run, outs := c.setup()
			before := snapshot(outs)
			err := run()
			var ae *tensor.ArgError
			if err == nil || !errors.As(err, &ae) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got error %v, want an ArgError containing %q", err, c.want)
			}
			if !slices.EqualFunc(before, snapshot(outs), bytes.Equal) {
				t.Fatal("an output was written although the call failed")
			}
		})
	}
}

// snapshot copies the storage of host tensors (nil stays nil).
func snapshot(ts []*tensor.Tensor) [][]byte {
	out := make([][]byte, len(ts))
	for i, t := range ts {
		if t != nil {
			out[i] = bytes.Clone(t.Bytes())
		}
	}
	return out
}

func TestZeroTokens(t *testing.T) {
	a := newQK(tensor.BF16, 0, 4, 2, 16, 16, 8)
	if err := a.run(); err != nil {
		t.Fatalf("RotateQK with T = 0: %v", err)
	}
	b := newBHSD(tensor.BF16, 2, 3, 0, 16, 16)
	if err := b.run(); err != nil {
		t.Fatalf("Rope with S = 0: %v", err)
	}
}

// TestPositionZeroIsIdentity checks that position 0 leaves q and k exactly
// as they were (cos 0 = 1, sin 0 = 0), on the host and, with a GPU, on the
// device, for both styles and a partial rotary dim.
func TestPositionZeroIsIdentity(t *testing.T) {
	dev := gputest.Maybe(t)
	for _, style := range []Style{NeoX, GPTJ} {
		for _, dt := range []tensor.DType{tensor.BF16, tensor.F16, tensor.F32} {
			a := newQK(dt, 7, 4, 2, 64, 32, 16)
			a.o.Style = style
			a.pos.SetInt64s(make([]int64, 7))
			want := snapshot([]*tensor.Tensor{a.q, a.k})
			if err := a.run(); err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(want, snapshot([]*tensor.Tensor{a.q, a.k}), bytes.Equal) {
				t.Errorf("%v %v host: position 0 changed q or k", style, dt)
			}
			if dev == nil {
				continue
			}
			a = newQK(dt, 7, 4, 2, 64, 32, 16)
			a.o.Style = style
			a.pos.SetInt64s(make([]int64, 7))
			got := runQKOnDevice(t, dev, a)
			if !slices.EqualFunc(want, snapshot(got), bytes.Equal) {
				t.Errorf("%v %v device: position 0 changed q or k", style, dt)
			}
		}
	}
}

// runQKOnDevice runs a on dev and returns q and k copied back.
func runQKOnDevice(t *testing.T, dev *cuda.Device, a *qkArgs) []*tensor.Tensor {
	t.Helper()
	ds := a.onDevice(t, dev)
	if err := RotateQK(nil, ds[0], ds[1], ds[2], ds[3], a.o); err != nil {
		t.Fatal(err)
	}
	var out []*tensor.Tensor
	for _, d := range ds[:2] {
		h, err := d.ToHost()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
	return out
}

// TestQuarterTurn rotates by hand-checked 90° angles: a table whose row 1
// holds cos = 0, sin = 1 for every pair.
func TestQuarterTurn(t *testing.T) {
	cases := []struct {
		style Style
		r     int
		want  []float64
	}{
		// NeoX pairs (0,2), (1,3): y_i = −x_{i+2}, y_{i+2} = x_i.
		{NeoX, 4, []float64{-3, -4, 1, 2, 5, 6}},
		// GPT-J pairs (0,1), (2,3): y_2i = −x_{2i+1}, y_{2i+1} = x_2i.
		{GPTJ, 4, []float64{-2, 1, -4, 3, 5, 6}},
		// Rotary dim 2: only dims 0 and 1 turn, either style.
		{NeoX, 2, []float64{-2, 1, 3, 4, 5, 6}},
	}
	for _, c := range cases {
		x := tensor.New(tensor.F32, 1, 1, 6)
		x.SetFloat64s([]float64{1, 2, 3, 4, 5, 6})
		cache := tensor.New(tensor.F32, 2, c.r)
		row := make([]float64, 2*c.r)
		row[0] = 1 // row 0: cos 1, sin 0 for pair 0 (unused)
		for i := range c.r / 2 {
			row[c.r+c.r/2+i] = 1 // row 1: cos 0, sin 1
		}
		cache.SetFloat64s(row)
		pos := tensor.New(tensor.I64, 1)
		pos.SetInt64s([]int64{1})
		if err := RotateQK(nil, x, nil, pos, cache, Options{Style: c.style, RotaryDim: c.r}); err != nil {
			t.Fatal(err)
		}
		if got := x.Float64s(); !slices.Equal(got, c.want) {
			t.Errorf("%v r=%d: got %v, want %v", c.style, c.r, got, c.want)
		}
	}
}

// TestHostPathMatchesAngles checks the host path of both ops, which reads
// the tables it is given, against angles computed in float64.
func TestHostPathMatchesAngles(t *testing.T) {
	tol := check.ForDType(tensor.F32) // far above the fp32 table's rounding
	for _, style := range []Style{NeoX, GPTJ} {
		a := newQK(tensor.F32, 9, 3, 2, 32, 16, 2048)
		a.o.Style = style
		wq, wk := clone(a.q), clone(a.k)
		if err := a.run(); err != nil {
			t.Fatal(err)
		}
		refQK(wq, wk, a.pos.Int64s(), 8, style, angleCosSin(1e4, 16))
		r := check.Merge(check.Compare("q", a.q.Float64s(), wq.Float64s(), tol), check.Compare("k", a.k.Float64s(), wk.Float64s(), tol))
		if !r.Pass {
			t.Errorf("RotateQK %v: %v", style, r)
		}

		b := newBHSD(tensor.F32, 2, 3, 5, 16, 8)
		b.o.Style = style
		want := clone(b.y)
		if err := b.run(); err != nil {
			t.Fatal(err)
		}
		refBHSD(want, b.x, 4, style, angleCosSin(1e4, 8))
		if r := check.Compare("y", b.y.Float64s(), want.Float64s(), tol); !r.Pass {
			t.Errorf("Rope %v: %v", style, r)
		}
	}
}

// clone returns a contiguous host copy of a contiguous host tensor.
func clone(x *tensor.Tensor) *tensor.Tensor {
	c := tensor.New(x.DType(), x.Shape()...)
	if err := c.CopyFrom(x); err != nil {
		panic(err)
	}
	return c
}

// TestQKInOneBuffer places q [4, 4, 128] and k [4, 1, 128] in one buffer
// of tokens 768 elements apart, k at several offsets from q: RotateQK takes
// them where no element is shared (k beside q, or in the row before it)
// and refuses them where k meets a token's q.
func TestQKInOneBuffer(t *testing.T) {
	for _, c := range []struct {
		qAt, kAt int // elements from the buffer's start
		ok       bool
	}{
		{0, 512, true},  // k right after q
		{0, 640, true},  // k at the end of the row
		{0, 704, false}, // k runs into the next token's q
		{0, 256, false}, // k inside q
		{128, 0, true},  // k right before q
		{100, 0, false}, // k's last elements meet q
		{256, 0, true},  // a gap between k and q
	} {
		buf := tensor.New(tensor.F32, 5*768)
		view := func(at, heads int) *tensor.Tensor {
			sl, err := buf.Slice(0, at, buf.Dim(0))
			if err == nil {
				sl, err = sl.View(tensor.F32, []int{4, heads, 128}, []int{768, 128, 1})
			}
			if err != nil {
				t.Fatal(err)
			}
			return sl
		}
		q, k := view(c.qAt, 4), view(c.kAt, 1)
		pos, cache := spreadPositions(4, 16), mustCache(tensor.F32, 16, 128)
		err := RotateQK(nil, q, k, pos, cache, Options{})
		if c.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), "argument k: overlaps q") {
			t.Errorf("q at %d, k at %d: %v, want ok %v", c.qAt, c.kAt, err, c.ok)
		}
	}
}

// TestFusedQKVHost rotates q [4, 2, 8] and k [4, 1, 8], views on strides
// (24, 8, 1) of one host qkv buffer with k from element 16 on, as the device
// path does: their spans overlap but no element is shared. The result must
// match rotating contiguous copies of q and k.
func TestFusedQKVHost(t *testing.T) {
	rng := tensor.SeededRNG(3)
	qkv := tensor.Rand(rng, tensor.F32, 1, 4, 3, 8)
	q, err := qkv.Slice(1, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	k, err := qkv.Slice(1, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	wq, wk := tensor.New(tensor.F32, 4, 2, 8), tensor.New(tensor.F32, 4, 1, 8)
	wq.SetFloat64s(q.Float64s())
	wk.SetFloat64s(k.Float64s())
	pos, cache := spreadPositions(4, 16), mustCache(tensor.F32, 16, 8)
	if err := RotateQK(nil, q, k, pos, cache, Options{RotaryDim: 8}); err != nil {
		t.Fatal(err)
	}
	if err := RotateQK(nil, wq, wk, pos, cache, Options{RotaryDim: 8}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(q.Float64s(), wq.Float64s()) || !slices.Equal(k.Float64s(), wk.Float64s()) {
		t.Errorf("views of qkv: q %v, k %v; contiguous copies: q %v, k %v", q.Float64s(), k.Float64s(), wq.Float64s(), wk.Float64s())
	}
}

// TestLaunchParts checks how launches are cut into parts whose grids fit
// CUDA's limits (gridDim.y and z at most 65535; y is a share of the heads
// times the blocks of chunks, which many heads of a long head dim take past
// it: x [1, 40000, 1, 4098] bf16 has 2049 chunks, 3 blocks of them, per
// head), and that every (batch, head) of the launch is served once, by a
// part whose pointers and head index reach the same address the whole
// launch would (checked at the corners of each part's q and k sides). Tokens past the kernel's int32 indexing are refused with an
// ArgError before any part.
func TestLaunchParts(t *testing.T) {
	h200 := cuda.Props{SMs: 132, L2Bytes: 60 << 20}
	g := func(x, y, z uint32) cuda.Dim3 { return cuda.Dim3{X: x, Y: y, Z: z} }
	cases := []struct {
		name           string
		a              kernelArgs
		nc, chunkBytes int
		spread         bool
		want           []cuda.Dim3 // nil: refused
	}{
		{"bhsd 40000 heads of 4098", kernelArgs{ntok: 1, batch: 1, n0: 40000, d: 4098}, 2049, 4, false, []cuda.Dim3{g(1, 65535, 1), g(1, 54465, 1)}},
		{"bhsd 21845 heads of 4098", kernelArgs{ntok: 1, batch: 1, n0: 21845, d: 4098}, 2049, 4, false, []cuda.Dim3{g(1, 65535, 1)}},
		{"bhsd 40000 heads of 4096", kernelArgs{ntok: 1, batch: 1, n0: 40000, d: 4096}, 256, 32, false, []cuda.Dim3{g(1, 40000, 1)}},
		{"bhsd 70000 heads of 8", kernelArgs{ntok: 3, batch: 2, n0: 70000, d: 8}, 1, 16, false, []cuda.Dim3{g(1, 65535, 2), g(1, 4465, 2)}},
		{"bhsd 140000 batches", kernelArgs{ntok: 5, batch: 140000, n0: 3, d: 128}, 8, 32, false,
			[]cuda.Dim3{g(1, 3, 65535), g(1, 3, 65535), g(1, 3, 8930)}},
		{"bhsd 70000 batches of 70000 heads", kernelArgs{ntok: 1, batch: 70000, n0: 70000, d: 2}, 1, 4, false,
			[]cuda.Dim3{g(1, 65535, 65535), g(1, 4465, 65535), g(1, 65535, 4465), g(1, 4465, 4465)}},
		// Too many threads for a flat launch: 3-D blocks of one head lane
		// of 4 heads (hb 4), in parts of 21845 shares, the second part
		// starting in q and ending in k.
		{"qk 160000 heads of 4098", kernelArgs{ntok: 27, batch: 1, n0: 128000, n1: 32000, d: 4098}, 2049, 4, true,
			[]cuda.Dim3{g(27, 65535, 1), g(27, 54465, 1)}},
		{"qk flat", kernelArgs{ntok: 4096, batch: 1, n0: 32, n1: 8, d: 128}, 8, 32, true, []cuda.Dim3{g(10240, 1, 1)}},
		// The token index t = blockIdx.x·blockDim.z + threadIdx.z is an int:
		// 2³¹ tokens (q [2³¹, 1, 2] bf16, 8 GiB) do not fit the int32 ntok,
		// and 2³¹ − 1 tokens in blocks of 42 (head dim 6) index threads up to
		// 2³¹ + 39, which wrap negative.
		{"qk 2^31 tokens", kernelArgs{ntok: 1 << 31, batch: 1, n0: 1, d: 2}, 1, 4, true, nil},
		{"bhsd 2^31-1 tokens of head dim 6", kernelArgs{ntok: 1<<31 - 1, batch: 1, n0: 1, d: 6}, 3, 4, false, nil},
		{"bhsd 2^31-1 tokens of head dim 128", kernelArgs{ntok: 1<<31 - 1, batch: 1, n0: 1, d: 128}, 8, 32, false, []cuda.Dim3{g(1<<27, 1, 1)}},
	}
	const esize = 2
	for _, c := range cases {
		a := c.a
		a.src0, a.dst0, a.qk1 = 1<<40, 2<<40, 3<<40
		a.s0, a.d0, a.s1 = [3]int{1 << 24, 4096, 8192}, [3]int{1 << 25, 8192, 4096}, [2]int{4096, 5000}
		cfg := pickLaunch(h200, a.ntok*a.batch, a.n0+a.n1, c.nc, c.chunkBytes, c.spread)
		if err := checkTokens(cfg, a, "rope.Rope", "x"); c.want == nil {
			var ae *tensor.ArgError
			if !errors.As(err, &ae) || ae.Arg != "x" {
				t.Errorf("%s: error %v; want an ArgError on x", c.name, err)
			}
			continue
		} else if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		// addr is where the kernel finds head h of batch b, src0's or qk1's
		// side, from the arguments of launch (or part) p.
		addr := func(p kernelArgs, b, h int) cuda.DevicePtr {
			if h < p.n0 {
				return p.src0 + cuda.DevicePtr(esize*(b*p.s0[0]+h*p.s0[2]))
			}
			return p.qk1 + cuda.DevicePtr(esize*(h-p.n0)*p.s1[1])
		}
		var grids []cuda.Dim3
		b0, lo, heads := 0, 0, a.n0+a.n1
		err := forParts(cfg, a, c.nc, esize, func(p kernelArgs, grid cuda.Dim3) error {
			grids = append(grids, grid)
			// The addressing is affine in b and h on either side of n0, so
			// the corners of each side stand for all.
			for _, b := range []int{0, p.batch - 1} {
				for _, h := range []int{0, p.n0 - 1, p.n0, p.n0 + p.n1 - 1} {
					if h < 0 || h >= p.n0+p.n1 {
						continue
					}
					if got, want := addr(p, b, h), addr(a, b0+b, lo+h); got != want {
						return fmt.Errorf("part %d: batch %d head %d at %#x, want %#x", len(grids), b, h, got, want)
					}
				}
			}
			if p.dst0-a.dst0 != cuda.DevicePtr(esize*(b0*a.d0[0]+min(lo, a.n0)*a.d0[2])) {
				return fmt.Errorf("part %d: dst0 at %#x", len(grids), p.dst0)
			}
			if lo += p.n0 + p.n1; lo == heads {
				b0, lo = b0+p.batch, 0
			}
			return nil
		})
		if err == nil && (b0 != a.batch || lo != 0) {
			err = fmt.Errorf("parts ended at batch %d head %d of %d × %d", b0, lo, a.batch, heads)
		}
		if err != nil || !slices.Equal(grids, c.want) {
			t.Errorf("%s: grids %v, error %v; want %v", c.name, grids, err, c.want)
		}
	}
}

// TestDeviceValidation covers the errors only device tensors can raise:
// mixed locations, and device positions outside the cache (found by the
// copy back). Nothing may be written.
func TestDeviceValidation(t *testing.T) {
	dev := gputest.Device(t)
	cases := []struct {
		name string
		edit func(a *qkArgs, ds []*tensor.Tensor) []*tensor.Tensor // returns q, k, pos, cache for the call
		want string
	}{
		{"k on the host", func(a *qkArgs, ds []*tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{ds[0], a.k, ds[2], ds[3]}
		}, "argument k: is on the host but q is on device"},
		{"cache on the host", func(a *qkArgs, ds []*tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{ds[0], ds[1], ds[2], a.cache}
		}, "argument cosSin: is on the host"},
		{"position past the cache", func(a *qkArgs, ds []*tensor.Tensor) []*tensor.Tensor {
			a.pos.SetInt64s([]int64{1, 2, 3, 40, 0})
			if err := ds[2].CopyFrom(a.pos); err != nil {
				t.Fatal(err)
			}
			return ds
		}, "positions[3] = 40 is outside the cos/sin cache [0, 32)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := newQK(tensor.BF16, 5, 4, 2, 16, 8, 32)
			ds := a.onDevice(t, dev)
			args := c.edit(a, ds)
			err := RotateQK(nil, args[0], args[1], args[2], args[3], a.o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got error %v, want one containing %q", err, c.want)
			}
			for i, want := range []*tensor.Tensor{a.q, a.k} {
				got, err := ds[i].ToHost()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Bytes(), want.Bytes()) {
					t.Fatalf("tensor %d was written although the call failed", i)
				}
			}
		})
	}
}

// TestUntrustedPositionIsSkipped checks the kernel's guard: with
// TrustPositions and a position outside the cache, that token's rows stay
// as they were and every other token is rotated as usual.
func TestUntrustedPositionIsSkipped(t *testing.T) {
	dev := gputest.Device(t)
	a := newQK(tensor.F32, 6, 4, 2, 32, 32, 64)
	a.pos.SetInt64s([]int64{5, 9, 1 << 40, 63, -7, 0})
	a.o.TrustPositions = true
	got := runQKOnDevice(t, dev, a)

	want := []*tensor.Tensor{clone(a.q), clone(a.k)}
	good := []int64{5, 9, 0, 63, 0, 0}
	refQK(want[0], want[1], good, 16, NeoX, tableCosSin(a.cache))
	for i, x := range []*tensor.Tensor{a.q, a.k} {
		w, g, orig := want[i].Float64s(), got[i].Float64s(), x.Float64s()
		per := x.Dim(1) * x.Dim(2)
		for _, bad := range []int{2, 4} { // tokens with bad positions keep their input
			copy(w[bad*per:(bad+1)*per], orig[bad*per:(bad+1)*per])
		}
		if r := check.Compare(fmt.Sprint("tensor ", i), g, w, check.ForDType(tensor.F32)); !r.Pass {
			t.Errorf("%v", r)
		}
	}
}

// TestCosSinCacheArguments: arguments no cache has are ArgErrors naming
// the argument, found before anything is allocated (2²⁸ rows of 128 fp32
// entries would take 128 GiB).
func TestCosSinCacheArguments(t *testing.T) {
	inf := math.Inf(1)
	for _, c := range []struct {
		dt        tensor.DType
		maxPos, r int
		theta     float64
		arg, msg  string
	}{
		{tensor.F32, 3, 5, 1e4, "r", "is 5, want a positive even rotary dim"},
		{tensor.F32, 4, 1, 1e4, "r", "is 1"},
		{tensor.F32, 2, 0, 1e4, "r", "is 0"},
		{tensor.F32, 4, -2, 1e4, "r", "is -2"},
		{tensor.F32, 0, 1 << 40, 1e4, "r", "more than the largest head dim 65536"},
		{tensor.F32, -1, 8, 1e4, "maxPos", "is -1, want ≥ 0"},
		{tensor.F32, 1 << 28, 128, 1e4, "maxPos", "is 268435456, more than the 16777215 rows a cache of r = 128 may hold (2147483647 entries)"},
		{tensor.BF16, maxCacheEntries/64 + 1, 64, 1e4, "maxPos", "rows a cache of r = 64 may hold"},
		{tensor.I32, 4, 8, 1e4, "dt", "is i32, want a float dtype"},
		{tensor.F32, 4, 8, 0, "theta", "is 0, want a positive finite base"},
		{tensor.F32, 4, 8, -1e4, "theta", "is -10000"},
		{tensor.F32, 4, 8, math.NaN(), "theta", "is NaN"},
		{tensor.F32, 4, 8, inf, "theta", "is +Inf"},
		{tensor.F32, 4, 8, -inf, "theta", "is -Inf"},
		{tensor.F32, 4, 128, 5e-324, "theta", "the angles p·θ^(−2i/r) overflow"},
	} {
		got, err := CosSinCache(c.dt, c.maxPos, c.r, c.theta)
		var ae *tensor.ArgError
		if got != nil || !errors.As(err, &ae) || ae.Op != "rope.CosSinCache" || ae.Arg != c.arg || !strings.Contains(ae.Msg, c.msg) {
			t.Errorf("CosSinCache(%v, %d, %d, %v): %v; want an ArgError on %s containing %q", c.dt, c.maxPos, c.r, c.theta, err, c.arg, c.msg)
		}
	}
	if c := mustCache(tensor.F32, 0, 8); c.Dim(0) != 0 || c.Dim(1) != 8 {
		t.Errorf("empty cache has shape %v", c.Shape())
	}
}

// TestCosSinCacheValues checks every entry of a cache computed in several
// blocks of rows against the angles, rounded once: cos(p·ω_i), then
// sin(p·ω_i), ω_i = θ^(−2i/r).
func TestCosSinCacheValues(t *testing.T) {
	const maxPos, r, theta = 5000, 32, 5e5
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
		c, err := CosSinCache(dt, maxPos, r, theta)
		if err != nil {
			t.Fatal(err)
		}
		got := c.Float64s()
		for p := range maxPos {
			for i := range r / 2 {
				s, co := math.Sincos(float64(p) * math.Pow(theta, -2*float64(i)/r))
				if g := got[p*r+i]; g != tensor.Round(dt, co) {
					t.Fatalf("%v: row %d cos %d = %v, want %v", dt, p, i, g, tensor.Round(dt, co))
				}
				if g := got[p*r+r/2+i]; g != tensor.Round(dt, s) {
					t.Fatalf("%v: row %d sin %d = %v, want %v", dt, p, i, g, tensor.Round(dt, s))
				}
			}
		}
	}
}

// TestReferenceKeepsPassThroughBits: the CPU path leaves the dims past the
// rotary ones bit for bit, as the kernels do: in place in RotateQK, and
// copied into a y of other strides in Rope. A bf16 NaN whose payload a
// round trip through float64 would change marks them.
func TestReferenceKeepsPassThroughBits(t *testing.T) {
	const nan = 0x7fab
	bits := func(x *tensor.Tensor, i int) uint16 { return binary.LittleEndian.Uint16(x.Bytes()[2*i:]) }
	q := tensor.New(tensor.BF16, 1, 1, 8) // rotary dim 4: elements 4-7 pass through
	q.SetFloat64s([]float64{1, 2, 3, 4, 5, 6, 7, 8})
	binary.LittleEndian.PutUint16(q.Bytes()[2*6:], nan)
	pos := tensor.New(tensor.I64, 1)
	if err := RotateQK(nil, q, nil, pos, mustCache(tensor.F32, 4, 4), Options{RotaryDim: 4}); err != nil {
		t.Fatal(err)
	}
	if b := bits(q, 6); b != nan {
		t.Errorf("RotateQK: pass-through NaN has bits %#04x, want %#04x", b, nan)
	}
	x := tensor.New(tensor.BF16, 1, 1, 2, 8)
	x.SetFloat64s([]float64{1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8})
	binary.LittleEndian.PutUint16(x.Bytes()[2*(8+5):], nan)
	y, _ := tensor.NewStrided(tensor.BF16, []int{1, 1, 2, 8}, []int{32, 32, 16, 1})
	cos, sin := cosSinTables(tensor.F32, 2, 4)
	if err := Rope(nil, y, x, cos, sin, Options{RotaryDim: 4}); err != nil {
		t.Fatal(err)
	}
	if b := bits(y, 16+5); b != nan {
		t.Errorf("Rope: copied NaN has bits %#04x, want %#04x", b, nan)
	}
	if got := y.Float64s()[4:8]; !slices.Equal(got, []float64{5, 6, 7, 8}) {
		t.Errorf("Rope: pass-through dims %v, want [5 6 7 8]", got)
	}
}

// TestCaptureNeedsTrustedPositions: RotateQK's host check of device
// positions cannot be captured in a CUDA graph, so capturing it without
// TrustPositions is an error on positions; with it, the call captures as
// one kernel launch.
func TestCaptureNeedsTrustedPositions(t *testing.T) {
	dev := gputest.Device(t)
	a := newQK(tensor.BF16, 5, 4, 2, 64, 64, 32)
	ds := a.onDevice(t, dev)
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	capture := func(o Options) (*cuda.Graph, error) {
		return s.Capture(cuda.CaptureGlobal, func() error { return RotateQK(s, ds[0], ds[1], ds[2], ds[3], o) })
	}
	_, err = capture(a.o)
	var ae *tensor.ArgError
	if !errors.As(err, &ae) || ae.Arg != "positions" || !strings.Contains(ae.Msg, "TrustPositions") {
		t.Errorf("capture without TrustPositions: got %v", err)
	}
	a.o.TrustPositions = true
	g, err := capture(a.o)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	if g.Nodes() != 1 {
		t.Errorf("RotateQK captured as %d nodes, want one launch", g.Nodes())
	}
	if h, _ := ds[0].ToHost(); !bytes.Equal(h.Bytes(), a.q.Bytes()) {
		t.Error("capturing RotateQK changed q")
	}
}
