package rope

import (
	_ "embed"
	"fmt"
	"math"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/intmath"
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
	v       int  // rotation pairs per chunk
	da      int  // alignment of a data access, bytes
	hpt     int  // heads per thread
	pass    int  // elements per pass-through copy, 0 for none
	wide    bool // head offsets (head index × head stride) need 64 bits
	maxT    int  // launch bounds: threads per block (0: no bounds)
	minB    int  // launch bounds: resident blocks per SM (caps registers)
	cs      bool // evict-first data stores
	flat    bool // 1-D blocks over (chunk, head lane, token)
	evict   bool // L2 evict-last 16-byte data reads
}

var ctypes = map[tensor.DType]string{tensor.F32: "float", tensor.BF16: "bf16", tensor.F16: "f16",
	tensor.I32: "i32", tensor.I64: "i64"}

func (k spec) kernel() jit.Kernel {
	defs := map[string]any{"ROPE_T": ctypes[k.dt], "ROPE_C": ctypes[k.cdt], "ROPE_NEOX": b2i(k.style == NeoX),
		"ROPE_V": k.v, "ROPE_DA": k.da, "ROPE_HPT": k.hpt, "ROPE_PASS": k.pass,
		"ROPE_MAXT": k.maxT, "ROPE_MINB": k.minB, "ROPE_CS": b2i(k.cs), "ROPE_FLAT": b2i(k.flat),
		"ROPE_EVICT": b2i(k.evict)}
	defs["ROPE_HOFF"] = "int"
	if k.wide {
		defs["ROPE_HOFF"] = "i64"
	}
	if k.pos != tensor.Invalid {
		defs["ROPE_POS"] = ctypes[k.pos]
	}
	return jit.Kernel{File: "rope/rope.cu", Source: ropeSrc, Entry: "rope", Defines: jit.Defines(defs)}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

var ropeFuncs = jit.Funcs[spec]{Kernel: spec.kernel}

// maxGrid is CUDA's limit on gridDim.y and gridDim.z (gridDim.x may reach
// math.MaxInt32). A launch whose batch (z) or heads (y: shares of the heads
// times cb blocks of chunks) need more is cut into parts that fit
// (forParts).
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

// knobs are the choices a launch is tuned by.
type knobs struct {
	hpt     int  // heads per thread (1, 2 or 4)
	threads int  // target threads per block
	occ     int  // resident threads per SM the registers must allow; 0: the compiler's choice
	cs      bool // evict-first data stores
	flat    bool // serving layout: 1-D blocks over (chunk, head lane, token)
	evict   bool // L2 evict-last data reads (16-byte ones)
}

// launchCfg is how a launch spreads the work.
type launchCfg struct {
	knobs
	hb    int       // heads per block (flat: head lanes per token); the grid's y splits the heads ...
	cb    int       // ... and each share of them into cb blocks of chunks
	block cuda.Dim3 // x: chunks of a head, y: head lanes, z: tokens (flat: all in x)
}

// flatBytes is the data a thread of a flat launch moves per direction:
// hpt = flatBytes / (bytes of one head's chunk, 2V elements), within [1, 4].
const flatBytes = 32

// pickKnobs chooses the launch knobs for tokens × heads × nc chunks of
// chunkBytes data each (2V elements).
//
// What was measured (H200, bf16 data and table, BenchmarkTune and kittens
// bench; µs, the previous kernel's BENCH.md time → this one's; "copy" is the
// 1 GiB D2D copy, 4232–4258 GB/s in these runs):
//   - Registers were the first limit: the old kernel kept each 16-bit
//     element in a register of its own (55 registers at one head per thread
//     with NVRTC 11.8, so at most 36 warps per SM). Kept packed and bounded
//     by launch bounds, a thread of one head takes 40 (NVRTC 13, sm_90a), of
//     two GPT-J heads 38, of four NeoX heads 63.
//   - Serving layout, large (≥ 2 waves of resident threads): flat blocks of
//     128 threads, 32 bytes of data per thread (one NeoX head of r = 128, two
//     GPT-J heads of r = 64), 1536 resident threads, evict-first stores.
//     llama3-8b T=4096: 28.32 → 25.38 (79% of copy), T=16384: 103.42 →
//     86.27 (93%); deepseek-v3 T=4096: 50.62 → 37.22 (86%). In the same runs
//     3-D blocks of 4 heads per thread took 26.14–26.24, 88.58–88.70 and
//     39.87–39.90 (3-D blocks leave lanes idle: 40 heads in 10 lanes of 8
//     chunks fill 80 of 96 lanes); 2048 resident threads (32 registers)
//     took 28.13, 96.32 and 39.46; 4 heads per thread flat 26.50, 88.74 and
//     38.56. Loading the next heads while storing the current ones (a loop
//     of several steps per thread) never won (88.54 at T=16384).
//   - Serving layout, small (qwen3-next T=4096, decode): 3-D blocks of about
//     128 threads, 4 heads per thread: qwen3-next 12.13 → 10.18–10.34; flat
//     took 10.66–11.17. llama decode T=1 4.48 → 4.77, T=32 4.74 → 4.93
//     (launch-bound).
//   - [B, H, S, D]: one head per thread, 128-thread blocks of 16 tokens, no
//     register bound: 4x32x1024x128 21.02 → 20.74 (96% of a same-size copy),
//     8x32x2048x128 69.18 → 69.18 (98%), 16x32x4096x128 257.66 → 256.22;
//     2 or 4 heads per thread were 0.3–4% slower, evict-first stores level
//     (within 1%).
//   - [B, H, S, D] in torch.compile's layout (twenty-ninth session,
//     BenchmarkTune, two rounds each, µs): Inductor's kernel (dumped) gives a
//     thread one 16-byte output, reading its own and its partner half's
//     elements, where ours rotates both halves of a chunk. Ours in that
//     layout (out of place only: in place, a thread would overwrite what its
//     partner still reads) was about 1% faster on an H100 (4x32x1024x128
//     27.36 → 27.07–27.10 at 256 threads, 8x32x2048x128 93.8 → 93.1,
//     16x32x4096x128 362.0 → 358.5–358.7; torch.compile took 26.59, 92.70
//     and 356.67 in BENCH-H100.md) and 2–7% slower on an H200 (20.8 →
//     21.3, 67.7 → 70.2–70.5, 254.4 → 265.3–265.9 at 128 threads; 4–7% at
//     256): not kept. That is the layout's cost on the H200 where ours is
//     1.11–1.15× torch.compile and its gain on the H100 where ours is
//     0.96–0.98×.
//   - An in-place identity pass (16-byte load and store back) streams at 99%
//     of a same-size copy (176–704 MB moved): rotating in place costs
//     nothing over a copy by itself.
//
// [B, H, S, D] launches whose data, read and written, exceed L2 read them
// under an L2 evict-last policy (load16_evict_last in kittens.cuh). On an
// H200, two rounds (µs, without → with): 4x32x1024x128 21.09 → 20.54 and
// 20.93 → 20.74, 8x32x2048x128 68.54 → 66.56 and 68.54 → 67.26 (in place
// 69.09 → 68.13 and 68.90 → 68.00), 16x32x4096x128 256.9 → 253.7 and
// 256.7 → 254.2 (in place 260.5 → 255.6 twice). In the eighth session
// BenchmarkTune (the policy's choice timed first and last, its opposite
// between) put 8x32x2048x128 the other way round on an H200 (67.49 and
// 67.58 → 65.86 without) and an H100 (93.76 and 93.82 → 91.04), yet
// kittens bench, after the bound was raised to 8 L2s, timed the cases it
// moved slower on both: H200 4x32x1024x128 20.64 → 20.90 and
// 8x32x2048x128 67.62 → 68.54, H100 27.30 → 27.65 and 93.70 → 94.21; the
// bound went back to one L2. The serving layout goes
// without: there it lost, llama3-8b T=4096 25.22 → 25.63 and 25.15 →
// 25.82, T=16384 85.54 → 87.42 and 85.50 → 87.23, deepseek-v3 T=4096
// 37.12 → 38.66 and 37.06 → 38.98 (flat launches, in place like the
// [B, H, S, D] ones above that gained).
func pickKnobs(props cuda.Props, tokens, heads, nc, chunkBytes int, spreadHeads bool) knobs {
	if !spreadHeads {
		evict := 2*int64(tokens)*int64(heads)*int64(nc)*int64(chunkBytes) > int64(props.L2Bytes)
		return knobs{hpt: 1, threads: 128, evict: evict}
	}
	hpt := min(4, max(1, flatBytes/chunkBytes))
	lanes := (heads + hpt - 1) / hpt
	const occ = 1536
	if int64(tokens)*int64(lanes)*int64(nc) >= 2*occ*int64(props.SMs) {
		return knobs{hpt: hpt, threads: 128, occ: occ, cs: true, flat: true}
	}
	return knobs{hpt: 4, threads: 128, occ: 1024, cs: true}
}

// tuning, when its threads is non-zero, overrides pickKnobs; only the
// tuning benchmark and the parity tests of other knobs set it.
var tuning knobs

// pickLaunch sizes a launch over tokens × heads × nc chunks of V pairs,
// chunkBytes of data each. A flat launch gives each thread one chunk of hpt
// heads of one token (head lanes: heads y, y + lanes, ...) in 1-D blocks.
// Otherwise a block holds the chunks of whole heads (x) and a thread hpt
// heads, blockDim.y apart. When a token's heads are adjacent in memory
// (spreadHeads, the serving layout), a block takes an even share of one
// token's heads (y; the grid's y splits the heads into as few shares as keep
// a block within the target size) and, when the token needs fewer threads
// than that, several tokens (z). Otherwise ([B, H, S, D]) a block takes hpt
// heads of as many consecutive tokens as fit (z), so each head's rows form
// one contiguous stretch, and the grid splits the heads.
func pickLaunch(props cuda.Props, tokens, heads, nc, chunkBytes int, spreadHeads bool) launchCfg {
	k := pickKnobs(props, tokens, heads, nc, chunkBytes, spreadHeads)
	if tuning.threads > 0 {
		k = tuning
	}
	lanes := (heads + k.hpt - 1) / k.hpt // head lanes of a token
	// A flat launch indexes its threads with an int, the last block's
	// spare threads included, and takes all heads at once: bounding
	// tokens × heads × chunks (not lanes) keeps its head indices, up to
	// heads + hpt, in an int too.
	if k.flat && spreadHeads && int64(tokens)*int64(heads)*int64(nc) <= math.MaxInt32-1024 {
		return launchCfg{knobs: k, hb: lanes, cb: 1, block: cuda.Dim3{X: uint32(k.threads), Y: 1, Z: 1}}
	}
	k.flat = false
	bx := min(nc, 1024) // heads of more chunks (r > 2048 at V = 1) take cb blocks
	cb := (nc + bx - 1) / bx
	if !spreadHeads {
		bz := max(1, min(64, k.threads/bx, tokens))
		return launchCfg{knobs: k, hb: k.hpt, cb: cb, block: cuda.Dim3{X: uint32(bx), Y: 1, Z: uint32(bz)}}
	}
	by := max(1, min(lanes, k.threads/bx)) // head lanes per block, within the target size
	shares := (lanes + by - 1) / by        // blocks per token
	by = (lanes + shares - 1) / shares     // evened out
	bz := max(1, min(64, k.threads/(bx*by), tokens))
	return launchCfg{knobs: k, hb: by * k.hpt, cb: cb, block: cuda.Dim3{X: uint32(bx), Y: uint32(by), Z: uint32(bz)}}
}

// kernelArgs is everything one launch of rope.cu takes beyond its spec.
type kernelArgs struct {
	src0, dst0, qk1, pos, cos, sin cuda.DevicePtr
	cosRow, sinRow, maxPos         int
	ntok, batch, n0, n1, half, d   int
	s0, d0                         [3]int // batch, token, head strides
	s1                             [2]int // token, head strides
}

// checkTokens refuses tokens the kernel cannot index, with an ArgError of op
// naming arg: it takes ntok as an int32, and a 3-D grid's token index,
// blockIdx.x·blockDim.z + threadIdx.z, is an int that must not pass
// 2³¹ − 1 in the last block (a flat launch needs no such check: pickLaunch
// takes it only when all its thread indices fit).
func checkTokens(cfg launchCfg, a kernelArgs, op, arg string) error {
	if cfg.flat {
		return nil
	}
	blocks := intmath.CeilDiv(a.ntok, int(cfg.block.Z))
	if last := int64(blocks)*int64(cfg.block.Z) - 1; a.ntok > math.MaxInt32 || last > math.MaxInt32 {
		return &tensor.ArgError{Op: op, Arg: arg, Msg: fmt.Sprintf(
			"%d tokens in blocks of %d (token indices up to %d) exceed the kernel's int32 token indexing",
			a.ntok, cfg.block.Z, last)}
	}
	return nil
}

// forParts calls f with each part of launch cfg over a (its heads hold nc
// chunks each, of esize-byte elements) and that part's grid, in order,
// stopping at the first error. Parts keep the grid within CUDA's limits: at
// most maxGrid batches, and runs of whole shares of the heads with at most
// maxGrid blocks of them. Nearly every launch is one part; the [B, H, S, D]
// layout takes more past 65535 batches or heads (fewer heads of long head
// dims: 21846 of 4098), the serving layout only where a flat launch would
// pass 2³¹ threads.
func forParts(cfg launchCfg, a kernelArgs, nc, esize int, f func(p kernelArgs, grid cuda.Dim3) error) error {
	heads := a.n0 + a.n1
	per := heads // heads per part
	if !cfg.flat {
		per = maxGrid / cfg.cb * cfg.hb
	}
	for b0 := 0; b0 < a.batch; b0 += maxGrid {
		for lo := 0; lo < heads; lo += per {
			p := a.part(b0, min(a.batch, b0+maxGrid), lo, min(heads, lo+per), esize)
			g := cuda.Dim3{X: uint32(intmath.CeilDiv(p.ntok, int(cfg.block.Z))),
				Y: uint32(intmath.CeilDiv(p.n0+p.n1, cfg.hb) * cfg.cb), Z: uint32(p.batch)}
			if cfg.flat {
				g = cuda.D1(intmath.CeilDiv(p.ntok*cfg.hb*nc, cfg.threads))
			}
			if err := f(p, g); err != nil {
				return err
			}
		}
	}
	return nil
}

// part returns the launch over batches [b0, b1) and heads [lo, hi) of a,
// esize bytes an element: its base pointers moved to the part's first batch
// and head, of src0 and dst0 for the heads before n0 and of qk1 for those
// after.
func (a kernelArgs) part(b0, b1, lo, hi, esize int) kernelArgs {
	at := func(p cuda.DevicePtr, elems int) cuda.DevicePtr {
		return p + cuda.DevicePtr(int64(elems)*int64(esize))
	}
	p := a
	p.batch = b1 - b0
	p.n0 = max(0, min(hi, a.n0)-lo)
	p.n1 = hi - lo - p.n0
	h0 := min(lo, a.n0) // src0/dst0 head the part starts at
	p.src0 = at(a.src0, b0*a.s0[0]+h0*a.s0[2])
	p.dst0 = at(a.dst0, b0*a.d0[0]+h0*a.d0[2])
	p.qk1 = at(a.qk1, max(0, lo-a.n0)*a.s1[1])
	return p
}

// launch runs one specialization of rope.cu on s (nil: default stream);
// spreadHeads says a token's heads are adjacent in memory (see pickLaunch).
// op and arg name the call and its data argument in errors.
func launch(s *cuda.Stream, dev *cuda.Device, sp spec, a kernelArgs, spreadHeads bool, op, arg string) error {
	if s == nil {
		s = dev.DefaultStream()
	}
	heads, nc := a.n0+a.n1, a.half/sp.v
	cfg := pickLaunch(dev.Props(), a.ntok*a.batch, heads, nc, 2*sp.v*sp.dt.Size(), spreadHeads)
	if err := checkTokens(cfg, a, op, arg); err != nil {
		return err
	}
	sp.hpt, sp.cs, sp.flat = cfg.hpt, cfg.cs, cfg.flat
	sp.evict = cfg.evict && sp.da == 16 // only 16-byte reads take the policy
	if cfg.occ > 0 {
		// The bound is for the target block size (≥ this block's), so
		// shapes that differ only in their blocks share a specialization.
		sp.maxT = max(cfg.threads, int(cfg.block.X*cfg.block.Y*cfg.block.Z))
		sp.minB = max(1, cfg.occ/sp.maxT)
	}
	sp.wide = !int32Offsets(heads, a)
	fn, err := ropeFuncs.Get(dev, s, sp)
	if err != nil {
		return err
	}
	return forParts(cfg, a, nc, sp.dt.Size(), func(a kernelArgs, grid cuda.Dim3) error {
		args := cuda.NewArgs().Ptr(a.src0).Ptr(a.dst0).Ptr(a.qk1).Ptr(a.pos).Ptr(a.cos).Ptr(a.sin).
			I64(int64(a.cosRow)).I64(int64(a.sinRow)).I64(int64(a.maxPos)).
			I32(int32(a.ntok)).I32(int32(a.n0)).I32(int32(a.n1)).I32(int32(cfg.hb)).I32(int32(cfg.cb)).I32(int32(a.half)).I32(int32(a.d)).
			I64(int64(a.s0[0])).I64(int64(a.s0[1]))
		headStride(args, a.s0[2], sp.wide).I64(int64(a.d0[0])).I64(int64(a.d0[1]))
		headStride(args, a.d0[2], sp.wide).I64(int64(a.s1[0]))
		headStride(args, a.s1[1], sp.wide)
		return fn.Launch(cuda.LaunchConfig{Grid: grid, Block: cfg.block, Stream: s}, args)
	})
}

// int32Offsets reports whether every head offset the kernel forms (head
// index × head stride, plus an element of the head) fits in an int32.
func int32Offsets(heads int, a kernelArgs) bool {
	worst := 0
	for _, st := range []int{a.s0[2], a.d0[2], a.s1[1]} {
		worst = max(worst, (heads-1)*max(st, -st))
	}
	return worst+a.d <= math.MaxInt32
}

// headStride appends a head stride as the kernel's HOff: int or i64.
func headStride(args *cuda.Args, v int, wide bool) *cuda.Args {
	if wide {
		return args.I64(int64(v))
	}
	return args.I32(int32(v))
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
	return launch(s, q.Device(), sp, a, true, "rope.RotateQK", "q")
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
	return launch(s, x.Device(), sp, a, false, "rope.Rope", "x")
}
