package rope

import (
	_ "embed"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

//go:embed rope.cu
var ropeSrc string

// spec is one specialization of rope.cu.
type spec struct {
	dt, cdt tensor.DType // activations, cos/sin tables
	pos     tensor.DType // I32 or I64 positions; Invalid: the position is the token index
	style   Style
	v       int // rotation pairs per chunk
	da      int // alignment of a data access, bytes
	hpt     int // heads in flight per thread
	pass    int // elements per pass-through copy, 0 for none
}

var ctypes = map[tensor.DType]string{tensor.F32: "float", tensor.BF16: "bf16", tensor.F16: "f16",
	tensor.I32: "i32", tensor.I64: "i64"}

func (k spec) kernel() jit.Kernel {
	neox := 0
	if k.style == NeoX {
		neox = 1
	}
	defs := map[string]any{"ROPE_T": ctypes[k.dt], "ROPE_C": ctypes[k.cdt], "ROPE_NEOX": neox,
		"ROPE_V": k.v, "ROPE_DA": k.da, "ROPE_HPT": k.hpt, "ROPE_PASS": k.pass}
	if k.pos != tensor.Invalid {
		defs["ROPE_POS"] = ctypes[k.pos]
	}
	return jit.Kernel{File: "rope/rope.cu", Source: ropeSrc, Entry: "rope", Defines: jit.Defines(defs)}
}

var ropeFuncs = jit.Funcs[spec]{Kernel: spec.kernel}

// maxGrid bounds the batch and the heads of the [B, H, S, D] layout
// (gridDim.z and gridDim.y).
const maxGrid = 65535

// aligned reports whether n-element accesses of size-byte elements at ptr
// plus any multiple of each offset (elements) meet their alignment,
// min(n·size, 16) bytes.
func aligned(ptr uint64, size, n int, offs ...int) bool {
	a := min(n*size, 16)
	if ptr%uint64(a) != 0 {
		return false
	}
	for _, o := range offs {
		if o*size%a != 0 {
			return false
		}
	}
	return true
}

// region is one tensor the kernel accesses in vectors: its base address
// and the strides (elements) between the rows it touches.
type region struct {
	ptr  uint64
	offs []int
}

// pickPairs returns V, the rotation pairs a thread handles per chunk, and
// the alignment of its data accesses: the widest V that keeps every data
// access ≤ 16 bytes and aligned (NeoX reads V elements from each half, GPT-J
// 2V consecutive elements) and every cos/sin access of V table entries
// aligned. V = 1 always works; GPT-J pairs on odd strides are then read as
// single elements.
func pickPairs(style Style, dt, cdt tensor.DType, half int, data, tables []region) (v, align int) {
	w, second := 1, half // elements per data access per pair; NeoX's second access
	if style == GPTJ {
		w, second = 2, 0
	}
	for v := 16 / dt.Size() / w; v >= 1; v /= 2 {
		ok := half%v == 0 && aligned(0, dt.Size(), w*v, second)
		for _, d := range data {
			ok = ok && aligned(d.ptr, dt.Size(), w*v, d.offs...)
		}
		for _, t := range tables {
			ok = ok && aligned(t.ptr, cdt.Size(), v, t.offs...)
		}
		if ok {
			return v, min(w*v*dt.Size(), 16)
		}
	}
	return 1, dt.Size()
}

// pickPass returns the elements per pass-through copy of dims [r, d): the
// widest aligned access up to 16 bytes that divides d − r.
func pickPass(dt tensor.DType, r, d int, data []region) int {
	for p := 16 / dt.Size(); p > 1; p /= 2 {
		ok := (d-r)%p == 0 && aligned(0, dt.Size(), p, r)
		for _, x := range data {
			ok = ok && aligned(x.ptr, dt.Size(), p, x.offs...)
		}
		if ok {
			return p
		}
	}
	return 1
}

// launchCfg is how a launch spreads the work.
type launchCfg struct {
	hpt   int       // heads in flight per thread (1, 2 or 4)
	hb    int       // heads per block; the grid's y splits the heads
	block cuda.Dim3 // x: chunks of a head, y: head groups, z: tokens
}

// Launch shapes, measured on an H200 (bf16, the bench shapes): one head per
// thread in blocks of about 128 threads was fastest in both layouts, ahead
// of 2 or 4 heads per thread (which save table loads but take 50–95
// registers, and capping those spills) and of blocks of 256 or more.
// Issuing the data loads before the table loads mattered more than either.
// Blocks of 64 were level on [B, H, S, D], 4–10% faster on llama and
// DeepSeek serving shapes and 5% slower on Qwen3-Next (BenchmarkTune).
const blockThreads = 128

// tuning, when non-zero, overrides the picker's heads per thread and block
// size; only the tuning benchmark sets it.
var tuning struct{ hpt, threads int }

// pickLaunch sizes a launch over tokens × heads × nc chunks of V pairs. A
// block holds the chunks of whole heads (x). When a token's heads are
// adjacent in memory (spreadHeads, the serving layout), a block takes an
// even share of one token's heads (y; the grid's y splits the heads into
// as few shares as keep a block near blockThreads) and, when the token needs
// fewer threads than that, several tokens (z). Otherwise ([B, H, S, D]) a
// block takes one head of as many consecutive tokens as fit (z), so each
// block reads one contiguous stretch, and the grid splits the heads.
func pickLaunch(tokens, heads, nc int, spreadHeads bool) launchCfg {
	hpt, threads := 1, blockThreads
	if tuning.hpt > 0 {
		hpt = tuning.hpt
	}
	if tuning.threads > 0 {
		threads = tuning.threads
	}
	bx := min(nc, threads)
	if !spreadHeads {
		bz := max(1, min(64, threads/bx, tokens))
		return launchCfg{hpt: hpt, hb: hpt, block: cuda.Dim3{X: uint32(bx), Y: 1, Z: uint32(bz)}}
	}
	groups := (heads + hpt - 1) / hpt                    // threads along y for a whole token
	shares := max(1, (groups*bx+threads-1)/threads)      // blocks per token
	by := min((groups+shares-1)/shares, max(1, 1024/bx)) // head groups per block
	bz := max(1, min(64, threads/(bx*by), tokens))
	return launchCfg{hpt: hpt, hb: by * hpt, block: cuda.Dim3{X: uint32(bx), Y: uint32(by), Z: uint32(bz)}}
}

// kernelArgs is everything one launch of rope.cu takes beyond its spec.
type kernelArgs struct {
	src0, dst0, qk1, pos, cos, sin cuda.DevicePtr
	cosRow, sinRow, maxPos         int
	ntok, batch, n0, n1, half, d   int
	s0, d0                         [3]int // batch, token, head strides
	s1                             [2]int // token, head strides
}

// launch runs one specialization of rope.cu on s (nil: default stream);
// spreadHeads says a token's heads are adjacent in memory (see pickLaunch).
func launch(s *cuda.Stream, dev *cuda.Device, sp spec, a kernelArgs, spreadHeads bool) error {
	if s == nil {
		s = dev.DefaultStream()
	}
	heads := a.n0 + a.n1
	cfg := pickLaunch(a.ntok*a.batch, heads, a.half/sp.v, spreadHeads)
	sp.hpt = cfg.hpt
	fn, err := ropeFuncs.Get(dev, sp)
	if err != nil {
		return err
	}
	bz := int(cfg.block.Z)
	grid := cuda.Dim3{X: uint32((a.ntok + bz - 1) / bz), Y: uint32((heads + cfg.hb - 1) / cfg.hb), Z: uint32(a.batch)}
	args := cuda.NewArgs().Ptr(a.src0).Ptr(a.dst0).Ptr(a.qk1).Ptr(a.pos).Ptr(a.cos).Ptr(a.sin).
		I64(int64(a.cosRow)).I64(int64(a.sinRow)).I64(int64(a.maxPos)).
		I32(int32(a.ntok)).I32(int32(a.n0)).I32(int32(a.n1)).I32(int32(cfg.hb)).I32(int32(a.half)).I32(int32(a.d)).
		I64(int64(a.s0[0])).I64(int64(a.s0[1])).I64(int64(a.s0[2])).
		I64(int64(a.d0[0])).I64(int64(a.d0[1])).I64(int64(a.d0[2])).
		I64(int64(a.s1[0])).I64(int64(a.s1[1]))
	return fn.Launch(cuda.LaunchConfig{Grid: grid, Block: cfg.block, Stream: s}, args)
}

// launchQK rotates device q and k in place (validated arguments, T > 0).
func launchQK(s *cuda.Stream, q, k, positions, cosSin *tensor.Tensor, r int, style Style) error {
	half, esize := r/2, cosSin.DType().Size()
	a := kernelArgs{
		src0: q.Ptr(), dst0: q.Ptr(), pos: positions.Ptr(),
		cos: cosSin.Ptr(), sin: cosSin.Ptr() + cuda.DevicePtr(half*esize),
		cosRow: cosSin.Stride(0), sinRow: cosSin.Stride(0), maxPos: cosSin.Dim(0),
		ntok: q.Dim(0), batch: 1, n0: q.Dim(1), half: half, d: q.Dim(2),
		s0: [3]int{0, q.Stride(0), q.Stride(1)}, d0: [3]int{0, q.Stride(0), q.Stride(1)},
	}
	data := []region{{uint64(q.Ptr()), []int{q.Stride(0), q.Stride(1)}}}
	if k != nil {
		a.qk1, a.n1, a.s1 = k.Ptr(), k.Dim(1), [2]int{k.Stride(0), k.Stride(1)}
		data = append(data, region{uint64(k.Ptr()), []int{k.Stride(0), k.Stride(1)}})
	}
	tables := []region{{uint64(a.cos), []int{a.cosRow}}, {uint64(a.sin), []int{a.sinRow}}}
	sp := spec{dt: q.DType(), cdt: cosSin.DType(), pos: positions.DType(), style: style}
	sp.v, sp.da = pickPairs(style, q.DType(), cosSin.DType(), half, data, tables)
	return launch(s, q.Device(), sp, a, true)
}

// launchBHSD writes device y = RoPE(x) (validated arguments, non-empty).
func launchBHSD(s *cuda.Stream, y, x, cos, sin *tensor.Tensor, r int, style Style) error {
	half := r / 2
	a := kernelArgs{
		src0: x.Ptr(), dst0: y.Ptr(), cos: cos.Ptr(), sin: sin.Ptr(),
		cosRow: cos.Stride(0), sinRow: sin.Stride(0), maxPos: min(cos.Dim(0), sin.Dim(0)),
		ntok: x.Dim(2), batch: x.Dim(0), n0: x.Dim(1), half: half, d: x.Dim(3),
		s0: [3]int{x.Stride(0), x.Stride(2), x.Stride(1)}, d0: [3]int{y.Stride(0), y.Stride(2), y.Stride(1)},
	}
	data := []region{{uint64(x.Ptr()), x.Strides()[:3]}, {uint64(y.Ptr()), y.Strides()[:3]}}
	tables := []region{{uint64(cos.Ptr()), []int{a.cosRow}}, {uint64(sin.Ptr()), []int{a.sinRow}}}
	sp := spec{dt: x.DType(), cdt: cos.DType(), style: style}
	sp.v, sp.da = pickPairs(style, x.DType(), cos.DType(), half, data, tables)
	if r < a.d && !tensor.Same(y, x) {
		sp.pass = pickPass(x.DType(), r, a.d, data)
	}
	return launch(s, x.Device(), sp, a, false)
}
