package normtest

import (
	"fmt"
	"math/rand/v2"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/tensor"
)

// shape is one benchmark case's rows and row length; benchmarks run bf16.
type shape struct{ rows, n int }

// bench builds one benchmark case. Fused ops run out of place, as the
// PyTorch snippet they are compared with does; in place, as serving runs
// them, takes the same time (fused_add_rmsnorm 16384x8192: within 0.3%).
// The bytes count each input read once and each output written once.
func (d *op) bench(sh shape) bench.Case {
	const dt = tensor.BF16
	m, n, nOut := sh.rows, sh.n, d.nOut(sh.n)
	es := int64(dt.Size())
	var bytes int64
	switch {
	case d.kind == kindL2Backward:
		bytes = 3*int64(m)*int64(n)*es + 4*int64(m)
	case d.fused:
		bytes = (3*int64(m)*int64(n) + int64(m)*int64(nOut)) * es
	default:
		bytes = (int64(m)*int64(n) + int64(m)*int64(nOut)) * es
	}
	if d.weighted() {
		bytes += int64(n) * es
	}
	if d.bias() {
		bytes += int64(n) * es
	}
	name := fmt.Sprintf("%dx%d %v", m, n, dt)
	if nOut != n {
		name = fmt.Sprintf("%dx%d pad%d %v", m, n, nOut, dt)
	}
	args := map[string]any{"M": m, "N": n, "dtype": dt.String(), "eps": d.eps}
	if d.padTo > 0 {
		args["pad_to"] = d.padTo
	}
	return bench.Case{
		Name:  name,
		Bytes: bytes,
		Torch: &bench.TorchCase{Op: d.name, Args: args},
		Goal:  bench.RowwiseGoal,
		New: func(dev *cuda.Device, rng *rand.Rand) (bench.Instance, error) {
			a := &allocator{dev: dev, rng: rng}
			t := operands{x: a.random(dt, 0, 1, m, n)}
			switch {
			case d.kind == kindL2Backward:
				t.y = a.random(dt, 0, 1, m, n) // dx
				t.savedY = a.random(dt, 0, 1/float64(n), m, n)
				t.savedRStd = a.random(tensor.F32, 1, 0.2, m)
			case d.fused:
				t.residual = a.random(dt, 0, 1, m, n)
				t.residualOut = a.random(dt, 0, 1, m, n)
				t.y = a.random(dt, 0, 1, m, nOut)
			default:
				t.y = a.random(dt, 0, 1, m, nOut)
			}
			if d.weighted() {
				t.w = a.random(dt, 1, 0.3, n)
			}
			if d.bias() {
				t.b = a.random(dt, 0, 0.3, n)
			}
			if a.err != nil {
				a.free()
				return bench.Instance{}, fmt.Errorf("norm: bench %s: %w", name, a.err)
			}
			return bench.Instance{Run: func(s *cuda.Stream) error { return d.call(s, t, false) }, Free: a.free}, nil
		},
	}
}

// allocator makes a bench instance's device tensors and keeps the first error.
type allocator struct {
	dev *cuda.Device
	rng *rand.Rand
	all []*tensor.Tensor
	err error
}

func (a *allocator) random(dt tensor.DType, mean, std float64, shape ...int) *tensor.Tensor {
	if a.err != nil {
		return nil
	}
	t, err := tensor.RandDevice(a.dev, a.rng, dt, mean, std, shape...)
	if err != nil {
		a.err = err
		return nil
	}
	a.all = append(a.all, t)
	return t
}

func (a *allocator) free() {
	for _, t := range a.all {
		t.Free()
	}
}
