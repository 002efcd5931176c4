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
// a run-time constant, done as a multiply-high and a shift.
//
// The math must cost only a few instructions per element, or it, not
// memory, sets the pace (accurate expf and IEEE division measured 35% below
// the copy rate): the sigmoid is rcp(1 + ex2(−z·log2 e)) with the hardware
// approximations, the exact GELU goes through a Chebyshev erfc of relative
// error ~1e-7 (no 1 − erf cancellation in the negative tail), and the
// tanh-GELU is x·σ(2u), which equals ½·x·(1 + tanh u). Finite inputs give
// finite, correctly signed outputs; tails below about e^−87 flush to ±0.
// NaN propagates, also through the clamps (min.NaN / max.NaN).
//
// Defines: ELEM (bf16, f16, float), ACT (0 silu, 1 gelu, 2 gelu_tanh,
// 3 relu, 4 tanh), VEC (elements per access), UNROLL (items per pass).
#include "kittens.cuh"

typedef ELEM E;
constexpr int kVec = VEC;
constexpr int kUnroll = UNROLL;
constexpr int kMaxBlock = 512;

// Vec is VEC elements read or written by one instruction.
struct alignas(kVec * sizeof(E)) Vec { E v[kVec]; };

// store_stream writes 16 bytes with the evict-first (.cs) policy: the
// output is not read again by this kernel, and keeping it from displacing
// other lines measured 3-5% faster than a plain store at large sizes.
KI void store_stream(E* p, const Pack<E>& v) {
  const uint4 u = *reinterpret_cast<const uint4*>(&v);
  asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(u.x), "r"(u.y), "r"(u.z), "r"(u.w) : "memory");
}

// vload reads a Vec; a full 16-byte one goes through load_pack, which skips
// L1, unless the kernel also writes this memory (nc false: in-place calls).
KI Vec vload(const E* p, bool nc) {
  Vec r;
  if constexpr (sizeof(Vec) == 16) {
    Pack<E> q = nc ? load_pack(p) : load_pack_rw(p);
#pragma unroll
    for (int i = 0; i < kVec; i++) r.v[i] = q.v[i];
  } else {
    r = *reinterpret_cast<const Vec*>(p);
  }
  return r;
}

// vstore writes a Vec, 16 bytes through store_stream.
KI void vstore(E* p, const Vec& v) {
  if constexpr (sizeof(Vec) == 16) {
    Pack<E> q;
#pragma unroll
    for (int i = 0; i < kVec; i++) q.v[i] = v.v[i];
    store_stream(p, q);
  } else {
    *reinterpret_cast<Vec*>(p) = v;
  }
}

// Fast hardware approximations: ex2 (2^x, ≤ 2 ulp; results below 2^−126
// flush to 0) and rcp (1/x, ≤ 1 ulp). They keep the math a few
// instructions per element, which a stream at full bandwidth needs.
KI float ex2(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
KI float rcp(float x) { float y; asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }

constexpr float kLog2e = 1.4426950408889634f;

// sigmoid(z) = 1/(1 + e^−z). For z → −∞, e^−z overflows to inf and the
// result is 0; for z → +∞ it is 1; NaN stays NaN.
KI float sigmoid(float z) { return rcp(1.f + ex2(-kLog2e * z)); }

// erfc_pos is erfc(z) for z ≥ 0 by the Chebyshev-fitted form
// t·exp(−z² + P(t)), t = 1/(1 + z/2), relative error about 1.2e-7 over the
// whole range (the classic fit of Numerical Recipes' erfcc); the exponent
// keeps the tail's tiny values instead of cancelling 1 − erf.
KI float erfc_pos(float z) {
  const float t = rcp(fmaf(0.5f, z, 1.f));
  float p = 0.17087277f;
  p = fmaf(p, t, -0.82215223f);
  p = fmaf(p, t, 1.48851587f);
  p = fmaf(p, t, -1.13520398f);
  p = fmaf(p, t, 0.27886807f);
  p = fmaf(p, t, -0.18628806f);
  p = fmaf(p, t, 0.09678418f);
  p = fmaf(p, t, 0.37409196f);
  p = fmaf(p, t, 1.00002368f);
  p = fmaf(p, t, -1.26551223f);
  return t * ex2(kLog2e * fmaf(-z, z, p));
}

// act applies the activation; alpha scales the sigmoid's argument of SiLU
// (SwiGLU's α) and is unused by the others.
KI float act(float x, float alpha) {
#if ACT == 0
  return x * sigmoid(alpha * x);
#elif ACT == 1
  // ½·x·(1 + erf(x/√2)) = ½·x·erfc(−x/√2), and erfc(−z) = 2 − erfc(z).
  const float h = 0.5f * x, e = erfc_pos(0.70710678118654752f * fabsf(x));
  return x >= 0.f ? fmaf(-h, e, x) : h * e;
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

// act_unary: y = act(x) over rows of cols elements (row strides sy, sx in
// elements); per_row = ⌈cols/VEC⌉ (with its Divider terms), items =
// rows·per_row. nc is 0 when y is x.
extern "C" __global__ void __launch_bounds__(kMaxBlock)
act_unary(E* y, const E* x, int cols, long long sy, long long sx, unsigned per_row, unsigned div_mul, unsigned div_shr,
          unsigned items, int nc) {
  const Divider div{per_row, div_mul, div_shr};
  const unsigned step = gridDim.x * blockDim.x * kUnroll;
  for (unsigned base = blockIdx.x * blockDim.x * kUnroll + threadIdx.x; base < items; base += step) {
    Item at[kUnroll];
    Vec in[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      const unsigned it = base + u * blockDim.x;
      at[u] = locate(it, div);
      if (it < items && at[u].col + kVec <= cols) in[u] = vload(x + at[u].row * sx + at[u].col, nc != 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      const unsigned it = base + u * blockDim.x;
      if (it >= items) break;
      const E* xs = x + at[u].row * sx;
      E* ys = y + at[u].row * sy;
      if (at[u].col + kVec <= cols) {
        Vec out;
#pragma unroll
        for (int i = 0; i < kVec; i++) out.v[i] = from_float<E>(act(to_float(in[u].v[i]), 1.f));
        vstore(ys + at[u].col, out);
      } else {
        for (int c = at[u].col; c < cols; c++) ys[c] = from_float<E>(act(to_float(xs[c]), 1.f));
      }
    }
  }
}

// gated_one is one output: act(gate)·up, or with kFull the SwiGLU terms
// and clamps as well. min.NaN / max.NaN keep a NaN operand (fminf would
// drop it).
template <bool kFull> KI E gated_one(float g, float u, float limit, float alpha, float up_add) {
  if constexpr (kFull) {
    asm("min.NaN.f32 %0, %0, %1;" : "+f"(g) : "f"(limit));
    asm("min.NaN.f32 %0, %0, %1;" : "+f"(u) : "f"(limit));
    asm("max.NaN.f32 %0, %0, %1;" : "+f"(u) : "f"(-limit));
    return from_float<E>(act(g, alpha) * (u + up_add));
  } else {
    return from_float<E>(act(g, 1.f) * u);
  }
}

// gated_rows is the body of act_gated; see there.
template <bool kFull>
KI void gated_rows(E* y, const E* x, int d, long long sy, long long sx, Divider div, unsigned items, int interleaved,
                   int gate_second, float limit, float alpha, float up_add) {
  const int g_off = interleaved ? gate_second : (gate_second ? d : 0);
  const int u_off = interleaved ? 1 - gate_second : (gate_second ? 0 : d);
  const int in_step = interleaved ? 2 : 1;
  const unsigned step = gridDim.x * blockDim.x * kUnroll;
  for (unsigned base = blockIdx.x * blockDim.x * kUnroll + threadIdx.x; base < items; base += step) {
    Item at[kUnroll];
    Vec a[kUnroll], b[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      const unsigned it = base + u * blockDim.x;
      at[u] = locate(it, div);
      if (it < items && at[u].col + kVec <= d) {
        const E* xs = x + at[u].row * sx;
        const E* pa = interleaved ? xs + 2 * at[u].col : xs + g_off + at[u].col;
        const E* pb = interleaved ? pa + kVec : xs + u_off + at[u].col;
        a[u] = vload(pa, true);
        b[u] = vload(pb, true);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      const unsigned it = base + u * blockDim.x;
      if (it >= items) break;
      const E* xs = x + at[u].row * sx;
      E* ys = y + at[u].row * sy;
      if (at[u].col + kVec <= d) {
        Vec out;
#pragma unroll
        for (int i = 0; i < kVec; i++) {
          // Interleaved: inputs 2i and 2i + 1 of the pair a, b (indices fixed at compile time).
          const E e0 = 2 * i < kVec ? a[u].v[2 * i] : b[u].v[2 * i - kVec];
          const E e1 = 2 * i + 1 < kVec ? a[u].v[2 * i + 1] : b[u].v[2 * i + 1 - kVec];
          const E g = interleaved ? (gate_second ? e1 : e0) : a[u].v[i];
          const E up = interleaved ? (gate_second ? e0 : e1) : b[u].v[i];
          out.v[i] = gated_one<kFull>(to_float(g), to_float(up), limit, alpha, up_add);
        }
        vstore(ys + at[u].col, out);
      } else {
        for (int c = at[u].col; c < d; c++)
          ys[c] = gated_one<kFull>(to_float(xs[c * in_step + g_off]), to_float(xs[c * in_step + u_off]), limit,
                                   alpha, up_add);
      }
    }
  }
}

// act_gated: y[r, i] = act(gate)·up over rows of d outputs; with full, the
// SwiGLU form act(min(gate, limit), alpha)·(clamp(up, ±limit) + up_add).
// Halves: gate at column i (d + i when gate_second), up at d + i (i).
// Interleaved: gate at 2i (2i + 1 when gate_second), up at 2i + 1 (2i); an
// item then reads 2·VEC inputs as two Vecs. per_row = ⌈d/VEC⌉.
extern "C" __global__ void __launch_bounds__(kMaxBlock)
act_gated(E* y, const E* x, int d, long long sy, long long sx, unsigned per_row, unsigned div_mul, unsigned div_shr,
          unsigned items, int interleaved, int gate_second, int full, float limit, float alpha, float up_add) {
  const Divider div{per_row, div_mul, div_shr};
  if (full)
    gated_rows<true>(y, x, d, sy, sx, div, items, interleaved, gate_second, limit, alpha, up_add);
  else
    gated_rows<false>(y, x, d, sy, sx, div, items, interleaved, gate_second, limit, alpha, up_add);
}
