// rope.cu: rotary position embedding for both layouts the package serves,
// q and k rotated together in place ([T, H, D] with a positions array) and
// x → y out of place ([B, H, S, D], the position of a row is its s).
//
// Design. RoPE is pure data movement with four multiply-adds per pair, so the
// kernel is built around bytes: each rotated element is read once and written
// once, and the pass-through dims (partial rotary) are not touched at all in
// place, or copied with the widest aligned access out of place. A thread owns
// one chunk of V consecutive rotation pairs of HPT heads of one token: it
// issues all their 16-byte loads, then loads the chunk's V cos and V sin
// values once for all HPT heads (the heads of a token share its position),
// rotates and stores. NeoX pairs (i, i + r/2) are read as two V-wide vectors
// from the two halves of the rotary part, GPT-J pairs (2i, 2i + 1) as one
// 2V-wide vector. Arithmetic is fp32 whatever the storage types, rounded once
// on the store; 16-bit data stays packed two to a register from the load to
// the store, which halves the registers a thread needs.
//
// Two thread layouts, picked by the host:
//   - 3-D blocks: threadIdx.x is the chunk, threadIdx.y the head lane (lane y
//     takes heads y, y + blockDim.y, ... of the block's share of the heads,
//     blockIdx.y), threadIdx.z the token inside the block, blockIdx.x the
//     block of tokens, blockIdx.z the batch of the [B, H, S, D] layout.
//   - ROPE_FLAT (serving layout only): 1-D blocks over (chunk, head lane,
//     token), chunk fastest, so that every warp is full whatever the head
//     count (40 or 129 heads leave lanes of 3-D blocks idle).
//
// Heads [0, n0) come from the first tensor (q, or x → y), heads [n0, n0 + n1)
// from the second (k, rotated in place). The data loads are plain (not .nc):
// in place, the kernel writes what it reads.
//
// Positions come from an int32/int64 array (ROPE_POS defined) or are the token
// index. A thread issues its data loads before the table loads, whose address
// waits on the position. A position outside [0, maxPos) leaves its token
// untouched: a checked call never gets here with one (the host rejected it),
// and an unchecked call stays memory-safe.
//
// Defines (prefixed: NVRTC's built-in headers use names like T): ROPE_T (data:
// bf16, f16, float), ROPE_C (cos/sin: float or ROPE_T), ROPE_NEOX (1 or 0),
// ROPE_V (pairs per chunk), ROPE_DA (alignment of a data access, bytes),
// ROPE_HPT (heads per thread), ROPE_PASS (elements per pass-through copy; 0:
// no copy), ROPE_POS (optional: i32 or i64), ROPE_HOFF (int or i64: head
// offsets), ROPE_FLAT (1-D blocks), ROPE_CS (evict-first stores), ROPE_EVICT
// (L2 evict-last data reads, see dload), ROPE_MAXT
// and ROPE_MINB (launch bounds: threads per block and resident blocks per
// SM, which cap the registers; ROPE_MAXT 0: no bounds).
#include "kittens.cuh"

using T = ROPE_T;
using C = ROPE_C;
constexpr bool NEOX = ROPE_NEOX;
constexpr int V = ROPE_V;
constexpr int HPT = ROPE_HPT;
using HOff = ROPE_HOFF;  // head offsets within a token: int where they fit

// dload reads a data access; with ROPE_EVICT a 16-byte one asks L2 to evict
// the line last (Cache::last, a coherent load: in place, the kernel writes
// what it reads). The line outlives the kernel, so the picker sets
// ROPE_EVICT only where the caller opted in (cuda.Device.SetL2EvictLast).
template <class D> KI D dload(const T* p) {
  return load<D, ROPE_EVICT && alignof(D) == 16 ? Cache::last : Cache::plain>(p);
}

// dstore writes a data access; 16-byte stores carry the evict-first (.cs)
// hint when ROPE_CS is 1: nothing reads the output again in this kernel.
template <class D> KI void dstore(T* p, const D& x) {
  store<ROPE_CS && sizeof(D) == 16 && alignof(D) == 16 ? Cache::stream : Cache::plain>(p, x);
}

// W is the number of elements one data access covers, DA its alignment: the
// access's size, except for GPT-J on odd strides (V = 1, pairs split in two).
constexpr int W = NEOX ? V : 2 * V;
constexpr int DA = ROPE_DA;
static_assert(W * sizeof(T) <= 16, "a data access is at most 16 bytes");
using Data = Vec<T, W, DA>;
using Table = Vec<C, V>;

// Heads holds one chunk of HPT heads: the first half's V elements (NeoX) or
// the 2V interleaved ones (GPT-J) in a, the second half's in z (NeoX).
struct Heads {
  Data a[HPT];
#if ROPE_NEOX
  Data z[HPT];
#endif
};

// rotate turns the V pairs of one head's chunk by cos and sin, in fp32.
// NeoX pairs element i of a with element i of z, and rounds two neighbours
// at a time so that a 16-bit pair is packed by one instruction.
KI void rotate(Data& a, [[maybe_unused]] Data& z, const Table& cs, const Table& sn) {
#if ROPE_NEOX
  constexpr int step = V % 2 == 0 ? 2 : 1;
#pragma unroll
  for (int i = 0; i < V; i += step) {
    float y1[2], y2[2];
#pragma unroll
    for (int k = 0; k < step; k++) {
      const float c = cs.get(i + k), s = sn.get(i + k);
      const float x1 = a.get(i + k), x2 = z.get(i + k);
      y1[k] = fmaf(x1, c, -x2 * s);
      y2[k] = fmaf(x2, c, x1 * s);
    }
    if constexpr (step == 2) {
      a.set2(i, y1[0], y1[1]);
      z.set2(i, y2[0], y2[1]);
    } else {
      a.set(i, y1[0]);
      z.set(i, y2[0]);
    }
  }
#else
#pragma unroll
  for (int i = 0; i < V; i++) {
    const float c = cs.get(i), s = sn.get(i);
    const float x1 = a.get(2 * i), x2 = a.get(2 * i + 1);
    a.set2(2 * i, fmaf(x1, c, -x2 * s), fmaf(x2, c, x1 * s));
  }
#endif
}

#if ROPE_MAXT > 0
#define ROPE_BOUNDS __launch_bounds__(ROPE_MAXT, ROPE_MINB)
#else
#define ROPE_BOUNDS
#endif

extern "C" __global__ void ROPE_BOUNDS
rope(const T* src0, T* dst0, T* qk1,
#ifdef ROPE_POS
     const ROPE_POS* __restrict__ positions,
#else
     const void* positions,
#endif
     const C* __restrict__ cosp, const C* __restrict__ sinp,
     i64 cosRow, i64 sinRow, i64 maxPos,
     int ntok, int n0, int n1, int hb, int cb, int half, int D,
     i64 s0b, i64 s0t, HOff s0h,  // src0 strides: batch, token, head
     i64 d0b, i64 d0t, HOff d0h,  // dst0 strides
     i64 s1t, HOff s1h) {         // qk1 strides: token, head
  wait_prior_grids();
#if ROPE_FLAT
  // hb is the head lanes per token; lane y takes heads y, y + hb, ...
  const int nc = half / V;
  const int g = blockIdx.x * blockDim.x + threadIdx.x;  // the host keeps it in int
  const int c = g % nc, r = g / nc;
  const int lane = r % hb, t = r / hb;
  if (t >= ntok) return;
  const int hlo = 0, hhi = n0 + n1, by = hb;
#else
  const int t = blockIdx.x * blockDim.z + threadIdx.z;
  if (t >= ntok) return;
  // blockIdx.y is a share of the heads (hb of them: [hlo, hhi) of the
  // n0 + n1) times cb blocks of chunks.
  const int share = blockIdx.y / cb, cblk = blockIdx.y - share * cb;
  const int hlo = share * hb, hhi = min(n0 + n1, hlo + hb);
  const int by = blockDim.y, lane = threadIdx.y;
  const int c = cblk * blockDim.x + threadIdx.x;  // chunk of V pairs
#endif
#ifdef ROPE_POS
  const i64 pos = (i64)positions[t];
#else
  const i64 pos = t;
#endif
  // The guard; a token that fails it reads row 0 and stores nothing.
  const bool ok = pos >= 0 && pos < maxPos;
  const i64 row = ok ? pos : 0;
  const T* s0 = src0 + blockIdx.z * s0b + t * s0t;
  T* o0 = dst0 + blockIdx.z * d0b + t * d0t;
  T* o1 = qk1 + t * s1t;  // unused when n1 == 0
  const int e = NEOX ? c * V : c * 2 * V;  // first element of the chunk in a head

  const int h0 = hlo + lane;  // this thread's heads: h0 + j·by, j < HPT
  if (c < half / V && h0 < hhi) {
    // Data first, then the table: the table's address waits for the
    // position load, the data loads need not.
    Heads x;
#pragma unroll
    for (int j = 0; j < HPT; j++) {
      const int h = h0 + j * by;
      if (h < hhi) {
        const T* p = (h < n0 ? s0 + h * s0h : o1 + (h - n0) * s1h) + e;
        x.a[j] = dload<Data>(p);
#if ROPE_NEOX
        x.z[j] = dload<Data>(p + half);
#endif
      }
    }
    const Table cs = load<Table>(cosp + row * cosRow + c * V);
    const Table sn = load<Table>(sinp + row * sinRow + c * V);
#pragma unroll
    for (int j = 0; j < HPT; j++) {
      const int h = h0 + j * by;
      if (h < hhi && ok) {
#if ROPE_NEOX
        rotate(x.a[j], x.z[j], cs, sn);
#else
        rotate(x.a[j], x.a[j], cs, sn);
#endif
        T* q = (h < n0 ? o0 + h * d0h : o1 + (h - n0) * s1h) + e;
        dstore(q, x.a[j]);
#if ROPE_NEOX
        dstore(q + half, x.z[j]);
#endif
      }
    }
  }

#if ROPE_PASS > 0
  static_assert(!ROPE_FLAT, "the pass-through copy takes the 3-D blocks");
  // Out of place with r < D: chunk block 0 copies dims [r, D) of this
  // block's heads of src0 (n1 is 0 here) to dst0.
  if (cblk != 0) return;
  const int npc = (D - 2 * half) / ROPE_PASS;
  const int lanes = blockDim.x * blockDim.y;
  for (int j = threadIdx.y * blockDim.x + threadIdx.x; j < (hhi - hlo) * npc; j += lanes) {
    const int h = hlo + j / npc, e = 2 * half + (j % npc) * ROPE_PASS;
    using Pass = Vec<T, ROPE_PASS>;
    dstore(o0 + h * d0h + e, load<Pass>(s0 + h * s0h + e));
  }
#endif
}
