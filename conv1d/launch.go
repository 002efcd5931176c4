package conv1d

import (
	_ "embed"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/jit"
	"github.com/gokittens/kittens/tensor"
)

//go:embed conv1d.cu
var kernelSrc string

// kernelKey is one specialization of conv1d.cu.
type kernelKey struct {
	dtype     tensor.DType
	width     int  // taps W
	vec       int  // channels per thread (VEC·size ≤ 16 bytes)
	unroll    int  // tokens loaded before computing
	silu      bool // SiLU epilogue
	hints     bool // read-once/write-once cache hints on x and y (not in place)
	minBlocks int  // blocks of 128 threads per SM the registers must allow
	mode      int  // decode state rule: modeShift, modeSpec or modeCircular
	ring      int  // rows per bulk-copied stage of x; 0: x through registers
	stages    int  // ring stages (with ring)
	evictLast bool // the ring's bulk copies ask L2 to evict their lines last
}

func (k kernelKey) kernel() jit.Kernel {
	return jit.Kernel{File: "conv1d/conv1d.cu", Source: kernelSrc, Entry: "conv1d_fwd",
		Defines: jit.Defines(map[string]any{"DTYPE": k.dtype, "WIDTH": k.width, "VEC": k.vec,
			"UNROLL": k.unroll, "SILU": k.silu, "HINTS": k.hints, "MINB": k.minBlocks, "MODE": k.mode,
			"RING": k.ring, "STAGES": max(k.stages, 1), "EVICT_LAST": k.evictLast})}
}

var kernels = jit.Funcs[kernelKey]{Kernel: kernelKey.kernel}

// tune, when set (tests only), replaces the configuration picked for p.
var tune func(p *plan, sh shape, c config) config

// preparedShapes are the calls Prepare compiles for, at dim 8192: prefill
// larger and smaller than L2, and decode of one token (shallow and deep
// batches) and of four.
var preparedShapes = []shape{
	{dim: 8192, tokens: 4096, seqs: 1},
	{dim: 8192, tokens: 1024, seqs: 1},
	{dim: 8192, tokens: 32, seqs: 32, seqLen: 1},
	{dim: 8192, tokens: 256, seqs: 256, seqLen: 1},
	{dim: 8192, tokens: 1024, seqs: 256, seqLen: 4},
}

// Prepare compiles, in parallel, the kernels conv1d uses most on dev: width
// 4 with SiLU in every dtype, on 16-byte aligned rows, for prefill (calls
// larger and smaller than L2) and for decode of one token (few and many
// sequences) and of four in each decode mode, configured as dev's launches
// pick them. Calling it once at start-up keeps NVRTC out of the first
// calls; any kernel it skips is compiled on first use.
func Prepare(dev *cuda.Device) error {
	v := tensor.Validate("conv1d.Prepare")
	v.Check(dev != nil, "dev", "is nil")
	if err := v.Err(); err != nil {
		return err
	}
	var ks []jit.Kernel
	for _, k := range pickedKeys(dev.Props(), preparedShapes, []int{MaxWidth}, []bool{true}) {
		ks = append(ks, k.kernel())
	}
	return jit.Prepare(dev, ks)
}

// maxGridY is the most blocks a launch may have along y (and z).
const maxGridY = 65535

// gridOf lays out the launch: channel blocks along x, fastest, so that the
// blocks in flight read and write whole rows; slots along y, spilling into z
// past maxGridY (the kernel skips the surplus the rounding adds). The slot
// is then blockIdx.z·gridDim.y + blockIdx.y: no division in the kernel.
func gridOf(slots, chanBlocks int) cuda.Dim3 {
	z := (slots + maxGridY - 1) / maxGridY
	return cuda.Dim3{X: uint32(chanBlocks), Y: uint32((slots + z - 1) / z), Z: uint32(z)}
}

// maxVec is the widest channel group (a power of two, at most 16 bytes)
// that every device access of p allows: channel counts, split points and
// strides divisible by it, base addresses aligned to its size.
func (p *plan) maxVec() int {
	es := p.x.DType().Size()
	for vec := maxVecBytes / es; vec > 1; vec /= 2 {
		ok := p.dim%vec == 0 && p.split[0]%vec == 0 && p.split[1]%vec == 0
		aligned := func(t *tensor.Tensor, strides ...int) {
			if t == nil {
				return
			}
			ok = ok && uint64(t.Ptr())%uint64(vec*es) == 0
			for _, s := range strides {
				ok = ok && t.Stride(s)%vec == 0
			}
		}
		aligned(p.x, 0)
		aligned(p.w)
		aligned(p.bias)
		for _, o := range p.outs {
			aligned(o, 0)
		}
		aligned(p.stateIn, 0, 1)
		aligned(p.stateOut, 0, 1)
		if ok {
			return vec
		}
	}
	return 1
}

func ptrOf(t *tensor.Tensor) cuda.DevicePtr {
	if t == nil {
		return 0
	}
	return t.Ptr()
}

func stridesOf(t *tensor.Tensor) (slot int64, col int32) {
	if t == nil {
		return 0, 0
	}
	return int64(t.Stride(0)), int32(t.Stride(1))
}

// launch runs the kernel for a validated device plan.
func (p *plan) launch(s *cuda.Stream) error {
	dev := p.x.Device()
	if s == nil {
		s = dev.DefaultStream()
	}
	sh := shape{dim: p.dim, tokens: p.tokens, seqs: p.nSeqs, elemSize: p.x.DType().Size(),
		maxVec: p.maxVec(), inPlace: p.inPlace}
	if p.cu == nil {
		sh.seqLen = p.seqLen
	}
	c := pickConfig(dev.Props(), sh)
	if tune != nil {
		c = tune(p, sh, c)
	}
	fn, err := kernels.Get(dev, s, c.key(p.x.DType(), p.width, p.silu, p.mode))
	if err != nil {
		return err
	}
	slots, chanBlocks := c.grid(sh)
	outs, os := [3]cuda.DevicePtr{}, [3]int32{}
	for i := range outs {
		o := p.outs[i]
		if o == nil {
			o = p.outs[0] // unused part: split boundaries never reach it
		}
		outs[i], os[i] = o.Ptr(), int32(o.Stride(0))
	}
	inSlot, inCol := stridesOf(p.stateIn)
	outSlot, outCol := stridesOf(p.stateOut)
	seqLen := int32(p.seqLen)
	if p.cu != nil {
		seqLen = 0
	}
	a := cuda.NewArgs().
		Ptr(p.x.Ptr()).I32(int32(p.x.Stride(0))).I32(int32(p.tokens)).I32(int32(p.dim)).
		Ptr(p.w.Ptr()).Ptr(ptrOf(p.bias)).
		Ptr(outs[0]).Ptr(outs[1]).Ptr(outs[2]).I32(os[0]).I32(os[1]).I32(os[2]).
		I32(int32(p.split[0])).I32(int32(p.split[1])).
		Ptr(ptrOf(p.cu)).I32(seqLen).I32(int32(p.nSeqs)).
		Ptr(ptrOf(p.slots)).Ptr(ptrOf(p.hasInit)).
		Ptr(ptrOf(p.stateIn)).I64(inSlot).I32(inCol).
		Ptr(ptrOf(p.stateOut)).I64(outSlot).I32(outCol).
		I32(int32(p.nSlots)).I32(int32(p.stateLen)).I32(int32(c.chunk)).Ptr(ptrOf(p.modeIdx)).Ptr(ptrOf(p.errFlag))
	return fn.Launch(cuda.LaunchConfig{
		Grid:   gridOf(slots, chanBlocks),
		Block:  cuda.D1(c.threads),
		Shared: c.shared(sh.elemSize),
		Stream: s,
	}, a)
}
