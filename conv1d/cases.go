package conv1d

import (
	"math"
	"math/rand/v2"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/tensor"
)

// opKind is the entry point a case exercises.
type opKind int

const (
	opForward opKind = iota
	opForwardSplit
	opDense
	opUpdate
	opUpdateSplit
)

// testCase describes one parity or benchmark case of any entry point; build
// turns it into tensors and a call, so checks and benches share one builder.
type testCase struct {
	name             string
	op               opKind
	dt               tensor.DType
	width            int
	dim              int   // channels of the plain forms
	keyDim, valueDim int   // split forms: dim = 2·keyDim + valueDim
	lens             []int // Forward, ForwardSplit: sequence lengths
	batch, seqLen    int   // ForwardDense, Update*: B and L (Update: 0 means x [B, dim])
	nSlots           int   // pool size; 0 means B
	stateLen         int   // 0 means W−1
	pads             []int // sequences given the pad slot −1
	initShare        float64
	noStates         bool // Forward*: no ConvStates (nor indices)
	noIndices        bool // sequence b uses slot b
	noBias           bool
	silu             bool
	accepted         bool // Update*: NumAcceptedTokens, random in [1, L]
	circular         bool // Update*: CacheSeqlens, random (one near 2^30)
	inPlace          bool // Update: out is x; ForwardDense: final states are the initial states
	denseInit        bool // ForwardDense: initial states given
	denseFinal       bool // ForwardDense: final states given
	rowPad           int  // extra elements after each row of x
}

// inMode is decode case c under a state rule of spec §4.3: the plain shift
// as it is; speculative decoding, specTokens tokens a sequence, vLLM's
// state_len = W−2+L, accepted counts random in [1, L]; or the circular
// buffer, random ring positions (one near 2^30).
func (c testCase) inMode(mode int) testCase {
	switch mode {
	case modeSpec:
		c.accepted, c.seqLen, c.stateLen = true, specTokens, c.width-2+specTokens
	case modeCircular:
		c.circular = true
	}
	return c
}

// mode is the decode state rule c runs under.
func (c testCase) mode() int {
	switch {
	case c.accepted:
		return modeSpec
	case c.circular:
		return modeCircular
	}
	return modeShift
}

// built is a case turned into host tensors and a call on them.
type built struct {
	ts      []*tensor.Tensor
	names   []string
	outputs []int
	exact   []int // outputs that are plain copies: compared with zero tolerance
	marked  []int // outputs whose rows the op must write hold the poison (check.Spec.Marked)
	call    func(s *cuda.Stream, ts []*tensor.Tensor, o Options) error
	bytes   int64 // fewest bytes moved
}

func (b *built) add(name string, t *tensor.Tensor) int {
	if t == nil {
		return -1
	}
	b.ts = append(b.ts, t)
	b.names = append(b.names, name)
	return len(b.ts) - 1
}

func pick(ts []*tensor.Tensor, i int) *tensor.Tensor {
	if i < 0 {
		return nil
	}
	return ts[i]
}

func (c testCase) channels() int {
	if c.op == opForwardSplit || c.op == opUpdateSplit {
		return 2*c.keyDim + c.valueDim
	}
	return c.dim
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

func (c testCase) layout(rng *rand.Rand) *layout {
	l := &layout{dim: c.channels(), width: c.width, stateLen: c.stateLen}
	l.varlen = c.op == opForward || c.op == opForwardSplit
	l.stateful = !(l.varlen && c.noStates) && !(c.op == opDense && !c.denseInit && !c.denseFinal)
	if l.stateLen == 0 {
		l.stateLen = c.width - 1
	}
	l.lens = c.lens
	seqLen := max(c.seqLen, 1)
	if !l.varlen {
		l.lens = make([]int, c.batch)
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
	case c.op == opDense || c.seqLen > 0:
		l.lead = []int{nSeqs, seqLen}
	default:
		l.lead = []int{nSeqs}
	}

	// Slots: a random permutation of the pool, pads marked −1.
	l.nSlots = max(c.nSlots, nSeqs)
	l.slots = make([]int64, nSeqs)
	perm := rng.Perm(l.nSlots)
	for i := range l.slots {
		l.slots[i] = int64(perm[i])
		if c.noIndices {
			l.slots[i] = int64(i)
		}
	}
	for _, p := range c.pads {
		l.slots[p] = -1
	}
	// Initial states: a random round(share·B) of the varlen sequences;
	// every sequence in decode and in dense calls given initial states.
	l.init = make([]bool, nSeqs)
	nInit := int(math.Round(c.initShare * float64(nSeqs)))
	for i, j := range rng.Perm(nSeqs) {
		l.init[j] = i < nInit
	}
	if c.op == opUpdate || c.op == opUpdateSplit || (c.op == opDense && c.denseInit) {
		for i := range l.init {
			l.init[i] = true
		}
	}
	if c.accepted || c.circular {
		l.modeVals = make([]int64, nSeqs)
		for i := range l.modeVals {
			if c.accepted {
				l.modeVals[i] = 1 + rng.Int64N(int64(seqLen))
			} else {
				l.modeVals[i] = rng.Int64N(int64(4 * l.stateLen))
			}
		}
		if c.circular {
			l.modeVals[0] = 1<<30 + rng.Int64N(64)
		}
	}

	// Bytes: x read, written rows of the outputs, w, bias, and the state
	// columns each live sequence reads and writes (stateCols).
	l.written = make([]bool, l.tokens)
	writesStates := c.op != opDense || c.denseFinal || c.inPlace
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
	dim, es := int64(l.dim), int64(c.dt.Size())
	l.bytes = es * (int64(l.tokens)*dim + rows*dim + dim*int64(c.width) + dim*boolInt(!c.noBias) +
		(colsRead+colsWritten)*dim)
	return l
}

// stateCols is how many columns of its state row (sl columns) a live
// sequence of n > 0 tokens must read, when it starts from its state, and
// write; writes is false when the op leaves the states alone (ForwardDense
// without final states), which then read only the window:
//   - shift: the window's newest W−1 columns and the columns [n, sl) that
//     stay in the row; the whole row is written;
//   - spec (NumAcceptedTokens a): the window [a−1, a−1+W−1) and the kept
//     columns [a, a+sl−n), together [a−1, a+max(W−2, sl−n)); the whole row
//     is written;
//   - circular: the W−1 columns before the ring position; only the last
//     min(n, sl) inputs are written, the other columns keep their values.
func (c testCase) stateCols(sl, n int, writes bool) (read, written int64) {
	win := c.width - 1
	switch {
	case !writes:
		return int64(win), 0
	case c.accepted:
		return int64(max(win, sl-n+1)), int64(sl)
	case c.circular:
		return int64(min(win, sl)), int64(min(n, sl))
	}
	return int64(max(win, sl-n)), int64(sl)
}

// build draws the case's inputs with fill and lays out its outputs: rows the
// op must write are poisoned (0xFF bytes), rows it must skip (pad slots)
// hold random values that must survive.
func (c testCase) build(rng *rand.Rand, fill func(*tensor.Tensor, float64)) *built {
	l := c.layout(rng)
	bd := &built{bytes: l.bytes}
	dim, dt, nSeqs := l.dim, c.dt, len(l.lens)
	withLead := func(last int) []int { return append(append([]int(nil), l.lead...), last) }

	x, _ := tensor.NewStrided(dt, withLead(dim), rowStrides(withLead(dim), c.rowPad))
	fill(x, 1)
	w := tensor.New(dt, dim, c.width)
	fill(w, 0.5)
	var bias *tensor.Tensor
	if !c.noBias {
		bias = tensor.New(dt, dim)
		fill(bias, 0.5)
	}
	ix, iw, ib := bd.add("x", x), bd.add("w", w), bd.add("bias", bias)

	parts, outNames := []int{dim}, []string{"y"}
	if c.op == opForwardSplit || c.op == opUpdateSplit {
		parts, outNames = []int{c.keyDim, c.keyDim, c.valueDim}, []string{"q", "k", "v"}
	}
	iOut := []int{-1, -1, -1}
	if c.inPlace && c.op == opUpdate {
		iOut[0] = ix
		bd.outputs = append(bd.outputs, ix)
	} else {
		for i, part := range parts {
			o := tensor.New(dt, withLead(part)...)
			fill(o, 1)
			poisonRows(o, len(l.lead), l.written)
			iOut[i] = bd.add(outNames[i], o)
			bd.outputs = append(bd.outputs, iOut[i])
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
	case c.op == opDense:
		if c.denseInit {
			st := tensor.New(dt, nSeqs, l.stateLen, dim)
			fill(st, 1)
			iIn = bd.add("initial_states", st)
		}
		switch {
		case c.inPlace:
			iOutState = iIn
		case c.denseFinal:
			iOutState = bd.add("final_states", tensor.New(dt, nSeqs, l.stateLen, dim))
		}
	case l.stateful:
		pool := tensor.New(dt, l.nSlots, l.stateLen, dim)
		fill(pool, 1)
		iIn = bd.add("conv_states", pool)
		iOutState = iIn
		if !c.noIndices {
			idx := tensor.New(tensor.I32, nSeqs)
			idx.SetInt64s(l.slots)
			iIdx = bd.add("cache_indices", idx)
		}
		if l.modeVals != nil {
			mv := tensor.New(tensor.I32, nSeqs)
			mv.SetInt64s(l.modeVals)
			iMode = bd.add(map[bool]string{true: "num_accepted_tokens", false: "cache_seqlens"}[c.accepted], mv)
		}
		if l.varlen && c.initShare > 0 {
			flags := tensor.New(tensor.U8, nSeqs)
			v := make([]int64, nSeqs)
			for i, ok := range l.init {
				v[i] = boolInt(ok)
			}
			flags.SetInt64s(v)
			iInit = bd.add("has_initial_state", flags)
		}
	}
	if iOutState >= 0 {
		bd.outputs = append(bd.outputs, iOutState)
		bd.exact = append(bd.exact, iOutState)
	}

	bd.call = func(s *cuda.Stream, ts []*tensor.Tensor, o Options) error {
		x, w, bias := pick(ts, ix), pick(ts, iw), pick(ts, ib)
		q, k, v := pick(ts, iOut[0]), pick(ts, iOut[1]), pick(ts, iOut[2])
		states, idx := pick(ts, iIn), pick(ts, iIdx)
		switch c.op {
		case opForward, opForwardSplit:
			seqs := Varlen{CuSeqlens: pick(ts, iCu), CacheIndices: idx, HasInitialState: pick(ts, iInit), ConvStates: states}
			if c.op == opForward {
				return Forward(s, q, x, w, bias, seqs, o)
			}
			return ForwardSplit(s, q, k, v, x, w, bias, seqs, o)
		case opDense:
			return ForwardDense(s, q, x, w, bias, states, pick(ts, iOutState), o)
		}
		st := Decode{ConvStates: states, StateIndices: idx}
		if c.accepted {
			st.NumAcceptedTokens = pick(ts, iMode)
		} else {
			st.CacheSeqlens = pick(ts, iMode)
		}
		if c.op == opUpdate {
			return Update(s, q, x, w, bias, st, o)
		}
		return UpdateSplit(s, q, k, v, x, w, bias, st, o)
	}
	return bd
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
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

// poisonRows sets every token row marked in written to 0xFF bytes (NaN),
// the pattern check counts as never written.
func poisonRows(t *tensor.Tensor, lead int, written []bool) {
	v, _ := tokenView(t, lead)
	es, n := t.DType().Size(), t.Dim(-1)
	b := t.Bytes()
	for r, w := range written {
		if w {
			off := r * v.Stride(0) * es
			for i := range n * es {
				b[off+i] = 0xFF
			}
		}
	}
}

// normalFill fills with fresh N(0, std²) samples.
func normalFill(rng *rand.Rand) func(*tensor.Tensor, float64) {
	return func(t *tensor.Tensor, std float64) { t.FillNormal(rng, 0, std) }
}

// tiledFill fills large benchmark tensors quickly: a block of random
// samples repeated over the storage (never zeros, never constant).
func tiledFill(rng *rand.Rand) func(*tensor.Tensor, float64) {
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

// check runs the case as a parity check on dev (nil: host only).
func (c testCase) spec(rng *rand.Rand) (check.Spec, error) {
	bd := c.build(rng, normalFill(rng))
	tol := map[int]check.Tolerance{}
	for _, i := range bd.exact {
		tol[i] = check.Tolerance{}
	}
	return check.Spec{
		Tensors: bd.ts, Names: bd.names, Outputs: bd.outputs, Marked: bd.marked, Tol: tol,
		Run: func(s *cuda.Stream, ts []*tensor.Tensor) error {
			capturing, err := s.Capturing()
			if err != nil {
				return err
			}
			return bd.call(s, ts, Options{SiLU: c.silu, AssumeValidIndices: capturing})
		},
	}, nil
}

// bench makes the case a registry benchmark; the kernel runs with
// AssumeValidIndices, as a serving loop would.
func (c testCase) bench(torch *bench.TorchCase) bench.Case {
	return bench.Case{
		Name:  c.name,
		Bytes: c.layout(rand.New(rand.NewPCG(1, 2))).bytes,
		Torch: torch,
		Goal:  bench.RowwiseGoal,
		New: func(dev *cuda.Device, rng *rand.Rand) (bench.Instance, error) {
			bd := c.build(rng, tiledFill(rng))
			devTS := make([]*tensor.Tensor, len(bd.ts))
			free := func() {
				for _, t := range devTS {
					t.Free()
				}
			}
			for i, t := range bd.ts {
				d, err := t.ToDevice(dev)
				if err != nil {
					free()
					return bench.Instance{}, err
				}
				devTS[i] = d
			}
			o := Options{SiLU: c.silu, AssumeValidIndices: true}
			return bench.Instance{Run: func(s *cuda.Stream) error { return bd.call(s, devTS, o) }, Free: free}, nil
		},
	}
}
