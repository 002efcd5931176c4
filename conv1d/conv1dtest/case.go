package conv1dtest

import (
	"math"
	"math/rand/v2"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/conv1d"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/tensor"
)

// Op is the entry point of conv1d a Case calls.
type Op int

// The entry points.
const (
	OpForward      Op = iota // conv1d.Forward
	OpForwardSplit           // conv1d.ForwardSplit
	OpDense                  // conv1d.ForwardDense
	OpUpdate                 // conv1d.Update
	OpUpdateSplit            // conv1d.UpdateSplit
)

// Case describes one call of any entry point: its shapes, sequences, state
// pool and options. Build turns it into tensors and the call, so parity
// cases, benchmark cases and tests share one builder.
type Case struct {
	Name             string
	Op               Op
	DType            tensor.DType
	Width            int     // W, the taps per channel
	Dim              int     // channels of OpForward, OpDense and OpUpdate
	KeyDim, ValueDim int     // the split forms: dim = 2·KeyDim + ValueDim
	Lens             []int   // OpForward, OpForwardSplit: the sequence lengths
	Batch, SeqLen    int     // OpDense, OpUpdate, OpUpdateSplit: B and L (decode: 0 means x [B, dim])
	NSlots           int     // the pool's slots; 0 means B
	StateLen         int     // the state rows' length; 0 means W−1
	Pads             []int   // the sequences given the pad slot −1
	InitShare        float64 // varlen: the share of sequences that start from their state
	NoStates         bool    // varlen: no ConvStates (nor indices)
	NoIndices        bool    // sequence b uses slot b
	NoBias           bool
	SiLU             bool
	Accepted         bool // decode: NumAcceptedTokens, random in [1, L]
	Circular         bool // decode: CacheSeqlens, random (one near 2^30)
	InPlace          bool // OpUpdate: out is x; OpDense: the final states are the initial states
	DenseInit        bool // OpDense: initial states given
	DenseFinal       bool // OpDense: final states given
	RowPad           int  // extra elements after each row of x
}

// Decode state rules a benchmark runs under.
const (
	modeShift = iota
	modeSpec
	modeCircular
)

// specTokens is L, the tokens a sequence verifies, in the
// speculative-decoding benchmarks.
const specTokens = 4

// inMode is decode case c under a state rule: the plain shift as it is;
// speculative decoding, specTokens tokens a sequence, vLLM's state_len =
// W−2+L, accepted counts random in [1, L]; or the circular buffer, random
// ring positions (one near 2^30).
func (c Case) inMode(mode int) Case {
	switch mode {
	case modeSpec:
		c.Accepted, c.SeqLen, c.StateLen = true, specTokens, c.Width-2+specTokens
	case modeCircular:
		c.Circular = true
	}
	return c
}

// Built is a Case turned into host tensors and a call on them.
type Built struct {
	Tensors []*tensor.Tensor
	Names   []string // of Tensors: "x", "w", "bias", "y" or "q", "k", "v", "cu_seqlens", "conv_states", ...
	Outputs []int    // the indices of the tensors the call writes
	Exact   []int    // outputs that are plain copies (the states): compared with zero tolerance
	Bytes   int64    // the fewest bytes the call moves

	marked []int // outputs whose rows the op must write hold the poison (check.Spec.Marked)
	call   func(s *cuda.Stream, ts []*tensor.Tensor, o conv1d.Options) error
}

// Call runs the case's entry point on ts, Tensors or copies of them (on a
// device, for instance), in the same order.
func (b *Built) Call(s *cuda.Stream, ts []*tensor.Tensor, o conv1d.Options) error {
	return b.call(s, ts, o)
}

// Named returns the built tensor called name, or nil.
func (b *Built) Named(name string) *tensor.Tensor {
	for i, n := range b.Names {
		if n == name {
			return b.Tensors[i]
		}
	}
	return nil
}

func (b *Built) add(name string, t *tensor.Tensor) int {
	if t == nil {
		return -1
	}
	b.Tensors = append(b.Tensors, t)
	b.Names = append(b.Names, name)
	return len(b.Tensors) - 1
}

func pick(ts []*tensor.Tensor, i int) *tensor.Tensor {
	if i < 0 {
		return nil
	}
	return ts[i]
}

func (c Case) channels() int {
	if c.Op == OpForwardSplit || c.Op == OpUpdateSplit {
		return 2*c.KeyDim + c.ValueDim
	}
	return c.Dim
}

// layout is the structure of a case without its data: sequences, slots,
// which sequences start from a state, which rows get written, and the
// fewest bytes the op moves.
type layout struct {
	dim, width, stateLen, tokens, nSlots int
	lens                                 []int
	cu, slots                            []int64
	init                                 []bool
	modeVals                             []int64 // NumAcceptedTokens or CacheSeqlens; nil: neither
	lead                                 []int   // leading shape of x
	varlen, stateful                     bool
	written                              []bool // token rows the op writes
	bytes                                int64
}

func (c Case) layout(rng *rand.Rand) *layout {
	l := &layout{dim: c.channels(), width: c.Width, stateLen: c.StateLen}
	l.varlen = c.Op == OpForward || c.Op == OpForwardSplit
	l.stateful = !(l.varlen && c.NoStates) && !(c.Op == OpDense && !c.DenseInit && !c.DenseFinal)
	if l.stateLen == 0 {
		l.stateLen = c.Width - 1
	}
	l.lens = c.Lens
	seqLen := max(c.SeqLen, 1)
	if !l.varlen {
		l.lens = make([]int, c.Batch)
		for i := range l.lens {
			l.lens[i] = seqLen
		}
	}
	nSeqs := len(l.lens)
	l.cu = make([]int64, nSeqs+1)
	for i, n := range l.lens {
		l.tokens += n
		l.cu[i+1] = int64(l.tokens)
	}
	switch {
	case l.varlen:
		l.lead = []int{l.tokens}
	case c.Op == OpDense || c.SeqLen > 0:
		l.lead = []int{nSeqs, seqLen}
	default:
		l.lead = []int{nSeqs}
	}

	// Slots: a random permutation of the pool, pads marked −1.
	l.nSlots = max(c.NSlots, nSeqs)
	l.slots = make([]int64, nSeqs)
	perm := rng.Perm(l.nSlots)
	for i := range l.slots {
		l.slots[i] = int64(perm[i])
		if c.NoIndices {
			l.slots[i] = int64(i)
		}
	}
	for _, p := range c.Pads {
		l.slots[p] = -1
	}
	// Initial states: a random round(share·B) of the varlen sequences;
	// every sequence in decode and in dense calls given initial states.
	l.init = make([]bool, nSeqs)
	nInit := int(math.Round(c.InitShare * float64(nSeqs)))
	for i, j := range rng.Perm(nSeqs) {
		l.init[j] = i < nInit
	}
	if c.Op == OpUpdate || c.Op == OpUpdateSplit || (c.Op == OpDense && c.DenseInit) {
		for i := range l.init {
			l.init[i] = true
		}
	}
	if c.Accepted || c.Circular {
		l.modeVals = make([]int64, nSeqs)
		for i := range l.modeVals {
			if c.Accepted {
				l.modeVals[i] = 1 + rng.Int64N(int64(seqLen))
			} else {
				l.modeVals[i] = rng.Int64N(int64(4 * l.stateLen))
			}
		}
		if c.Circular {
			l.modeVals[0] = 1<<30 + rng.Int64N(64)
		}
	}

	// Bytes: x read, written rows of the outputs, w, bias, and the state
	// columns each live sequence reads and writes (stateCols).
	l.written = make([]bool, l.tokens)
	writesStates := c.Op != OpDense || c.DenseFinal || c.InPlace
	var rows, colsRead, colsWritten int64
	for i, n := range l.lens {
		live := l.slots[i] >= 0 || !l.stateful
		for t := l.cu[i]; t < l.cu[i+1]; t++ {
			l.written[t] = live
		}
		if live {
			rows += int64(n)
		}
		if l.stateful && live && n > 0 {
			read, written := c.stateCols(l.stateLen, n, writesStates)
			if l.init[i] {
				colsRead += read
			}
			colsWritten += written
		}
	}
	dim, es := int64(l.dim), int64(c.DType.Size())
	var biasElems int64
	if !c.NoBias {
		biasElems = dim
	}
	l.bytes = es * (int64(l.tokens)*dim + rows*dim + dim*int64(c.Width) + biasElems + (colsRead+colsWritten)*dim)
	return l
}

// stateCols is how many columns of its state row (sl columns) a live
// sequence of n > 0 tokens must read, when it starts from its state, and
// write; writes is false when the op leaves the states alone (OpDense
// without final states), which then read only the window:
//   - shift: the window's newest W−1 columns and the columns [n, sl) that
//     stay in the row; the whole row is written;
//   - spec (NumAcceptedTokens a): the window [a−1, a−1+W−1) and the kept
//     columns [a, a+sl−n), together [a−1, a+max(W−2, sl−n)); the whole row
//     is written;
//   - circular: the W−1 columns before the ring position; only the last
//     min(n, sl) inputs are written, the other columns keep their values.
func (c Case) stateCols(sl, n int, writes bool) (read, written int64) {
	win := c.Width - 1
	switch {
	case !writes:
		return int64(win), 0
	case c.Accepted:
		return int64(max(win, sl-n+1)), int64(sl)
	case c.Circular:
		return int64(min(win, sl)), int64(min(n, sl))
	}
	return int64(max(win, sl-n)), int64(sl)
}

// Fill fills a tensor with random values of standard deviation std.
type Fill func(t *tensor.Tensor, std float64)

// Build draws the case's inputs with fill and lays out its outputs: rows
// the op must write are poisoned (0xFF bytes), rows it must skip (pad
// slots) hold random values that must survive.
func (c Case) Build(rng *rand.Rand, fill Fill) *Built {
	l := c.layout(rng)
	bd := &Built{Bytes: l.bytes}
	dim, dt, nSeqs := l.dim, c.DType, len(l.lens)
	withLead := func(last int) []int { return append(append([]int(nil), l.lead...), last) }

	x, _ := tensor.NewStrided(dt, withLead(dim), rowStrides(withLead(dim), c.RowPad))
	fill(x, 1)
	w := tensor.New(dt, dim, c.Width)
	fill(w, 0.5)
	var bias *tensor.Tensor
	if !c.NoBias {
		bias = tensor.New(dt, dim)
		fill(bias, 0.5)
	}
	ix, iw, ib := bd.add("x", x), bd.add("w", w), bd.add("bias", bias)

	parts, outNames := []int{dim}, []string{"y"}
	if c.Op == OpForwardSplit || c.Op == OpUpdateSplit {
		parts, outNames = []int{c.KeyDim, c.KeyDim, c.ValueDim}, []string{"q", "k", "v"}
	}
	iOut := []int{-1, -1, -1}
	if c.InPlace && c.Op == OpUpdate {
		iOut[0] = ix
		bd.Outputs = append(bd.Outputs, ix)
	} else {
		for i, part := range parts {
			o := tensor.New(dt, withLead(part)...)
			fill(o, 1)
			poisonRows(o, l.written)
			iOut[i] = bd.add(outNames[i], o)
			bd.Outputs = append(bd.Outputs, iOut[i])
			bd.marked = append(bd.marked, iOut[i])
		}
	}

	iCu, iIdx, iInit, iIn, iOutState, iMode := -1, -1, -1, -1, -1, -1
	if l.varlen {
		cu := tensor.New(tensor.I32, nSeqs+1)
		cu.SetInt64s(l.cu)
		iCu = bd.add("cu_seqlens", cu)
	}
	switch {
	case c.Op == OpDense:
		if c.DenseInit {
			st := tensor.New(dt, nSeqs, l.stateLen, dim)
			fill(st, 1)
			iIn = bd.add("initial_states", st)
		}
		switch {
		case c.InPlace:
			iOutState = iIn
		case c.DenseFinal:
			iOutState = bd.add("final_states", tensor.New(dt, nSeqs, l.stateLen, dim))
		}
	case l.stateful:
		pool := tensor.New(dt, l.nSlots, l.stateLen, dim)
		fill(pool, 1)
		iIn = bd.add("conv_states", pool)
		iOutState = iIn
		if !c.NoIndices {
			idx := tensor.New(tensor.I32, nSeqs)
			idx.SetInt64s(l.slots)
			iIdx = bd.add("cache_indices", idx)
		}
		if l.modeVals != nil {
			mv := tensor.New(tensor.I32, nSeqs)
			mv.SetInt64s(l.modeVals)
			iMode = bd.add(map[bool]string{true: "num_accepted_tokens", false: "cache_seqlens"}[c.Accepted], mv)
		}
		if l.varlen && c.InitShare > 0 {
			flags := tensor.New(tensor.U8, nSeqs)
			v := make([]int64, nSeqs)
			for i, ok := range l.init {
				if ok {
					v[i] = 1
				}
			}
			flags.SetInt64s(v)
			iInit = bd.add("has_initial_state", flags)
		}
	}
	if iOutState >= 0 {
		bd.Outputs = append(bd.Outputs, iOutState)
		bd.Exact = append(bd.Exact, iOutState)
	}

	bd.call = func(s *cuda.Stream, ts []*tensor.Tensor, o conv1d.Options) error {
		x, w, bias := pick(ts, ix), pick(ts, iw), pick(ts, ib)
		q, k, v := pick(ts, iOut[0]), pick(ts, iOut[1]), pick(ts, iOut[2])
		states, idx := pick(ts, iIn), pick(ts, iIdx)
		switch c.Op {
		case OpForward, OpForwardSplit:
			seqs := conv1d.Varlen{CuSeqlens: pick(ts, iCu), CacheIndices: idx, HasInitialState: pick(ts, iInit), ConvStates: states}
			if c.Op == OpForward {
				return conv1d.Forward(s, q, x, w, bias, seqs, o)
			}
			return conv1d.ForwardSplit(s, q, k, v, x, w, bias, seqs, o)
		case OpDense:
			return conv1d.ForwardDense(s, q, x, w, bias, states, pick(ts, iOutState), o)
		}
		st := conv1d.Decode{ConvStates: states, StateIndices: idx}
		if c.Accepted {
			st.NumAcceptedTokens = pick(ts, iMode)
		} else {
			st.CacheSeqlens = pick(ts, iMode)
		}
		if c.Op == OpUpdate {
			return conv1d.Update(s, q, x, w, bias, st, o)
		}
		return conv1d.UpdateSplit(s, q, k, v, x, w, bias, st, o)
	}
	return bd
}

// rowStrides are contiguous strides for shape with pad extra elements after
// each innermost row.
func rowStrides(shape []int, pad int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
		if i == len(shape)-1 {
			acc += pad
		}
	}
	return s
}

// poisonRows sets every token row of the contiguous tensor t marked in
// written to 0xFF bytes (NaN), the pattern check counts as never written.
func poisonRows(t *tensor.Tensor, written []bool) {
	row := t.Dim(-1) * t.DType().Size()
	b := t.Bytes()
	for r, w := range written {
		if w {
			for i := range row {
				b[r*row+i] = 0xFF
			}
		}
	}
}

// NormalFill fills with fresh N(0, std²) samples.
func NormalFill(rng *rand.Rand) Fill {
	return func(t *tensor.Tensor, std float64) { t.FillNormal(rng, 0, std) }
}

// TiledFill fills large benchmark tensors quickly: a block of random
// samples repeated over the storage (never zeros, never constant).
func TiledFill(rng *rand.Rand) Fill {
	return func(t *tensor.Tensor, std float64) {
		const tile = 1 << 16
		b := t.Bytes()
		if len(b) <= tile*t.DType().Size() {
			t.FillNormal(rng, 0, std)
			return
		}
		src := tensor.New(t.DType(), tile)
		src.FillNormal(rng, 0, std)
		for off := 0; off < len(b); off += copy(b[off:], src.Bytes()) {
		}
	}
}

// spec is the case as a parity check: outputs at the dtype's tolerance,
// states exact. A capturing run assumes valid indices, whose host check
// cannot be captured.
func (c Case) spec(rng *rand.Rand) (check.Spec, error) {
	bd := c.Build(rng, NormalFill(rng))
	tol := map[int]check.Tolerance{}
	for _, i := range bd.Exact {
		tol[i] = check.Tolerance{}
	}
	return check.Spec{
		Tensors: bd.Tensors, Names: bd.Names, Outputs: bd.Outputs, Marked: bd.marked, Tol: tol,
		Run: func(s *cuda.Stream, ts []*tensor.Tensor) error {
			capturing, err := s.Capturing()
			if err != nil {
				return err
			}
			return bd.Call(s, ts, conv1d.Options{SiLU: c.SiLU, AssumeValidIndices: capturing})
		},
	}, nil
}

// bench is the case as a benchmark; the kernel runs with
// AssumeValidIndices, as a serving loop would.
func (c Case) bench(torch *bench.TorchCase) bench.Case {
	return bench.Case{
		Name:  c.Name,
		Bytes: c.layout(rand.New(rand.NewPCG(1, 2))).bytes,
		Torch: torch,
		Goal:  bench.RowwiseGoal,
		New: func(dev *cuda.Device, rng *rand.Rand) (bench.Instance, error) {
			bd := c.Build(rng, TiledFill(rng))
			devTS := make([]*tensor.Tensor, len(bd.Tensors))
			free := func() {
				for _, t := range devTS {
					t.Free()
				}
			}
			for i, t := range bd.Tensors {
				d, err := t.ToDevice(dev)
				if err != nil {
					free()
					return bench.Instance{}, err
				}
				devTS[i] = d
			}
			o := conv1d.Options{SiLU: c.SiLU, AssumeValidIndices: true}
			return bench.Instance{Run: func(s *cuda.Stream) error { return bd.Call(s, devTS, o) }, Free: free}, nil
		},
	}
}
