package rope

import (
	"math"

	"github.com/gokittens/kittens/tensor"
)

// maxCacheEntries bounds a cache's maxPos·r: 2³¹ − 1 entries (8 GiB in
// fp32) hold 16M positions at r = 128, more than any model's context, so a
// larger request is refused as a mistake before anything is allocated.
const maxCacheEntries = math.MaxInt32

// CosSinCache returns the unscaled cache RotateQK reads, a host tensor
// [maxPos, r] of dtype dt: row p holds cos(p·θ^(−2i/r)) for i ∈ [0, r/2),
// then the matching sines. Angles are computed in float64 and rounded once
// to dt. Frequency-scaled variants (llama3, YaRN) are built the same way
// with their own ω_i. Rope's cos and sin tables [S, r/2] are the two
// column halves of its first S rows.
//
// dt must be a float dtype, maxPos ≥ 0, r positive, even and at most the
// largest head dim RotateQK takes (65536), maxPos·r at most 2³¹ − 1, and θ
// positive and finite; otherwise the error, a tensor.ArgError, names the
// argument.
func CosSinCache(dt tensor.DType, maxPos, r int, theta float64) (*tensor.Tensor, error) {
	v := tensor.Validate("rope.CosSinCache")
	v.Check(dt.IsFloat(), "dt", "is %v, want a float dtype", dt)
	v.Check(maxPos >= 0, "maxPos", "is %d, want ≥ 0", maxPos)
	v.Check(r > 0 && r%2 == 0, "r", "is %d, want a positive even rotary dim", r)
	v.Check(r <= maxHeadDim, "r", "is %d, more than the largest head dim %d", r, maxHeadDim)
	v.Check(theta > 0 && !math.IsInf(theta, 1), "theta", "is %v, want a positive finite base", theta)
	if v.Err() == nil {
		v.Check(maxPos <= maxCacheEntries/r, "maxPos", "is %d, more than the %d rows a cache of r = %d may hold (%d entries)",
			maxPos, maxCacheEntries/r, r, maxCacheEntries)
		// θ < 1 turns the frequencies up, the last pair's fastest: a tiny
		// θ takes its angles past float64.
		wmax := math.Pow(theta, -float64(r-2)/float64(r))
		v.Check(!math.IsInf(wmax*float64(max(maxPos, 1)), 1), "theta", "is %v: the angles p·θ^(−2i/r) overflow", theta)
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	t := tensor.New(dt, maxPos, r)
	if maxPos == 0 {
		return t, nil
	}
	half, cs := r/2, angleCosSin(theta, r)
	step := max(1, 1<<16/r) // rows computed at a time: a small float64 buffer
	buf := make([]float64, min(maxPos, step)*r)
	for lo := 0; lo < maxPos; lo += step {
		hi := min(maxPos, lo+step)
		for p := lo; p < hi; p++ {
			row := buf[(p-lo)*r:][:r]
			for i := range half {
				row[i], row[half+i] = cs(int64(p), i)
			}
		}
		rows, err := t.Slice(0, lo, hi)
		if err != nil {
			return nil, err
		}
		rows.SetFloat64s(buf[:(hi-lo)*r])
	}
	return t, nil
}
