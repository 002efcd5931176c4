// router.cu (moe): router top-k. LANES lanes of a warp (a power of two;
// ROWS = THREADS / LANES rows a block) hold one token's row of E logits,
// lane l holding CHUNKS chunks of VEC consecutive experts at
// (c·LANES + l)·VEC, loaded as one vector each where the row is 16-byte
// aligned.
//
// Each expert gets a selection score (its logit with softmax scoring; its
// sigmoid, plus the bias, with sigmoid scoring) and a composite: an order key
// of the score in the high 32 bits (NaN lowest, −0 as +0) and the inverted
// expert id in the low bits. Composites are distinct and the larger ranks
// first (higher score, then lower id); 0 marks padding and experts taken or
// masked. Selection is K rounds of a row-wide maximum of the composites (a
// butterfly over the row's lanes), each taking the winner; the rounds are
// unrolled up to KCAP ≥ K so that round r's result lands in a register of
// lane r mod LANES. With GROUPED the scores also go to shared memory: lane l
// scores groups l, l + LANES, ... (the sum of their two best scores), the
// same rounds pick the TopKGroups best, and the experts of the others are
// masked.
//
// Sigmoid selection scores are computed with explicitly rounded fp32
// operations (never contracted into FMAs), the same sequence as the Go
// reference's routerExp and routerSigmoid, whose constants are the bit
// patterns below: selection matches the reference exactly.
//
// Defines: DTYPE (float, bf16, f16), VEC (1 or up to 16/sizeof(DTYPE)),
// LANES, CHUNKS, KCAP (a power of two ≥ K), THREADS, SIGMOID, BIAS, GROUPED.
#include "kittens.cuh"

constexpr int SLOTS = CHUNKS * VEC;                             // experts a lane holds
constexpr int ROWS = THREADS / LANES;                           // rows a block
constexpr int PER = (KCAP + LANES - 1) / LANES;                 // results a lane keeps
constexpr int GMAX = LANES * SLOTS / 2 > 0 ? LANES * SLOTS / 2 : 1;  // most groups a row (E/2)
constexpr int GPL = (GMAX + LANES - 1) / LANES;                 // groups a lane scores
constexpr int FLAG_RENORM = 1, FLAG_SHARED = 2;                 // the flags argument
static_assert(LANES >= 1 && LANES <= 32 && (LANES & (LANES - 1)) == 0, "LANES is a power of two ≤ 32");
static_assert(VEC == 1 || VEC * sizeof(DTYPE) <= 16, "VEC fits a 16-byte vector");

KI float router_f(u32 b) { return __uint_as_float(b); }

// router_exp is e^y: y = n·ln 2 + r, n = rint(y·log2 e) after clamping y to
// [−104, 89], e^r by a degree-7 Taylor polynomial, then two exact scalings
// by powers of two (the second rounds once where the result is subnormal or
// overflows).
KI float router_exp(float y) {
  if (y != y) return y;
  y = fminf(fmaxf(y, -104.f), 89.f);
  const float n = rintf(__fmul_rn(y, router_f(0x3fb8aa3bu)));
  const float r = __fsub_rn(__fsub_rn(y, __fmul_rn(n, router_f(0x3f317200u))), __fmul_rn(n, router_f(0x35bfbe8eu)));
  float p = router_f(0x39500d01u);
  p = __fadd_rn(__fmul_rn(p, r), router_f(0x3ab60b61u));
  p = __fadd_rn(__fmul_rn(p, r), router_f(0x3c088889u));
  p = __fadd_rn(__fmul_rn(p, r), router_f(0x3d2aaaabu));
  p = __fadd_rn(__fmul_rn(p, r), router_f(0x3e2aaaabu));
  p = __fadd_rn(__fmul_rn(p, r), router_f(0x3f000000u));
  p = __fadd_rn(__fmul_rn(p, r), router_f(0x3f800000u));
  p = __fadd_rn(__fmul_rn(p, r), router_f(0x3f800000u));
  const int ni = (int)n, h = ni / 2;
  return __fmul_rn(__fmul_rn(p, __int_as_float((h + 127) << 23)), __int_as_float((ni - h + 127) << 23));
}
// router_sigmoid is σ(x) from t = e^−|x|: 1/(1 + t) for x ≥ 0, t/(1 + t)
// below, which keeps its relative accuracy where σ is subnormal.
KI float router_sigmoid(float x) {
  const float t = router_exp(-fabsf(x)), d = __fadd_rn(1.f, t);
  return __fdiv_rn(x >= 0.f ? 1.f : t, d);
}

// router_order maps a score to a key whose unsigned order is selection's.
KI u32 router_order(float f) {
  u32 u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0u;  // NaN: below every number
  if (u == 0x80000000u) u = 0;                      // -0 ties +0
  return u ^ ((u & 0x80000000u) ? 0xffffffffu : 0x80000000u);
}
KI u64 router_comp(float f, int id) { return ((u64)router_order(f) << 32) | (u64)(0xffffffffu - (u32)id); }
KI int router_id(u64 c) { return (int)(0xffffffffu - (u32)c); }

// router_row_max is the largest composite of the row's LANES lanes.
KI u64 router_row_max(u64 v) {
#pragma unroll
  for (int o = LANES / 2; o > 0; o >>= 1) {
    const u32 lo = __shfl_xor_sync(0xffffffffu, (u32)v, o), hi = __shfl_xor_sync(0xffffffffu, (u32)(v >> 32), o);
    const u64 t = ((u64)hi << 32) | lo;
    v = t > v ? t : v;
  }
  return v;
}
template <int N> KI u64 router_local_max(const u64 (&c)[N]) {
  u64 m = 0;
#pragma unroll
  for (int i = 0; i < N; i++) m = c[i] > m ? c[i] : m;
  return m;
}

extern "C" __global__ void __launch_bounds__(THREADS)
moe_router(const DTYPE* __restrict__ x, i64 xs, const float* __restrict__ bias, float* __restrict__ w, i64 ws,
           i32* __restrict__ ids, i64 is, int T, int E, int k, int gsize, int ngroup, int kgroup, float scale,
           int flags) {
  wait_prior_grids();
  const int lane = threadIdx.x & 31, l = lane & (LANES - 1), first = lane - l, rb = threadIdx.x / LANES;
  const i64 row = (i64)blockIdx.x * ROWS + rb;
  const bool live = row < T;  // a lane past the last row still takes part in its row's shuffles
  const DTYPE* xr = x + (live ? row : 0) * xs;

  float v[SLOTS];
#pragma unroll
  for (int c = 0; c < CHUNKS; c++) {
    const int e0 = (c * LANES + l) * VEC;
    if (VEC > 1 && live && e0 + VEC <= E) {
      const Vec<DTYPE, VEC> p = load<Vec<DTYPE, VEC>, Cache::stream>(xr + e0);
#pragma unroll
      for (int j = 0; j < VEC; j++) v[c * VEC + j] = p.get(j);
    } else {
#pragma unroll
      for (int j = 0; j < VEC; j++) v[c * VEC + j] = live && e0 + j < E ? to_float(xr[e0 + j]) : 0.f;
    }
  }
#define EXPERT(i) ((((i) / VEC) * LANES + l) * VEC + (i) % VEC)

  // val: what the weight is made of (softmax: exp(x − max); sigmoid: σ(x)).
  float val[SLOTS], key[SLOTS];
  u64 comp[SLOTS];
#if SIGMOID
#pragma unroll
  for (int i = 0; i < SLOTS; i++) {
    const int e = EXPERT(i);
    val[i] = router_sigmoid(v[i]);
    key[i] = val[i];
#if BIAS
    if (live && e < E) key[i] = __fadd_rn(val[i], bias[e]);
#endif
    comp[i] = live && e < E ? router_comp(key[i], e) : 0ull;
  }
#else
  float m = -kinf();
#pragma unroll
  for (int i = 0; i < SLOTS; i++)
    if (live && EXPERT(i) < E) m = fmaxf(m, v[i]);
  m = group_max<LANES>(m);
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < SLOTS; i++) {
    const int e = EXPERT(i);
    val[i] = live && e < E ? expf(v[i] - m) : 0.f;
    sum += val[i];
    key[i] = v[i];
    comp[i] = live && e < E ? router_comp(key[i], e) : 0ull;
  }
  sum = group_sum<LANES>(sum);
#endif

#if GROUPED
  __shared__ float skey[ROWS][LANES * SLOTS];
  __shared__ u8 skept[ROWS][GMAX];
#pragma unroll
  for (int i = 0; i < SLOTS; i++)
    if (EXPERT(i) < E) skey[rb][EXPERT(i)] = key[i];
#pragma unroll
  for (int i = 0; i < GPL; i++)
    if (i * LANES + l < GMAX) skept[rb][i * LANES + l] = 0;
  __syncwarp();
  u64 gc[GPL];
#pragma unroll
  for (int i = 0; i < GPL; i++) {
    const int g = i * LANES + l;
    gc[i] = 0;
    if (live && g < ngroup) {
      u32 o1 = 0, o2 = 0;  // the two best scores' keys; a NaN until found
      float f1 = knan(), f2 = knan();
      for (int j = 0; j < gsize; j++) {
        const float f = skey[rb][g * gsize + j];
        const u32 o = router_order(f);
        if (o > o1) {
          o2 = o1, f2 = f1, o1 = o, f1 = f;
        } else if (o > o2) {
          o2 = o, f2 = f;
        }
      }
      gc[i] = router_comp(__fadd_rn(f1, f2), g);
    }
  }
  for (int r = 0; r < kgroup; r++) {
    const u64 best = router_row_max(router_local_max(gc));
#pragma unroll
    for (int i = 0; i < GPL; i++)
      if (gc[i] == best) gc[i] = 0;
    if (live && l == 0) skept[rb][router_id(best)] = 1;
  }
  __syncwarp();
#pragma unroll
  for (int i = 0; i < SLOTS; i++)
    if (comp[i] != 0 && !skept[rb][EXPERT(i) / gsize]) comp[i] = 0;
#endif

  // K rounds: round r's expert and weight go to lane r mod LANES.
  int rid[PER];
  float rval[PER], total = 0.f;
#pragma unroll
  for (int i = 0; i < PER; i++) rid[i] = 0, rval[i] = 0.f;
#pragma unroll
  for (int r = 0; r < KCAP; r++) {
    if (r < k) {
      const u64 best = router_row_max(router_local_max(comp));
      float mine = 0.f;
#pragma unroll
      for (int i = 0; i < SLOTS; i++)
        if (comp[i] == best) comp[i] = 0, mine = val[i];
      const int e = router_id(best);
      float s = __shfl_sync(0xffffffffu, mine, first + ((e / VEC) & (LANES - 1)));
#if !SIGMOID
      s = s / sum;
#endif
      total += s;
      if (l == r % LANES) rid[r / LANES] = e, rval[r / LANES] = s;
    }
  }
#undef EXPERT
  if (!live) return;
  const float denom = (flags & FLAG_RENORM) ? total + 1e-20f : 1.f;
  i32* idr = ids + row * is;
  float* wr = w + row * ws;
#pragma unroll
  for (int i = 0; i < PER; i++) {
    const int r = i * LANES + l;
    if (r < k) idr[r] = rid[i], wr[r] = rval[i] / denom * scale;
  }
  if ((flags & FLAG_SHARED) && l == 0) idr[k] = E, wr[k] = 1.f;
}
