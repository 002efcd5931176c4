package moe

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

//go:embed permute.cu
var permuteSrc string

// PermuteOptions are Permute's optional arguments.
type PermuteOptions struct {
	// Count, when not nil, is an i32 tensor [1] where the other tensors
	// are (vLLM's num_tokens_post_pad): only the first Count rows of y
	// (and scales) are written, the rest are left as they are. A Count
	// below 0 writes none, one above P all. The kernel reads it, so a
	// serving loop can pass the count an earlier op wrote on the device
	// without waiting for it.
	Count *tensor.Tensor
}

// Permute gathers token rows into expert order: y[p] = x[idx[p] / k] for
// every sorted position p, where idx holds the flat index f = t·k + j of
// the (token t, slot j) pair at p, as vLLM's sorted_token_ids (padded per
// expert with T·k) and triton_kernels' gather indices both do. An idx entry
// outside [0, T·k) is padding and gives a zero row (so do −1 entries).
//
// x is [T, H] f32, bf16 or f16; idx is [P] i32, contiguous; y is [P, H],
// with x's dtype (a bit-exact copy of each row) or f8e4m3 (the row
// quantized on the way, see below); scales is [P] f32, contiguous, given
// exactly when y is f8e4m3. x and y may have row strides; H may be any
// size (16-byte accesses where the pointers, row strides and H allow,
// narrower ones otherwise). k ≥ 1 and T·k < 2^31. P = 0 is a no-op.
//
// Quantization is per row and dynamic, in fp32: amax = max |x[r, c]| over
// the row, scales[p] = amax / 448 (rounded to nearest even), and y[p, c] =
// x[r, c] / scales[p] rounded to nearest even and saturated to ±448, as
// torch's (x / scale).clamp(−448, 448).to(torch.float8_e4m3fn) computes
// it; the kernel's result is the CPU reference's bit for bit. A padding row has scale 0 and zeros. A row of
// zeros (or of fp32 values all below 448·2^−150, whose amax / 448 rounds
// to 0) has scale 0 and its elements' signed zeros. A row that holds a NaN
// or an infinity has a NaN scale and NaN (0x7f) in every element: its
// scale would be meaningless. FP8 output needs compute capability 8.9 or
// later.
//
// Host tensors run the CPU reference, device tensors the kernel, on s
// (nil: the device's default stream); the call queues work and never
// waits, so it can be captured in a CUDA graph. Nothing is written when an
// argument is bad; idx's values are not checked (an entry out of range is
// padding).
func Permute(s *cuda.Stream, y, scales, x, idx *tensor.Tensor, k int, o PermuteOptions) error {
	if err := permuteValidate(s, y, scales, x, idx, k, o); err != nil {
		return err
	}
	if idx.Dim(0) == 0 || (x.Dim(1) == 0 && scales == nil) {
		return nil
	}
	if !y.IsDevice() {
		permuteReference(y, scales, x, idx, k, o.Count)
		return nil
	}
	return permuteLaunch(s, y, scales, x, idx, k, o.Count)
}

// Unpermute combines expert rows back into token order: out[t] =
// Σ_j w[t, j]·y[pos[t·k + j]] over the slots j = 0..k−1 in order, each
// product added with one fused multiply-add into fp32 accumulators, the
// sum rounded once to out's dtype. pos maps each flat index f = t·k + j to
// its sorted row p (triton_kernels' scatter indices, or the inverse of
// vLLM's sorted_token_ids). A pos entry outside [0, P), −1 in particular,
// marks a dropped slot (its expert lives on another rank): it contributes
// nothing and its row is not read; a token whose slots are all dropped
// gets zeros.
//
// y is [P, H] and out [T, H], each f32, bf16 or f16 (they may differ), with
// row strides allowed; pos is i32 [T·k] or [T, k], or nil: y then holds
// the T·k rows in flat order (P = T·k, vLLM's moe_sum with weights); w is
// f32 [T, k], or nil for weights of 1. pos and w are contiguous. k ≥ 1 and
// T·k < 2^31. NaN and infinities in the rows read, or in their weights,
// propagate as in the sum. T = 0 or H = 0 is a no-op.
//
// Host tensors run the CPU reference (float64 sums), device tensors the
// kernel, on s (nil: the device's default stream), without waiting: the
// call can be captured in a CUDA graph. Nothing is written when an
// argument is bad; pos's values are not checked (an entry out of range is
// a dropped slot).
func Unpermute(s *cuda.Stream, out, y, pos, w *tensor.Tensor, k int) error {
	if err := unpermuteValidate(s, out, y, pos, w, k); err != nil {
		return err
	}
	if out.Dim(0) == 0 || out.Dim(1) == 0 {
		return nil
	}
	if !out.IsDevice() {
		unpermuteReference(out, y, pos, w, k)
		return nil
	}
	return unpermuteLaunch(s, out, y, pos, w, k)
}

// permuteFloats are the row dtypes Permute reads and Unpermute reads and
// writes.
var permuteFloats = []tensor.DType{tensor.F32, tensor.BF16, tensor.F16}

// permuteMaxH is the longest row the kernels index with int: a pass's
// access index runs up to a chunk (at most 512·4 accesses) past the row.
const permuteMaxH = math.MaxInt32 - 1<<12

// permuteFP8Arch is the first compute capability (major·10 + minor) whose
// conversions write e4m3.
const permuteFP8Arch = 89

// permuteFlat checks k and the flat index range of T tokens for op's
// validator v.
func permuteFlat(v *tensor.Validator, tokens, k int) {
	v.Check(k >= 1, "k", "is %d, want k ≥ 1", k)
	v.Check(k < 1 || tokens <= math.MaxInt32/k, "k", "is %d for %d tokens: T·k must stay below 2^31 (flat indices are i32)", k, tokens)
}

func permuteValidate(s *cuda.Stream, y, scales, x, idx *tensor.Tensor, k int, o PermuteOptions) error {
	v := tensor.Validate("moe.Permute")
	v.Tensor("x", x).Rank(2).DType(permuteFloats...)
	v.Tensor("idx", idx).Rank(1).DType(tensor.I32).Contiguous()
	v.Tensor("y", y).Rank(2)
	if err := v.Err(); err != nil {
		return err
	}
	tokens, h, p := x.Dim(0), x.Dim(1), idx.Dim(0)
	permuteFlat(v, tokens, k)
	v.Check(h <= permuteMaxH, "x", "has rows of %d elements, more than the kernel's %d", h, permuteMaxH)
	v.Check(p <= math.MaxInt32, "idx", "has %d entries, more than the kernel's i32 positions reach", p)
	v.Tensor("y", y).Shape(p, h)
	quant := y.DType() == tensor.F8E4M3
	v.Check(quant || y.DType() == x.DType(), "y", "has dtype %v, want %v like x, or f8e4m3 to quantize", y.DType(), x.DType())
	if quant {
		v.Tensor("scales", scales).Rank(1).Shape(p).DType(tensor.F32).Contiguous()
	} else {
		v.Check(scales == nil, "scales", "is given but y is %v: scales come with f8e4m3 output only", y.DType())
	}
	v.Optional("o.Count", o.Count).Rank(1).Shape(1).DType(tensor.I32)
	if err := v.Err(); err != nil {
		return err
	}
	v.SameLocation(s, []string{"y", "scales", "x", "idx", "o.Count"}, y, scales, x, idx, o.Count)
	v.NoOverlap("y", y, "x", x)
	v.NoOverlap("y", y, "idx", idx)
	v.NoOverlap("y", y, "o.Count", o.Count)
	v.NoOverlap("scales", scales, "x", x)
	v.NoOverlap("scales", scales, "idx", idx)
	v.NoOverlap("scales", scales, "y", y)
	v.NoOverlap("scales", scales, "o.Count", o.Count)
	if err := v.Err(); err != nil || !y.IsDevice() {
		return err
	}
	if pr := y.Device().Props(); quant && pr.Major*10+pr.Minor < permuteFP8Arch {
		v.Failf("y", "is f8e4m3, which needs compute capability 8.9 or later; %s is %d.%d", pr.Name, pr.Major, pr.Minor)
	}
	return v.Err()
}

func unpermuteValidate(s *cuda.Stream, out, y, pos, w *tensor.Tensor, k int) error {
	v := tensor.Validate("moe.Unpermute")
	v.Tensor("out", out).Rank(2).DType(permuteFloats...)
	v.Tensor("y", y).Rank(2).DType(permuteFloats...)
	v.Optional("pos", pos).Rank(1, 2).DType(tensor.I32).Contiguous()
	if err := v.Err(); err != nil {
		return err
	}
	tokens, h, rows := out.Dim(0), out.Dim(1), y.Dim(0)
	permuteFlat(v, tokens, k)
	v.Check(h <= permuteMaxH, "out", "has rows of %d elements, more than the kernel's %d", h, permuteMaxH)
	v.Tensor("y", y).Shape(-1, h)
	v.Check(rows <= math.MaxInt32, "y", "has %d rows, more than i32 positions reach", rows)
	if err := v.Err(); err != nil {
		return err
	}
	switch {
	case pos == nil:
		v.Check(rows == tokens*k, "y", "has %d rows; without pos it holds the T·k = %d rows in flat order", rows, tokens*k)
	case pos.Rank() == 1:
		v.Tensor("pos", pos).Shape(tokens * k)
	default:
		v.Tensor("pos", pos).Shape(tokens, k)
	}
	v.Optional("w", w).Rank(2).Shape(tokens, k).DType(tensor.F32).Contiguous()
	if err := v.Err(); err != nil {
		return err
	}
	v.SameLocation(s, []string{"out", "y", "pos", "w"}, out, y, pos, w)
	v.NoOverlap("out", out, "y", y)
	v.NoOverlap("out", out, "pos", pos)
	v.NoOverlap("out", out, "w", w)
	return v.Err()
}

// permuteReference is Permute's CPU path: byte copies of the rows, or the
// quantization in fp32 as the kernel computes it.
func permuteReference(y, scales, x, idx *tensor.Tensor, k int, count *tensor.Tensor) {
	h, numel := x.Dim(1), int64(x.Dim(0))*int64(k)
	rows := idx.Dim(0)
	if count != nil {
		rows = int(min(max(count.Int64s()[0], 0), int64(rows)))
	}
	in, out := x.DType().Size(), y.DType().Size()
	xb, yb := x.Bytes(), y.Bytes()
	sx, sy := x.Stride(0), y.Stride(0)
	var xv []float64
	if scales != nil {
		xv = x.Float64s()
	}
	for p, f := range idx.Int64s()[:rows] {
		var dst []byte // y's row p; none where H = 0 (y has no storage then)
		if h > 0 {
			dst = yb[p*sy*out:][:h*out]
		}
		scale := float32(0)
		switch r := int(f / int64(k)); {
		case f < 0 || f >= numel:
			clear(dst)
		case scales == nil:
			copy(dst, xb[r*sx*in:][:h*in])
		default:
			scale = permuteQuantizeRow(dst, xv[r*h:][:h])
		}
		if scales != nil {
			binary.LittleEndian.PutUint32(scales.Bytes()[4*p:], math.Float32bits(scale))
		}
	}
}

// permuteQuantizeRow writes row (values of x, exact in fp32) to dst as
// e4m3 bytes and returns its scale, in fp32 arithmetic as the kernel does.
func permuteQuantizeRow(dst []byte, row []float64) float32 {
	var m uint32
	for _, v := range row {
		m = max(m, math.Float32bits(float32(v))&0x7fffffff)
	}
	if m >= 0x7f800000 { // a NaN or an infinity
		for i := range dst {
			dst[i] = 0x7f
		}
		return math.Float32frombits(0x7fc00000)
	}
	scale := math.Float32frombits(m) / 448
	for i, v := range row {
		q := float32(math.Copysign(0, v))
		if scale > 0 {
			q = float32(v) / scale
		}
		dst[i] = tensor.F8E4M3Bits(float64(q))
	}
	return scale
}

// unpermuteReference is Unpermute's CPU path, with float64 sums.
func unpermuteReference(out, y, pos, w *tensor.Tensor, k int) {
	tokens, h, rows := out.Dim(0), out.Dim(1), int64(y.Dim(0))
	yv := y.Float64s()
	var ps []int64
	if pos != nil {
		ps = pos.Int64s()
	}
	var ws []float64
	if w != nil {
		ws = w.Float64s()
	}
	sum := make([]float64, tokens*h)
	for f := range tokens * k {
		p, wf := int64(f), 1.0
		if ps != nil {
			p = ps[f]
		}
		if p < 0 || p >= rows {
			continue
		}
		if ws != nil {
			wf = ws[f]
		}
		acc := sum[f/k*h:][:h]
		for c, v := range yv[p*int64(h):][:h] {
			acc[c] += wf * v
		}
	}
	out.SetFloat64s(sum)
}

// permuteConfig is the launch shape of either kernel (see permute.cu).
type permuteConfig struct {
	vec     int  // elements per access
	vpt     int  // accesses a lane takes per pass
	lanes   int  // threads per row: a power of two up to 32, or a multiple of 32 (the whole block)
	threads int  // block size
	fits    bool // one pass covers the row
}

// Picker constants. A lane takes up to permuteVPT accesses a pass (64
// bytes in flight at 16-byte accesses); rows that need up to 32 lanes take
// a power of two of them, several rows to a block of permuteGroupBlock
// threads; longer rows take a block of their own, of up to permuteMaxLanes
// threads, which loops over rows longer than a pass.
const (
	permuteVPT        = 4
	permuteGroupBlock = 128
	permuteMaxLanes   = 512
)

// pickPermute returns the launch shape for rows of h elements at vec
// elements per access on a device of props: the lanes that give each about
// permuteVPT accesses. It needs no dynamic shared memory (the block
// reduction's 64 bytes are static).
func pickPermute(props cuda.Props, h, vec int) permuteConfig {
	acc := intmath.CeilDiv(h, vec)
	need := max(1, intmath.CeilDiv(acc, permuteVPT))
	c := permuteConfig{vec: vec}
	if need <= 32 {
		c.lanes, c.threads = intmath.NextPow2(need), permuteGroupBlock
	} else {
		most := permuteMaxLanes
		if props.MaxThreadsPerBlock >= 32 {
			most = min(most, props.MaxThreadsPerBlock/32*32)
		}
		c.lanes = min(intmath.RoundUp(need, 32), most)
		c.threads = c.lanes
	}
	c.vpt = min(max(1, intmath.CeilDiv(acc, c.lanes)), permuteVPT)
	c.fits = c.lanes*c.vpt >= acc
	return c
}

// permuteVec returns the widest access, at most 16 bytes of the widest
// dtype among ts, in elements, that divides h and to which every row start
// of every tensor of ts is aligned.
func permuteVec(h int, ts ...*tensor.Tensor) int {
	widest := 1
	for _, t := range ts {
		widest = max(widest, t.DType().Size())
	}
	fits := func(v int) bool {
		if h%v != 0 {
			return false
		}
		for _, t := range ts {
			if uint64(t.Ptr())%uint64(v*t.DType().Size()) != 0 || (t.Dim(0) > 1 && t.Stride(0)%v != 0) {
				return false
			}
		}
		return true
	}
	v := 16 / widest
	for v > 1 && !fits(v) {
		v /= 2
	}
	return v
}

// permuteKey is one specialization of moe_permute: x's and y's dtypes (y
// f8e4m3: QUANT) and the launch shape.
type permuteKey struct {
	in, out tensor.DType
	cfg     permuteConfig
}

// unpermuteKey is one specialization of moe_unpermute: y's and out's
// dtypes and the launch shape.
type unpermuteKey struct {
	in, out tensor.DType
	cfg     permuteConfig
}

// permuteKernel is permute.cu's entry for one build.
func permuteKernel(in, out tensor.DType, cfg permuteConfig, unpermute bool) jit.Kernel {
	entry := "moe_permute"
	if unpermute {
		entry = "moe_unpermute"
	}
	return jit.Kernel{File: "moe/permute.cu", Source: permuteSrc, Entry: entry, Defines: jit.Defines(map[string]any{
		"SRC": in, "DST": out, "QUANT": out == tensor.F8E4M3, "UNPERMUTE": unpermute,
		"VEC": cfg.vec, "VPT": cfg.vpt, "LANES": cfg.lanes, "THREADS": cfg.threads, "FITS": cfg.fits,
	})}
}

var (
	permuteFuncs = jit.Funcs[permuteKey]{Kernel: func(k permuteKey) jit.Kernel {
		return permuteKernel(k.in, k.out, k.cfg, false)
	}}
	unpermuteFuncs = jit.Funcs[unpermuteKey]{Kernel: func(k unpermuteKey) jit.Kernel {
		return permuteKernel(k.in, k.out, k.cfg, true)
	}}
)

// permutePreparedH are the hidden sizes Prepare compiles for: Qwen3-MoE and
// Qwen3-Next, Mixtral, Llama-4, DeepSeek-V3.
var permutePreparedH = []int{2048, 4096, 5120, 7168}

// preparedPermute lists the kernels Prepare compiles: for every row dtype
// and the hidden sizes above, on 16-byte-aligned rows, the copy and the fp8
// permute and the unpermute into the same dtype.
func preparedPermute(props cuda.Props) []jit.Kernel {
	var ks []jit.Kernel
	for _, dt := range permuteFloats {
		for _, h := range permutePreparedH {
			cfg := pickPermute(props, h, 16/dt.Size())
			ks = append(ks, permuteFuncs.Kernel(permuteKey{dt, dt, cfg}), unpermuteFuncs.Kernel(unpermuteKey{dt, dt, cfg}))
			if props.Major*10+props.Minor >= permuteFP8Arch {
				ks = append(ks, permuteFuncs.Kernel(permuteKey{dt, tensor.F8E4M3, cfg}))
			}
		}
	}
	return ks
}

// permuteGrid is the blocks that cover n rows, THREADS/LANES a block.
func permuteGrid(n int, cfg permuteConfig) cuda.Dim3 {
	return cuda.D1(intmath.CeilDiv(n, cfg.threads/cfg.lanes))
}

// permutePtr is t's device address, or 0 for a nil t.
func permutePtr(t *tensor.Tensor) cuda.DevicePtr {
	if t == nil {
		return 0
	}
	return t.Ptr()
}

func permuteLaunch(s *cuda.Stream, y, scales, x, idx *tensor.Tensor, k int, count *tensor.Tensor) error {
	dev := y.Device()
	if s == nil {
		s = dev.DefaultStream()
	}
	h, rows := x.Dim(1), idx.Dim(0)
	cfg := pickPermute(dev.Props(), h, permuteVec(h, x, y))
	fn, err := permuteFuncs.Get(dev, s, permuteKey{x.DType(), y.DType(), cfg})
	if err != nil {
		return fmt.Errorf("moe.Permute: %w", err)
	}
	a := cuda.NewArgs().Ptr(y.Ptr()).I64(int64(y.Stride(0))).Ptr(permutePtr(scales)).Ptr(x.Ptr()).I64(int64(x.Stride(0))).
		Ptr(idx.Ptr()).Ptr(permutePtr(count)).I32(int32(rows)).I32(int32(x.Dim(0) * k)).I32(int32(k)).I32(int32(h))
	if err := fn.Launch(cuda.LaunchConfig{Grid: permuteGrid(rows, cfg), Block: cuda.D1(cfg.threads), Stream: s}, a); err != nil {
		return fmt.Errorf("moe.Permute: %w", err)
	}
	return nil
}

func unpermuteLaunch(s *cuda.Stream, out, y, pos, w *tensor.Tensor, k int) error {
	dev := out.Device()
	if s == nil {
		s = dev.DefaultStream()
	}
	tokens, h := out.Dim(0), out.Dim(1)
	cfg := pickPermute(dev.Props(), h, permuteVec(h, y, out))
	fn, err := unpermuteFuncs.Get(dev, s, unpermuteKey{y.DType(), out.DType(), cfg})
	if err != nil {
		return fmt.Errorf("moe.Unpermute: %w", err)
	}
	a := cuda.NewArgs().Ptr(out.Ptr()).I64(int64(out.Stride(0))).Ptr(y.Ptr()).I64(int64(y.Stride(0))).
		Ptr(permutePtr(pos)).Ptr(permutePtr(w)).I32(int32(tokens)).I32(int32(k)).I32(int32(y.Dim(0))).I32(int32(h))
	if err := fn.Launch(cuda.LaunchConfig{Grid: permuteGrid(tokens, cfg), Block: cuda.D1(cfg.threads), Stream: s}, a); err != nil {
		return fmt.Errorf("moe.Unpermute: %w", err)
	}
	return nil
}
