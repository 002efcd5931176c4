// rope.cu: rotary position embedding for both layouts the package serves,
// q and k rotated together in place ([T, H, D] with a positions array) and
// x → y out of place ([B, H, S, D], the position of a row is its s).
//
// Design. RoPE is pure data movement with four multiply-adds per pair, so the
// kernel is built around bytes: each rotated element is read once and written
// once, and the pass-through dims (partial rotary) are not touched at all in
// place, or copied with the widest aligned access out of place. A thread owns
// one chunk of V consecutive rotation pairs of one token (threadIdx.x) and
// keeps that chunk's V cos and V sin values in registers while it walks its
// heads: threadIdx.y picks the first, then every blockDim.y-th head of the
// block's head range (blockIdx.y; hb heads each). HPT heads are loaded before
// any is rotated and stored, so a thread can have several 16-byte loads in
// flight. threadIdx.z is the token inside the block, blockIdx.x the block of
// tokens, blockIdx.z the batch of the [B, H, S, D] layout. The host picks the
// shape: in the serving layout a token's heads are adjacent in memory, so a
// block spreads a run of them over threadIdx.y; in [B, H, S, D] the rows of
// one head are, so a block takes many tokens (threadIdx.z) of one head. NeoX pairs (i, i + r/2) are read as two V-wide vectors from the
// two halves of the rotary part, GPT-J pairs (2i, 2i + 1) as one 2V-wide
// vector; both read V consecutive cos and sin values. Arithmetic is fp32
// whatever the storage types, rounded once on the store.
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
// ROPE_HPT (heads in flight per thread), ROPE_PASS (elements per
// pass-through copy; 0: no copy), ROPE_POS (optional: i32 or i64).
#include "kittens.cuh"

using T = ROPE_T;
using C = ROPE_C;
constexpr bool NEOX = ROPE_NEOX;
constexpr int V = ROPE_V;
constexpr int HPT = ROPE_HPT;

// Vec is N elements of E with alignment A: by default N·sizeof(E) up to 16
// bytes, so that it moves as one load or store (or 16-byte pieces: the fp32
// cos/sin of an 8-pair chunk). A smaller A makes the compiler split it.
template <class E, int N, int A = (N * sizeof(E) >= 16 ? 16 : N * sizeof(E))>
struct alignas(A) Vec {
  E v[N];
};

template <class E, int N, int A = alignof(Vec<E, N>)>
KI Vec<E, N, A> vload(const E* p) { return *reinterpret_cast<const Vec<E, N, A>*>(p); }
template <class E, int N, int A>
KI void vstore(E* p, const Vec<E, N, A>& x) { *reinterpret_cast<Vec<E, N, A>*>(p) = x; }

// W is the number of elements one data access covers, DA its alignment: the
// access's size, except for GPT-J on odd strides (V = 1, pairs split in two).
constexpr int W = NEOX ? V : 2 * V;
constexpr int DA = ROPE_DA;
static_assert(W * sizeof(T) <= 16, "a data access is at most 16 bytes");
using Data = Vec<T, W, DA>;

extern "C" __global__ void rope(const T* src0, T* dst0, T* qk1,
#ifdef ROPE_POS
                                const ROPE_POS* __restrict__ positions,
#else
                                const void* positions,
#endif
                                const C* __restrict__ cosp, const C* __restrict__ sinp,
                                i64 cosRow, i64 sinRow, i64 maxPos,
                                int ntok, int n0, int n1, int hb, int half, int D,
                                i64 s0b, i64 s0t, i64 s0h,  // src0 strides: batch, token, head
                                i64 d0b, i64 d0t, i64 d0h,  // dst0 strides
                                i64 s1t, i64 s1h) {         // qk1 strides: token, head
  const int t = blockIdx.x * blockDim.z + threadIdx.z;
  if (t >= ntok) return;
  const i64 b = blockIdx.z;
#ifdef ROPE_POS
  const i64 pos = (i64)positions[t];
#else
  const i64 pos = t;
#endif
  // The guard; a token that fails it reads row 0 and stores nothing.
  const bool ok = pos >= 0 && pos < maxPos;
  const i64 row = ok ? pos : 0;

  // This block's heads: [hlo, hhi) of the n0 + n1.
  const int hlo = blockIdx.y * hb, hhi = min(n0 + n1, hlo + hb);
  const T* s0 = src0 + b * s0b + (i64)t * s0t;
  T* o0 = dst0 + b * d0b + (i64)t * d0t;
  T* o1 = qk1 + (i64)t * s1t;  // unused when n1 == 0

  const int nc = half / V;
  for (int c = threadIdx.x; c < nc; c += blockDim.x) {
    const int e = NEOX ? c * V : c * 2 * V;  // first element of the chunk in a head
    for (int h0 = hlo + threadIdx.y; h0 < hhi; h0 += blockDim.y * HPT) {
      // Data first, then the table: the table's address waits for the
      // position load, the data loads need not.
      Data a[HPT];
#if ROPE_NEOX
      Data z[HPT];
#endif
#pragma unroll
      for (int j = 0; j < HPT; j++) {
        const int h = h0 + j * blockDim.y;
        if (h < hhi) {
          const T* p = h < n0 ? s0 + h * s0h : o1 + (h - n0) * s1h;
          a[j] = vload<T, W, DA>(p + e);
#if ROPE_NEOX
          z[j] = vload<T, W, DA>(p + e + half);
#endif
        }
      }
      const Vec<C, V> cs = vload<C, V>(cosp + row * cosRow + c * V);
      const Vec<C, V> sn = vload<C, V>(sinp + row * sinRow + c * V);
#pragma unroll
      for (int j = 0; j < HPT; j++) {
        const int h = h0 + j * blockDim.y;
        if (h < hhi && ok) {
#pragma unroll
          for (int i = 0; i < V; i++) {
            const float c_ = to_float(cs.v[i]), s_ = to_float(sn.v[i]);
#if ROPE_NEOX
            const float x1 = to_float(a[j].v[i]), x2 = to_float(z[j].v[i]);
            a[j].v[i] = from_float<T>(fmaf(x1, c_, -x2 * s_));
            z[j].v[i] = from_float<T>(fmaf(x2, c_, x1 * s_));
#else
            const float x1 = to_float(a[j].v[2 * i]), x2 = to_float(a[j].v[2 * i + 1]);
            a[j].v[2 * i] = from_float<T>(fmaf(x1, c_, -x2 * s_));
            a[j].v[2 * i + 1] = from_float<T>(fmaf(x2, c_, x1 * s_));
#endif
          }
          T* q = h < n0 ? o0 + h * d0h : o1 + (h - n0) * s1h;
          vstore(q + e, a[j]);
#if ROPE_NEOX
          vstore(q + e + half, z[j]);
#endif
        }
      }
    }
  }

#if ROPE_PASS > 0
  // Out of place with r < D: copy dims [r, D) of this block's heads of src0
  // (n1 is 0 here) to dst0.
  const int npc = (D - 2 * half) / ROPE_PASS;
  const int lanes = blockDim.x * blockDim.y;
  for (int j = threadIdx.y * blockDim.x + threadIdx.x; j < (hhi - hlo) * npc; j += lanes) {
    const int h = hlo + j / npc, e = 2 * half + (j % npc) * ROPE_PASS;
    vstore(o0 + h * d0h + e, vload<T, ROPE_PASS>(s0 + h * s0h + e));
  }
#endif
}
