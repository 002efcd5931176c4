package softmax

import (
	"fmt"
	"math"
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/tensor"
)

// h200 and small are the device properties the picker is tested on: the
// target GPU, and a small pre-Hopper one (48 KiB of shared memory, 16 SMs,
// no clusters).
var (
	h200 = cuda.Props{Name: "H200", Major: 9, Minor: 0, SMs: 132, MaxThreadsPerBlock: 1024,
		SharedPerBlock: 48 << 10, SharedPerBlockOptin: 227 << 10, SharedPerSM: 228 << 10, RegistersPerBlock: 65536,
		L2Bytes: 60 << 20, L2EvictLast: true}
	small = cuda.Props{Name: "small", Major: 8, Minor: 6, SMs: 16, MaxThreadsPerBlock: 1024,
		SharedPerBlock: 48 << 10, SharedPerBlockOptin: 48 << 10, SharedPerSM: 64 << 10, RegistersPerBlock: 65536,
		L2Bytes: 4 << 20, L2EvictLast: true}
)

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
		off := c.p
		off.L2EvictLast = false
		if o := pickConfig(off, c.m, c.n, c.dt, c.vec); o.EvictLast {
			t.Errorf("%s %dx%d %s vec %d, L2EvictLast off: EvictLast", c.p.Name, c.m, c.n, c.dt, c.vec)
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
// as measured best there (BenchmarkSweep). Block counts the producer warp.
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
