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

// kernelKey is one specialization of rope.cu.
type kernelKey struct {
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

func (k kernelKey) kernel() jit.Kernel {
	defs := map[string]any{"ROPE_T": k.dt, "ROPE_C": k.cdt, "ROPE_NEOX": k.style == NeoX,
		"ROPE_V": k.v, "ROPE_DA": k.da, "ROPE_HPT": k.hpt, "ROPE_PASS": k.pass,
		"ROPE_MAXT": k.maxT, "ROPE_MINB": k.minB, "ROPE_CS": k.cs, "ROPE_FLAT": k.flat,
		"ROPE_EVICT": k.evict, "ROPE_HOFF": "int"}
	if k.wide {
		defs["ROPE_HOFF"] = "i64"
	}
	if k.pos != tensor.Invalid {
		defs["ROPE_POS"] = k.pos
	}
	return jit.Kernel{File: "rope/rope.cu", Source: ropeSrc, Entry: "rope", Defines: jit.Defines(defs)}
}

var ropeFuncs = jit.Funcs[kernelKey]{Kernel: kernelKey.kernel}

// Prepare compiles, in parallel, the kernels rope uses most: for every
// activation dtype with an fp32 table and with one of its own dtype, both
// styles, on rows that take the widest vectors, RotateQK with int64
// positions at decode and at prefill sizes and Rope on data within and past
// L2. Calling it once at start-up keeps NVRTC out of the first calls; any
// kernel it skips is compiled on first use. A nil dev is an error.
func Prepare(dev *cuda.Device) error {
	v := tensor.Validate("rope.Prepare")
	v.Check(dev != nil, "dev", "is nil")
	if err := v.Err(); err != nil {
		return err
	}
	var ks []jit.Kernel
	for _, key := range prepared(dev.Props()) {
		ks = append(ks, key.kernel())
	}
	return jit.Prepare(dev, ks)
}

// prepared lists the specializations Prepare compiles on a device with
// props: those that pickLaunch gives llama3-8b's 32 + 8 heads of 128 at 1
// and 16384 tokens (RotateQK), and 32 heads of 128 at 128 and 16384 rows a
// head (Rope). Other head counts and sizes mostly share them.
func prepared(props cuda.Props) []kernelKey {
	const half = 64
	var keys []kernelKey
	seen := map[kernelKey]bool{}
	add := func(k kernelKey) {
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16, tensor.F32} {
		for _, cdt := range []tensor.DType{tensor.F32, dt} {
			for _, style := range []Style{NeoX, GPTJ} {
				key := kernelKey{dt: dt, cdt: cdt, style: style}
				key.v, key.da = pickPairs(style, dt, cdt, half, nil, nil)
				nc, chunk := half/key.v, 2*key.v*dt.Size()
				qk := key
				qk.pos = tensor.I64
				for _, tokens := range []int{1, 16384} {
					add(qk.withLaunch(pickLaunch(props, tokens, 40, nc, chunk, true)))
				}
				for _, rows := range []int{128, 16384} {
					add(key.withLaunch(pickLaunch(props, rows, 32, nc, chunk, false)))
				}
			}
		}
	}
	return keys
}

// maxGrid is CUDA's limit on gridDim.y and gridDim.z (gridDim.x may reach
// math.MaxInt32). A launch whose batch (z) or heads (y: shares of the heads
// times cb blocks of chunks) need more is cut into parts that fit
// (forParts).
const maxGrid = 65535

// kernelArgs is everything one launch of rope.cu takes beyond its kernelKey.
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
func launch(s *cuda.Stream, dev *cuda.Device, key kernelKey, a kernelArgs, spreadHeads bool, op, arg string) error {
	if s == nil {
		s = dev.DefaultStream()
	}
	heads, nc := a.n0+a.n1, a.half/key.v
	cfg := pickLaunch(dev.Props(), a.ntok*a.batch, heads, nc, 2*key.v*key.dt.Size(), spreadHeads)
	if err := checkTokens(cfg, a, op, arg); err != nil {
		return err
	}
	key = key.withLaunch(cfg)
	key.wide = !int32Offsets(heads, a)
	fn, err := ropeFuncs.Get(dev, s, key)
	if err != nil {
		return err
	}
	return forParts(cfg, a, nc, key.dt.Size(), func(a kernelArgs, grid cuda.Dim3) error {
		args := cuda.NewArgs().Ptr(a.src0).Ptr(a.dst0).Ptr(a.qk1).Ptr(a.pos).Ptr(a.cos).Ptr(a.sin).
			I64(int64(a.cosRow)).I64(int64(a.sinRow)).I64(int64(a.maxPos)).
			I32(int32(a.ntok)).I32(int32(a.n0)).I32(int32(a.n1)).I32(int32(cfg.hb)).I32(int32(cfg.cb)).I32(int32(a.half)).I32(int32(a.d)).
			I64(int64(a.s0[0])).I64(int64(a.s0[1]))
		headStride(args, a.s0[2], key.wide).I64(int64(a.d0[0])).I64(int64(a.d0[1]))
		headStride(args, a.d0[2], key.wide).I64(int64(a.s1[0]))
		headStride(args, a.s1[1], key.wide)
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
	key := kernelKey{dt: q.DType(), cdt: cosSin.DType(), pos: positions.DType(), style: style}
	key.v, key.da = pickPairs(style, q.DType(), cosSin.DType(), half, data, tables)
	return launch(s, q.Device(), key, a, true, "rope.RotateQK", "q")
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
	key := kernelKey{dt: x.DType(), cdt: cos.DType(), style: style}
	key.v, key.da = pickPairs(style, x.DType(), cos.DType(), half, data, tables)
	if r < a.d && !tensor.Same(y, x) {
		key.pass = pickPass(x.DType(), r, a.d, data)
	}
	return launch(s, x.Device(), key, a, false, "rope.Rope", "x")
}
