package conv1d

import (
	"math"

	"github.com/gokittens/kittens/tensor"
)

// reference is the CPU path: the package comment's math in float64,
// written as directly as possible, on host tensors whose indices
// checkIndices has already read.
// Each sequence reads and writes only its own output rows and its own state
// slot (in circular mode, only the columns it writes), so that whatever the
// call skips keeps its bytes, NaN payloads included, as on the device, and
// calls on disjoint slots of one pool may run side by side.
func (p *plan) reference() {
	dim, width, sl := p.dim, p.width, p.stateLen
	xs, ws := p.x.Float64s(), p.w.Float64s()
	bs := make([]float64, dim)
	if p.bias != nil {
		bs = p.bias.Float64s()
	}
	type sequence struct {
		start, end, slot int
		mv               int       // the NumAcceptedTokens or CacheSeqlens entry
		old              []float64 // the slot's state row [sl, dim] before the call, or nil
	}
	var seqs []sequence
	for b := range p.nSeqs {
		s := sequence{start: b * p.seqLen, end: (b + 1) * p.seqLen, slot: b}
		if p.cuHost != nil {
			s.start, s.end = int(p.cuHost[b]), int(p.cuHost[b+1])
		}
		if p.slotHost != nil {
			s.slot = int(p.slotHost[b])
		}
		if s.slot < 0 || s.end == s.start {
			continue
		}
		if p.modeHost != nil {
			s.mv = int(p.modeHost[b])
		}
		// Every old row is read before any is written: stateOut may be
		// the same pool.
		if p.stateIn != nil && (p.initHost == nil || p.initHost[b] != 0) {
			s.old = part(p.stateIn, 0, s.slot, s.slot+1).Float64s()
		}
		seqs = append(seqs, s)
	}
	for _, s := range seqs {
		n, mv, old := s.end-s.start, s.mv, s.old
		// histCol is the state column that holds x̃[τ], τ < 0, in each mode.
		histCol := func(tau int) int {
			switch p.mode {
			case modeSpec: // the window [accepted−1, accepted−1+W−1) ends at x̃[−1]
				return mv - 1 + (width - 1) + tau
			case modeCircular: // the ring's next write position is mv mod sl
				return ((mv+tau)%sl + sl) % sl
			}
			return sl + tau
		}
		// xt is x̃[τ] of channel c: the input for τ ≥ 0, the initial state
		// (or zero) before the sequence.
		xt := func(tau, c int) float64 {
			switch {
			case tau >= 0:
				return xs[(s.start+tau)*dim+c]
			case old != nil:
				return old[histCol(tau)*dim+c]
			}
			return 0
		}
		var outs [3][]float64 // the sequence's rows of each output
		for i, o := range p.outs {
			if o != nil {
				outs[i] = make([]float64, n*o.Dim(1))
			}
		}
		for t := range n {
			for c := range dim {
				acc := bs[c]
				for k := range width {
					acc += ws[c*width+k] * xt(t-(width-1)+k, c)
				}
				if p.silu {
					acc /= 1 + math.Exp(-acc)
				}
				part, col, pw := 0, c, dim
				switch {
				case c >= p.split[1]:
					part, col, pw = 2, c-p.split[1], dim-p.split[1]
				case c >= p.split[0]:
					part, col, pw = 1, c-p.split[0], p.split[1]-p.split[0]
				case p.split[0] < dim:
					pw = p.split[0]
				}
				outs[part][t*pw+col] = acc
			}
		}
		for i, o := range p.outs {
			if o != nil {
				part(o, 0, s.start, s.end).SetFloat64s(outs[i])
			}
		}
		if p.stateOut == nil {
			continue
		}
		row := part(p.stateOut, 0, s.slot, s.slot+1)
		switch p.mode {
		case modeCircular: // x written in order from the ring position on: only a column's last write stays
			for i := max(n-sl, 0); i < n; i++ {
				v := make([]float64, dim)
				for c := range v {
					v[c] = xt(i, c)
				}
				col := (mv + i) % sl
				part(row, 1, col, col+1).SetFloat64s(v)
			}
		default:
			v := make([]float64, sl*dim)
			for j := range sl {
				for c := range dim {
					if p.mode == modeSpec && j < sl-n { // columns [accepted, accepted+sl−n) of the old row, then x
						v[j*dim+c] = old[(mv+j)*dim+c]
					} else { // the last sl entries of [old row ‖ x]
						v[j*dim+c] = xt(n-sl+j, c)
					}
				}
			}
			row.SetFloat64s(v)
		}
	}
}

// part is the view of t's indices [lo, hi) along dim, which the caller has
// checked lie inside it.
func part(t *tensor.Tensor, dim, lo, hi int) *tensor.Tensor {
	v, err := t.Slice(dim, lo, hi)
	if err != nil {
		panic(err) // a bug in this package: the indices were checked
	}
	return v
}
