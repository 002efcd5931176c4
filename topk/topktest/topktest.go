// Package topktest holds the topk family's parity and benchmark cases and
// its PyTorch builder, for the kittens harness (the tests, the kittens
// command and the generated tables). Users of package topk do not need it.
//
// Every case calls topk.TopK: on host tensors it runs the CPU reference, on
// device tensors the kernel, and the harness compares the two.
package topktest

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/suite"
	"github.com/gokittens/kittens/tensor"
	"github.com/gokittens/kittens/topk"
)

//go:embed torch_topk.py
var torchSrc string

// Suite returns the topk family's op with its parity and benchmark cases
// and the PyTorch snippet the benchmark cases are compared with.
func Suite() (f suite.Family) {
	f.Name = "topk"
	f.Ops = append(f.Ops, &suite.Op{
		Name:    "topk",
		Family:  "topk",
		Doc:     "k largest elements of each row and their indices, descending, torch.topk order (NaN first, ties to the lower index)",
		Checks:  checks(),
		Benches: benches(),
	})
	f.Torch = torchSrc
	return f
}

// checkCase is one parity shape. Its rows cycle through the row kinds of
// fillRows, starting at kind; stride 0 means contiguous rows.
type checkCase struct {
	m, n, k, stride int
	dt, it          tensor.DType
	kind            int
}

// checkShapes: routing rows (warp kernel), then rows for the radix kernel.
var checkShapes = []struct {
	m, n, k, stride int
	allDTypes       bool
}{
	{8, 8, 1, 0, true}, {8, 8, 8, 0, true}, {37, 7, 7, 0, true}, {100, 129, 10, 0, true},
	{64, 128, 8, 0, true}, {50, 256, 32, 0, true}, {33, 1000, 32, 0, true}, {16, 1024, 1, 0, true},
	{40, 1024, 32, 0, true}, {24, 256, 10, 264, true}, {24, 256, 10, 259, true}, {0, 128, 8, 0, true},
	{8, 1000, 1000, 0, true}, {16, 100, 50, 0, true}, {6, 2048, 33, 0, true}, {0, 5000, 64, 0, false},
	{4, 100003, 50, 0, false}, {2, 151936, 20, 0, false}, {1, 201088, 1024, 0, false},
	{3, 32768, 1, 0, false}, {2, 131072, 4096, 0, false}, {3, 50000, 64, 50003, false},
	{1, 201088, 20, 0, false}, {1, 128000, 50, 0, false}, {6, 65536, 256, 0, false},
}

func checks() []check.Case {
	dts := []tensor.DType{tensor.F32, tensor.BF16, tensor.F16}
	var out []check.Case
	for i, s := range checkShapes {
		for j, dt := range dts {
			if !s.allDTypes && j != i%len(dts) {
				continue
			}
			it := tensor.I64
			if (i+j)%2 == 1 {
				it = tensor.I32
			}
			c := checkCase{s.m, s.n, s.k, s.stride, dt, it, i}
			out = append(out, check.Case{Name: c.name(), Spec: c.spec})
		}
	}
	return out
}

func (c checkCase) name() string {
	s := fmt.Sprintf("%dx%d k=%d %v %v", c.m, c.n, c.k, c.dt, c.it)
	if c.stride > 0 {
		s += fmt.Sprintf(" stride %d", c.stride)
	}
	return s
}

// spec compares values (exactly, and bit for bit through a byte copy) and
// indices (exactly) with the reference.
func (c checkCase) spec(rng *rand.Rand) (check.Spec, error) {
	stride := c.stride
	if stride == 0 {
		stride = c.n
	}
	x, err := tensor.NewStrided(c.dt, []int{c.m, c.n}, []int{stride, 1})
	if err != nil {
		return check.Spec{}, err
	}
	fillRows(rng, x, c.kind)
	size := c.dt.Size()
	ts := []*tensor.Tensor{x, tensor.New(c.dt, c.m, c.k), tensor.New(c.it, c.m, c.k), tensor.New(tensor.U8, c.m, c.k*size)}
	return check.Spec{
		Tensors: ts,
		Names:   []string{"x", "values", "indices", "value bits"},
		Outputs: []int{1, 2, 3},
		Poison:  []int{1, 2},
		Tol:     map[int]check.Tolerance{1: {}},
		Run: func(s *cuda.Stream, ts []*tensor.Tensor) error {
			if err := topk.TopK(s, ts[1], ts[2], ts[0], c.k); err != nil {
				return err
			}
			bitsView, err := ts[1].View(tensor.U8, ts[3].Shape(), ts[3].Strides())
			if err != nil {
				return err
			}
			return ts[3].CopyFromOn(s, bitsView)
		},
	}, nil
}

// rowKinds is the number of kinds fillRows cycles through.
const rowKinds = 6

// fillRows fills x row by row; row r is of kind (r + kind) mod rowKinds:
//
//	0: N(0, 1)
//	1: integers 0..7 (many exact ties)
//	2: N(0, 1) with NaN (both signs, odd payloads), ±inf and ±0 sprinkled in
//	3: one value throughout (a finite one, or NaN on every other such row)
//	4: drawn from {+0, −0, −inf, 1}
//	5: −inf except a few NaN and finite values
func fillRows(rng *rand.Rand, x *tensor.Tensor, kind int) {
	m, n := x.Dim(0), x.Dim(1)
	v := make([]float64, m*n)
	negNaN := map[int]bool{} // element → store a negative NaN with a payload
	for r := range m {
		row := v[r*n : (r+1)*n]
		switch kr := (r + kind) % rowKinds; kr {
		case 0, 2:
			for j := range row {
				row[j] = rng.NormFloat64()
			}
			if kr == 2 {
				specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), math.NaN()}
				for range max(1, n/16) {
					j := rng.IntN(n)
					row[j] = specials[rng.IntN(len(specials))]
					if math.IsNaN(row[j]) && rng.IntN(2) == 0 {
						negNaN[r*n+j] = true
					}
				}
			}
		case 1:
			for j := range row {
				row[j] = float64(rng.IntN(8))
			}
		case 3:
			c := math.Round(rng.NormFloat64()*8) / 4
			if r%2 == 1 {
				c = math.NaN()
			}
			for j := range row {
				row[j] = c
			}
		case 4:
			set := []float64{0, math.Copysign(0, -1), math.Inf(-1), 1}
			for j := range row {
				row[j] = set[rng.IntN(len(set))]
			}
		case 5:
			for j := range row {
				switch rng.IntN(64) {
				case 0:
					row[j] = math.NaN()
				case 1, 2:
					row[j] = rng.NormFloat64()
				default:
					row[j] = math.Inf(-1)
				}
			}
		}
	}
	x.SetFloat64s(v)
	b, xs, size := x.Bytes(), x.Stride(0), x.DType().Size()
	for e := range negNaN {
		off := ((e/n)*xs + e%n) * size
		switch x.DType() {
		case tensor.F32:
			binary.LittleEndian.PutUint32(b[off:], 0xffc00001)
		case tensor.BF16:
			binary.LittleEndian.PutUint16(b[off:], 0xffc1)
		case tensor.F16:
			binary.LittleEndian.PutUint16(b[off:], 0xfe01)
		}
	}
}

// benchDType is the dtype of every bench case's rows (and of the PyTorch
// baseline's).
const benchDType = tensor.F32

func benches() []bench.Case {
	shapes := [][3]int{
		{4096, 128, 8}, {4096, 256, 10}, {4096, 1024, 32}, {1024, 256, 10},
		{1, 128000, 50}, {1, 151936, 20}, {64, 151936, 20}, {64, 201088, 50}, {1, 201088, 20},
	}
	out := make([]bench.Case, 0, len(shapes))
	for _, s := range shapes {
		out = append(out, benchCase(s[0], s[1], s[2]))
	}
	return out
}

// benchCase times TopK on N(0, 1) rows with i64 indices (as torch returns).
// Its goal is twice torch.topk's speed.
func benchCase(m, n, k int) bench.Case {
	dt, it := benchDType, tensor.I64
	return bench.Case{
		Name:  fmt.Sprintf("%dx%d k=%d %v", m, n, k, dt),
		Bytes: int64(m*n*dt.Size() + m*k*(dt.Size()+it.Size())),
		Goal:  bench.Goal{VsEager: 2},
		New: func(dev *cuda.Device, rng *rand.Rand) (bench.Instance, error) {
			x, err := tensor.Rand(rng, dt, 1, m, n).ToDevice(dev)
			if err != nil {
				return bench.Instance{}, err
			}
			values, err := tensor.Empty(dev, dt, m, k)
			if err != nil {
				x.Free()
				return bench.Instance{}, err
			}
			indices, err := tensor.Empty(dev, it, m, k)
			if err != nil {
				x.Free()
				values.Free()
				return bench.Instance{}, err
			}
			return bench.Instance{
				Run: func(s *cuda.Stream) error { return topk.TopK(s, values, indices, x, k) },
				Free: func() {
					x.Free()
					values.Free()
					indices.Free()
				},
			}, nil
		},
		Torch: &bench.TorchCase{Op: "topk", Args: map[string]any{"m": m, "n": n, "k": k, "dtype": dt.String()}},
	}
}
