package softmax

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/internal/gputest"
	"github.com/gokittens/kittens/internal/intmath"
	"github.com/gokittens/kittens/tensor"
)

func TestParity(t *testing.T) { gputest.RunChecks(t, Suite()) }

func BenchmarkSoftmax(b *testing.B) { gputest.RunBenches(b, Suite()) }

// h200 and small are the device properties the picker is tested on: the
// target GPU, and a small pre-Hopper one (48 KiB of shared memory, 16 SMs,
// no clusters).
var (
	h200 = cuda.Props{Name: "H200", Major: 9, Minor: 0, SMs: 132, MaxThreadsPerBlock: 1024,
		SharedPerBlock: 48 << 10, SharedPerBlockOptin: 227 << 10, SharedPerSM: 228 << 10, RegistersPerBlock: 65536,
		L2Bytes: 60 << 20}
	small = cuda.Props{Name: "small", Major: 8, Minor: 6, SMs: 16, MaxThreadsPerBlock: 1024,
		SharedPerBlock: 48 << 10, SharedPerBlockOptin: 48 << 10, SharedPerSM: 64 << 10, RegistersPerBlock: 65536,
		L2Bytes: 4 << 20}
)

func fromRows(dt tensor.DType, rows ...[]float64) *tensor.Tensor {
	t := tensor.New(dt, len(rows), len(rows[0]))
	var v []float64
	for _, r := range rows {
		v = append(v, r...)
	}
	t.SetFloat64s(v)
	return t
}

func TestReference(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	ln2, ln3 := math.Ln2, math.Log(3)
	for _, c := range []struct {
		name  string
		x     []float64
		scale float32
		want  []float64
	}{
		{"exp is 1, 2, 3", []float64{0, ln2, ln3}, 0, []float64{1. / 6, 2. / 6, 3. / 6}},
		{"scale", []float64{0, 1, 2}, float32(ln2), []float64{1. / 7, 2. / 7, 4. / 7}},
		{"max subtracted", []float64{1000, 1000, 1000 + ln3}, 1, []float64{0.2, 0.2, 0.6}},
		{"negative scale", []float64{0, -ln3}, -1, []float64{0.25, 0.75}},
		{"-inf is a zero", []float64{-inf, 0, -inf, ln3}, 0, []float64{0, 0.25, 0, 0.75}},
		{"all -inf is NaN", []float64{-inf, -inf}, 0, []float64{nan, nan}},
		{"+inf is NaN", []float64{inf, 0}, 0, []float64{nan, nan}},
		{"NaN spreads", []float64{0, nan, 1}, 0, []float64{nan, nan, nan}},
		{"N=1", []float64{-7}, 0, []float64{1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := fromRows(tensor.F32, c.x)
			y := tensor.New(tensor.F32, 1, len(c.x))
			if err := Softmax(nil, y, x, Options{Scale: c.scale}); err != nil {
				t.Fatal(err)
			}
			if r := check.Compare("y", y.Float64s(), c.want, check.ForDType(tensor.F32)); !r.Pass {
				t.Errorf("softmax(%v) = %v, want %v: %v", c.x, y.Float64s(), c.want, r)
			}
			if err := Softmax(nil, x, x, Options{Scale: c.scale}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(x.Bytes(), y.Bytes()) {
				t.Errorf("in place gave %v, out of place %v", x.Float64s(), y.Float64s())
			}
		})
	}
}

// TestReferenceScaleOverflow checks that the reference rounds x·Scale to
// fp32, as the kernel does (and torch.softmax(x * scale) does for f32 and
// bf16 x): a product beyond the fp32 range is ±inf, so a row masked with the
// lowest finite value and scaled by 2 is a row of −inf (NaN out), and the
// largest finite value scaled by 2 is +inf (NaN out). Computed in float64,
// the same rows came out uniform and one-hot, where the device gave NaN.
func TestReferenceScaleOverflow(t *testing.T) {
	nan := math.NaN()
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
		big := largestFinite(dt)
		for _, c := range []struct {
			name  string
			x     []float64
			scale float32
			want  []float64
		}{
			{"masked row scaled to -inf", []float64{-big, -big}, 2, []float64{nan, nan}},
			{"largest scaled to +inf", []float64{big, 0}, 2, []float64{nan, nan}},
			{"N=1 scaled to +inf", []float64{big}, 2, []float64{nan}},
			{"negative scale to +inf", []float64{-big, 0}, -2, []float64{nan, nan}},
			{"in range", []float64{-big, -big}, 0.5, []float64{0.5, 0.5}},
		} {
			x := fromRows(dt, c.x)
			y := tensor.New(dt, 1, len(c.x))
			if err := Softmax(nil, y, x, Options{Scale: c.scale}); err != nil {
				t.Fatal(err)
			}
			if r := check.Compare("y", y.Float64s(), c.want, check.ForDType(dt)); !r.Pass {
				t.Errorf("%s %s: softmax(%v·%v) = %v, want %v: %v", dt, c.name, c.x, c.scale, y.Float64s(), c.want, r)
			}
		}
	}
}

// TestReferenceBF16 checks the single rounding to bf16: 1/3 rounds to
// nearest even, not truncated.
func TestReferenceBF16(t *testing.T) {
	x := fromRows(tensor.BF16, []float64{0, 0, 0})
	y := tensor.New(tensor.BF16, 1, 3)
	if err := Softmax(nil, y, x, Options{}); err != nil {
		t.Fatal(err)
	}
	want := tensor.Round(tensor.BF16, 1./3)
	for _, got := range y.Float64s() {
		if got != want {
			t.Fatalf("bf16 softmax of zeros = %v, want %v", got, want)
		}
	}
}

func TestZeroSizes(t *testing.T) {
	for _, shape := range [][2]int{{0, 16}, {4, 0}, {maxRows, 0}, {0, maxCols}} {
		x, y := tensor.New(tensor.BF16, shape[0], shape[1]), tensor.New(tensor.BF16, shape[0], shape[1])
		if err := Softmax(nil, y, x, Options{}); err != nil {
			t.Errorf("%v: %v", shape, err)
		}
	}
}

// TestValidation checks that each kind of bad argument is reported, naming
// the argument, and that nothing was written.
func TestValidation(t *testing.T) {
	slice := func(tt *tensor.Tensor, start, end int) *tensor.Tensor {
		s, err := tt.Slice(1, start, end)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	wide := tensor.New(tensor.F32, 4, 12)
	for _, c := range []struct {
		name string
		y, x *tensor.Tensor
		opt  Options
		arg  string
	}{
		{"nil x", tensor.New(tensor.F32, 2, 3), nil, Options{}, "x"},
		{"nil y", nil, tensor.New(tensor.F32, 2, 3), Options{}, "y"},
		{"x rank 1", tensor.New(tensor.F32, 2, 3), tensor.New(tensor.F32, 6), Options{}, "x"},
		{"x rank 3", tensor.New(tensor.F32, 2, 3), tensor.New(tensor.F32, 1, 2, 3), Options{}, "x"},
		{"y rank 3", tensor.New(tensor.F32, 1, 2, 3), tensor.New(tensor.F32, 2, 3), Options{}, "y"},
		{"shape mismatch", tensor.New(tensor.F32, 2, 4), tensor.New(tensor.F32, 2, 3), Options{}, "y"},
		{"dtype mismatch", tensor.New(tensor.BF16, 2, 3), tensor.New(tensor.F32, 2, 3), Options{}, "y"},
		{"integer dtype", tensor.New(tensor.I32, 2, 3), tensor.New(tensor.I32, 2, 3), Options{}, "x"},
		{"fp8 dtype", tensor.New(tensor.F8E4M3, 2, 3), tensor.New(tensor.F8E4M3, 2, 3), Options{}, "x"},
		{"partial overlap", slice(wide, 1, 9), slice(wide, 0, 8), Options{}, "y"},
		{"NaN scale", tensor.New(tensor.F32, 2, 3), tensor.New(tensor.F32, 2, 3), Options{Scale: float32(math.NaN())}, "Scale"},
		{"infinite scale", tensor.New(tensor.F32, 2, 3), tensor.New(tensor.F32, 2, 3), Options{Scale: float32(math.Inf(1))}, "Scale"},
		// Shapes with no elements have no storage: the bounds are checked all the same.
		{"too many rows", tensor.New(tensor.F32, maxRows+1, 0), tensor.New(tensor.F32, maxRows+1, 0), Options{}, "x"},
		{"too many columns", tensor.New(tensor.F32, 0, maxCols+1), tensor.New(tensor.F32, 0, maxCols+1), Options{}, "x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			expectRejected(t, c.y, c.x, c.opt, c.arg)
		})
	}
}

// expectRejected calls Softmax with bad arguments on host tensors and checks
// the error names arg and that y is untouched.
func expectRejected(t *testing.T, y, x *tensor.Tensor, opt Options, arg string) {
	t.Helper()
	var before []byte
	if y != nil && !y.IsDevice() {
		y.FillNormal(tensor.SeededRNG(1), 0, 1)
		before = bytes.Clone(y.Bytes())
	}
	err := Softmax(nil, y, x, opt)
	var ae *tensor.ArgError
	if !errors.As(err, &ae) {
		t.Fatalf("got error %v, want a *tensor.ArgError", err)
	}
	if ae.Arg != arg {
		t.Errorf("error %q names %q, want %q", err, ae.Arg, arg)
	}
	if before != nil && !bytes.Equal(before, y.Bytes()) {
		t.Errorf("y was written although the call failed")
	}
}

// TestValidationDevice covers the errors that need a device tensor: a mix of
// host and device tensors, and a device tensor partly overlapping the output.
func TestValidationDevice(t *testing.T) {
	dev := gputest.Device(t)
	xd, err := tensor.Empty(dev, tensor.F32, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer xd.Free()
	t.Run("device x, host y", func(t *testing.T) {
		expectRejected(t, tensor.New(tensor.F32, 2, 8), xd, Options{}, "x")
	})
	t.Run("host x, device y", func(t *testing.T) {
		expectRejected(t, xd, tensor.New(tensor.F32, 2, 8), Options{}, "x")
	})
	t.Run("device partial overlap", func(t *testing.T) {
		a, _ := xd.Slice(1, 0, 6)
		b, _ := xd.Slice(1, 2, 8)
		expectRejected(t, b, a, Options{}, "y")
	})
}

// checkInvariants asserts what every config must satisfy.
func checkInvariants(t *testing.T, p cuda.Props, m, n int, c config) {
	t.Helper()
	fail := func(format string, a ...any) {
		t.Errorf("%s m=%d n=%d %+v: %s", p.Name, m, n, c, fmt.Sprintf(format, a...))
	}
	if c.Bulk {
		checkBulk(t, p, m, n, c, fail)
		return
	}
	if c.Smem > p.SharedPerBlock {
		fail("shared memory %d over %d", c.Smem, p.SharedPerBlock)
	}
	if c.Block < 32 || c.Block > p.MaxThreadsPerBlock || c.Block > c.MaxT || c.Block%32 != 0 {
		fail("bad block size")
	}
	if c.NVec > 1 && c.NVec*c.Vec*c.DType.Size() > maxRowBytes {
		fail("%d elements per thread, over %d bytes", c.NVec*c.Vec, maxRowBytes)
	}
	if c.Cluster < 1 || c.Cluster > maxCluster || (p.Major < 9 && c.Cluster > 1) {
		fail("bad cluster size")
	}
	if c.Prefetch && (c.Cluster > 1 || c.Stream) {
		fail("prefetch needs one block per unit and a resident tile")
	}
	lanes := c.Block
	if c.Group > 0 {
		lanes = c.Group
	}
	if exact := !c.Stream && n == c.Cluster*c.Chunk && c.Chunk == lanes*c.NVec*c.Vec; c.Full && !exact {
		fail("FULL where the tiles do not hold the row exactly (its loads would run past it)")
	} else if exact != c.Full && !(c.Group == 0 && c.Prefetch) {
		fail("FULL is %v where the tiles hold the row exactly: %v", c.Full, exact)
	}
	if c.Group > 0 {
		if c.Cluster != 1 || c.Stream || c.Group*c.NVec*c.Vec < n || c.Block%c.Group != 0 {
			fail("short-row config does not hold its row")
		}
		if c.Grid*(c.Block/c.Group) < m {
			fail("grid covers %d rows", c.Grid*(c.Block/c.Group))
		}
		return
	}
	if c.Grid != m*c.Cluster || c.Chunk%c.Vec != 0 && c.Cluster > 1 || c.Chunk*c.Cluster < n {
		fail("grid or chunks do not cover the matrix")
	}
	if !c.Stream && c.Block*c.NVec*c.Vec < min(c.Chunk, n) {
		fail("resident config does not hold its share")
	}
}

// checkBulk asserts what a softmax_bulk config must satisfy: a device with
// bulk copies, 16-byte vectors that tile every row, chunks that cover the row
// and fit the block's and the SM's shared memory, and a grid of whole
// clusters no larger than the rows need.
func checkBulk(t *testing.T, p cuda.Props, m, n int, c config, fail func(string, ...any)) {
	t.Helper()
	size := c.DType.Size()
	if p.Major < 9 || c.Vec*size != 16 || n%c.Vec != 0 || c.Chunk%c.Vec != 0 || c.NVec != 1 {
		fail("bulk copies need Hopper and 16-byte vectors that tile the row")
	}
	if c.Group != 0 || c.Stream || c.Prefetch {
		fail("bulk configs own whole rows, in shared memory")
	}
	if c.Smem > p.SharedPerBlockOptin || c.Smem+smReserve > p.SharedPerSM {
		fail("shared memory %d does not hold the chunk or is over the device's %d (block) / %d (SM)",
			c.Smem, p.SharedPerBlockOptin, p.SharedPerSM)
	}
	if c.Cluster < 1 || c.Cluster > 16 || c.Chunk*c.Cluster < n || (c.Cluster-1)*c.Chunk >= n {
		fail("chunks do not cover the row, or a block is empty")
	}
	if c.Grid%c.Cluster != 0 || c.Grid < c.Cluster || c.Grid/c.Cluster > m || c.Grid > math.MaxInt32 {
		fail("grid is not a number of whole clusters within the rows")
	}
	if c.Piece < 1 || c.Slots > maxSlots || c.Slots*c.Piece*c.Vec < c.Chunk || c.Smem != bulkHead+c.Slots*c.Piece*16 {
		fail("the ring does not hold a chunk, or has too many slots")
	}
	if c.Block < 64 || c.Block%32 != 0 || c.Block > c.MaxT || c.MaxT != bulkThreads+32 || c.Block > p.MaxThreadsPerBlock {
		fail("bad block size")
	}
}

// TestPickConfig checks the register path's picks (what GPUs without bulk
// copies, and rows that do not suit them, get), and that pickConfig takes
// them wherever it does not take the bulk path.
func TestPickConfig(t *testing.T) {
	for _, c := range []struct {
		p     cuda.Props
		m, n  int
		dt    tensor.DType
		vec   int
		group int // expected lanes per row (0: block per row)
		nvec  int
		block int
		cl    int
		strm  bool
		evict bool // pickConfig's L2 evict-last reads: 16-byte reads of more than L2
	}{
		{h200, 65536, 128, tensor.BF16, 8, 8, 2, 256, 1, false, false},
		{h200, 4096, 128, tensor.BF16, 8, 8, 2, 64, 1, false, false},
		{h200, 4096, 4096, tensor.BF16, 8, 0, 2, 256, 1, false, true},
		{h200, 16384, 8192, tensor.BF16, 8, 0, 2, 512, 1, false, true},
		{h200, 16, 262144, tensor.F32, 4, 0, 2, 512, 8, true, false},
		{h200, 256, 262144, tensor.BF16, 8, 0, 2, 512, 8, true, true},
		{h200, 256, 131072, tensor.BF16, 8, 0, 4, 512, 8, false, true},
		{h200, 256, 32768, tensor.F32, 4, 0, 2, 1024, 1, true, true},
		{h200, 256, 32768, tensor.BF16, 8, 0, 4, 1024, 1, false, false},
		{h200, 256, 131072, tensor.F32, 4, 0, 2, 512, 8, true, true},
		{h200, 64, 151936, tensor.BF16, 8, 0, 2, 512, 8, true, false},
		{h200, 4, 1 << 20, tensor.F32, 4, 0, 2, 512, 8, true, false},
		{small, 16, 262144, tensor.F32, 4, 0, 2, 1024, 1, true, true},
		{small, 16, 8192, tensor.BF16, 8, 0, 2, 512, 1, false, false},
		{h200, 10, 100003, tensor.BF16, 1, 0, 8, 512, 8, true, false},
		{h200, 1, 2, tensor.F32, 2, 1, 1, 64, 1, false, false},
	} {
		got := pickRegister(c.p, c.m, c.n, c.dt, c.vec)
		checkInvariants(t, c.p, c.m, c.n, got)
		all := pickConfig(c.p, c.m, c.n, c.dt, c.vec)
		if all.EvictLast != c.evict {
			t.Errorf("%s %dx%d %s vec %d: EvictLast %v, want %v", c.p.Name, c.m, c.n, c.dt, c.vec, all.EvictLast, c.evict)
		}
		if all.EvictLast = false; !all.Bulk && all != got {
			t.Errorf("%s %dx%d %s vec %d: pickConfig %+v is neither bulk nor pickRegister's %+v", c.p.Name, c.m, c.n, c.dt, c.vec, all, got)
		}
		if got.Group != c.group || got.NVec != c.nvec || got.Block != c.block || got.Cluster != c.cl || got.Stream != c.strm {
			t.Errorf("%s %dx%d %s vec %d: got group %d nvec %d block %d cluster %d stream %v, want %d %d %d %d %v",
				c.p.Name, c.m, c.n, c.dt, c.vec, got.Group, got.NVec, got.Block, got.Cluster, got.Stream,
				c.group, c.nvec, c.block, c.cl, c.strm)
		}
	}
}

// TestWithRows checks which lane-group launches withRows and oneUnitEach
// specialize on their rows: one unit a block only where the grid is the
// units, no row checks only where the units hold whole rows, 32-bit offsets
// up to the last row the units index, compile-time rows only where both
// tensors are contiguous, and nothing for a block per row.
func TestWithRows(t *testing.T) {
	const big = 1 << 24 // rows of 128 that reach 2^31 elements
	for _, c := range []struct {
		name             string
		m, n, grid       int // grid: 0 for the picker's
		ldx, ldy         int64
		once, exact, off bool
		ncols            int
	}{
		{"4096x128: a block a unit", 4096, 128, 0, 128, 128, true, true, true, 128},
		{"65536x128, grid capped by occupancy", 65536, 128, 1056, 128, 128, false, true, true, 128},
		{"4097 rows: a unit past the last row", 4097, 128, 0, 128, 128, true, false, true, 128},
		{"y strided", 4096, 128, 0, 128, 200, true, true, true, 0},
		{"2^24 - 32 rows: units x 32 x 128 + 128 = 2^31 - 3968", big - 32, 128, 0, 128, 128, true, true, true, 128},
		{"2^24 rows: 2^31 + 128", big, 128, 0, 128, 128, true, true, false, 128},
		{"a block per row", 4096, 4096, 0, 4096, 4096, false, false, false, 0},
	} {
		p := pickRegister(h200, c.m, c.n, tensor.BF16, 8)
		if c.grid > 0 {
			p.Grid = c.grid
		}
		got := p.withRows(c.m, c.n, c.ldx, c.ldy)
		once := got.oneUnitEach(c.m)
		if once != c.once || got.Exact != c.exact || got.Off32 != c.off || got.NCols != c.ncols {
			t.Errorf("%s: %+v gives once %v, exact %v, off32 %v, ncols %d; want %v, %v, %v, %d", c.name, p,
				once, got.Exact, got.Off32, got.NCols, c.once, c.exact, c.off, c.ncols)
		}
		if got.Block != p.Block || got.Grid != p.Grid || got.Group != p.Group || got.NVec != p.NVec {
			t.Errorf("%s: withRows changed the launch: %+v -> %+v", c.name, p, got)
		}
	}
}

// TestPickBulk checks the bulk picks for the benchmark shapes on an H200,
// as measured best there (BenchmarkConfigs). Block counts the producer warp.
func TestPickBulk(t *testing.T) {
	for _, c := range []struct {
		m, n                       int
		dt                         tensor.DType
		bulk                       bool
		cl, piece, slots, block, g int
		resident                   bool
	}{
		{4096, 4096, tensor.BF16, false, 0, 0, 0, 0, 0, false},          // 8 KiB rows: registers
		{16, 32768, tensor.BF16, false, 0, 0, 0, 0, 0, false},           // 1 MiB in all: registers
		{16384, 8192, tensor.BF16, true, 1, 1024, 1, 160, 16384, false}, // small chunks: a block per row
		{256, 32768, tensor.BF16, true, 1, 1024, 4, 288, 256, false},    // 64 KiB chunks, 16 KiB pieces
		{256, 32768, tensor.F32, true, 1, 2048, 7, 544, 256, true},      // a resident wave, 32 KiB pieces
		{256, 131072, tensor.F32, true, 4, 2048, 7, 544, 1024, true},    // 128 KiB chunks
		{256, 262144, tensor.F32, true, 8, 2048, 7, 544, 2048, true},
		{256, 131072, tensor.BF16, true, 2, 2048, 7, 544, 512, true},
		{256, 262144, tensor.BF16, true, 4, 2048, 7, 544, 1024, true},
		{64, 151936, tensor.BF16, true, 2, 2374, 4, 544, 128, false}, // one 2-block cluster a row fills the SMs
		{128, 8192, tensor.BF16, true, 1, 1024, 1, 160, 128, false},  // and so does one block a row
		{16, 32768, tensor.F32, true, 8, 1024, 1, 160, 128, false},   // few rows: widened clusters
		{16, 131072, tensor.F32, true, 8, 2048, 2, 288, 128, false},  // 8192 elements a block: no wider
		{16, 262144, tensor.F32, true, 16, 2048, 2, 288, 256, false}, // 16 blocks a row
		{16, 131072, tensor.BF16, true, 8, 2048, 1, 288, 128, false},
		{16, 262144, tensor.BF16, true, 16, 2048, 1, 288, 256, false},
	} {
		got := pickConfig(h200, c.m, c.n, c.dt, 16/c.dt.Size())
		checkInvariants(t, h200, c.m, c.n, got)
		if got.Bulk != c.bulk || c.bulk && (got.Cluster != c.cl || got.Piece != c.piece || got.Slots != c.slots || got.Block != c.block ||
			got.Grid != c.g || got.Resident != c.resident) {
			t.Errorf("%dx%d %s: got bulk %v cluster %d piece %d slots %d block %d grid %d resident %v, want %v %d %d %d %d %d %v",
				c.m, c.n, c.dt, got.Bulk, got.Cluster, got.Piece, got.Slots, got.Block, got.Grid, got.Resident,
				c.bulk, c.cl, c.piece, c.slots, c.block, c.g, c.resident)
		}
	}
}

// TestWaveGrid checks the resident grid: every cluster of the wave walks
// the same number of rows but the last, and no more clusters than that
// needs.
func TestWaveGrid(t *testing.T) {
	for _, c := range []struct{ m, cl, clusters, want int }{
		{256, 8, 15, 15 * 8}, // 18 rows each: 14 clusters take 18, the last 4
		{256, 2, 66, 64 * 2}, // 4 rows each
		{256, 1, 132, 128},   // 2 rows each
		{100, 4, 30, 25 * 4}, // 4 rows each
		{16, 8, 45, 16 * 8},  // a row each
		{5, 1, 0, 1},         // no occupancy known: one cluster walks every row
		{7, 3, 1000, 7 * 3},
	} {
		if got := waveGrid(c.m, c.cl, c.clusters); got != c.want {
			t.Errorf("waveGrid(%d, %d, %d) = %d, want %d", c.m, c.cl, c.clusters, got, c.want)
		}
	}
}

// TestPickBulkLimits checks that softmax_bulk is chosen only where the
// device has bulk copies and the rows suit them, and that its chunk always
// fits the device's shared memory: on simulated Hopper parts with less
// shared memory, longer rows widen the cluster or fall back to the register
// path rather than fail at launch.
func TestPickBulkLimits(t *testing.T) {
	lean := h200 // a Hopper part with 100 KiB of shared memory a block
	lean.Name, lean.SharedPerBlockOptin, lean.SharedPerSM = "lean", 100<<10, 132<<10
	tight := h200 // room for one 48 KiB block only
	tight.Name, tight.SharedPerBlockOptin, tight.SharedPerSM = "tight", 48<<10, 50<<10
	noOptin := h200
	noOptin.Name, noOptin.SharedPerBlockOptin = "no opt-in", 48<<10
	for _, c := range []struct {
		p       cuda.Props
		m, n    int
		dt      tensor.DType
		vec     int
		bulk    bool
		cluster int
	}{
		{h200, 256, 262144, tensor.F32, 4, true, 8},
		{h200, 256, 262144, tensor.F32, 2, false, 0}, // rows not 16-byte aligned
		{h200, 256, 262146, tensor.F32, 4, false, 0}, // not a whole number of vectors
		{h200, 256, 512, tensor.F32, 4, false, 0},    // too short: the register path
		{small, 256, 32768, tensor.F32, 4, false, 0}, // no bulk copies before Hopper
		{lean, 256, 262144, tensor.F32, 4, false, 0}, // 128 KiB chunks do not fit
		{lean, 256, 131072, tensor.F32, 4, true, 8},
		{tight, 256, 131072, tensor.F32, 4, false, 0},
		{tight, 256, 65536, tensor.F32, 4, true, 8},
		{noOptin, 256, 65536, tensor.F32, 4, true, 8},
		{noOptin, 256, 131072, tensor.F32, 4, false, 0},
		{lean, 256, 65536, tensor.F32, 4, true, 4},   // 64 KiB chunks where 128 KiB ones do not fit
		{lean, 64, 151936, tensor.BF16, 8, true, 8},  // 2-block clusters do not fit: widened ones
		{tight, 16, 262144, tensor.F32, 4, false, 0}, // 16-block clusters do not fit either
	} {
		got, ok := pickBulk(c.p, c.m, c.n, c.dt, c.vec)
		if ok != c.bulk || ok && got.Cluster != c.cluster {
			t.Errorf("%s %dx%d %s vec %d: bulk %v cluster %d, want %v %d", c.p.Name, c.m, c.n, c.dt, c.vec, ok, got.Cluster, c.bulk, c.cluster)
		}
		all := pickConfig(c.p, c.m, c.n, c.dt, c.vec)
		checkInvariants(t, c.p, c.m, c.n, all)
		if all.Bulk != c.bulk {
			t.Errorf("%s %dx%d %s: pickConfig bulk %v, want %v", c.p.Name, c.m, c.n, c.dt, all.Bulk, c.bulk)
		}
	}
	// Every row length the bulk path can take, a vector apart, with rows
	// enough for a block or a 2-block cluster to fill the SMs (34 to 131 on
	// an H200), fewer and more: a chunk that fits can overflow the block
	// once cut into pieces of whole vectors (f32 rows of 57856 did, in
	// 7 pieces of 2067 vectors, 80 bytes over).
	for _, p := range []cuda.Props{h200, lean} {
		for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
			vec, longest := 16/dt.Size(), maxBulkCluster*maxChunk(p, 1)/dt.Size()
			for _, m := range []int{16, 34, 66, 67, 100, 131, 256} {
				for n := bulkMinRow / dt.Size(); n <= longest && !t.Failed(); n += vec {
					checkInvariants(t, p, m, n, pickConfig(p, m, n, dt, vec))
				}
			}
		}
	}
}

// TestPickConfigSweep checks the invariants over many shapes on both
// simulated devices, and on one that allows only 256 threads a block.
func TestPickConfigSweep(t *testing.T) {
	tiny := small
	tiny.Name, tiny.MaxThreadsPerBlock = "tiny", 256
	lean := h200
	lean.Name, lean.SharedPerBlockOptin, lean.SharedPerSM, lean.MaxThreadsPerBlock = "lean", 64<<10, 100<<10, 256
	for _, p := range []cuda.Props{h200, small, tiny, lean} {
		for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
			for _, m := range []int{1, 3, 16, 100, 257, 4096, 1 << 20} {
				for _, n := range []int{1, 2, 3, 31, 128, 129, 1000, 4096, 4097, 8192, 32768, 100003, 151936, 262144, 1 << 20, 1 << 22} {
					for vec := 16 / dt.Size(); vec >= 1; vec /= 2 {
						checkInvariants(t, p, m, n, pickConfig(p, m, n, dt, vec))
					}
				}
			}
		}
	}
}

func TestVecWidth(t *testing.T) {
	for _, c := range []struct {
		size    int
		addrs   []uint64
		strides []int
		rows    int
		want    int
	}{
		{2, []uint64{256, 512}, []int{128, 128}, 4, 8},
		{4, []uint64{256, 512}, []int{128, 128}, 4, 4},
		{2, []uint64{256, 512}, []int{1003, 1000}, 4, 1},
		{2, []uint64{256, 512}, []int{1003, 1000}, 1, 8}, // one row: the stride does not matter
		{2, []uint64{260, 512}, []int{128, 128}, 4, 2},
		{4, []uint64{256, 520}, []int{4100, 4104}, 4, 2},
	} {
		if got := vecWidth(c.size, c.addrs, c.strides, c.rows); got != c.want {
			t.Errorf("vecWidth(%d, %v, %v, %d) = %d, want %d", c.size, c.addrs, c.strides, c.rows, got, c.want)
		}
	}
}

// TestStreamWithoutCluster runs the configs a GPU without clusters gets
// (one block per row, streaming when the row outgrows the block) on this
// GPU, against the reference.
func TestStreamWithoutCluster(t *testing.T) {
	dev := gputest.Device(t)
	rng, seed := tensor.NewRNG()
	for _, c := range []struct {
		dt   tensor.DType
		m, n int
	}{{tensor.F32, 3, 300001}, {tensor.F32, 3, 300000}, {tensor.BF16, 5, 70000}} {
		// runConfig's contiguous device tensors start 256-byte aligned.
		vec := vecWidth(c.dt.Size(), []uint64{0, 0}, []int{c.n, c.n}, c.m)
		cfg := pickConfig(small, c.m, c.n, c.dt, vec)
		if cfg.Cluster != 1 || !cfg.Stream {
			t.Fatalf("config %+v is not the streaming one", cfg)
		}
		runConfig(t, dev, fmt.Sprintf("%s %dx%d", c.dt, c.m, c.n), seed, rng, c.dt, c.m, c.n, 0, 0, false, false, cfg)
	}
}

// TestKernelResources reports the registers and local memory of the kernel
// each benchmark shape runs, and fails if a config spills to local memory.
func TestKernelResources(t *testing.T) {
	dev := gputest.Device(t)
	for _, b := range benchShapes {
		c := pickConfig(dev.Props(), b.M, b.N, b.DType, 16/b.DType.Size())
		fn, err := kernels.Get(dev, nil, c.spec)
		if err != nil {
			t.Fatal(err)
		}
		if c.Bulk {
			if err := prepareBulk(fn, c); err != nil {
				t.Fatal(err)
			}
		}
		regs, _ := fn.Attribute(cuda.FuncNumRegs)
		local, _ := fn.Attribute(cuda.FuncLocalSizeBytes)
		occ, _ := fn.MaxActiveBlocksPerSM(c.Block, c.Smem)
		t.Logf("%dx%d %s: %+v regs %d local %d blocks/SM %d", b.M, b.N, b.DType, c, regs, local, occ)
		if local > 0 {
			t.Errorf("%dx%d %s spills: %d bytes of local memory", b.M, b.N, b.DType, local)
		}
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
			cfg := pickRegister(dev.Props(), c.m, c.n, c.dt, 16/c.dt.Size())
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
		cfg := bulkConfig(p, c.m, c.n, c.dt, c.cl, c.pieces, c.slots, c.threads, c.rowsPer)
		cfg.EvictLast = i%2 == 1
		name := fmt.Sprintf("%s %dx%d ld %d/%d cl %d pieces %d slots %d threads %d rows %d inplace %v special %v evict %v",
			c.dt, c.m, c.n, c.ldx, c.ldy, c.cl, c.pieces, c.slots, c.threads, c.rowsPer, c.inPlace, c.special, cfg.EvictLast)
		checkInvariants(t, p, c.m, c.n, cfg)
		runConfig(t, dev, name, seed, rng, c.dt, c.m, c.n, c.ldx, c.ldy, c.inPlace, c.special, cfg)
	}
}

// runConfig runs config cfg on a fresh [m, n] input (row strides ldx and
// ldy, 0: contiguous) and compares it with the reference.
func runConfig(t *testing.T, dev *cuda.Device, name string, seed uint64, rng *rand.Rand, dt tensor.DType,
	m, n, ldx, ldy int, inPlace, special bool, cfg config) {
	t.Helper()
	x, err := tensor.NewStrided(dt, []int{m, n}, []int{max(ldx, n), 1})
	if err != nil {
		t.Fatal(err)
	}
	x.FillNormal(rng, 0, 4)
	if special {
		setSpecialRows(x, rng)
	}
	want := tensor.New(dt, m, n)
	reference(want, x, 0.5)
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
	err = run(nil, yd, xd, 0.5, cfg)
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
	if r := check.Compare("y", got.Float64s(), want.Float64s(), tolerance(dt)); !r.Pass {
		t.Errorf("seed %d %s: %v", seed, name, r)
	} else {
		t.Log(name, r)
	}
}

// BenchmarkConfigs times alternative configs of the benchmark shapes beside
// the picker's own, to tune the picker: lanes and block sizes for short
// rows; for longer rows the register path against softmax_bulk with other
// clusters, pieces, rings, block sizes and rows per cluster (a fixed number,
// or one wave of resident clusters). Each shape first logs the bandwidth of
// a copy of its bytes, the ceiling of a single launch of that size; each
// resident variant names its wave (clusters at once) and the clusters it
// launches. Bulk variants name their consumer threads (the producer warp
// comes on top). Each variant measures itself once: run with -test.run XXX
// -test.bench Configs -test.benchtime 1x.
func BenchmarkConfigs(b *testing.B) {
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
		shape    benchShape
		variants []variant
	}{
		{benchShape{tensor.BF16, 65536, 128}, []variant{keep, short(8, 2, 128), short(16, 1, 256)}},
		{benchShape{tensor.BF16, 4096, 4096}, []variant{keep, rowBlock(1, 2, 512, true), B(1, 1, 0, 128, 1), rowBlock(1, 4, 128, true),
			rowBlock(1, 1, 512, true), rowBlock(1, 4, 128, false), rowBlock(1, 2, 256, false)}},
		{benchShape{tensor.F32, 256, 262144}, []variant{keep, reg, B(8, 8, 0, 512, 2), W(8, 16, 1, 512), W(8, 32, 1, 512), W(8, 16, 1, 384),
			W(6, 16, 1, 512), W(6, 32, 1, 512), W(6, 16, 1, 256), W(6, 8, 1, 512), W(5, 16, 1, 512), W(12, 16, 2, 256), W(16, 16, 2, 256),
			W(16, 32, 2, 256), W(16, 32, 1, 512)}},
		{benchShape{tensor.F32, 256, 131072}, []variant{keep, reg, B(8, 2, 0, 256, 2), W(8, 16, 2, 256), W(4, 16, 1, 512), W(4, 32, 1, 512),
			W(3, 16, 1, 512), W(3, 32, 1, 512), W(3, 16, 1, 256), W(3, 8, 1, 512), W(6, 16, 2, 256), W(6, 32, 2, 256), W(6, 16, 2, 480),
			W(8, 32, 2, 256), W(8, 32, 1, 512)}},
		{benchShape{tensor.F32, 256, 32768}, []variant{keep, reg, B(1, 8, 0, 512, 2), W(1, 16, 1, 512), W(1, 32, 1, 512), W(1, 16, 1, 256),
			W(2, 16, 2, 256), W(2, 16, 2, 480), W(2, 32, 2, 256), W(2, 32, 1, 512)}},
		{benchShape{tensor.BF16, 256, 262144}, []variant{keep, reg, B(8, 2, 0, 256, 2), W(8, 16, 2, 256), W(4, 16, 1, 512), W(4, 32, 1, 512),
			W(3, 16, 1, 512), W(3, 32, 1, 512), W(3, 16, 1, 256), W(3, 8, 1, 512), W(6, 16, 2, 256), W(6, 32, 2, 256), W(6, 16, 2, 480),
			W(8, 32, 1, 512)}},
		{benchShape{tensor.BF16, 256, 131072}, []variant{keep, reg, B(4, 2, 0, 256, 1), W(2, 16, 1, 512), W(2, 32, 1, 512), W(2, 16, 1, 256),
			W(2, 16, 1, 384), W(4, 16, 2, 256), W(4, 16, 1, 512), W(3, 16, 2, 256), W(3, 16, 2, 480), W(4, 32, 1, 512)}},
		{benchShape{tensor.BF16, 256, 32768}, []variant{keep, reg, B(1, 2, 0, 256, 1), B(1, 4, 0, 256, 1), W(1, 16, 1, 512), W(1, 16, 2, 256),
			W(1, 32, 2, 256), W(1, 16, 3, 256), W(1, 32, 3, 256), W(1, 16, 2, 480), W(2, 16, 2, 256),
			W(2, 32, 1, 512), B(2, 2, 0, 256, 1)}},
		{benchShape{tensor.BF16, 64, 151936}, []variant{keep, reg, B(8, 1, 0, 256, 1), B(8, 2, 0, 256, 1), B(4, 2, 0, 512, 1), B(4, 4, 0, 512, 1),
			B(2, 4, 0, 512, 1), B(2, 8, 0, 512, 1), B(3, 4, 0, 512, 1), B(16, 1, 0, 128, 1), B(16, 2, 0, 128, 1), B(6, 2, 0, 256, 1),
			B(4, 2, 4, 512, 2), B(4, 1, 2, 512, 2), B(8, 1, 2, 256, 4), B(8, 1, 4, 256, 4), B(16, 1, 2, 128, 8)}},
		{benchShape{tensor.BF16, 16384, 8192}, []variant{keep, reg, rowBlock(1, 4, 256, true), B(1, 1, 0, 128, 1), B(1, 1, 0, 96, 1),
			B(1, 1, 0, 64, 1), B(1, 2, 0, 128, 1), W(1, 16, 4, 128), W(1, 16, 6, 128),
			W(1, 16, 8, 96), W(1, 16, 2, 256), W(1, 16, 1, 512)}},
		{benchShape{tensor.F32, 16, 262144}, []variant{keep, reg, B(16, 2, 0, 256, 1), B(16, 1, 0, 256, 1), B(16, 2, 0, 128, 1), B(16, 4, 0, 256, 1),
			B(8, 4, 0, 512, 1), B(16, 2, 4, 256, 2), B(16, 2, 4, 512, 2)}},
		{benchShape{tensor.F32, 16, 131072}, []variant{keep, reg, B(8, 2, 0, 256, 1), B(8, 1, 0, 256, 1), B(16, 2, 0, 128, 1), B(8, 4, 0, 256, 1)}},
		{benchShape{tensor.F32, 16, 32768}, []variant{keep, reg, B(8, 1, 0, 128, 1), B(16, 1, 0, 64, 1)}},
		{benchShape{tensor.BF16, 16, 32768}, []variant{keep}},
		{benchShape{tensor.BF16, 16, 131072}, []variant{keep, reg, B(8, 2, 0, 256, 1), B(8, 1, 0, 256, 1), B(16, 1, 0, 128, 1)}},
		{benchShape{tensor.BF16, 16, 262144}, []variant{keep, reg, B(16, 2, 0, 256, 1), B(16, 1, 0, 256, 1), B(16, 2, 0, 128, 1),
			B(16, 1, 2, 256, 2), B(16, 2, 4, 256, 2)}},
	} {
		if gbs, err := bench.CopyAt(dev, s.shape.bench().Bytes); err == nil {
			fmt.Printf("%s: a copy of the same bytes: %.0f GB/s\n", s.shape.bench().Name, gbs)
		}
		base := pickConfig(p, s.shape.M, s.shape.N, s.shape.DType, 16/s.shape.DType.Size())
		for _, v := range s.variants {
			c := base
			v.edit(&c, s.shape.M, s.shape.N)
			name := v.name
			if c.Bulk && (c.Smem > p.SharedPerBlockOptin || c.Smem+smReserve > p.SharedPerSM || c.Slots > maxSlots) {
				fmt.Printf("%s/%s: does not fit, skipped\n", s.shape.bench().Name, name)
				continue
			}
			if c.Bulk && c.Resident {
				fn, err := kernels.Get(dev, nil, c.spec)
				if err == nil {
					err = prepareBulk(fn, c)
				}
				w := 0
				if err == nil {
					w, err = wave(fn, p, c)
				}
				if err != nil {
					b.Errorf("%s/%s: %v", s.shape.bench().Name, name, err)
					continue
				}
				name += fmt.Sprintf(" wave %d launches %d", w, waveGrid(s.shape.M, c.Cluster, w)/c.Cluster)
			}
			bb := s.shape.bench()
			bb.Torch = nil
			bb.New = func(dev *cuda.Device, rng *rand.Rand) (bench.Instance, error) {
				x, y, err := s.shape.alloc(dev, rng)
				if err != nil {
					return bench.Instance{}, err
				}
				return bench.Instance{
					Run:  func(st *cuda.Stream) error { return run(st, y, x, 1, c) },
					Free: func() { x.Free(); y.Free() },
				}, nil
			}
			b.Run(fmt.Sprintf("%s/%s", bb.Name, name), func(b *testing.B) { gputest.Measure(b, dev, bb) })
		}
	}
}
