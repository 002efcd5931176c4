// permute.cu: token rows into expert order (moe_permute) and the weighted
// combine back to token order (moe_unpermute).
//
// Both are memory-bound gathers of whole rows: nothing is computed across
// rows, and every output row is written by the group of LANES threads that
// owns it, so no atomics are needed and the result does not depend on the
// schedule. A group is a power of two of lanes within a warp (a block of
// THREADS holds THREADS/LANES rows) or, for rows of more than 32·VPT
// accesses, the whole block (LANES = THREADS, a multiple of 32, one row).
// An access is VEC consecutive elements moved as one load or store (16
// bytes of the wider dtype where the pointers, row strides and H allow it;
// the host narrows it otherwise, down to single elements, so rows never end
// in a partial access). A lane takes up to VPT accesses a pass, all loads
// of the pass issued before any is used; with FITS one pass covers the row
// (LANES·VPT·VEC ≥ H) and the pass loop compiles away.
//
// moe_permute: y[p] = x[idx[p] / k] for each sorted position p, where an
// idx entry outside [0, T·k) is padding and gives a zero row. With QUANT
// the row is rounded to fp8 e4m3 on the way with a per-row scale: amax =
// max |x| over the row (as the unsigned order of the fp32 bits of |x|, so
// that a NaN or an infinity ranks above every number), scale = amax / 448
// (IEEE fp32 division), values x / scale rounded to nearest even and
// saturated to ±448; a row whose scale is 0 (all zeros, or fp32 subnormals
// too small for amax / 448) writes x·0, its zeros with their signs; a row
// holding a NaN or an infinity writes NaN (0x7f) throughout and a NaN
// scale. The values of a row stay in registers between the reduction and
// the conversion where FITS; otherwise the second pass reads the row again
// (from L2). Rows at or past *count (when count is given) are left alone.
//
// moe_unpermute: out[t] = Σ_j w[t·k + j] · y[pos[t·k + j]], one fused
// multiply-add per slot into fp32 accumulators, slots in order j = 0..k−1,
// rounded once to the output dtype. A pos entry outside [0, P) is a dropped
// slot and is not read. Without pos, slot f reads row f; without w, every
// weight is 1.
//
// Reads that move 16 bytes go through the read-only path without allocating
// in L1 (Cache::stream: no row is read twice by one block), and 16-byte
// stores carry the evict-first hint (the output is not read again here).
// Rows are addressed with 64-bit offsets; within a row, int.
//
// Defines: SRC, DST (element types read and written; DST fp8e4m3 with QUANT), QUANT,
// UNPERMUTE (which entry this build holds), VEC, VPT, LANES, THREADS, FITS.
#include "kittens.cuh"

typedef SRC Ein;
typedef DST Eout;
constexpr int kVec = VEC, kVpt = VPT, kLanes = LANES, kThreads = THREADS;
constexpr int kRows = kThreads / kLanes;  // rows per block
constexpr int kChunk = kLanes * kVpt;     // accesses a group covers per pass
constexpr bool kFits = FITS != 0;
static_assert(kLanes <= 32 ? 32 % kLanes == 0 && kThreads % 32 == 0 : kLanes % 32 == 0 && kRows == 1,
              "a group is a power of two of lanes within a warp, or the whole block");

using VI = Vec<Ein, kVec>;
using VO = Vec<Eout, kVec>;
constexpr int kInBytes = kVec * (int)sizeof(Ein), kOutBytes = kVec * (int)sizeof(Eout);
constexpr Cache kLoad = kInBytes == 16 ? Cache::stream : Cache::plain;
constexpr Cache kStore = kOutBytes == 16 ? Cache::stream : Cache::plain;

// passes is how far the pass loop runs: once with FITS (nacc ≤ kChunk),
// else over the row's nacc accesses.
KI int passes(int nacc) { return kFits ? 1 : nacc; }

#if !UNPERMUTE
static_assert(QUANT ? same<Eout, fp8e4m3> : same<Eout, Ein>, "a permute copies, or quantizes to fp8 e4m3");

// fill writes the access b over the row's nacc accesses.
KI void fill(Eout* dst, int lane, int nacc, const VO& b) {
  for (int a = lane; a < nacc; a += kLanes) store<kStore>(dst + a * kVec, b);
}

// load_pass reads the accesses of the pass at c0 that lie in the row.
KI void load_pass(VI (&v)[kVpt], const Ein* src, int c0, int lane, int nacc) {
#pragma unroll
  for (int i = 0; i < kVpt; ++i) {
    const int a = c0 + i * kLanes + lane;
    if (a < nacc) v[i] = load<VI, kLoad>(src + a * kVec);
  }
}

#if QUANT
// redux_max is the largest v over the lanes of mask (one instruction).
KI u32 redux_max(u32 v, u32 mask) {
  u32 r;
  asm volatile("redux.sync.max.u32 %0, %1, %2;" : "=r"(r) : "r"(v), "r"(mask));
  return r;
}

// row_max is the largest v over the row's group. A group within a warp
// reduces among its own lanes (its mask), so groups whose rows are past the
// end may have returned; a block-wide group reduces through shared memory
// (its threads share one row and return together).
KI u32 row_max(u32 v) {
  if constexpr (kLanes <= 32) {
    const u32 mask = kLanes == 32 ? 0xffffffffu : ((1u << kLanes) - 1) << ((threadIdx.x & 31) & ~(kLanes - 1));
    return redux_max(v, mask);
  } else {
    __shared__ u32 part[kThreads / 32];
    v = redux_max(v, 0xffffffffu);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    v = 0;
#pragma unroll
    for (int i = 0; i < kThreads / 32; ++i) v = part[i] > v ? part[i] : v;
    return v;
  }
}

// abs_bits is the fp32 bit pattern of |v|: its unsigned order is the order
// of the magnitudes, infinity above every number and NaN above infinity.
KI u32 abs_bits(float v) { return __float_as_uint(v) & 0x7fffffffu; }

// e4m3x2 rounds two floats to e4m3 (nearest even, saturating to ±448) in
// one instruction: lo in the low byte, hi in the next.
KI u32 e4m3x2(float lo, float hi) {
  u16 r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}

// scaled is v / scale, or where the scale is 0 (the row's magnitudes are
// all below 448·2^−150) a zero of v's sign.
KI float scaled(float v, float scale) { return scale > 0.f ? v / scale : copysignf(0.f, v); }

// quantize rounds an access of x to e4m3 with the row's scale.
KI VO quantize(const VI& v, float scale) {
  VO o;
  o.zero();
#pragma unroll
  for (int i = 0; i < kVec; i += 2) {
    const float hi = i + 1 < kVec ? scaled(v.get(i + 1), scale) : 0.f;
    const u32 pair = e4m3x2(scaled(v.get(i), scale), hi);
    o.put(i, of_bits<fp8e4m3>(pair & 0xff));
    if (i + 1 < kVec) o.put(i + 1, of_bits<fp8e4m3>(pair >> 8));
  }
  return o;
}

// nan_access is an access of e4m3 NaNs (0x7f).
KI VO nan_access() {
  VO o;
  o.zero();
#pragma unroll
  for (int i = 0; i < kVec; ++i) o.put(i, of_bits<fp8e4m3>(0x7f));
  return o;
}
#endif

// moe_permute: y[p] (row stride sy) = x[idx[p] / k] (row stride sx) for p <
// rows, rows of h elements; an idx entry outside [0, numel) gives a zero
// row. With QUANT, scales[p] is the row's scale. count, when not null,
// holds the number of leading rows to write.
extern "C" __global__ void __launch_bounds__(kThreads)
moe_permute(Eout* __restrict__ y, long long sy, float* __restrict__ scales, const Ein* __restrict__ x, long long sx,
            const i32* __restrict__ idx, const i32* __restrict__ count, int rows, int numel, int k, int h) {
  wait_prior_grids();
  const unsigned row = blockIdx.x * kRows + threadIdx.x / kLanes;  // < 2^31 + kRows: no wrap
  const int lane = threadIdx.x % kLanes;
  if (row >= (unsigned)rows) return;
  const int p = row;
  if (count != nullptr && p >= *count) return;
  const int f = idx[p];
  const int nacc = h / kVec;
  Eout* dst = y + p * sy;
  if (f < 0 || f >= numel) {
    VO z;
    z.zero();
    fill(dst, lane, nacc, z);
    if (QUANT && lane == 0) scales[p] = 0.f;
    return;
  }
  const Ein* src = x + (long long)(f / k) * sx;
  VI v[kVpt];
#if !QUANT
  for (int c0 = 0; c0 < passes(nacc); c0 += kChunk) {
    load_pass(v, src, c0, lane, nacc);
#pragma unroll
    for (int i = 0; i < kVpt; ++i) {
      const int a = c0 + i * kLanes + lane;
      if (a < nacc) store<kStore>(dst + a * kVec, v[i]);
    }
  }
#else
  u32 m = 0;
  for (int c0 = 0; c0 < passes(nacc); c0 += kChunk) {
    load_pass(v, src, c0, lane, nacc);
#pragma unroll
    for (int i = 0; i < kVpt; ++i) {
      if (c0 + i * kLanes + lane < nacc) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const u32 b = abs_bits(v[i].get(e));
          m = b > m ? b : m;
        }
      }
    }
  }
  m = row_max(m);
  if (m >= 0x7f800000u) {  // a NaN or an infinity in the row
    fill(dst, lane, nacc, nan_access());
    if (lane == 0) scales[p] = __uint_as_float(0x7fc00000u);
    return;
  }
  const float scale = __uint_as_float(m) / 448.f;
  for (int c0 = 0; c0 < passes(nacc); c0 += kChunk) {
    if (!kFits) load_pass(v, src, c0, lane, nacc);
#pragma unroll
    for (int i = 0; i < kVpt; ++i) {
      const int a = c0 + i * kLanes + lane;
      if (a < nacc) store<kStore>(dst + a * kVec, quantize(v[i], scale));
    }
  }
  if (lane == 0) scales[p] = scale;
#endif
}

#else
static_assert(!QUANT, "moe_unpermute does not quantize");

// moe_unpermute: out[t] (row stride so) = Σ_j w[t·k + j]·y[pos[t·k + j]]
// (y's row stride sy) for t < tokens, rows of h elements; a pos entry
// outside [0, prows) is a dropped slot. pos null: slot f reads row f; w
// null: weights of 1.
extern "C" __global__ void __launch_bounds__(kThreads)
moe_unpermute(Eout* __restrict__ out, long long so, const Ein* __restrict__ y, long long sy,
              const i32* __restrict__ pos, const float* __restrict__ w, int tokens, int k, int prows, int h) {
  wait_prior_grids();
  const unsigned row = blockIdx.x * kRows + threadIdx.x / kLanes;  // < 2^31 + kRows: no wrap
  const int lane = threadIdx.x % kLanes;
  if (row >= (unsigned)tokens) return;
  const int t = row;
  const int nacc = h / kVec;
  const long long f0 = (long long)t * k;
  Eout* dst = out + t * so;
  for (int c0 = 0; c0 < passes(nacc); c0 += kChunk) {
    float acc[kVpt][kVec];
#pragma unroll
    for (int i = 0; i < kVpt; ++i) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[i][e] = 0.f;
    }
    for (int j = 0; j < k; ++j) {
      const int p = pos != nullptr ? pos[f0 + j] : (int)(f0 + j);
      if (p < 0 || p >= prows) continue;
      const float wj = w != nullptr ? w[f0 + j] : 1.f;
      const Ein* src = y + p * sy;
      VI v[kVpt];
#pragma unroll
      for (int i = 0; i < kVpt; ++i) {
        const int a = c0 + i * kLanes + lane;
        if (a < nacc) v[i] = load<VI, kLoad>(src + a * kVec);
      }
#pragma unroll
      for (int i = 0; i < kVpt; ++i) {
        if (c0 + i * kLanes + lane < nacc) {
#pragma unroll
          for (int e = 0; e < kVec; ++e) acc[i][e] = fmaf(wj, v[i].get(e), acc[i][e]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kVpt; ++i) {
      const int a = c0 + i * kLanes + lane;
      if (a < nacc) store<kStore>(dst + a * kVec, pack<VO>(acc[i]));
    }
  }
}
#endif
