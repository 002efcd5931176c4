package rope

import (
	"slices"
	"testing"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/tensor"
)

func TestPickPairs(t *testing.T) {
	cases := []struct {
		name            string
		style           Style
		dt, cdt         tensor.DType
		half            int
		data            []region
		tables          []region
		wantV, wantAlig int
	}{
		{"neox bf16 r=128", NeoX, tensor.BF16, tensor.F32, 64, []region{{256, []int{5120, 128}}}, []region{{512, []int{128}}, {768, []int{128}}}, 8, 16},
		{"gptj bf16 r=64", GPTJ, tensor.BF16, tensor.BF16, 32, []region{{256, []int{8192, 64}}}, []region{{512, []int{64}}, {576, []int{64}}}, 4, 16},
		{"neox f32", NeoX, tensor.F32, tensor.F32, 64, []region{{256, []int{4096, 128}}}, nil, 4, 16},
		{"gptj f32", GPTJ, tensor.F32, tensor.F32, 64, []region{{256, []int{4096, 128}}}, nil, 2, 16},
		{"half 12 neox bf16", NeoX, tensor.BF16, tensor.BF16, 12, []region{{256, []int{960, 40}}}, nil, 4, 8},
		{"odd token stride", NeoX, tensor.BF16, tensor.BF16, 64, []region{{256, []int{5121, 128}}}, nil, 1, 2},
		{"head stride of 2 elements", NeoX, tensor.BF16, tensor.BF16, 64, []region{{256, []int{5120, 130}}}, nil, 2, 4},
		{"unaligned table row", NeoX, tensor.BF16, tensor.F32, 64, []region{{256, []int{5120, 128}}}, []region{{512, []int{130}}}, 2, 4},
		{"unaligned sin start", NeoX, tensor.BF16, tensor.BF16, 4, []region{{256, []int{512, 64}}}, []region{{512, []int{8}}, {520, []int{8}}}, 4, 8},
		{"half 3", NeoX, tensor.F16, tensor.F16, 3, []region{{256, []int{24, 6}}}, nil, 1, 2},
		{"gptj odd strides", GPTJ, tensor.BF16, tensor.BF16, 16, []region{{256, []int{114, 37}}}, nil, 1, 2},
		{"gptj even strides, V=1", GPTJ, tensor.F16, tensor.F16, 3, []region{{256, []int{18, 6}}}, nil, 1, 4},
	}
	for _, c := range cases {
		v, align := pickPairs(c.style, c.dt, c.cdt, c.half, c.data, c.tables)
		if v != c.wantV || align != c.wantAlig {
			t.Errorf("%s: V = %d, alignment %d; want %d, %d", c.name, v, align, c.wantV, c.wantAlig)
		}
	}
}

func TestPickPass(t *testing.T) {
	cases := []struct {
		name string
		dt   tensor.DType
		r, d int
		data []region
		want int
	}{
		{"qwen3next bf16", tensor.BF16, 64, 256, []region{{256, []int{4096, 256}}}, 8},
		{"f32", tensor.F32, 64, 128, []region{{256, []int{4096, 128}}}, 4},
		{"d-r = 4", tensor.BF16, 32, 36, []region{{256, []int{360, 36}}}, 4},
		{"odd strides", tensor.BF16, 40, 72, []region{{256, []int{3, 75}}}, 1},
	}
	for _, c := range cases {
		if got := pickPass(c.dt, c.r, c.d, c.data); got != c.want {
			t.Errorf("%s: pass width %d, want %d", c.name, got, c.want)
		}
	}
}

// TestPickLaunch checks the launch shapes on simulated devices: an H200's
// 132 SMs, and 16 SMs, where fewer tokens fill the GPU twice over.
func TestPickLaunch(t *testing.T) {
	h200, small := cuda.Props{SMs: 132, L2Bytes: 60 << 20, L2EvictLast: true}, cuda.Props{SMs: 16, L2Bytes: 4 << 20, L2EvictLast: true}
	cases := []struct {
		name                  string
		props                 cuda.Props
		tokens, heads, nc, cb int // cb: chunk bytes
		spread                bool
		flat                  bool
		hpt, occ              int
		hb, bx, by, bz        int
		nb, chunkBlocks       int  // blocks per token (3-D), blocks of chunks
		evict                 bool // L2 evict-last reads: [B, H, S, D] data exceeding L2
	}{
		{"llama decode T=1", h200, 1, 40, 8, 32, true, false, 4, 1024, 40, 8, 10, 1, 1, 1, false},
		{"llama T=16384", h200, 16384, 40, 8, 32, true, true, 1, 1536, 40, 128, 1, 1, 0, 1, false},
		{"deepseek T=4096", h200, 4096, 129, 8, 16, true, true, 2, 1536, 65, 128, 1, 1, 0, 1, false},
		{"qwen3-next T=4096", h200, 4096, 18, 4, 32, true, false, 4, 1024, 20, 4, 5, 6, 1, 1, false},
		{"qwen3-next T=4096, 16 SMs", small, 4096, 18, 4, 32, true, true, 1, 1536, 18, 128, 1, 1, 0, 1, false},
		{"flat past 2^31 threads", h200, 1 << 22, 129, 8, 16, true, false, 2, 1536, 26, 8, 13, 1, 5, 1, false},
		{"small heads", h200, 64, 4, 2, 32, true, false, 4, 1024, 4, 2, 1, 64, 1, 1, false},
		{"few tokens", h200, 3, 4, 2, 32, true, false, 4, 1024, 4, 2, 1, 3, 1, 1, false},
		{"huge head", h200, 64, 2, 1024, 4, true, false, 4, 1024, 4, 1024, 1, 1, 1, 1, false},
		{"head of 2048 chunks", h200, 64, 2, 2048, 4, true, false, 4, 1024, 4, 1024, 1, 1, 1, 2, false},
		{"bhsd 16x4096 H=32", h200, 16 * 4096, 32, 8, 32, false, false, 1, 0, 1, 8, 1, 16, 32, 1, true},
		{"bhsd short", h200, 5, 3, 8, 32, false, false, 1, 0, 1, 8, 1, 5, 3, 1, false},
		{"bhsd head dim 6", h200, 4096, 8, 3, 8, false, false, 1, 0, 1, 3, 1, 42, 8, 1, false},
	}
	for _, c := range cases {
		got := pickLaunch(c.props, c.tokens, c.heads, c.nc, c.cb, c.spread)
		b := got.block
		nb := 0
		if !got.flat {
			nb = (c.heads + got.hb - 1) / got.hb
		}
		if got.flat != c.flat || got.hpt != c.hpt || got.occ != c.occ || got.hb != c.hb || got.cb != c.chunkBlocks ||
			int(b.X) != c.bx || int(b.Y) != c.by || int(b.Z) != c.bz || nb != c.nb || got.evict != c.evict {
			t.Errorf("%s: flat %v, hpt %d, occ %d, hb %d (%d blocks per token, %d of chunks), block %v, evict %v; want %v, %d, %d, %d (%d, %d), %dx%dx%d, %v",
				c.name, got.flat, got.hpt, got.occ, got.hb, nb, got.cb, b, got.evict, c.flat, c.hpt, c.occ, c.hb, c.nb, c.chunkBlocks, c.bx, c.by, c.bz, c.evict)
		}
		off := c.props
		off.L2EvictLast = false
		if pickLaunch(off, c.tokens, c.heads, c.nc, c.cb, c.spread).evict {
			t.Errorf("%s, L2EvictLast off: evict", c.name)
		}
		if n := b.X * b.Y * b.Z; n > 1024 {
			t.Errorf("%s: %d threads per block", c.name, n)
		}
	}
}

// TestPreparedCoversServingShapes checks that Prepare compiles what the
// benchmark shapes launch, on simulated H100 and H200s: the key launch
// derives for each shape (contiguous tensors, int64 positions) is among
// prepared's.
func TestPreparedCoversServingShapes(t *testing.T) {
	shapes := []struct {
		name          string
		tokens, heads int
		d, r          int
		style         Style
		qk            bool
	}{
		{"llama3-8b T=1", 1, 40, 128, 128, NeoX, true},
		{"llama3-8b T=32", 32, 40, 128, 128, NeoX, true},
		{"llama3-8b T=4096", 4096, 40, 128, 128, NeoX, true},
		{"llama3-8b T=16384", 16384, 40, 128, 128, NeoX, true},
		{"qwen3-next T=4096", 4096, 18, 256, 64, NeoX, true},
		{"deepseek-v3 T=4096", 4096, 129, 64, 64, GPTJ, true},
		{"4x32x1024x128", 4 * 1024, 32, 128, 128, NeoX, false},
		{"16x32x4096x128", 16 * 4096, 32, 128, 128, NeoX, false},
		{"1x8x512x64 gptj", 512, 8, 64, 64, GPTJ, false},
	}
	for _, props := range []cuda.Props{{SMs: 132, L2Bytes: 50 << 20}, {SMs: 132, L2Bytes: 60 << 20}} {
		keys := prepared(props)
		for _, dt := range []tensor.DType{tensor.BF16, tensor.F16, tensor.F32} {
			for _, cdt := range []tensor.DType{tensor.F32, dt} {
				for _, c := range shapes {
					half := c.r / 2
					key := kernelKey{dt: dt, cdt: cdt, style: c.style}
					data := []region{{0, []int{c.heads * c.d, c.d}}}
					tables := []region{{0, []int{c.r}}, {uint64(half * cdt.Size()), []int{c.r}}}
					if c.qk {
						key.pos = tensor.I64
					} else {
						tables = []region{{0, []int{half}}, {0, []int{half}}}
					}
					key.v, key.da = pickPairs(c.style, dt, cdt, half, data, tables)
					key = key.withLaunch(pickLaunch(props, c.tokens, c.heads, half/key.v, 2*key.v*dt.Size(), c.qk))
					if !slices.Contains(keys, key) {
						t.Errorf("L2 %d MiB, %v cache %v, %s: %+v is not prepared", props.L2Bytes>>20, dt, cdt, c.name, key)
					}
				}
			}
		}
	}
}
