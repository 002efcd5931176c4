package softmax_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/softmax"
	"github.com/gokittens/kittens/softmax/softmaxtest"
	"github.com/gokittens/kittens/tensor"
)

// TestStreamWithoutCluster runs the configs a GPU without clusters gets
// (one block per row, streaming when the row outgrows the block) on this
// GPU, against the reference.
func TestStreamWithoutCluster(t *testing.T) {
	dev := gputest.Device(t)
	rng, seed := tensor.NewRNG()
	for _, c := range []struct {
		dt        tensor.DType
		m, n, vec int // vec: the widest access rows of n allow (runConfig's tensors start 256-byte aligned)
	}{{tensor.F32, 3, 300001, 1}, {tensor.F32, 3, 300000, 4}, {tensor.BF16, 5, 70000, 8}} {
		cfg := softmax.PickConfig(softmax.SmallGPU, c.m, c.n, c.dt, c.vec)
		if cfg.Cluster != 1 || !cfg.Stream {
			t.Fatalf("config %+v is not the streaming one", cfg)
		}
		runConfig(t, dev, fmt.Sprintf("%s %dx%d", c.dt, c.m, c.n), seed, rng, c.dt, c.m, c.n, 0, 0, false, false, cfg)
	}
}

// TestRegisterPath runs long aligned rows, which take the bulk path on
// Hopper, through the register path's configs for this GPU (clusters with
// rows in registers, streamed rows), with and without the L2 evict-last
// reads, against the reference.
func TestRegisterPath(t *testing.T) {
	dev := gputest.Device(t)
	rng, seed := tensor.NewRNG()
	for _, c := range []struct {
		dt      tensor.DType
		m, n    int
		inPlace bool
		special bool
	}{
		{tensor.F32, 4, 262144, false, false},
		{tensor.BF16, 6, 262144, false, true},
		{tensor.BF16, 4, 500000, false, true},
		{tensor.F32, 3, 400000, false, false},
		{tensor.BF16, 512, 8192, true, false},
	} {
		for _, evict := range []bool{false, true} {
			cfg := softmax.PickRegister(dev.Props(), c.m, c.n, c.dt, 16/c.dt.Size())
			cfg.EvictLast = evict
			name := fmt.Sprintf("%s %dx%d inplace %v special %v: %+v", c.dt, c.m, c.n, c.inPlace, c.special, cfg)
			runConfig(t, dev, name, seed, rng, c.dt, c.m, c.n, 0, 0, c.inPlace, c.special, cfg)
		}
	}
}

// TestBulkVariants runs softmax_bulk configs the picker may not choose on
// this GPU (clusters of 16, uneven pieces, rings deeper than a chunk, rows
// walked by a cluster, one wave of resident clusters, strides, in place,
// special values; every other one with the L2 evict-last reads) against the
// reference.
func TestBulkVariants(t *testing.T) {
	dev := gputest.Device(t)
	p := dev.Props()
	if p.Major < 9 {
		t.Skip("bulk copies need Hopper")
	}
	rng, seed := tensor.NewRNG()
	for i, c := range []struct {
		dt                                  tensor.DType
		m, n, ldx, ldy                      int
		cl, pieces, slots, threads, rowsPer int
		inPlace, special                    bool
	}{
		{tensor.F32, 5, 100000, 0, 0, 8, 8, 0, 512, 2, false, false},
		{tensor.F32, 5, 100000, 0, 0, 8, 4, 5, 512, 2, false, false},
		{tensor.F32, 5, 100000, 0, 0, 16, 4, 4, 256, 1, false, false},
		{tensor.F32, 5, 100000, 0, 0, 16, 2, 7, 256, 3, false, false},
		{tensor.F32, 4, 100000, 0, 0, 3, 3, 4, 160, 2, false, false},
		{tensor.BF16, 7, 8200, 0, 0, 1, 1, 2, 128, 3, false, false},
		{tensor.BF16, 7, 8200, 0, 0, 2, 3, 0, 96, 2, false, false},
		{tensor.BF16, 8, 20000, 0, 0, 4, 2, 3, 128, 2, false, true},
		{tensor.BF16, 8, 20000, 0, 0, 16, 1, 1, 64, 4, false, true},
		{tensor.F32, 6, 40000, 0, 0, 2, 4, 6, 256, 2, true, false},
		{tensor.F32, 6, 40000, 0, 0, 2, 4, 0, 256, 1, true, false},
		{tensor.BF16, 9, 16384, 16392, 16400, 2, 4, 5, 128, 2, false, false},
		{tensor.F16, 9, 16384, 16392, 16400, 4, 2, 0, 128, 1, false, false},
		{tensor.BF16, 40, 65536, 0, 0, 8, 2, 3, 256, 3, false, true},
		// One wave of resident clusters, each walking several rows (unevenly
		// where the wave does not divide them), with rings deeper than a row.
		{tensor.F32, 40, 100000, 0, 0, 8, 4, 12, 256, 0, false, false},
		{tensor.F32, 300, 8192, 0, 0, 1, 2, 12, 64, 0, false, false},
		{tensor.BF16, 300, 16384, 16392, 16400, 1, 4, 10, 128, 0, false, true},
		{tensor.F32, 64, 32768, 0, 0, 2, 8, 20, 256, 0, true, false},
		{tensor.BF16, 50, 65536, 0, 0, 16, 2, 8, 128, 0, false, true},
		{tensor.F16, 33, 20000, 0, 0, 4, 3, 7, 96, 0, false, false},
		{tensor.BF16, 24, 131072, 0, 0, 3, 8, 20, 512, 0, false, true},
		{tensor.F32, 40, 65536, 0, 0, 6, 5, 11, 480, 0, false, false},
	} {
		cfg := softmax.BulkConfig(p, c.m, c.n, c.dt, c.cl, c.pieces, c.slots, c.threads, c.rowsPer)
		cfg.EvictLast = i%2 == 1
		name := fmt.Sprintf("%s %dx%d ld %d/%d cl %d pieces %d slots %d threads %d rows %d inplace %v special %v evict %v",
			c.dt, c.m, c.n, c.ldx, c.ldy, c.cl, c.pieces, c.slots, c.threads, c.rowsPer, c.inPlace, c.special, cfg.EvictLast)
		softmax.CheckInvariants(t, p, c.m, c.n, cfg)
		runConfig(t, dev, name, seed, rng, c.dt, c.m, c.n, c.ldx, c.ldy, c.inPlace, c.special, cfg)
	}
}

// runConfig runs config cfg on a fresh [m, n] input (N(0, 4²), with
// softmaxtest's special rows where special is set; row strides ldx and ldy,
// 0: contiguous) with Scale 0.5, and compares it with the CPU reference.
func runConfig(t *testing.T, dev *cuda.Device, name string, seed uint64, rng *rand.Rand, dt tensor.DType,
	m, n, ldx, ldy int, inPlace, special bool, cfg softmax.Config) {
	t.Helper()
	x, err := tensor.NewStrided(dt, []int{m, n}, []int{max(ldx, n), 1})
	if err != nil {
		t.Fatal(err)
	}
	x.FillNormal(rng, 0, 4)
	if special {
		softmaxtest.SpecialRows(x, rng)
	}
	want := tensor.New(dt, m, n)
	if err := softmax.Softmax(nil, want, x, softmax.Options{Scale: 0.5}); err != nil {
		t.Fatal(err)
	}
	xd, err := x.ToDevice(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer xd.Free()
	yd := xd
	if !inPlace {
		y, err := tensor.NewStrided(dt, []int{m, n}, []int{max(ldy, n), 1})
		if err != nil {
			t.Fatal(err)
		}
		if yd, err = y.ToDevice(dev); err != nil {
			t.Fatal(err)
		}
		defer yd.Free()
		if err := yd.Poison(); err != nil {
			t.Fatal(err)
		}
	}
	err = softmax.Launch(nil, yd, xd, 0.5, cfg)
	if err == nil {
		err = dev.Synchronize()
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	got, err := yd.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	if r := check.Compare("y", got.Float64s(), want.Float64s(), softmaxtest.Tolerance(dt)); !r.Pass {
		t.Errorf("seed %d %s: %v", seed, name, r)
	} else {
		t.Log(name, r)
	}
}
