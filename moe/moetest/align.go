package moetest

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gokittens/kittens/bench"
	"github.com/gokittens/kittens/check"
	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/moe"
	"github.com/gokittens/kittens/suite"
	"github.com/gokittens/kittens/tensor"
)

// alignOps is moe.AlignBlockSize's op: its parity and benchmark cases.
func alignOps() []*suite.Op {
	op := &suite.Op{
		Name:   "moe_align_block_size",
		Family: "moe",
		Doc: "vLLM's moe_align_block_size: expert ids [T, k] (i32) to the flat pair indices sorted by expert (ascending within " +
			"one), each expert padded to a multiple of the block size with T·k, the expert of each block and the padded total; " +
			"optional expert map for expert parallelism",
	}
	for _, c := range alignCases {
		op.Checks = append(op.Checks, check.Case{Name: c.name(), Spec: c.spec})
	}
	for _, b := range alignBenches {
		op.Benches = append(op.Benches, b.bench())
	}
	return []*suite.Op{op}
}

// alignRouting is how a case draws its ids: every token takes k distinct
// experts, uniformly unless the kind says otherwise.
type alignRouting int

const (
	alignUniform alignRouting = iota
	// alignSkewed: one expert takes half the tokens.
	alignSkewed
	// alignSparse: only a quarter of the experts (at least k) get tokens.
	alignSparse
	// alignDropped: about one id in eight lies outside [0, E).
	alignDropped
)

func (r alignRouting) String() string {
	return [...]string{"uniform", "skewed", "a quarter of the experts", "ids out of range"}[r]
}

// alignDrawIDs returns ids [T, k] i32 drawn as r says (alignSkewed needs
// k < E).
func alignDrawIDs(rng *rand.Rand, t, k, e int, r alignRouting) *tensor.Tensor {
	pool := make([]int64, e)
	for i, p := range rng.Perm(e) {
		pool[i] = int64(p)
	}
	hot, from := pool[0], pool // from: the experts a token draws from
	switch r {
	case alignSkewed:
		from = pool[1:]
	case alignSparse:
		from = pool[:max(k, e/4)]
	}
	bad := []int64{-1, int64(e), int64(e) + 5, -1000, math.MaxInt32, math.MinInt32}
	v := make([]int64, t*k)
	for ti := range t {
		row := v[ti*k : (ti+1)*k]
		n := 0 // slots taken before the draw
		if r == alignSkewed && rng.IntN(2) == 0 {
			row[0], n = hot, 1
		}
		for j := range k - n { // a partial Fisher–Yates shuffle of from
			i := j + rng.IntN(len(from)-j)
			from[j], from[i] = from[i], from[j]
			row[n+j] = from[j]
		}
		rng.Shuffle(k, func(i, j int) { row[i], row[j] = row[j], row[i] })
		if r == alignDropped {
			for j := range row {
				if rng.IntN(8) == 0 {
					row[j] = bad[rng.IntN(len(bad))]
				}
			}
		}
	}
	ids := tensor.New(tensor.I32, t, k)
	ids.SetInt64s(v)
	return ids
}

// alignExpertMap returns an expert map [E] that keeps a random quarter of
// the experts (at least one) under local ids 0, 1, ... in a random order;
// the others are −1, and a few hold other values outside [0, E).
func alignExpertMap(rng *rand.Rand, e int) *tensor.Tensor {
	v := make([]int64, e)
	for i := range v {
		v[i] = -1
		if rng.IntN(8) == 0 {
			v[i] = []int64{int64(e), -7, math.MaxInt32}[rng.IntN(3)]
		}
	}
	local := rng.Perm(e)[:max(1, e/4)]
	for id, g := range local {
		v[g] = int64(id)
	}
	m := tensor.New(tensor.I32, e)
	m.SetInt64s(v)
	return m
}

// alignScratch is the bytes a case's workspace starts with, and is given
// back after each device call: the op's scratch is no output, and check.Run
// holds any other tensor it changes against it.
const alignScratch = 0x5a5a5a5a

// alignWorkspace returns a host workspace of n i32 elements holding
// alignScratch, nil for n = 0.
func alignWorkspace(n int) *tensor.Tensor {
	if n == 0 {
		return nil
	}
	ws := tensor.New(tensor.I32, n)
	b := ws.Bytes()
	for i := range b {
		b[i] = 0x5a
	}
	return ws
}

// alignRestore gives a device workspace its alignScratch bytes back on s
// (nil: the default stream); host workspaces are left alone (the host path
// does not use them).
func alignRestore(s *cuda.Stream, ws *tensor.Tensor) error {
	if ws == nil || !ws.IsDevice() {
		return nil
	}
	if s == nil {
		s = ws.Device().DefaultStream()
	}
	return s.Memset32(ws.Ptr(), alignScratch, ws.Numel())
}

// alignCase is one parity case of moe.AlignBlockSize: T tokens of k
// experts out of E drawn as Routing says, blocks of BS, with an expert map
// keeping a quarter of the experts where Map is set.
type alignCase struct {
	T, K, E, BS int
	Routing     alignRouting
	Map         bool
}

// alignCases cover T of 0, 1, 7, 4096 and 65536 and the edges of the fused
// kernel's single tile (512 tokens of 8), E from 1 to 1024 (odd ones too),
// k from 1 to 10, blocks of 1 to 128, skewed routing, experts without
// tokens, ids out of range and expert maps. Each stays within about 2M
// elements.
var alignCases = []alignCase{
	{T: 1, K: 8, E: 256, BS: 16},
	{T: 1, K: 1, E: 8, BS: 16},
	{T: 7, K: 2, E: 8, BS: 16},
	{T: 7, K: 10, E: 512, BS: 64, Routing: alignSkewed},
	{T: 7, K: 6, E: 64, BS: 32, Map: true},
	{T: 64, K: 8, E: 256, BS: 16, Routing: alignSkewed, Map: true},
	{T: 512, K: 8, E: 128, BS: 16},
	{T: 513, K: 8, E: 128, BS: 16, Routing: alignSkewed},
	{T: 4096, K: 8, E: 128, BS: 64},
	{T: 4096, K: 6, E: 384, BS: 16, Routing: alignSkewed},
	{T: 4096, K: 4, E: 64, BS: 32, Routing: alignSparse},
	{T: 4096, K: 8, E: 256, BS: 64, Map: true},
	{T: 4096, K: 10, E: 512, BS: 128, Routing: alignSkewed},
	{T: 65536, K: 2, E: 8, BS: 128, Routing: alignSkewed},
	{T: 65536, K: 1, E: 128, BS: 16, Map: true},
	{T: 1000, K: 8, E: 1024, BS: 16},
	{T: 600, K: 4, E: 64, BS: 16, Routing: alignDropped},
	{T: 7, K: 4, E: 16, BS: 16, Routing: alignDropped},
	{T: 2000, K: 3, E: 33, BS: 5},
	{T: 300, K: 1, E: 1, BS: 1},
	{T: 0, K: 8, E: 64, BS: 16},
}

func (c alignCase) name() string {
	s := fmt.Sprintf("T=%d k=%d E=%d bs=%d %v", c.T, c.K, c.E, c.BS, c.Routing)
	if c.Map {
		s += ", expert map"
	}
	return s
}

// spec compares the three outputs exactly (poisoned first: none holds −1).
func (c alignCase) spec(rng *rand.Rand) (check.Spec, error) {
	sz, err := moe.AlignSizes(c.T, c.K, c.E, c.BS)
	if err != nil {
		return check.Spec{}, err
	}
	ts := []*tensor.Tensor{alignDrawIDs(rng, c.T, c.K, c.E, c.Routing), tensor.New(tensor.I32, sz.SortedTokenIDs),
		tensor.New(tensor.I32, sz.ExpertIDs), tensor.New(tensor.I32, 1)}
	names := []string{"ids", "sorted_token_ids", "expert_ids", "num_tokens_post_pad"}
	mapAt, wsAt := -1, -1
	if c.Map {
		mapAt, ts, names = len(ts), append(ts, alignExpertMap(rng, c.E)), append(names, "expert_map")
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
	return check.Spec{
		Tensors: ts,
		Names:   names,
		Outputs: []int{1, 2, 3},
		Poison:  []int{1, 2, 3},
		Run: func(s *cuda.Stream, ts []*tensor.Tensor) error {
			out := moe.AlignOutputs{SortedTokenIDs: ts[1], ExpertIDs: ts[2], NumTokensPostPad: ts[3], Workspace: at(ts, wsAt)}
			if err := moe.AlignBlockSize(s, out, ts[0], moe.AlignOptions{Experts: c.E, BlockSize: c.BS, ExpertMap: at(ts, mapAt)}); err != nil {
				return err
			}
			return alignRestore(s, out.Workspace)
		},
	}, nil
}

// alignBench is one benchmark case of an index op (moe.AlignBlockSize,
// moe.RoutingData): a model's E and k at T tokens.
type alignBench struct {
	Model   string
	T, K, E int
}

// alignBenches: Mixtral, Qwen3-30B-A3B, DeepSeek-V3, Qwen3-Next and
// Llama-4 over decode (1 to 64 tokens), middle and prefill sizes.
var alignBenches = []alignBench{
	{"Mixtral", 16, 2, 8}, {"Mixtral", 4096, 2, 8}, {"Mixtral", 65536, 2, 8},
	{"Qwen3-30B-A3B", 1, 8, 128}, {"Qwen3-30B-A3B", 64, 8, 128}, {"Qwen3-30B-A3B", 16384, 8, 128},
	{"DeepSeek-V3", 16, 8, 256}, {"DeepSeek-V3", 512, 8, 256}, {"DeepSeek-V3", 4096, 8, 256}, {"DeepSeek-V3", 65536, 8, 256},
	{"Qwen3-Next", 64, 10, 512}, {"Qwen3-Next", 16384, 10, 512},
	{"Llama-4 Scout", 4096, 1, 16}, {"Llama-4 Maverick", 65536, 1, 128},
}

// goal is 3× the eager composition from 16384 tokens on, parity below.
func (b alignBench) goal() bench.Goal {
	if b.T >= 16384 {
		return bench.Goal{VsEager: 3}
	}
	return bench.Goal{VsEager: 1}
}

// blockSize is the GEMM block the align cases pad to: vLLM's 16 rows at
// decode sizes, 64 above.
func (b alignBench) blockSize() int {
	if b.T <= 64 {
		return 16
	}
	return 64
}

// alignDeviceSet allocates a benchmark set on dev: ids drawn uniformly on
// the host, and i32 buffers of the sizes given (0: none, a nil tensor).
// free releases everything it allocated, also after an error.
func alignDeviceSet(dev *cuda.Device, rng *rand.Rand, b alignBench, sizes ...int) (ids *tensor.Tensor, bufs []*tensor.Tensor, free func(), err error) {
	var all []*tensor.Tensor
	free = func() {
		for _, t := range all {
			t.Free()
		}
	}
	ids, err = alignDrawIDs(rng, b.T, b.K, b.E, alignUniform).ToDevice(dev)
	if err != nil {
		return nil, nil, free, err
	}
	all = append(all, ids)
	for _, n := range sizes {
		if n == 0 {
			bufs = append(bufs, nil)
			continue
		}
		t, err := tensor.Empty(dev, tensor.I32, n)
		if err != nil {
			return nil, nil, free, err
		}
		all = append(all, t)
		bufs = append(bufs, t)
	}
	return ids, bufs, free, nil
}

func (b alignBench) bench() bench.Case {
	bs := b.blockSize()
	sz, err := moe.AlignSizes(b.T, b.K, b.E, bs)
	if err != nil {
		panic(err) // the table's shapes are valid
	}
	return bench.Case{
		Name:  fmt.Sprintf("%s T=%d E=%d k=%d bs=%d", b.Model, b.T, b.E, b.K, bs),
		Bytes: int64(4 * (b.T*b.K + sz.SortedTokenIDs + sz.ExpertIDs + 1)),
		Goal:  b.goal(),
		New: func(dev *cuda.Device, rng *rand.Rand) (bench.Instance, error) {
			ids, bufs, free, err := alignDeviceSet(dev, rng, b, sz.SortedTokenIDs, sz.ExpertIDs, 1, sz.Workspace)
			if err != nil {
				free()
				return bench.Instance{}, err
			}
			out := moe.AlignOutputs{SortedTokenIDs: bufs[0], ExpertIDs: bufs[1], NumTokensPostPad: bufs[2], Workspace: bufs[3]}
			o := moe.AlignOptions{Experts: b.E, BlockSize: bs}
			return bench.Instance{Run: func(s *cuda.Stream) error { return moe.AlignBlockSize(s, out, ids, o) }, Free: free}, nil
		},
		Torch: &bench.TorchCase{Op: "moe_align_block_size", Args: map[string]any{"T": b.T, "k": b.K, "E": b.E, "bs": bs}},
	}
}
