// act.cu: elementwise and gated activations.
//
// Both kernels are memory-bound streams. The output is cut into items: VEC
// consecutive elements of one row (16 bytes when addresses, row strides and,
// for gated halves, d allow it; fewer otherwise), rows·⌈cols/VEC⌉ items in
// all. A thread takes UNROLL items per pass, a block apart so that a warp
// reads consecutive 16-byte pieces, and issues every load of the pass (two
// per gated item: gate and up) before it uses any; it computes in fp32 and
// stores with an evict-first hint. The host sizes the grid to cover the
// work in one pass or caps it at some waves of resident blocks, and the
// grid-stride loop takes the rest. The last item of a row, when cols is not
// a multiple of VEC, takes a scalar path. Finding an item's row divides by
// a run-time constant, done as a multiply-high and a shift. With SINGLE
// (one item a thread, a grid that covers them all, rows of whole vectors)
// the loop and the scalar path compile away: on the small gated shapes,
// where a thread's one load round trip is most of the kernel, the loads
// then issue 34 SASS instructions in instead of 53 (see launch.go).
//
// The math must cost only a few instructions per element, or it, not
// memory, sets the pace (accurate expf and IEEE division measured 35% below
// the copy rate): the sigmoid is rcp(1 + ex2(−z·log2 e)) with the hardware
// approximations, the exact GELU goes through a fitted erfc whose relative
// error suits the output type (no 1 − erf cancellation in the negative
// tail), and the tanh-GELU is x·σ(2u), which equals ½·x·(1 + tanh u).
// 16-bit inputs are widened and outputs narrowed a 32-bit word (two
// elements) at a time, and the gated kernel's layout and SwiGLU terms are
// compile-time, so no instruction is spent per element on unpacking or on
// selecting, and each gated kernel is one straight path. Finite inputs
// give finite, correctly signed outputs; tails below about e^−87 flush to
// ±0. NaN propagates, also through the clamps (min.NaN / max.NaN).
//
// Defines: ELEM (bf16, f16, float), ACT (0 silu, 1 gelu, 2 gelu_tanh,
// 3 relu, 4 tanh), VEC (elements per access), UNROLL (items per pass),
// EVICT_LAST (16-byte reads carry an L2 evict-last policy; see vload),
// SINGLE (one pass of whole items, see above);
// for act_gated, LAYOUT (0 halves, 1 interleaved with the gate first,
// 2 interleaved with the gate second) and FULL (1: the SwiGLU terms and
// clamps).
#include "kittens.cuh"

typedef ELEM E;
constexpr int kVec = VEC;
constexpr int kUnroll = UNROLL;
constexpr int kMaxBlock = 512;
constexpr int kBytes = kVec * (int)sizeof(E);
constexpr int kLayout = LAYOUT;
constexpr bool kFull = FULL != 0;
constexpr bool kSingle = SINGLE != 0;
static_assert(!kSingle || kUnroll == 1, "SINGLE takes one item a thread");

// The gated layouts (LAYOUT): halves, where the offsets say which half is
// the gate; interleaved with the gate at 2i (kInterGateFirst) or 2i + 1.
constexpr int kHalves = 0;
constexpr int kInterGateFirst = 1;
constexpr bool kInter = kLayout != kHalves;

// V is the VEC elements of an item, moved by one load or store.
using V = Vec<E, kVec>;

// vload reads an item's V. A full 16-byte one is read once through the
// read-only path without allocating in L1 (Cache::stream), unless the kernel
// also writes this memory (kNC false: in-place calls); with EVICT_LAST a
// 16-byte read, in place or not, asks L2 to evict the line last instead
// (Cache::last, a coherent load). The line outlives the kernel, so the
// picker sets EVICT_LAST only where the caller opted in
// (cuda.Device.SetL2EvictLast).
template <bool kNC> KI V vload(const E* p) {
  constexpr Cache c = kBytes != 16 ? Cache::plain : EVICT_LAST ? Cache::last : kNC ? Cache::stream : Cache::plain;
  return load<V, c>(p);
}

// vstore writes a V, 16 bytes with the evict-first (.cs) policy: the output
// is not read again by this kernel, and keeping it from displacing other
// lines measured 3-5% faster than a plain store at large sizes.
KI void vstore(E* p, const V& v) { store<kBytes == 16 ? Cache::stream : Cache::plain>(p, v); }

// Fast hardware approximations: ex2 (2^x, ≤ 2 ulp; results below 2^−126
// flush to 0) and rcp (1/x, ≤ 1 ulp). They keep the math a few
// instructions per element, which a stream at full bandwidth needs.
KI float ex2(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
KI float rcp(float x) { float y; asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }

constexpr float kLog2e = 1.4426950408889634f;

// sigmoid(z) = 1/(1 + e^−z). For z → −∞, e^−z overflows to inf and the
// result is 0; for z → +∞ it is 1; NaN stays NaN.
KI float sigmoid(float z) { return rcp(1.f + ex2(-kLog2e * z)); }

// normal_tail is Φ(−|x|) = ½·erfc(|x|/√2), the standard normal tail. With
// z = |x|/√2 it is Numerical Recipes' form erfc(z) = t·exp(−z² + P(t)),
// t = 1/(1 + z/2), rewritten as t·2^(Q(t) − x²·log2(e)/2) with
// Q = log2(e)·P − 1 (the −1 is the ½), so that ex2 applies directly and z
// is never formed. The exponent keeps the tail's tiny values instead of
// cancelling 1 − erf. fp32 outputs use NR's degree-9 P (relative error
// 1.2e-7; 8e-6 at worst in fp32 arithmetic, where the exponent passes 100);
// 16-bit outputs a degree-5 Chebyshev fit of the same P (7.6e-5, under a
// third of fp16's rounding error), four multiply-adds fewer per element.
KI float normal_tail(float x) {
  const float t = rcp(fmaf(0.35355339059327376f, fabsf(x), 1.f));
  float q;
  if constexpr (sizeof(E) == 4) {
    q = 2.465173006e-01f;
    q = fmaf(q, t, -1.186114907e+00f);
    q = fmaf(q, t, 2.147474527e+00f);
    q = fmaf(q, t, -1.637753129e+00f);
    q = fmaf(q, t, 4.023215771e-01f);
    q = fmaf(q, t, -2.687568665e-01f);
    q = fmaf(q, t, 1.396300495e-01f);
    q = fmaf(q, t, 5.397006273e-01f);
    q = fmaf(q, t, 1.442729235e+00f);
    q = fmaf(q, t, -2.825748205e+00f);
  } else {
    q = 2.859485745e-01f;
    q = fmaf(q, t, -8.893744946e-01f);
    q = fmaf(q, t, 5.330392718e-01f);
    q = fmaf(q, t, 4.454816282e-01f);
    q = fmaf(q, t, 1.450763106e+00f);
    q = fmaf(q, t, -2.825859785e+00f);
  }
  return t * ex2(fmaf(-0.5f * kLog2e * x, x, q));
}

// act applies the activation; alpha scales the sigmoid's argument of SiLU
// (SwiGLU's α) and is unused by the others.
KI float act(float x, float alpha) {
#if ACT == 0
  return x * sigmoid(alpha * x);
#elif ACT == 1
  // x·Φ(x) is x − |x|·Φ(−|x|) for x ≥ 0 and −|x|·Φ(−|x|) for x < 0; the
  // max(x, −0) keeps the sign of a tail that flushes to zero. At x = +inf
  // this is inf − inf·0 = NaN, where torch gives +inf: returning x there
  // cost 5–6% (gelu_and_mul 4096x256), so it is left, and documented
  // (act.GELU).
  return fmaf(-fabsf(x), normal_tail(x), fmaxf(x, -0.f));
#elif ACT == 2
  // ½·(1 + tanh u) = σ(2u), u = √(2/π)·(x + 0.044715·x³); x² overflowing to
  // inf still gives the right limit.
  return x * sigmoid(1.5957691216057308f * x * fmaf(0.044715f, x * x, 1.f));
#elif ACT == 3
  return x < 0.f ? 0.f : x;
#elif ACT == 4
  return tanhf(x);
#else
#error "unknown ACT"
#endif
}

// Item is where one item of VEC outputs lives: its row and first column.
struct Item {
  long long row;
  int col;
};

// Items per row, with the multiplier and shift the host computed so that
// it / d = umulhi(it, mul) >> shr for every it < 2^31 (d ≥ 2): a division
// per item would cost more than the activation.
struct Divider {
  unsigned d, mul, shr;
};

KI Item locate(unsigned it, Divider per_row) {
  const unsigned r = per_row.d == 1 ? it : __umulhi(it, per_row.mul) >> per_row.shr;
  return Item{(long long)r, (int)(it - r * per_row.d) * kVec};
}

// whole reports whether item at is a whole vector of a row of cols (always,
// with SINGLE).
KI bool whole(Item at, int cols) { return kSingle || at.col + kVec <= cols; }

// unary_rows is the body of act_unary; see there.
template <bool kNC>
KI void unary_rows(E* y, const E* x, int cols, long long sy, long long sx, Divider div, unsigned items) {
  const unsigned step = gridDim.x * blockDim.x * kUnroll;
  for (unsigned base = blockIdx.x * blockDim.x * kUnroll + threadIdx.x; base < items; base += step) {
    Item at[kUnroll];
    V in[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      const unsigned it = base + u * blockDim.x;
      at[u] = locate(it, div);
      if (it < items && whole(at[u], cols)) in[u] = vload<kNC>(x + at[u].row * sx + at[u].col);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      const unsigned it = base + u * blockDim.x;
      if (it >= items) break;
      E* ys = y + at[u].row * sy;
      if (whole(at[u], cols)) {
        float f[kVec];
        unpack(in[u], f);
#pragma unroll
        for (int i = 0; i < kVec; i++) f[i] = act(f[i], 1.f);
        vstore(ys + at[u].col, pack<V>(f));
      } else {
        const E* xs = x + at[u].row * sx;
        for (int c = at[u].col; c < cols; c++) ys[c] = from_float<E>(act(to_float(xs[c]), 1.f));
      }
    }
    if constexpr (kSingle) break;
  }
}

// act_unary: y = act(x) over rows of cols elements (row strides sy, sx in
// elements); per_row = ⌈cols/VEC⌉ (with its Divider terms), items =
// rows·per_row. nc is 0 when y is x.
extern "C" __global__ void __launch_bounds__(kMaxBlock)
act_unary(E* y, const E* x, int cols, long long sy, long long sx, unsigned per_row, unsigned div_mul, unsigned div_shr,
          unsigned items, int nc) {
  wait_prior_grids();
  const Divider div{per_row, div_mul, div_shr};
  if (nc)
    unary_rows<true>(y, x, cols, sy, sx, div, items);
  else
    unary_rows<false>(y, x, cols, sy, sx, div, items);
}

// gated_one is one output: act(gate)·up, or with FULL the SwiGLU terms and
// clamps as well. min.NaN / max.NaN keep a NaN operand (fminf would drop
// it).
KI float gated_one(float g, float u, float limit, float alpha, float up_add) {
  if constexpr (kFull) {
    asm("min.NaN.f32 %0, %0, %1;" : "+f"(g) : "f"(limit));
    asm("min.NaN.f32 %0, %0, %1;" : "+f"(u) : "f"(limit));
    asm("max.NaN.f32 %0, %0, %1;" : "+f"(u) : "f"(-limit));
    return act(g, alpha) * (u + up_add);
  } else {
    return act(g, 1.f) * u;
  }
}

// act_gated: y[r, i] = act(gate)·up over rows of d outputs; with FULL, the
// SwiGLU form act(min(gate, limit), alpha)·(clamp(up, ±limit) + up_add).
// Gate and up of output i sit at input columns i·s + g_off and i·s + u_off,
// s = 1 for halves (the offsets are 0 and d, or d and 0 for the gate
// second) and 2 when interleaved (0 and 1, or 1 and 0, as LAYOUT says;
// the vector path takes the order from LAYOUT, the scalar tail from the
// offsets). An interleaved item reads 2·VEC inputs as two Vecs.
// per_row = ⌈d/VEC⌉.
extern "C" __global__ void __launch_bounds__(kMaxBlock)
act_gated(E* y, const E* x, int d, long long sy, long long sx, unsigned per_row, unsigned div_mul, unsigned div_shr,
          unsigned items, int g_off, int u_off, float limit, float alpha, float up_add) {
  wait_prior_grids();
  const Divider div{per_row, div_mul, div_shr};
  const unsigned step = gridDim.x * blockDim.x * kUnroll;
  for (unsigned base = blockIdx.x * blockDim.x * kUnroll + threadIdx.x; base < items; base += step) {
    Item at[kUnroll];
    V a[kUnroll], b[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      const unsigned it = base + u * blockDim.x;
      at[u] = locate(it, div);
      if (it < items && whole(at[u], d)) {
        const E* xs = x + at[u].row * sx;
        const E* pa = kInter ? xs + 2 * at[u].col : xs + g_off + at[u].col;
        const E* pb = kInter ? pa + kVec : xs + u_off + at[u].col;
        a[u] = vload<true>(pa);
        b[u] = vload<true>(pb);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      const unsigned it = base + u * blockDim.x;
      if (it >= items) break;
      const E* xs = x + at[u].row * sx;
      E* ys = y + at[u].row * sy;
      if (whole(at[u], d)) {
        float fa[kVec], fb[kVec], out[kVec];
        unpack(a[u], fa);
        unpack(b[u], fb);
#pragma unroll
        for (int i = 0; i < kVec; i++) {
          if constexpr (kInter) {
            // Inputs 2i and 2i + 1 of the pair fa, fb (indices fixed at compile time).
            const float e0 = 2 * i < kVec ? fa[2 * i] : fb[2 * i - kVec];
            const float e1 = 2 * i + 1 < kVec ? fa[2 * i + 1] : fb[2 * i + 1 - kVec];
            out[i] = kLayout == kInterGateFirst ? gated_one(e0, e1, limit, alpha, up_add)
                                                : gated_one(e1, e0, limit, alpha, up_add);
          } else {
            out[i] = gated_one(fa[i], fb[i], limit, alpha, up_add);
          }
        }
        vstore(ys + at[u].col, pack<V>(out));
      } else {
        const int in_step = kInter ? 2 : 1;
        for (int c = at[u].col; c < d; c++)
          ys[c] = from_float<E>(
              gated_one(to_float(xs[c * in_step + g_off]), to_float(xs[c * in_step + u_off]), limit, alpha, up_add));
      }
    }
    if constexpr (kSingle) break;
  }
}
