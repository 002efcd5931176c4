package conv1d

import "math"

// reference is the CPU path: the §4 math in float64, written as directly as
// possible, on host tensors whose indices checkIndices has already read.
func (p *plan) reference() {
	dim, width, sl := p.dim, p.width, p.stateLen
	xs, ws := p.x.Float64s(), p.w.Float64s()
	bs := make([]float64, dim)
	if p.bias != nil {
		bs = p.bias.Float64s()
	}
	var outs [3][]float64 // current contents: skipped rows stay as they are
	for i, o := range p.outs {
		if o != nil {
			outs[i] = o.Float64s()
		}
	}
	var stIn, stOut []float64
	if p.stateIn != nil {
		stIn = p.stateIn.Float64s() // a snapshot: stateOut may be the same pool
	}
	if p.stateOut != nil {
		stOut = p.stateOut.Float64s()
	}
	for b := range p.nSeqs {
		start, end := b*p.seqLen, (b+1)*p.seqLen
		if p.cuHost != nil {
			start, end = int(p.cuHost[b]), int(p.cuHost[b+1])
		}
		slot := b
		if p.slotHost != nil {
			slot = int(p.slotHost[b])
		}
		n := end - start
		if slot < 0 || n == 0 {
			continue
		}
		init := stIn != nil && (p.initHost == nil || p.initHost[b] != 0)
		var mv int // the sequence's NumAcceptedTokens or CacheSeqlens entry
		if p.modeHost != nil {
			mv = int(p.modeHost[b])
		}
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
				return xs[(start+tau)*dim+c]
			case init:
				return stIn[(slot*sl+histCol(tau))*dim+c]
			}
			return 0
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
				outs[part][(start+t)*pw+col] = acc
			}
		}
		if stOut != nil {
			for c := range dim {
				row := func(j int) *float64 { return &stOut[(slot*sl+j)*dim+c] }
				old := func(j int) float64 { return stIn[(slot*sl+j)*dim+c] }
				switch p.mode {
				case modeSpec: // columns [accepted, accepted+sl−n) of the old row, then x
					for j := range sl - n {
						*row(j) = old(mv + j)
					}
					for i := range n {
						*row(sl - n + i) = xt(i, c)
					}
				case modeCircular: // x written in order from the ring position on
					for i := range n {
						*row((mv + i) % sl) = xt(i, c)
					}
				default: // the last sl entries of [old row ‖ x]
					for j := range sl {
						*row(j) = xt(n-sl+j, c)
					}
				}
			}
		}
	}
	for i, o := range p.outs {
		if o != nil {
			o.SetFloat64s(outs[i])
		}
	}
	if p.stateOut != nil {
		p.stateOut.SetFloat64s(stOut)
	}
}
