package rope

import (
	"math"

	"github.com/gokittens/kittens/cuda"
	"github.com/gokittens/kittens/tensor"
)

// aligned reports whether n-element accesses of size-byte elements at ptr
// plus any multiple of each offset (elements) meet their alignment,
// min(n·size, 16) bytes.
func aligned(ptr uint64, size, n int, offs ...int) bool {
	a := min(n*size, 16)
	if ptr%uint64(a) != 0 {
		return false
	}
	for _, o := range offs {
		if o*size%a != 0 {
			return false
		}
	}
	return true
}

// region is one tensor the kernel accesses in vectors: its base address
// and the strides (elements) between the rows it touches.
type region struct {
	ptr  uint64
	offs []int
}

// pickPairs returns V, the rotation pairs a thread handles per chunk, and
// the alignment of its data accesses: the widest V that keeps every data
// access ≤ 16 bytes and aligned (NeoX reads V elements from each half, GPT-J
// 2V consecutive elements) and every cos/sin access of V table entries
// aligned. V = 1 always works; GPT-J pairs on odd strides are then read as
// single elements.
func pickPairs(style Style, dt, cdt tensor.DType, half int, data, tables []region) (v, align int) {
	w, second := 1, half // elements per data access per pair; NeoX's second access
	if style == GPTJ {
		w, second = 2, 0
	}
	for v := 16 / dt.Size() / w; v >= 1; v /= 2 {
		ok := half%v == 0 && aligned(0, dt.Size(), w*v, second)
		for _, d := range data {
			ok = ok && aligned(d.ptr, dt.Size(), w*v, d.offs...)
		}
		for _, t := range tables {
			ok = ok && aligned(t.ptr, cdt.Size(), v, t.offs...)
		}
		if ok {
			return v, min(w*v*dt.Size(), 16)
		}
	}
	return 1, dt.Size()
}

// pickPass returns the elements per pass-through copy of dims [r, d): the
// widest aligned access up to 16 bytes that divides d − r.
func pickPass(dt tensor.DType, r, d int, data []region) int {
	for p := 16 / dt.Size(); p > 1; p /= 2 {
		ok := (d-r)%p == 0 && aligned(0, dt.Size(), p, r)
		for _, x := range data {
			ok = ok && aligned(x.ptr, dt.Size(), p, x.offs...)
		}
		if ok {
			return p
		}
	}
	return 1
}

// knobs are the choices a launch is tuned by.
type knobs struct {
	hpt     int  // heads per thread (1, 2 or 4)
	threads int  // target threads per block
	occ     int  // resident threads per SM the registers must allow; 0: the compiler's choice
	cs      bool // evict-first data stores
	flat    bool // serving layout: 1-D blocks over (chunk, head lane, token)
	evict   bool // L2 evict-last data reads (16-byte ones)
}

// launchCfg is how a launch spreads the work.
type launchCfg struct {
	knobs
	hb    int       // heads per block (flat: head lanes per token); the grid's y splits the heads ...
	cb    int       // ... and each share of them into cb blocks of chunks
	block cuda.Dim3 // x: chunks of a head, y: head lanes, z: tokens (flat: all in x)
}

// flatBytes is the data a thread of a flat launch moves per direction:
// hpt = flatBytes / (bytes of one head's chunk, 2V elements), within [1, 4].
const flatBytes = 32

// pickKnobs chooses the launch knobs for tokens × heads × nc chunks of
// chunkBytes data each (2V elements); NOTES.md has the measurements.
//
//	layout        when                                knobs
//	[B, H, S, D]  always                              1 head a thread, 128 threads, no register bound,
//	                                                  evict-last reads where data read + written > L2
//	                                                  and the device allows them (L2EvictLast)
//	serving       ≥ 2 waves of 1536 resident threads  flat, flatBytes a thread, 128 threads,
//	                                                  1536 resident, evict-first stores
//	serving       fewer (decode, few heads)           3-D, 4 heads a thread, 128 threads,
//	                                                  1024 resident, evict-first stores
//
// The register bound (occ) is what keeps 1536 threads resident. Flat blocks
// fill every warp whatever the head count, where 3-D blocks leave lanes
// idle (40 heads in 10 lanes of 8 chunks fill 80 of 96): llama3-8b T=16384
// took 86.3 µs flat against 88.6 in 3-D blocks on an H200.
func pickKnobs(props cuda.Props, tokens, heads, nc, chunkBytes int, spreadHeads bool) knobs {
	if !spreadHeads {
		evict := props.L2EvictLast && 2*int64(tokens)*int64(heads)*int64(nc)*int64(chunkBytes) > int64(props.L2Bytes)
		return knobs{hpt: 1, threads: 128, evict: evict}
	}
	hpt := min(4, max(1, flatBytes/chunkBytes))
	lanes := (heads + hpt - 1) / hpt
	const occ = 1536
	if int64(tokens)*int64(lanes)*int64(nc) >= 2*occ*int64(props.SMs) {
		return knobs{hpt: hpt, threads: 128, occ: occ, cs: true, flat: true}
	}
	return knobs{hpt: 4, threads: 128, occ: 1024, cs: true}
}

// tuning, when its threads is non-zero, overrides pickKnobs; only the
// tuning benchmark and the parity tests of other knobs set it.
var tuning knobs

// pickLaunch sizes a launch over tokens × heads × nc chunks of V pairs,
// chunkBytes of data each. A flat launch gives each thread one chunk of hpt
// heads of one token (head lanes: heads y, y + lanes, ...) in 1-D blocks.
// Otherwise a block holds the chunks of whole heads (x) and a thread hpt
// heads, blockDim.y apart. When a token's heads are adjacent in memory
// (spreadHeads, the serving layout), a block takes an even share of one
// token's heads (y; the grid's y splits the heads into as few shares as keep
// a block within the target size) and, when the token needs fewer threads
// than that, several tokens (z). Otherwise ([B, H, S, D]) a block takes hpt
// heads of as many consecutive tokens as fit (z), so each head's rows form
// one contiguous stretch, and the grid splits the heads.
func pickLaunch(props cuda.Props, tokens, heads, nc, chunkBytes int, spreadHeads bool) launchCfg {
	k := pickKnobs(props, tokens, heads, nc, chunkBytes, spreadHeads)
	if tuning.threads > 0 {
		k = tuning
	}
	lanes := (heads + k.hpt - 1) / k.hpt // head lanes of a token
	// A flat launch indexes its threads with an int, the last block's
	// spare threads included, and takes all heads at once: bounding
	// tokens × heads × chunks (not lanes) keeps its head indices, up to
	// heads + hpt, in an int too.
	if k.flat && spreadHeads && int64(tokens)*int64(heads)*int64(nc) <= math.MaxInt32-1024 {
		return launchCfg{knobs: k, hb: lanes, cb: 1, block: cuda.Dim3{X: uint32(k.threads), Y: 1, Z: 1}}
	}
	k.flat = false
	bx := min(nc, 1024) // heads of more chunks (r > 2048 at V = 1) take cb blocks
	cb := (nc + bx - 1) / bx
	if !spreadHeads {
		bz := max(1, min(64, k.threads/bx, tokens))
		return launchCfg{knobs: k, hb: k.hpt, cb: cb, block: cuda.Dim3{X: uint32(bx), Y: 1, Z: uint32(bz)}}
	}
	by := max(1, min(lanes, k.threads/bx)) // head lanes per block, within the target size
	shares := (lanes + by - 1) / by        // blocks per token
	by = (lanes + shares - 1) / shares     // evened out
	bz := max(1, min(64, k.threads/(bx*by), tokens))
	return launchCfg{knobs: k, hb: by * k.hpt, cb: cb, block: cuda.Dim3{X: uint32(bx), Y: uint32(by), Z: uint32(bz)}}
}

// withLaunch returns key specialized for launch cfg: its heads per thread,
// store and read policies, thread layout and launch bounds.
func (key kernelKey) withLaunch(cfg launchCfg) kernelKey {
	key.hpt, key.cs, key.flat = cfg.hpt, cfg.cs, cfg.flat
	key.evict = cfg.evict && key.da == 16 // only 16-byte reads take the policy
	if cfg.occ > 0 {
		// The bound is for the target block size (≥ this block's), so
		// shapes that differ only in their blocks share a specialization.
		key.maxT = max(cfg.threads, int(cfg.block.X*cfg.block.Y*cfg.block.Z))
		key.minB = max(1, cfg.occ/key.maxT)
	}
	return key
}
