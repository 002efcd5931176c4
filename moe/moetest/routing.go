package moetest

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/moe"
	"github.com/gokittens/kittens/suite"
	"github.com/gokittens/kittens/tensor"
)

// routingOps is moe.RoutingData's op: its parity and benchmark cases.
func routingOps() []*suite.Op {
	op := &suite.Op{
		Name:   "moe_routing_data",
		Family: "moe",
		Doc: "triton_kernels' routing data: expert ids [T, k] (i32) and weights (f32) to the bitmatrix, per-expert counts, " +
			"offsets in pairs and in tiles, the tile map, and the gather and scatter indices of the pairs sorted by expert " +
			"(ascending within one) with their weights",
	}
	for _, c := range routingCases {
		op.Checks = append(op.Checks, check.Case{Name: c.name(), Spec: c.spec})
	}
	for _, b := range alignBenches {
		op.Benches = append(op.Benches, routingBench(b))
	}
	return []*suite.Op{op}
}

// routingCase is one parity case of moe.RoutingData: T tokens of k experts
// out of E drawn as Routing says, tiles of BM rows (0: moe.RoutingBlockM's
// choice), weights unless NoWeights.
type routingCase struct {
	T, K, E, BM int
	Routing     alignRouting
	NoWeights   bool
}

// routingCases cover what alignCases do, with tiles of 1 to 128 rows, the
// default choice, no weights, and one expert of 65536 one-row tiles (tile
// indices that fill the 16 bits).
var routingCases = []routingCase{
	{T: 1, K: 8, E: 256, BM: 16},
	{T: 1, K: 1, E: 8},
	{T: 7, K: 2, E: 8, BM: 16},
	{T: 7, K: 10, E: 512, BM: 128, Routing: alignSkewed},
	{T: 64, K: 8, E: 128, BM: 16, NoWeights: true},
	{T: 512, K: 8, E: 128, BM: 32},
	{T: 513, K: 8, E: 128, Routing: alignSkewed},
	{T: 4096, K: 8, E: 128, BM: 64},
	{T: 4096, K: 6, E: 384, BM: 16, Routing: alignSkewed},
	{T: 4096, K: 4, E: 64, BM: 32, Routing: alignSparse},
	{T: 4096, K: 10, E: 512, Routing: alignSkewed},
	{T: 4096, K: 8, E: 8, BM: 1},
	{T: 65536, K: 2, E: 8, BM: 128, Routing: alignSkewed},
	{T: 65536, K: 1, E: 128, BM: 16, NoWeights: true},
	{T: 65536, K: 1, E: 2, BM: 1, Routing: alignSparse},
	{T: 1000, K: 8, E: 1024, BM: 16},
	{T: 600, K: 4, E: 64, BM: 16, Routing: alignDropped},
	{T: 7, K: 4, E: 16, BM: 16, Routing: alignDropped},
	{T: 2000, K: 3, E: 33, BM: 5},
	{T: 300, K: 1, E: 1, BM: 1},
	{T: 0, K: 8, E: 64, BM: 16},
}

func (c routingCase) blockM() int {
	if c.BM == 0 {
		return moe.RoutingBlockM(c.T, c.K, c.E)
	}
	return c.BM
}

func (c routingCase) name() string {
	s := fmt.Sprintf("T=%d k=%d E=%d block_m=%d %v", c.T, c.K, c.E, c.blockM(), c.Routing)
	if c.NoWeights {
		s += ", no weights"
	}
	return s
}

// routingWeights returns weights [T, k] f32 uniform in (0, 1), with about
// one in 64 a NaN (a payload of either sign), ±inf or −0: the op copies
// their bits.
func routingWeights(rng *rand.Rand, t, k int) *tensor.Tensor {
	w := tensor.New(tensor.F32, t, k)
	w.FillUniform(rng, 0, 1)
	b := w.Bytes()
	specials := []uint32{0x7fc00000, 0xffc00001, 0x7f800001, 0x7f800000, 0xff800000, 0x80000000}
	for i := 0; i < len(b); i += 4 {
		if rng.IntN(64) == 0 {
			binary.LittleEndian.PutUint32(b[i:], specials[rng.IntN(len(specials))])
		}
	}
	return w
}

// routingGarbage returns an i32 tensor of n elements holding alignScratch:
// an output that may hold −1 cannot be poisoned (−1 is the poison), so it
// starts from values no result holds, which an element the kernel leaves
// unwritten keeps.
func routingGarbage(n int) *tensor.Tensor {
	t := alignWorkspace(n)
	if t == nil {
		t = tensor.New(tensor.I32, 0)
	}
	return t
}

// spec compares every output exactly. BlockPidMap (−1 past the tiles) and,
// where ids are dropped, the gather and scatter indices (−1 there) start
// from alignScratch instead of the poison.
func (c routingCase) spec(rng *rand.Rand) (check.Spec, error) {
	bm := c.blockM()
	sz, err := moe.RoutingSizes(c.T, c.K, c.E, bm)
	if err != nil {
		return check.Spec{}, err
	}
	n := c.T * c.K
	sorted := func() *tensor.Tensor {
		if c.Routing == alignDropped {
			return routingGarbage(n)
		}
		return tensor.New(tensor.I32, n)
	}
	ts := []*tensor.Tensor{alignDrawIDs(rng, c.T, c.K, c.E, c.Routing), tensor.New(tensor.I32, c.T, sz.Words),
		tensor.New(tensor.I32, c.E), tensor.New(tensor.I32, c.E+1), tensor.New(tensor.I32, c.E+1),
		routingGarbage(sz.MaxTiles), sorted(), sorted()}
	names := []string{"ids", "bitmatrix", "hist", "token_offs_raw", "token_offs_pad", "block_pid_map", "gather_indx", "scatter_indx"}
	outputs, poison := []int{1, 2, 3, 4, 5, 6, 7}, []int{1, 2, 3, 4}
	if c.Routing != alignDropped {
		poison = append(poison, 6, 7)
	}
	wAt, gAt, wsAt := -1, -1, -1
	if !c.NoWeights {
		wAt, gAt = len(ts), len(ts)+1
		ts = append(ts, routingWeights(rng, c.T, c.K), tensor.New(tensor.F32, n))
		names = append(names, "weights", "gate_scal")
		outputs, poison = append(outputs, gAt), append(poison, gAt)
	}
	if ws := alignWorkspace(sz.Workspace); ws != nil {
		wsAt, ts, names = len(ts), append(ts, ws), append(names, "workspace")
	}
	at := func(ts []*tensor.Tensor, i int) *tensor.Tensor {
		if i < 0 {
			return nil
		}
		return ts[i]
	}
	tol := map[int]check.Tolerance{}
	if gAt >= 0 {
		tol[gAt] = check.Tolerance{} // bits copied
	}
	return check.Spec{
		Tensors: ts,
		Names:   names,
		Outputs: outputs,
		Poison:  poison,
		Tol:     tol,
		Run: func(s *cuda.Stream, ts []*tensor.Tensor) error {
			out := moe.RoutingOutputs{Bitmatrix: ts[1], Hist: ts[2], TokenOffsRaw: ts[3], TokenOffsPad: ts[4], BlockPidMap: ts[5],
				GatherIndx: ts[6], ScatterIndx: ts[7], GateScal: at(ts, gAt), Workspace: at(ts, wsAt)}
			if err := moe.RoutingData(s, out, ts[0], at(ts, wAt), moe.RoutingOptions{Experts: c.E, BlockM: bm}); err != nil {
				return err
			}
			return alignRestore(s, out.Workspace)
		},
	}, nil
}

// routingBench times moe.RoutingData with weights, in tiles of
// moe.RoutingBlockM's rows.
func routingBench(b alignBench) bench.Case {
	bm := moe.RoutingBlockM(b.T, b.K, b.E)
	sz, err := moe.RoutingSizes(b.T, b.K, b.E, bm)
	if err != nil {
		panic(err) // the table's shapes are valid
	}
	n := b.T * b.K
	return bench.Case{
		Name:  fmt.Sprintf("%s T=%d E=%d k=%d block_m=%d", b.Model, b.T, b.E, b.K, bm),
		Bytes: int64(4 * (2*n + b.T*sz.Words + 3*b.E + 2 + sz.MaxTiles + 3*n)),
		Goal:  b.goal(),
		New: func(dev *cuda.Device, rng *rand.Rand) (bench.Instance, error) {
			ids, bufs, free, err := alignDeviceSet(dev, rng, b, b.T*sz.Words, b.E, b.E+1, b.E+1, sz.MaxTiles, n, n, sz.Workspace)
			if err != nil {
				free()
				return bench.Instance{}, err
			}
			bits, err := bufs[0].View(tensor.I32, []int{b.T, sz.Words}, []int{sz.Words, 1})
			if err != nil {
				free()
				return bench.Instance{}, err
			}
			w, err := tensor.RandDevice(dev, rng, tensor.F32, 0.5, 0.2, b.T, b.K)
			if err != nil {
				free()
				return bench.Instance{}, err
			}
			gate, err := tensor.Empty(dev, tensor.F32, n)
			if err != nil {
				w.Free()
				free()
				return bench.Instance{}, err
			}
			out := moe.RoutingOutputs{Bitmatrix: bits, Hist: bufs[1], TokenOffsRaw: bufs[2], TokenOffsPad: bufs[3], BlockPidMap: bufs[4],
				GatherIndx: bufs[5], ScatterIndx: bufs[6], GateScal: gate, Workspace: bufs[7]}
			o := moe.RoutingOptions{Experts: b.E, BlockM: bm}
			return bench.Instance{
				Run: func(s *cuda.Stream) error { return moe.RoutingData(s, out, ids, w, o) },
				Free: func() {
					w.Free()
					gate.Free()
					free()
				},
			}, nil
		},
		Torch: &bench.TorchCase{Op: "moe_routing_data", Args: map[string]any{"T": b.T, "k": b.K, "E": b.E, "bm": bm}},
	}
}
