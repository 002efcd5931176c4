package softmaxtest

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/softmax"
	"github.com/gokittens/kittens/tensor"
)

// parityCase is one parity check: an [M, N] input of N(0, Std²) values with
// row strides Ldx and Ldy (0: contiguous), optionally run in place, with
// Special rows (see SpecialRows) at the top.
type parityCase struct {
	DType    tensor.DType
	M, N     int
	Ldx, Ldy int
	Std      float64
	Scale    float32
	InPlace  bool
	Special  bool
	Name     string // what the case is after
}

// parityCases cover both kernel layouts (lanes per row, blocks and clusters
// per row), the streaming path, the bulk path (on Hopper: aligned rows of 16
// KiB and more, 2 MiB in all), every dtype, odd N (scalar access), strides,
// in place, zero rows, N = 1 and the special values. Each stays under about
// 2M elements so the CPU reference stays quick. Package softmax's
// TestRegisterPath runs the long aligned rows through the register path too.
var parityCases = []parityCase{
	{DType: tensor.BF16, M: 128, N: 128, Std: 1, Name: "short rows"},
	{DType: tensor.BF16, M: 16384, N: 128, Std: 1, Scale: 0.7, Name: "short rows, scale"},
	{DType: tensor.F32, M: 257, N: 3, Std: 1, Name: "N=3"},
	{DType: tensor.BF16, M: 1000, N: 2, Std: 30, Name: "N=2"},
	{DType: tensor.BF16, M: 64, N: 1, Std: 1, Name: "N=1 gives ones"},
	{DType: tensor.F32, M: 64, N: 129, Std: 30, Scale: 0.125, Name: "odd N, large values"},
	{DType: tensor.BF16, M: 200, N: 1000, Std: 30, Name: "block per row, large values"},
	{DType: tensor.F32, M: 100, N: 4097, Std: 1, Name: "odd N, cluster"},
	{DType: tensor.BF16, M: 16, N: 100003, Std: 30, Name: "odd long rows, cluster"},
	{DType: tensor.F32, M: 4, N: 262144, Std: 1, Name: "long rows"},
	{DType: tensor.BF16, M: 6, N: 262144, Std: 30, Name: "long rows, large values"},
	{DType: tensor.BF16, M: 4, N: 500000, Std: 1, Special: true, Name: "longer rows"},
	{DType: tensor.F32, M: 3, N: 400000, Std: 30, Name: "longer rows, large values"},
	{DType: tensor.BF16, M: 128, N: 8192, Std: 4, Scale: -0.5, Special: true, Name: "bulk rows, special values"},
	{DType: tensor.F32, M: 64, N: 16384, Ldx: 16388, Ldy: 16392, Std: 1, Name: "bulk rows, strided"},
	{DType: tensor.BF16, M: 300, N: 1000, Ldx: 1003, Ldy: 1000, Std: 1, Name: "strided, unaligned rows"},
	{DType: tensor.F32, M: 64, N: 4096, Ldx: 4100, Ldy: 4104, Std: 1, Scale: -1.5, Name: "strided, negative scale"},
	{DType: tensor.BF16, M: 512, N: 4096, Std: 1, InPlace: true, Name: "in place"},
	{DType: tensor.F32, M: 300, N: 8, Std: 1, InPlace: true, Name: "in place, short rows"},
	{DType: tensor.F16, M: 1024, N: 256, Std: 1, Name: "f16"},
	{DType: tensor.F16, M: 300, N: 777, Std: 4, Name: "f16 odd N"},
	{DType: tensor.BF16, M: 0, N: 128, Std: 1, Name: "zero rows"},
	{DType: tensor.F32, M: 8, N: 1000, Std: 1, Special: true, Name: "special values"},
	{DType: tensor.BF16, M: 8, N: 128, Std: 1, Special: true, Name: "special values, short rows"},
	{DType: tensor.BF16, M: 8, N: 20000, Std: 1, Special: true, Name: "special values, cluster"},
}

func (c parityCase) String() string {
	s := fmt.Sprintf("%s %dx%d", c.DType, c.M, c.N)
	if c.Ldx != 0 || c.Ldy != 0 {
		s += fmt.Sprintf(" ld %d/%d", c.Ldx, c.Ldy)
	}
	if c.Scale != 0 {
		s += fmt.Sprintf(" scale %g", c.Scale)
	}
	return s + " " + c.Name
}

// Tolerance is the parity bound of softmax output in dt. For bf16 it is
// atol = rtol = 1.6e-2 elementwise: both sides round the same bf16 input's
// fp32 (device) or float64 (host) softmax once, and those differ by far
// less than a bf16 ulp, so results agree to one ulp (2⁻⁸ relative); the
// bound leaves room for that and no systematic error, which the
// relative-norm bound catches. f32 and f16 take check.ForDType: 1e-5 for
// f32 covers fp32 exponentials and a tree sum (about 1e-6 relative) and the
// rounding of x·Scale for non-power-of-two scales.
func Tolerance(dt tensor.DType) check.Tolerance {
	if dt == tensor.BF16 {
		return check.Tolerance{Atol: 1.6e-2, Rtol: 1.6e-2, RelNorm: check.ForDType(dt).RelNorm}
	}
	return check.ForDType(dt)
}

// input draws the case's x on the host.
func (c parityCase) input(rng *rand.Rand) (*tensor.Tensor, error) {
	x, err := tensor.NewStrided(c.DType, []int{c.M, c.N}, []int{max(c.Ldx, c.N), 1})
	if err != nil {
		return nil, err
	}
	x.FillNormal(rng, 0, c.Std)
	if c.Special {
		SpecialRows(x, rng)
	}
	return x, nil
}

// SpecialRows overwrites the first eight rows of the host matrix x: all −inf
// (NaN out), one NaN (NaN row), one +inf (NaN row), all but one element −inf
// (a one-hot row), half −inf (a masked row, finite out), then all and half
// the lowest finite value (uniform over the row, and over its first half,
// for a positive scale) and one element the largest finite value (one-hot).
// The last three catch a kernel that folds log2 e into the scale, as
// x·Scale·log2 e overflows fp32 there.
func SpecialRows(x *tensor.Tensor, rng *rand.Rand) {
	m, n := x.Dim(0), x.Dim(1)
	v := x.Float64s()
	ninf, big := math.Inf(-1), largestFinite(x.DType())
	for i := range min(m, 8) {
		row := v[i*n : (i+1)*n]
		switch i {
		case 0:
			for j := range row {
				row[j] = ninf
			}
		case 1:
			row[rng.IntN(n)] = math.NaN()
		case 2:
			row[rng.IntN(n)] = math.Inf(1)
		case 3:
			keep := rng.IntN(n)
			for j := range row {
				if j != keep {
					row[j] = ninf
				}
			}
		case 4:
			for j := n / 2; j < n; j++ {
				row[j] = ninf
			}
		case 5: // masked throughout with the lowest finite value, as Hugging Face masks
			for j := range row {
				row[j] = -big
			}
		case 6:
			for j := n / 2; j < n; j++ {
				row[j] = -big
			}
		case 7:
			row[rng.IntN(n)] = big
		}
	}
	x.SetFloat64s(v)
}

// largestFinite is dt's largest finite value (torch.finfo(dt).max).
func largestFinite(dt tensor.DType) float64 {
	switch dt {
	case tensor.BF16:
		return tensor.BF16Value(0x7f7f)
	case tensor.F16:
		return tensor.F16Value(0x7bff)
	}
	return math.MaxFloat32
}

// spec draws fresh inputs: a check.Spec that runs Softmax on them.
func (c parityCase) spec(rng *rand.Rand) (check.Spec, error) {
	x, err := c.input(rng)
	if err != nil {
		return check.Spec{}, err
	}
	opt := softmax.Options{Scale: c.Scale}
	if c.InPlace {
		return check.Spec{
			Tensors: []*tensor.Tensor{x}, Names: []string{"y=x"}, Outputs: []int{0},
			Tol: map[int]check.Tolerance{0: Tolerance(c.DType)},
			Run: func(s *cuda.Stream, ts []*tensor.Tensor) error { return softmax.Softmax(s, ts[0], ts[0], opt) },
		}, nil
	}
	y, err := tensor.NewStrided(c.DType, []int{c.M, c.N}, []int{max(c.Ldy, c.N), 1})
	if err != nil {
		return check.Spec{}, err
	}
	return check.Spec{
		Tensors: []*tensor.Tensor{x, y}, Names: []string{"x", "y"}, Outputs: []int{1}, Poison: []int{1},
		Tol: map[int]check.Tolerance{1: Tolerance(c.DType)},
		Run: func(s *cuda.Stream, ts []*tensor.Tensor) error { return softmax.Softmax(s, ts[1], ts[0], opt) },
	}, nil
}

// benchShape is one benchmark case.
type benchShape struct {
	DType tensor.DType
	M, N  int
}

// benchShapes: short rows (router and per-head shapes), hidden-size rows,
// long rows in both dtypes, and a sampling batch over a 151,936 vocabulary.
var benchShapes = func() []benchShape {
	s := []benchShape{
		{tensor.BF16, 4096, 128}, {tensor.BF16, 16384, 128}, {tensor.BF16, 65536, 128},
		{tensor.BF16, 4096, 4096}, {tensor.BF16, 16384, 8192},
	}
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
		for _, m := range []int{16, 256} {
			for _, n := range []int{32768, 131072, 262144} {
				s = append(s, benchShape{dt, m, n})
			}
		}
	}
	return append(s, benchShape{tensor.BF16, 64, 151936})
}()

func (b benchShape) bench() bench.Case {
	return bench.Case{
		Name:  fmt.Sprintf("%dx%d %s", b.M, b.N, b.DType),
		Bytes: 2 * int64(b.M) * int64(b.N) * int64(b.DType.Size()),
		New:   b.instance,
		Torch: &bench.TorchCase{Op: "softmax", Args: map[string]any{"M": b.M, "N": b.N, "dtype": b.DType.String()}},
		Goal:  bench.RowwiseGoal,
	}
}

// instance is one benchmark set: Softmax from a fresh x (random, std 1)
// into y.
func (b benchShape) instance(dev *cuda.Device, rng *rand.Rand) (bench.Instance, error) {
	x, err := tensor.RandDevice(dev, rng, b.DType, 0, 1, b.M, b.N)
	if err != nil {
		return bench.Instance{}, err
	}
	y, err := tensor.Empty(dev, b.DType, b.M, b.N)
	if err != nil {
		x.Free()
		return bench.Instance{}, err
	}
	return bench.Instance{
		Run:  func(s *cuda.Stream) error { return softmax.Softmax(s, y, x, softmax.Options{}) },
		Free: func() { x.Free(); y.Free() },
	}, nil
}
