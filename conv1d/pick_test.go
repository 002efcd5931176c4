package conv1d

import (
	"testing"

	"github.com/gokittens/kittens/cuda"
)

func TestPickConfig(t *testing.T) {
	h100 := cuda.Props{Major: 9, SMs: 132, L2Bytes: 50 << 20, L2EvictLast: true}
	small := cuda.Props{Major: 9, SMs: 8, L2Bytes: 4 << 20, L2EvictLast: true}
	for _, tc := range []struct {
		name  string
		props cuda.Props
		sh    shape
		want  config
	}{
		{"prefill 4096x8192 bf16", h100, shape{dim: 8192, tokens: 4096, seqs: 1, elemSize: 2, maxVec: 8},
			config{vec: 4, unroll: 8, minBlocks: 6, threads: 128, chunk: 16, ring: 8, stages: 4, evictLast: true}},
		{"prefill 32768x8192 bf16", h100, shape{dim: 8192, tokens: 32768, seqs: 1, elemSize: 2, maxVec: 8},
			config{vec: 4, unroll: 8, minBlocks: 6, threads: 128, chunk: 16, ring: 8, stages: 4, evictLast: true}},
		{"prefill 1024x8192 bf16: 34 MB fit L2", h100, shape{dim: 8192, tokens: 1024, seqs: 1, elemSize: 2, maxVec: 8},
			config{vec: 4, unroll: 8, minBlocks: 6, threads: 128, chunk: 12, ring: 8, stages: 4}},
		{"prefill on few SMs", small, shape{dim: 8192, tokens: 4096, seqs: 1, elemSize: 2, maxVec: 8},
			config{vec: 4, unroll: 8, minBlocks: 6, threads: 128, chunk: 16, ring: 8, stages: 4, evictLast: true}},
		{"prefill before Hopper: registers (no bulk copies)", cuda.Props{Major: 8, SMs: 108, L2Bytes: 40 << 20},
			shape{dim: 8192, tokens: 4096, seqs: 1, elemSize: 2, maxVec: 8},
			config{vec: 4, unroll: 8, minBlocks: 6, threads: 128, chunk: 24}},
		{"prefill unaligned rows: registers", h100, shape{dim: 8192, tokens: 4096, seqs: 1, elemSize: 2, maxVec: 4},
			config{vec: 4, unroll: 8, minBlocks: 6, threads: 128, chunk: 24}},
		{"prefill f32: the ring would not fit", h100, shape{dim: 8192, tokens: 4096, seqs: 1, elemSize: 4, maxVec: 4},
			config{vec: 4, unroll: 8, minBlocks: 6, threads: 128, chunk: 24}},
		{"decode B1", h100, shape{dim: 8192, tokens: 1, seqs: 1, seqLen: 1, elemSize: 2, maxVec: 8},
			config{vec: 4, unroll: 1, hints: true, minBlocks: 8, threads: 32, chunk: 8}},
		{"decode B32: a shallow grid keeps four channels", h100, shape{dim: 8192, tokens: 32, seqs: 32, seqLen: 1, elemSize: 2, maxVec: 8},
			config{vec: 4, unroll: 1, hints: true, minBlocks: 8, threads: 128, chunk: 8}},
		{"decode B256: a deep grid takes 16 bytes a thread", h100, shape{dim: 8192, tokens: 256, seqs: 256, seqLen: 1, elemSize: 2, maxVec: 8},
			config{vec: 8, unroll: 1, hints: true, minBlocks: 6, threads: 128, chunk: 24}},
		{"decode B256 unaligned: four channels", h100, shape{dim: 8192, tokens: 256, seqs: 256, seqLen: 1, elemSize: 2, maxVec: 4},
			config{vec: 4, unroll: 1, hints: true, minBlocks: 8, threads: 128, chunk: 24}},
		{"decode B256 f32: four channels are 16 bytes", h100, shape{dim: 8192, tokens: 256, seqs: 256, seqLen: 1, elemSize: 4, maxVec: 4},
			config{vec: 4, unroll: 1, hints: true, minBlocks: 8, threads: 128, chunk: 24}},
		{"decode B256 on few SMs", small, shape{dim: 8192, tokens: 256, seqs: 256, seqLen: 1, elemSize: 2, maxVec: 8},
			config{vec: 8, unroll: 1, hints: true, minBlocks: 6, threads: 128, chunk: 24}},
		{"decode in place: no hints", h100, shape{dim: 8192, tokens: 256, seqs: 256, seqLen: 1, elemSize: 2, maxVec: 8, inPlace: true},
			config{vec: 8, unroll: 1, minBlocks: 6, threads: 128, chunk: 1}},
		{"4-token decode batches its 4 tokens under the decode cap", h100, shape{dim: 8192, tokens: 1024, seqs: 256, seqLen: 4, elemSize: 2, maxVec: 8},
			config{vec: 4, unroll: 4, hints: true, minBlocks: 8, threads: 128, chunk: 24}},
		{"3-token decode: a batch of 4", h100, shape{dim: 8192, tokens: 768, seqs: 256, seqLen: 3, elemSize: 2, maxVec: 8},
			config{vec: 4, unroll: 4, hints: true, minBlocks: 8, threads: 128, chunk: 24}},
		{"6-token decode keeps the prefill batch", h100, shape{dim: 8192, tokens: 1536, seqs: 256, seqLen: 6, elemSize: 2, maxVec: 8},
			config{vec: 4, unroll: 8, hints: true, minBlocks: 6, threads: 128, chunk: 24}},
		{"dense batch streams", h100, shape{dim: 8192, tokens: 8192, seqs: 4, seqLen: 2048, elemSize: 2, maxVec: 8},
			config{vec: 4, unroll: 8, minBlocks: 6, threads: 128, chunk: 16, ring: 8, stages: 4, evictLast: true}},
		{"odd dim f32", h100, shape{dim: 37, tokens: 100, seqs: 2, elemSize: 4, maxVec: 1},
			config{vec: 1, unroll: 8, minBlocks: 6, threads: 32, chunk: 8}},
		{"f32 packs", small, shape{dim: 1000, tokens: 5000, seqs: 1, elemSize: 4, maxVec: 4},
			config{vec: 4, unroll: 8, minBlocks: 6, threads: 128, chunk: 24}},
		{"f32 narrow blocks take the ring", h100, shape{dim: 1000, tokens: 40, seqs: 2, elemSize: 4, maxVec: 4},
			config{vec: 4, unroll: 8, minBlocks: 6, threads: 32, chunk: 8, ring: 8, stages: 4}},
		{"in place keeps sequences whole", h100, shape{dim: 64, tokens: 600, seqs: 3, seqLen: 200, elemSize: 2, maxVec: 8, inPlace: true},
			config{vec: 4, unroll: 8, minBlocks: 6, threads: 32, chunk: 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pickConfig(tc.props, tc.sh)
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			off, want := tc.props, tc.want
			off.L2EvictLast, want.evictLast = false, false
			if got := pickConfig(off, tc.sh); got != want {
				t.Errorf("L2EvictLast off: got %+v, want %+v", got, want)
			}
			if s, ch := got.grid(tc.sh); !gridFits(gridOf(s, ch), s) || got.threads%32 != 0 || got.threads > maxBlock ||
				(!tc.sh.inPlace && got.chunk < MaxWidth-1) || got.shared(tc.sh.elemSize) > maxRingBytes {
				t.Errorf("config %+v breaks a launch limit", got)
			}
		})
	}
}

func TestGridCoversSequences(t *testing.T) {
	// Sequence b owns slots [cu[b]/C + b, cu[b+1]/C + b + 1): enough for its
	// chunks, disjoint, and the last ends at the grid size.
	c := config{vec: 8, unroll: 8, threads: 128, chunk: 8}
	cu := []int{0, 0, 1, 9, 16, 17, 40, 40, 41}
	slots, _ := c.grid(shape{dim: 8, tokens: cu[len(cu)-1], seqs: len(cu) - 1})
	prevEnd := 0
	for b := range len(cu) - 1 {
		lo, hi := cu[b]/c.chunk+b, cu[b+1]/c.chunk+b+1
		if lo != prevEnd && b > 0 {
			t.Fatalf("sequence %d starts at slot %d, previous ended at %d", b, lo, prevEnd)
		}
		if need := (cu[b+1] - cu[b] + c.chunk - 1) / c.chunk; hi-lo < need {
			t.Fatalf("sequence %d has %d slots for %d chunks", b, hi-lo, need)
		}
		prevEnd = hi
	}
	if prevEnd != slots {
		t.Fatalf("slots end at %d, grid has %d", prevEnd, slots)
	}
}
