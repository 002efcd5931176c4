package conv1d

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gokittens/kittens/internal/fuzzargs"
	"github.com/gokittens/kittens/tensor"
)

// The fuzz tests build every call from the fuzzer's bytes (fuzzargs.In):
// dtypes, ranks, shapes, widths, row and batch strides, where each
// tensor's storage lives (its own, the shared arena where tensors may
// overlap, x itself, or nil: fuzzargs.Arena.Place), the index tensors'
// contents and the options. An independent model of the documented rules
// (convValid) says whether the call is valid, and a model of the
// documented result (convExpect) what a valid call writes.

// opKind is the entry point a fuzzed call exercises.
type opKind int

const (
	opForward opKind = iota
	opForwardSplit
	opDense
	opUpdate
	opUpdateSplit
)

// fuzzTensor is one fuzzed tensor and how its values are made.
type fuzzTensor struct {
	t    *tensor.Tensor
	fill int     // fillNormal, fillPoison or fillInts
	ints []int64 // the values of fillInts
}

// get is the tensor, nil for a nil ft.
func (ft *fuzzTensor) get() *tensor.Tensor {
	if ft == nil {
		return nil
	}
	return ft.t
}

// How genConv fills a tensor.
const (
	fillNormal = iota // N(0, 1) samples
	fillPoison        // 0xFF bytes: an output
	fillInts          // the values ints
)

// hugePad is a row padding past int32, used only where no second row makes
// it cost memory.
const hugePad = 1 << 31

// fuzzStrides fuzzes the strides of shape: row padding from pads, rarely a
// batch stride beyond L rows for rank 3, or a row stride past int32.
func fuzzStrides(in *fuzzargs.In, shape []int, pads ...int) []int {
	pad := pads[in.N(len(pads))]
	rows := 1
	for _, d := range shape[:max(len(shape)-1, 0)] {
		rows *= d
	}
	bpad := 0
	switch o := in.Rare(16); {
	case o == 16 && rows <= 1:
		pad = hugePad
	case o > 0 && len(shape) == 3:
		bpad = o
	}
	strides := fuzzargs.PaddedStrides(shape, pad)
	if len(shape) == 3 {
		strides[0] += bpad
	}
	return strides
}

// desc describes a tensor for the log.
func desc(t *tensor.Tensor) string {
	if t == nil {
		return "nil"
	}
	return fmt.Sprintf("%v%v/%v", t.DType(), t.Shape(), t.Strides())
}

// convArgs is one call of any op of the package.
type convArgs struct {
	op          opKind
	x, w, bias  *tensor.Tensor
	outs        []*tensor.Tensor // y (out), or q, k, v
	seqs        Varlen           // Forward, ForwardSplit
	init, final *tensor.Tensor   // ForwardDense
	st          Decode           // Update, UpdateSplit
	o           Options
}

func (a *convArgs) call() error {
	switch a.op {
	case opForward:
		return Forward(nil, a.outs[0], a.x, a.w, a.bias, a.seqs, a.o)
	case opForwardSplit:
		return ForwardSplit(nil, a.outs[0], a.outs[1], a.outs[2], a.x, a.w, a.bias, a.seqs, a.o)
	case opDense:
		return ForwardDense(nil, a.outs[0], a.x, a.w, a.bias, a.init, a.final, a.o)
	case opUpdate:
		return Update(nil, a.outs[0], a.x, a.w, a.bias, a.st, a.o)
	}
	return UpdateSplit(nil, a.outs[0], a.outs[1], a.outs[2], a.x, a.w, a.bias, a.st, a.o)
}

func (a *convArgs) String() string {
	vals := func(t *tensor.Tensor) string {
		if t == nil || t.Numel() > 40 {
			return desc(t)
		}
		return fmt.Sprintf("%s%v", desc(t), t.Int64s())
	}
	s := fmt.Sprintf("x %s, w %s, bias %s, outs", desc(a.x), desc(a.w), desc(a.bias))
	for _, o := range a.outs {
		s += " " + desc(o)
	}
	switch a.op {
	case opForward, opForwardSplit:
		s += fmt.Sprintf(", cu %s, idx %s, init %s, states %s", vals(a.seqs.CuSeqlens), vals(a.seqs.CacheIndices),
			vals(a.seqs.HasInitialState), desc(a.seqs.ConvStates))
	case opDense:
		s += fmt.Sprintf(", init %s, final %s", desc(a.init), desc(a.final))
	default:
		s += fmt.Sprintf(", states %s, idx %s, accepted %s, seqlens %s", desc(a.st.ConvStates), vals(a.st.StateIndices),
			vals(a.st.NumAcceptedTokens), vals(a.st.CacheSeqlens))
	}
	return s + fmt.Sprintf(", silu %v, assume %v, flag %s", a.o.SiLU, a.o.AssumeValidIndices, desc(a.o.ErrorFlag))
}

// convGen builds a fuzzed call.
type convGen struct {
	in  *fuzzargs.In
	a   *fuzzargs.Arena
	fts []*fuzzTensor
}

// tensor adds a fuzzed tensor of dtype dt and shape to the call, its rows
// padded by one of pads (default 0, 1 or 3 elements), placed by the input
// (fuzzargs.Arena.Place, the alias being x).
func (g *convGen) tensor(dt tensor.DType, shape []int, fill int, pads ...int) *fuzzTensor {
	if len(pads) == 0 {
		pads = []int{0, 0, 1, 3}
	}
	strides := fuzzStrides(g.in, shape, pads...)
	var x *tensor.Tensor
	if len(g.fts) > 0 {
		x = g.fts[0].t
	}
	ft := &fuzzTensor{t: g.a.Place(fmt.Sprintf("tensor %d", len(g.fts)), dt, shape, strides, x, 32), fill: fill}
	g.fts = append(g.fts, ft)
	return ft
}

// dtype is dt, or rarely another one.
func (g *convGen) dtype(dt tensor.DType) tensor.DType {
	if o := g.in.Rare(16); o > 0 {
		return []tensor.DType{tensor.F32, tensor.BF16, tensor.F16, tensor.I32, tensor.I64, tensor.U8, tensor.F8E4M3}[o%7]
	}
	return dt
}

// shape is s, or rarely one with a dimension more or less, or one size off.
func (g *convGen) shape(s ...int) []int {
	o := g.in.Rare(16)
	switch {
	case o == 1:
		return append([]int{1}, s...)
	case o == 2 && len(s) > 0:
		return s[1:]
	case o == 3:
		return append(slices.Clone(s), 1)
	case o >= 4 && len(s) > 0:
		s = slices.Clone(s)
		i := o % len(s)
		s[i] = max(s[i]+1-2*(o/len(s)%2), 0)
	}
	return s
}

// ints adds an index tensor holding v (cut or zero-padded to its size), of
// dtype dt and shape [len(v)] unless fuzzed otherwise.
func (g *convGen) ints(v []int64, dt tensor.DType) *fuzzTensor {
	ft := g.tensor(g.dtype(dt), g.shape(len(v)), fillInts)
	ft.ints = v
	return ft
}

// genConv builds a call of op from the fuzzer's bytes. It returns the call
// and the arena its tensors live in.
func genConv(op opKind, data []byte) (*convArgs, *fuzzargs.Arena) {
	in := fuzzargs.NewIn(data)
	g := &convGen{in: in, a: fuzzargs.NewArena(in, 1<<16, uint64(len(data)))}
	a := &convArgs{op: op}
	split := op == opForwardSplit || op == opUpdateSplit
	decode := op == opUpdate || op == opUpdateSplit
	dt := []tensor.DType{tensor.BF16, tensor.F16, tensor.F32}[in.N(3)]
	width := 2 + in.N(3)
	if o := in.Rare(16); o > 0 {
		width = []int{0, 1, 5, 6}[o%4]
	}
	dim, kd := 1+in.Dim(-1, 32, 129), 0
	if split {
		kd = 1 + in.Dim(-1, 32)
		dim = 2*kd + 1 + in.Dim(-1, 32)
	}
	a.o.SiLU, a.o.AssumeValidIndices = in.N(2) == 1, in.N(2) == 1

	// The sequences: B, their tokens, the leading shape of x.
	var nSeqs, seqLen, tokens int
	var lead []int
	var cu []int64
	switch op {
	case opForward, opForwardSplit:
		nSeqs = 1 + in.N(6)
		if in.Rare(16) > 0 {
			nSeqs = 0
		}
		cu = make([]int64, nSeqs+1)
		for b := range nSeqs {
			cu[b+1] = cu[b] + int64(in.Dim(33)%6)
		}
		tokens = int(cu[nSeqs])
		switch o := in.Rare(16); {
		case o == 0:
		case o <= 2:
			cu[0] = []int64{1, -1}[o-1]
		case o <= 8 && nSeqs > 0: // decreasing, negative or past the end
			j := 1 + in.N(nSeqs)
			cu[j] = []int64{cu[j-1] - 1, -3, int64(tokens) + 5, math.MaxInt32, math.MinInt32, cu[j] + 1}[o-3]
		default: // x has another token count
			tokens = max(tokens+1-2*(o%2), 0)
		}
		lead = []int{tokens}
	case opDense:
		nSeqs, seqLen = in.Dim(33), in.Dim(33)
		lead = []int{nSeqs, seqLen}
	default:
		nSeqs, seqLen = in.Dim(33), 1
		lead = []int{nSeqs}
		if in.N(2) == 1 {
			seqLen = in.N(5)
			lead = append(lead, seqLen)
		}
	}
	withLead := func(last int) []int { return append(slices.Clone(lead), last) }

	fx := g.tensor(g.dtype(dt), g.shape(withLead(dim)...), fillNormal)
	fw := g.tensor(g.dtype(dt), g.shape(dim, width), fillNormal, 0, 0, 0, 0, 0, 0, 0, 1)
	var fb *fuzzTensor
	if in.N(4) != 0 {
		fb = g.tensor(g.dtype(dt), g.shape(dim), fillNormal)
	}
	parts := []int{dim}
	if split {
		parts = []int{kd, kd, dim - 2*kd}
	}
	fouts := make([]*fuzzTensor, len(parts))
	inPlace := op == opUpdate && in.N(4) == 0
	oneBuffer := split && in.N(4) == 0
	for i, p := range parts {
		switch {
		case inPlace, oneBuffer:
			fouts[i] = &fuzzTensor{}
		default:
			fouts[i] = g.tensor(g.dtype(dt), g.shape(withLead(p)...), fillPoison)
		}
	}

	// The states, their slot indices and the decode mode.
	stateLen := max(width-1, 0) + in.N(3)
	mode := modeShift
	if decode {
		mode = in.N(3)
		if mode == modeSpec {
			stateLen = max(stateLen, width-2+seqLen)
		}
	}
	if in.Rare(16) > 0 {
		stateLen = max(width-2, 0)
	}
	nSlots := nSeqs + in.N(3)
	if o := in.Rare(16); o > 0 {
		nSlots = max(nSeqs-o, 0)
	}
	pool := func(fill int) *fuzzTensor {
		return g.tensor(g.dtype(dt), g.shape(nSlots, stateLen, dim), fill)
	}
	slots := func() *fuzzTensor {
		if in.N(4) == 0 {
			return nil
		}
		perm := make([]int64, max(nSlots, nSeqs))
		for i := range perm {
			perm[i] = int64(i)
		}
		for i := range perm {
			j := i + in.N(len(perm)-i)
			perm[i], perm[j] = perm[j], perm[i]
		}
		v := perm[:nSeqs]
		for b := range v {
			if in.N(6) == 0 {
				v[b] = []int64{-1, -2, math.MinInt32}[in.N(3)]
			}
		}
		if o := in.Rare(16); o > 0 && nSeqs > 0 { // past the pool, or a duplicate
			v[in.N(nSeqs)] = []int64{int64(nSlots), math.MaxInt32, v[in.N(nSeqs)], int64(nSlots + in.Byte())}[o%4]
		}
		return g.ints(v, tensor.I32)
	}
	var fcu, fpool, ffinal, fidx, finit, faccepted, fseqlens, fflag *fuzzTensor
	switch op {
	case opForward, opForwardSplit:
		fcu = g.ints(cu, tensor.I32)
		if in.N(4) != 0 {
			fpool = pool(fillNormal)
			fidx = slots()
			if in.N(3) != 0 {
				v := make([]int64, nSeqs)
				for b := range v {
					v[b] = []int64{0, 1, 255}[in.N(3)]
				}
				finit = g.ints(v, tensor.U8)
			}
		} else if o := in.Rare(16); o > 0 { // indices or flags without a pool
			if o%2 == 0 {
				fidx = g.ints(make([]int64, nSeqs), tensor.I32)
			} else {
				finit = g.ints(make([]int64, nSeqs), tensor.U8)
			}
		}
	case opDense:
		if in.N(3) != 0 {
			fpool = pool(fillNormal)
		}
		switch in.N(4) {
		case 1:
			ffinal = pool(fillPoison)
		case 2:
			ffinal = fpool
		case 3:
			if in.Rare(16) > 0 { // final states of another length
				stateLen++
				ffinal = pool(fillPoison)
			}
		}
	default:
		if in.Rare(16) == 0 {
			fpool = pool(fillNormal)
		}
		fidx = slots()
		both := in.Rare(16) > 0
		if mode == modeSpec || both {
			v := make([]int64, nSeqs)
			for b := range v {
				v[b] = 1 + int64(in.N(max(seqLen, 1)))
			}
			if o := in.Rare(16); o > 0 && nSeqs > 0 {
				v[in.N(nSeqs)] = []int64{0, int64(seqLen + 1), -1, math.MinInt32}[o%4]
			}
			faccepted = g.ints(v, tensor.I32)
		}
		if mode == modeCircular || both {
			v := make([]int64, nSeqs)
			for b := range v {
				switch in.N(4) {
				case 0:
					v[b] = math.MaxInt32 - int64(in.N(8))
				case 1:
					v[b] = 1<<30 + int64(in.Byte())
				default:
					v[b] = int64(in.N(4 * max(stateLen, 1)))
				}
			}
			if o := in.Rare(16); o > 0 && nSeqs > 0 {
				v[in.N(nSeqs)] = []int64{-1, math.MinInt32}[o%2]
			}
			fseqlens = g.ints(v, tensor.I32)
		}
	}
	switch in.N(16) {
	case 14:
		fflag = g.tensor(tensor.I32, []int{1}, fillPoison)
	case 15:
		fflag = g.tensor(g.dtype(tensor.I32), g.shape(1), fillPoison)
	}

	rng := rand.New(rand.NewPCG(uint64(len(data)), uint64(in.Byte())))
	if oneBuffer { // q, k and v: column slices of one [.., dim] buffer
		buf := tensor.New(dt, withLead(dim)...)
		buf.Poison()
		g.a.Adopt("qkv", buf)
		col := 0
		for i, p := range parts {
			fouts[i].t = fuzzargs.Slice(buf, len(lead), col, col+p)
			col += p
		}
	}
	if inPlace {
		fouts[0].t = fx.t
	}
	// Floats first, then outputs, then indices, so that indices overlapping
	// another tensor keep their values (and x, w or a pool may not).
	for _, fill := range []int{fillNormal, fillPoison, fillInts} {
		for _, ft := range g.fts {
			if ft.t == nil || ft.fill != fill || (ft != fx && ft.t == fx.t) {
				continue
			}
			switch fill {
			case fillNormal:
				ft.t.FillNormal(rng, 0, 1)
			case fillPoison:
				ft.t.Poison()
			default:
				v := make([]int64, ft.t.Numel())
				copy(v, ft.ints)
				ft.t.SetInt64s(v)
			}
		}
	}

	a.x, a.w, a.bias = fx.t, fw.t, fb.get()
	for _, fo := range fouts {
		a.outs = append(a.outs, fo.t)
	}
	switch op {
	case opForward, opForwardSplit:
		a.seqs = Varlen{CuSeqlens: fcu.get(), CacheIndices: fidx.get(), HasInitialState: finit.get(), ConvStates: fpool.get()}
	case opDense:
		a.init, a.final = fpool.get(), ffinal.get()
	default:
		a.st = Decode{ConvStates: fpool.get(), StateIndices: fidx.get(), NumAcceptedTokens: faccepted.get(), CacheSeqlens: fseqlens.get()}
	}
	a.o.ErrorFlag = fflag.get()
	g.a.Snapshot()
	return a, g.a
}

// convRoles are a call's tensors under the names of its checks, with the
// state source and destination, the slot indices and the decode mode
// tensor picked out.
type convRoles struct {
	stIn, stOut, slots, modeIdx *tensor.Tensor
	mode                        int
	all                         []*tensor.Tensor
	written                     []bool
}

func (a *convArgs) roles() convRoles {
	var r convRoles
	switch a.op {
	case opForward, opForwardSplit:
		r.stOut, r.slots = a.seqs.ConvStates, a.seqs.CacheIndices
		if a.seqs.HasInitialState != nil {
			r.stIn = a.seqs.ConvStates
		}
	case opDense:
		r.stIn, r.stOut = a.init, a.final
	default:
		r.stIn, r.stOut, r.slots = a.st.ConvStates, a.st.ConvStates, a.st.StateIndices
		switch {
		case a.st.NumAcceptedTokens != nil:
			r.mode, r.modeIdx = modeSpec, a.st.NumAcceptedTokens
		case a.st.CacheSeqlens != nil:
			r.mode, r.modeIdx = modeCircular, a.st.CacheSeqlens
		}
	}
	r.all = []*tensor.Tensor{a.x, a.w, a.bias, r.stIn, r.stOut, a.seqs.CuSeqlens, r.slots, a.seqs.HasInitialState,
		a.st.NumAcceptedTokens, a.st.CacheSeqlens, a.o.ErrorFlag}
	r.written = make([]bool, len(r.all))
	r.written[4], r.written[10] = true, true // the final states, and the error flag written on a device
	for _, o := range a.outs {
		r.all, r.written = append(r.all, o), append(r.written, true)
	}
	return r
}

// convValid reports why a call is invalid by the package's documented rules
// (and its int32 limits), "" for a valid one. unsure says that the call has
// a row stride past int32 on a tensor with a single row, which the rules
// leave open.
func convValid(a *convArgs) (why string, unsure bool) {
	x, w := a.x, a.w
	floats := []tensor.DType{tensor.BF16, tensor.F16, tensor.F32}
	ranks := map[opKind][]int{opForward: {2}, opForwardSplit: {2}, opDense: {3}, opUpdate: {2, 3}, opUpdateSplit: {2, 3}}[a.op]
	if x == nil || !slices.Contains(ranks, x.Rank()) || !slices.Contains(floats, x.DType()) {
		return "x", false
	}
	dt, dim := x.DType(), x.Dim(-1)
	lead := x.Shape()[:x.Rank()-1]
	is := func(t *tensor.Tensor, want tensor.DType, shape ...int) bool {
		return t != nil && t.DType() == want && slices.Equal(t.Shape(), shape)
	}
	// [B, L, C] tensors must step over batches by L token rows.
	merges := func(t *tensor.Tensor) bool {
		return t.Rank() != 3 || t.Dim(0) <= 1 || t.Dim(1) <= 1 || t.Stride(0) == t.Dim(1)*t.Stride(1)
	}
	for _, t := range append([]*tensor.Tensor{x}, a.outs...) {
		if t != nil && slices.ContainsFunc(t.Strides(), func(s int) bool { return s > math.MaxInt32 }) {
			unsure = true
		}
	}
	if dim < 1 || dim > maxDim || !merges(x) {
		return "x", unsure
	}
	if w == nil || w.Rank() != 2 || w.DType() != dt || !w.Contiguous() || w.Dim(0) != dim || w.Dim(1) < MinWidth || w.Dim(1) > MaxWidth {
		return "w", unsure
	}
	width := w.Dim(1)
	if a.bias != nil && !is(a.bias, dt, dim) {
		return "bias", unsure
	}
	parts := []int{dim}
	if len(a.outs) == 3 {
		q := a.outs[0]
		if q == nil || q.Rank() != len(lead)+1 {
			return "q", unsure
		}
		kd := q.Dim(-1)
		if kd < 1 || 2*kd >= dim {
			return "q", unsure
		}
		parts = []int{kd, kd, dim - 2*kd}
	}
	for i, o := range a.outs {
		if !is(o, dt, append(slices.Clone(lead), parts[i])...) || !merges(o) {
			return "output", unsure
		}
	}
	r := a.roles()
	nSeqs, seqLen := x.Dim(0), 1
	if x.Rank() == 3 {
		seqLen = x.Dim(1)
	}
	pool := func(p *tensor.Tensor) bool {
		return p != nil && p.Rank() == 3 && p.DType() == dt && p.Dim(2) == dim && p.Dim(1) >= width-1
	}
	switch a.op {
	case opForward, opForwardSplit:
		cu := a.seqs.CuSeqlens
		if cu == nil || cu.Rank() != 1 || cu.DType() != tensor.I32 || cu.Dim(0) < 2 {
			return "CuSeqlens", unsure
		}
		nSeqs = cu.Dim(0) - 1
		init := a.seqs.HasInitialState
		switch {
		case a.seqs.ConvStates == nil:
			if r.slots != nil || init != nil {
				return "indices without states", unsure
			}
		case !pool(a.seqs.ConvStates):
			return "ConvStates", unsure
		case init != nil && !is(init, tensor.U8, nSeqs):
			return "HasInitialState", unsure
		}
	case opDense:
		for _, st := range []*tensor.Tensor{a.init, a.final} {
			if st != nil && (!pool(st) || st.Dim(0) != nSeqs) {
				return "dense states", unsure
			}
		}
		if a.init != nil && a.final != nil && !slices.Equal(a.init.Shape(), a.final.Shape()) {
			return "dense states", unsure
		}
	default:
		if !pool(a.st.ConvStates) {
			return "ConvStates", unsure
		}
		switch {
		case a.st.NumAcceptedTokens != nil && a.st.CacheSeqlens != nil:
			return "both modes", unsure
		case r.mode == modeSpec && a.st.ConvStates.Dim(1) < width-2+seqLen:
			return "state_len for NumAcceptedTokens", unsure
		case r.modeIdx != nil && !is(r.modeIdx, tensor.I32, nSeqs):
			return "mode tensor", unsure
		}
	}
	nSlots := 0
	if r.stOut != nil && a.op != opDense {
		nSlots = r.stOut.Dim(0)
		if r.slots == nil && nSlots < nSeqs {
			return "too few slots", unsure
		}
		if r.slots != nil && !is(r.slots, tensor.I32, nSeqs) {
			return "slot indices", unsure
		}
	}
	for _, st := range []*tensor.Tensor{r.stIn, r.stOut} {
		if st != nil && (st.Dim(1) > maxStateLen || st.Stride(1) > math.MaxInt32 || st.Dim(0) > math.MaxInt32) {
			return "states beyond int32", unsure
		}
	}
	if f := a.o.ErrorFlag; f != nil && !is(f, tensor.I32, 1) {
		return "ErrorFlag", unsure
	}
	// Written tensors overlap nothing else, but an Update's out may be x
	// itself and the final states may be the initial ones.
	for i, wt := range r.all {
		for j, t := range r.all {
			if !r.written[i] || i == j || wt == nil || t == nil || !tensor.Overlap(wt, t) {
				continue
			}
			if (a.op == opUpdate && i == len(r.all)-1 && j == 0 || i == 4 && j == 3) && tensor.Same(wt, t) {
				continue
			}
			return fmt.Sprintf("overlap of %d with %d", i, j), unsure
		}
	}
	// The index contents.
	if cu := a.seqs.CuSeqlens; a.op == opForward || a.op == opForwardSplit {
		v := cu.Int64s()
		for b := range nSeqs {
			if v[b+1] < v[b] {
				return "CuSeqlens decreasing", unsure
			}
		}
		if v[0] != 0 || v[nSeqs] != int64(x.Dim(0)) {
			return "CuSeqlens ends", unsure
		}
	}
	var slotv []int64
	if r.slots != nil {
		slotv = r.slots.Int64s()
		seen := map[int64]bool{}
		for _, s := range slotv {
			if s >= int64(nSlots) || s >= 0 && seen[s] {
				return "slot index", unsure
			}
			seen[s] = s >= 0
		}
	}
	if r.modeIdx != nil {
		for b, v := range r.modeIdx.Int64s() {
			if slotv != nil && slotv[b] < 0 {
				continue
			}
			if r.mode == modeSpec && (v < 1 || v > int64(seqLen)) || r.mode == modeCircular && v < 0 {
				return "mode entry", unsure
			}
		}
	}
	return "", unsure
}

// convWant is what a valid call must leave: the token rows of the outputs
// and the state columns it writes, and their values.
type convWant struct {
	rows   []bool    // [tokens]: rows of the outputs written
	y      []float64 // [tokens, dim]: the outputs side by side, rounded to the dtype
	scale  []float64 // [tokens, dim]: the sum of the terms' magnitudes
	cols   []bool    // [n_slots, state_len]: state columns written; nil: none
	states []float64 // [n_slots, state_len, dim]
}

// convExpect is the documented result of a valid call (package comment,
// Varlen, Decode), worked out from its inputs before the call.
func convExpect(a *convArgs) *convWant {
	x, r := a.x, a.roles()
	dim, width := x.Dim(-1), a.w.Dim(1)
	xv, wv := x.Float64s(), a.w.Float64s()
	bv := make([]float64, dim)
	if a.bias != nil {
		bv = a.bias.Float64s()
	}
	tokens := len(xv) / dim
	want := &convWant{rows: make([]bool, tokens), y: make([]float64, tokens*dim), scale: make([]float64, tokens*dim)}
	sl := 0
	var inv []float64
	if r.stIn != nil {
		sl, inv = r.stIn.Dim(1), r.stIn.Float64s()
	}
	if r.stOut != nil {
		sl, want.states = r.stOut.Dim(1), r.stOut.Float64s()
		want.cols = make([]bool, r.stOut.Dim(0)*sl)
	}
	nSeqs, seqLen := x.Dim(0), 1
	if x.Rank() == 3 {
		seqLen = x.Dim(1)
	}
	var cu, slotv, modev, initv []int64
	if a.op == opForward || a.op == opForwardSplit {
		cu = a.seqs.CuSeqlens.Int64s()
		nSeqs = len(cu) - 1
		if a.seqs.HasInitialState != nil {
			initv = a.seqs.HasInitialState.Int64s()
		}
	}
	if r.slots != nil {
		slotv = r.slots.Int64s()
	}
	if r.modeIdx != nil {
		modev = r.modeIdx.Int64s()
	}
	for b := range nSeqs {
		start, end, slot, mv := b*seqLen, (b+1)*seqLen, b, 0
		if cu != nil {
			start, end = int(cu[b]), int(cu[b+1])
		}
		if slotv != nil {
			slot = int(slotv[b])
		}
		if slot < 0 || end == start {
			continue // a pad slot or an empty sequence: skipped
		}
		if modev != nil {
			mv = int(modev[b])
		}
		var old []float64 // the slot's row before the call; nil: zeros
		if inv != nil && (initv == nil || initv[b] != 0) {
			old = inv[slot*sl*dim : (slot+1)*sl*dim]
		}
		// hist is x̃[τ] of channel c: the input, or the state column that
		// holds it in the mode, or zero.
		hist := func(tau, c int) float64 {
			switch {
			case tau >= 0:
				return xv[(start+tau)*dim+c]
			case old == nil:
				return 0
			case r.mode == modeSpec: // the window starts at column accepted−1
				return old[(mv-1+width-1+tau)*dim+c]
			case r.mode == modeCircular: // the ring's next write position is mv mod sl
				return old[((mv+tau)%sl+sl)%sl*dim+c]
			}
			return old[(sl+tau)*dim+c] // the newest W−1 columns
		}
		n := end - start
		for t := range n {
			want.rows[start+t] = true
			for c := range dim {
				acc, sc := bv[c], math.Abs(bv[c])
				for k := range width {
					term := wv[c*width+k] * hist(t-(width-1)+k, c)
					acc, sc = acc+term, sc+math.Abs(term)
				}
				if a.o.SiLU {
					acc /= 1 + math.Exp(-acc)
				}
				want.y[(start+t)*dim+c], want.scale[(start+t)*dim+c] = acc, sc
			}
		}
		if r.stOut == nil {
			continue
		}
		row := want.states[slot*sl*dim : (slot+1)*sl*dim]
		for j := range sl {
			switch {
			case r.mode == modeCircular: // x written from the ring position on
				continue
			case r.mode == modeSpec && j < sl-n: // columns [accepted, accepted+sl−n) of the old row
				copy(row[j*dim:(j+1)*dim], old[(mv+j)*dim:(mv+j+1)*dim])
			default: // the last sl entries of [old row ‖ x]
				for c := range dim {
					row[j*dim+c] = hist(n-sl+j, c)
				}
			}
			want.cols[slot*sl+j] = true
		}
		if r.mode == modeCircular {
			for i := max(n-sl, 0); i < n; i++ {
				col := (mv + i) % sl
				copy(row[col*dim:(col+1)*dim], xv[(start+i)*dim:(start+i+1)*dim])
				want.cols[slot*sl+col] = true
			}
		}
	}
	rounded := tensor.New(x.DType(), len(want.y))
	rounded.SetFloat64s(want.y)
	want.y = rounded.Float64s()
	return want
}

// rowView is token row i of a [T, C] or [B, L, C] tensor.
func rowView(t *tensor.Tensor, i int) *tensor.Tensor {
	if t.Rank() == 2 {
		return fuzzargs.Slice(t, 0, i, i+1)
	}
	return fuzzargs.Slice(fuzzargs.Slice(t, 0, i/t.Dim(1), i/t.Dim(1)+1), 1, i%t.Dim(1), i%t.Dim(1)+1)
}

// checkConv checks a successful valid call against want: only the rows and
// columns it names were written, with the values it holds.
func checkConv(t *testing.T, a *convArgs, arena *fuzzargs.Arena, want *convWant) {
	t.Helper()
	var writable []*tensor.Tensor
	dim := a.x.Dim(-1)
	for _, o := range a.outs {
		for i, w := range want.rows {
			if w {
				writable = append(writable, rowView(o, i))
			}
		}
	}
	r := a.roles()
	sl := 0
	if want.cols != nil {
		sl = r.stOut.Dim(1)
		for i, w := range want.cols {
			if w {
				slot := fuzzargs.Slice(r.stOut, 0, i/sl, i/sl+1)
				writable = append(writable, fuzzargs.Slice(slot, 1, i%sl, i%sl+1))
			}
		}
	}
	arena.CheckWrites(t, fmt.Sprintf("%v: outside the rows and state columns the call may write", a), writable...)
	eps := map[tensor.DType]float64{tensor.F32: 0x1p-23, tensor.BF16: 0x1p-7, tensor.F16: 0x1p-10}[a.x.DType()]
	col := 0
	for oi, o := range a.outs {
		got, pw := o.Float64s(), o.Dim(-1)
		for i, w := range want.rows {
			for j := 0; w && j < pw; j++ {
				g, e := got[i*pw+j], want.y[i*dim+col+j]
				ok := g == e || math.IsNaN(g) && math.IsNaN(e) ||
					math.Abs(g-e) <= eps*math.Abs(e)+1e-9*want.scale[i*dim+col+j]+1e-7
				if !ok {
					t.Fatalf("%v: output %d row %d column %d is %v, want %v", a, oi, i, j, g, e)
				}
			}
		}
		col += pw
	}
	if want.cols != nil {
		got := r.stOut.Float64s()
		for i, w := range want.cols {
			for c := 0; w && c < dim; c++ {
				g, e := got[i*dim+c], want.states[i*dim+c]
				if g != e && !(math.IsNaN(g) && math.IsNaN(e)) {
					t.Fatalf("%v: state slot %d column %d channel %d is %v, want %v", a, i/sl, i%sl, c, g, e)
				}
			}
		}
	}
}

// fuzzConv fuzzes op: see FuzzForward.
func fuzzConv(f *testing.F, op opKind) {
	// Seeds: bytes below 240 make valid calls of many shapes; a few odd
	// bytes among them make mostly invalid ones.
	rng := rand.New(rand.NewPCG(uint64(op), 7))
	f.Add([]byte{})
	for i := range 12 {
		b := make([]byte, 40+rng.IntN(120))
		for j := range b {
			b[j] = byte(rng.IntN(240))
			if i >= 8 && rng.IntN(12) == 0 {
				b[j] = byte(240 + rng.IntN(16))
			}
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, arena := genConv(op, data)
		why, unsure := convValid(a)
		var want *convWant
		if why == "" {
			want = convExpect(a)
		}
		err := a.call()
		if err != nil {
			if why == "" && !unsure {
				t.Fatalf("%v: valid call refused: %v", a, err)
			}
			arena.CheckError(t, a.String(), err, "conv1d")
			return
		}
		if why != "" {
			t.Fatalf("%v: invalid call (%s) accepted", a, why)
		}
		checkConv(t, a, arena, want)
	})
}

// FuzzForward calls Forward on the CPU path with fuzzed arguments: dtypes,
// ranks, shapes, widths 0–6, channel counts, row and batch strides (one
// past int32 where it costs no memory), tensors in one shared buffer where
// they may overlap, x passed as another argument, nil tensors, cu_seqlens
// that start elsewhere than 0, decrease, go negative or past T, cache
// indices that are pads, past the pool or shared, HasInitialState values,
// a host ErrorFlag and the options. It checks that no call panics; that a
// call fails, with a non-empty tensor.ArgError and every byte of every
// buffer unchanged, exactly when the documented rules (convValid) say it is
// invalid; and that a valid call writes only the rows of y of the sequences
// it does not skip and their state slots, with the documented values
// (convExpect).
func FuzzForward(f *testing.F) { fuzzConv(f, opForward) }

// FuzzForwardSplit is FuzzForward for ForwardSplit, q, k and v sometimes
// column slices of one buffer (refused when their spans overlap).
func FuzzForwardSplit(f *testing.F) { fuzzConv(f, opForwardSplit) }

// FuzzForwardDense is FuzzForward for ForwardDense: B and L of 0–9 (rarely
// 33), initial and final states absent, separate, the same tensor, or of
// different lengths or overlapping.
func FuzzForwardDense(f *testing.F) { fuzzConv(f, opDense) }

// FuzzUpdate is FuzzForward for Update: x [B, dim] or [B, L, dim], out
// sometimes x itself, state indices with pads, out of the pool or shared,
// and the decode modes: NumAcceptedTokens in and out of [1, L] with state
// rows long enough or not, CacheSeqlens near 2^31 or negative, or both set.
func FuzzUpdate(f *testing.F) { fuzzConv(f, opUpdate) }

// FuzzUpdateSplit is FuzzUpdate for UpdateSplit, q, k and v sometimes
// column slices of one buffer.
func FuzzUpdateSplit(f *testing.F) { fuzzConv(f, opUpdateSplit) }
