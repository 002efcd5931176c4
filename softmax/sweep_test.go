package softmax

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"testing"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/tensor"
)

// sweepShape is one [M, N] input of the sweep.
type sweepShape struct {
	DType tensor.DType
	M, N  int
}

// bench is the shape's case: run(s, y, x) on a fresh x (random, std 1)
// into y.
func (sh sweepShape) bench(run func(s *cuda.Stream, y, x *tensor.Tensor) error) bench.Case {
	return bench.Case{
		Name:  fmt.Sprintf("%dx%d %s", sh.M, sh.N, sh.DType),
		Bytes: 2 * int64(sh.M) * int64(sh.N) * int64(sh.DType.Size()),
		New: func(dev *cuda.Device, rng *rand.Rand) (bench.Instance, error) {
			x, err := tensor.RandDevice(dev, rng, sh.DType, 0, 1, sh.M, sh.N)
			if err != nil {
				return bench.Instance{}, err
			}
			y, err := tensor.Empty(dev, sh.DType, sh.M, sh.N)
			if err != nil {
				x.Free()
				return bench.Instance{}, err
			}
			return bench.Instance{
				Run:  func(s *cuda.Stream) error { return run(s, y, x) },
				Free: func() { x.Free(); y.Free() },
			}, nil
		},
	}
}

// BenchmarkSweep is for tuning the picker and runs only when
// KITTENS_SOFTMAX_SWEEP is set: to 1 for every shape, or to a regexp over
// the shapes' names ("256x262144 f32"). It times configs of the benchmark
// shapes beside the picker's own: lanes and block sizes for short rows; for
// longer rows the register path against softmax_bulk with other clusters,
// pieces, rings, block sizes and rows per cluster (a fixed number, or one
// wave of resident clusters). Each shape first prints the bandwidth of a
// copy of its bytes, the ceiling of a launch of that size; each resident
// variant names its wave (clusters at once) and the clusters it launches;
// bulk variants name their consumer threads (the producer warp comes on
// top). Run with -test.run XXX -test.bench Sweep -test.benchtime 1x.
func BenchmarkSweep(b *testing.B) {
	filter := os.Getenv("KITTENS_SOFTMAX_SWEEP")
	if filter == "" {
		b.Skip("set KITTENS_SOFTMAX_SWEEP=1, or to a regexp over \"MxN dtype\"")
	}
	if filter == "1" {
		filter = ""
	}
	match, err := regexp.Compile(filter)
	if err != nil {
		b.Fatal(err)
	}
	dev := gputest.Device(b)
	p := dev.Props()
	type variant struct {
		name string
		edit func(c *config, m, n int)
	}
	short := func(g, nvec, block int) variant {
		return variant{fmt.Sprintf("lanes %d nvec %d block %d", g, nvec, block), func(c *config, m, _ int) {
			c.Group, c.NVec, c.Block, c.MaxT = g, nvec, block, launchBound(block)
			c.Grid = intmath.CeilDiv(m, block/g)
		}}
	}
	rowBlock := func(cl, nvec, block int, prefetch bool) variant {
		return variant{fmt.Sprintf("cluster %d nvec %d block %d prefetch %v", cl, nvec, block, prefetch), func(c *config, m, n int) {
			c.Cluster, c.NVec, c.Block, c.MaxT, c.Prefetch = cl, nvec, block, launchBound(block), prefetch && cl == 1
			c.Grid, c.Chunk = m*cl, intmath.CeilDiv(intmath.CeilDiv(n, c.Vec), cl)*c.Vec
			if cl == 1 {
				c.Chunk = n
			}
		}}
	}
	keep := variant{"picker", func(*config, int, int) {}}
	reg := variant{"register path", func(c *config, m, n int) {
		*c = pickRegister(p, m, n, c.DType, 16/c.DType.Size())
	}}
	B := func(cl, pieces, slots, threads, rowsPer int) variant {
		return variant{fmt.Sprintf("bulk cluster %d pieces %d slots %d threads %d rows %d", cl, pieces, slots, threads, rowsPer),
			func(c *config, m, n int) { *c = bulkConfig(p, m, n, c.DType, cl, pieces, slots, threads, rowsPer) }}
	}
	// W: one wave of resident clusters of cl blocks, pieces of kb KiB, and
	// rings that fill the SM's shared memory with perSM blocks.
	W := func(cl, kb, perSM, threads int) variant {
		return variant{fmt.Sprintf("wave cluster %d piece %dK perSM %d threads %d", cl, kb, perSM, threads),
			func(c *config, m, n int) {
				chunk := intmath.CeilDiv(n/c.Vec, cl) * 16
				*c = withRing(p, bulkConfig(p, m, n, c.DType, cl, intmath.CeilDiv(chunk, kb<<10), 0, threads, 0), perSM)
			}}
	}
	for _, s := range []struct {
		shape    sweepShape
		variants []variant
	}{
		{sweepShape{tensor.BF16, 65536, 128}, []variant{keep, short(8, 2, 128), short(16, 1, 256)}},
		{sweepShape{tensor.BF16, 4096, 4096}, []variant{keep, rowBlock(1, 2, 512, true), B(1, 1, 0, 128, 1), rowBlock(1, 4, 128, true),
			rowBlock(1, 1, 512, true), rowBlock(1, 4, 128, false), rowBlock(1, 2, 256, false)}},
		{sweepShape{tensor.F32, 256, 262144}, []variant{keep, reg, B(8, 8, 0, 512, 2), W(8, 16, 1, 512), W(8, 32, 1, 512), W(8, 16, 1, 384),
			W(6, 16, 1, 512), W(6, 32, 1, 512), W(6, 16, 1, 256), W(6, 8, 1, 512), W(5, 16, 1, 512), W(12, 16, 2, 256), W(16, 16, 2, 256),
			W(16, 32, 2, 256), W(16, 32, 1, 512)}},
		{sweepShape{tensor.F32, 256, 131072}, []variant{keep, reg, B(8, 2, 0, 256, 2), W(8, 16, 2, 256), W(4, 16, 1, 512), W(4, 32, 1, 512),
			W(3, 16, 1, 512), W(3, 32, 1, 512), W(3, 16, 1, 256), W(3, 8, 1, 512), W(6, 16, 2, 256), W(6, 32, 2, 256), W(6, 16, 2, 480),
			W(8, 32, 2, 256), W(8, 32, 1, 512)}},
		{sweepShape{tensor.F32, 256, 32768}, []variant{keep, reg, B(1, 8, 0, 512, 2), W(1, 16, 1, 512), W(1, 32, 1, 512), W(1, 16, 1, 256),
			W(2, 16, 2, 256), W(2, 16, 2, 480), W(2, 32, 2, 256), W(2, 32, 1, 512)}},
		{sweepShape{tensor.BF16, 256, 262144}, []variant{keep, reg, B(8, 2, 0, 256, 2), W(8, 16, 2, 256), W(4, 16, 1, 512), W(4, 32, 1, 512),
			W(3, 16, 1, 512), W(3, 32, 1, 512), W(3, 16, 1, 256), W(3, 8, 1, 512), W(6, 16, 2, 256), W(6, 32, 2, 256), W(6, 16, 2, 480),
			W(8, 32, 1, 512)}},
		{sweepShape{tensor.BF16, 256, 131072}, []variant{keep, reg, B(4, 2, 0, 256, 1), W(2, 16, 1, 512), W(2, 32, 1, 512), W(2, 16, 1, 256),
			W(2, 16, 1, 384), W(4, 16, 2, 256), W(4, 16, 1, 512), W(3, 16, 2, 256), W(3, 16, 2, 480), W(4, 32, 1, 512)}},
		{sweepShape{tensor.BF16, 256, 32768}, []variant{keep, reg, B(1, 2, 0, 256, 1), B(1, 4, 0, 256, 1), W(1, 16, 1, 512), W(1, 16, 2, 256),
			W(1, 32, 2, 256), W(1, 16, 3, 256), W(1, 32, 3, 256), W(1, 16, 2, 480), W(2, 16, 2, 256),
			W(2, 32, 1, 512), B(2, 2, 0, 256, 1)}},
		{sweepShape{tensor.BF16, 64, 151936}, []variant{keep, reg, B(8, 1, 0, 256, 1), B(8, 2, 0, 256, 1), B(4, 2, 0, 512, 1), B(4, 4, 0, 512, 1),
			B(2, 4, 0, 512, 1), B(2, 8, 0, 512, 1), B(3, 4, 0, 512, 1), B(16, 1, 0, 128, 1), B(16, 2, 0, 128, 1), B(6, 2, 0, 256, 1),
			B(4, 2, 4, 512, 2), B(4, 1, 2, 512, 2), B(8, 1, 2, 256, 4), B(8, 1, 4, 256, 4), B(16, 1, 2, 128, 8)}},
		{sweepShape{tensor.BF16, 16384, 8192}, []variant{keep, reg, rowBlock(1, 4, 256, true), B(1, 1, 0, 128, 1), B(1, 1, 0, 96, 1),
			B(1, 1, 0, 64, 1), B(1, 2, 0, 128, 1), W(1, 16, 4, 128), W(1, 16, 6, 128),
			W(1, 16, 8, 96), W(1, 16, 2, 256), W(1, 16, 1, 512)}},
		{sweepShape{tensor.F32, 16, 262144}, []variant{keep, reg, B(16, 2, 0, 256, 1), B(16, 1, 0, 256, 1), B(16, 2, 0, 128, 1), B(16, 4, 0, 256, 1),
			B(8, 4, 0, 512, 1), B(16, 2, 4, 256, 2), B(16, 2, 4, 512, 2)}},
		{sweepShape{tensor.F32, 16, 131072}, []variant{keep, reg, B(8, 2, 0, 256, 1), B(8, 1, 0, 256, 1), B(16, 2, 0, 128, 1), B(8, 4, 0, 256, 1)}},
		{sweepShape{tensor.F32, 16, 32768}, []variant{keep, reg, B(8, 1, 0, 128, 1), B(16, 1, 0, 64, 1)}},
		{sweepShape{tensor.BF16, 16, 32768}, []variant{keep}},
		{sweepShape{tensor.BF16, 16, 131072}, []variant{keep, reg, B(8, 2, 0, 256, 1), B(8, 1, 0, 256, 1), B(16, 1, 0, 128, 1)}},
		{sweepShape{tensor.BF16, 16, 262144}, []variant{keep, reg, B(16, 2, 0, 256, 1), B(16, 1, 0, 256, 1), B(16, 2, 0, 128, 1),
			B(16, 1, 2, 256, 2), B(16, 2, 4, 256, 2)}},
	} {
		name := s.shape.bench(nil).Name
		if !match.MatchString(name) {
			continue
		}
		if gbs, err := bench.CopyAt(dev, s.shape.bench(nil).Bytes); err == nil {
			fmt.Printf("%s: a copy of the same bytes: %.0f GB/s\n", name, gbs)
		}
		base := pickConfig(p, s.shape.M, s.shape.N, s.shape.DType, 16/s.shape.DType.Size())
		for _, v := range s.variants {
			c := base
			v.edit(&c, s.shape.M, s.shape.N)
			vname := v.name
			if c.Bulk && (c.Smem > p.SharedPerBlockOptin || c.Smem+smReserve > p.SharedPerSM || c.Slots > maxSlots) {
				fmt.Printf("%s/%s: does not fit, skipped\n", name, vname)
				continue
			}
			if c.Bulk && c.Resident {
				fn, err := kernels.Get(dev, nil, c.kernelKey)
				if err == nil {
					err = prepareBulk(fn, c)
				}
				w := 0
				if err == nil {
					w, err = wave(fn, p, c)
				}
				if err != nil {
					b.Errorf("%s/%s: %v", name, vname, err)
					continue
				}
				vname += fmt.Sprintf(" wave %d launches %d", w, waveGrid(s.shape.M, c.Cluster, w)/c.Cluster)
			}
			bc := s.shape.bench(func(st *cuda.Stream, y, x *tensor.Tensor) error { return run(st, y, x, 1, c) })
			b.Run(name+"/"+vname, func(b *testing.B) { gputest.Measure(b, dev, bc) })
		}
	}
}
