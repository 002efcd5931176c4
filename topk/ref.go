package topk

import (
	"cmp"
	"math"
	"slices"

	"github.com/gokittens/kittens/tensor"
)

// rankCompare orders elements as TopK returns them: NaN first, then by value
// descending, equal values (−0 and +0 too) and NaNs by ascending index.
func rankCompare(va, vb float64, ia, ib int) int {
	na, nb := math.IsNaN(va), math.IsNaN(vb)
	switch {
	case na != nb:
		if na {
			return -1
		}
		return 1
	case !na && va != vb:
		if va > vb {
			return -1
		}
		return 1
	}
	return cmp.Compare(ia, ib)
}

// reference is the CPU top-k: sort each row's indices by rankCompare and
// copy the first k elements' bytes (so values are bit-exact copies).
func reference(values, indices, x *tensor.Tensor, k int) {
	m, n := x.Dim(0), x.Dim(1)
	size := x.DType().Size()
	xv := x.Float64s()
	xb, vb := x.Bytes(), values.Bytes()
	xs, vs := x.Stride(0), values.Stride(0)
	order := make([]int, n)
	out := make([]int64, 0, m*k)
	for r := range m {
		row := xv[r*n : (r+1)*n]
		for j := range order {
			order[j] = j
		}
		slices.SortFunc(order, func(a, b int) int { return rankCompare(row[a], row[b], a, b) })
		for i, j := range order[:k] {
			copy(vb[(r*vs+i)*size:][:size], xb[(r*xs+j)*size:][:size])
			out = append(out, int64(j))
		}
	}
	indices.SetInt64s(out)
}
