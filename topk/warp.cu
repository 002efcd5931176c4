// warp.cu (topk): top-k of short rows (N ≤ 1024, k ≤ 32), the MoE-router
// shape. One warp owns one row and keeps all of it in registers: lane l holds
// chunks of VEC consecutive elements at (c·32 + l)·VEC, loaded as 16-byte
// vectors when the row is aligned, as order keys (see common.cuh).
//
// Selection is a bitwise radix search for the k-th largest key, done on the
// registers: from the top bit down, try setting the bit in the threshold and
// keep it when at least k keys are still ≥ it; a count is a compare per
// register and one redux.sync. The search stops as soon as exactly k keys
// clear the threshold (usually half-way through the bits on real data), or
// runs to the last bit and leaves the exact k-th key. Then every key above the
// threshold is taken, plus the ties at the threshold lowest index first (their
// rank in index order comes from ballots). The k ≤ 32 survivors land one per
// lane as composites and a warp bitonic sort orders them; values are copied
// back from x by index, so they are the input's exact bits.
//
// Defines: DTYPE (float, bf16, f16), IDX (i32, i64), VEC (1 or 16/sizeof(DTYPE)),
// CHUNKS (chunks per lane, CHUNKS·VEC·32 ≥ N), WPB (warps, hence rows, per block).

KI u64 warp_sort_desc(u64 v, int lane) {
#pragma unroll
  for (int size = 2; size <= 32; size <<= 1) {
#pragma unroll
    for (int s = size >> 1; s > 0; s >>= 1) {
      const u64 o = shfl_xor_u64(v, s);
      const bool desc = (lane & size) == 0, lower = (lane & s) == 0;
      v = (lower == desc) ? (v > o ? v : o) : (v < o ? v : o);
    }
  }
  return v;
}

static_assert(VEC == 1 || VEC * sizeof(DTYPE) == 16, "VEC is 1 or a 16-byte vector");

extern "C" __global__ void __launch_bounds__(WPB * 32)
topk_warp(const DTYPE* __restrict__ x, i64 xs, DTYPE* __restrict__ vals, i64 vs, IDX* __restrict__ idx, i64 is,
          int M, int N, int k) {
  wait_prior_grids();
  constexpr int E = CHUNKS * VEC;
  __shared__ u64 slots[WPB][32];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const i64 row = (i64)blockIdx.x * WPB + w;
  if (row >= M) return;  // the whole warp leaves together
  const DTYPE* xr = x + row * xs;

  u32 key[E];
#pragma unroll
  for (int c = 0; c < CHUNKS; c++) {
    const int base = (c * 32 + lane) * VEC;
    if (VEC > 1 && base + VEC <= N) {
      const Vec<DTYPE, VEC> p = load<Vec<DTYPE, VEC>, Cache::stream>(xr + base);
#pragma unroll
      for (int v = 0; v < VEC; v++) key[c * VEC + v] = order_key(p.at(v));
    } else {
#pragma unroll
      for (int v = 0; v < VEC; v++) key[c * VEC + v] = base + v < N ? order_key(xr[base + v]) : 0u;
    }
  }

  // Radix search: p is the largest threshold with at least k keys ≥ p.
  u32 p = 0, cp = (u32)N;
  if (cp != (u32)k) {
    for (int b = KEY_BITS - 1; b >= 0; --b) {
      const u32 t = p | (1u << b);
      u32 c = 0;
#pragma unroll
      for (int j = 0; j < E; j++) c += key[j] >= t;
      c = redux_add(c);
      if (c >= (u32)k) {
        p = t;
        cp = c;
        if (cp == (u32)k) break;
      }
    }
  }

  // Take keys > p, and the lowest-index ties at p to make k.
  u32 gt = 0;
#pragma unroll
  for (int j = 0; j < E; j++) gt += key[j] > p;
  const u32 need = (u32)k - redux_add(gt);
  const u32 lt = lanemask_lt();
  u32 used = 0, tiesBefore = 0;
#pragma unroll
  for (int c = 0; c < CHUNKS; c++) {
    u32 below = 0, all = 0;  // ties of this chunk in lower lanes; in the whole chunk
#pragma unroll
    for (int v = 0; v < VEC; v++) {
      const u32 b = __ballot_sync(0xffffffffu, key[c * VEC + v] == p);
      below += __popc(b & lt);
      all += __popc(b);
    }
    u32 mine = 0;
#pragma unroll
    for (int v = 0; v < VEC; v++) {
      const u32 kv = key[c * VEC + v];
      const bool tie = kv == p;
      const bool take = kv > p || (tie && tiesBefore + below + mine < need);
      mine += tie;
      const u32 m = __ballot_sync(0xffffffffu, take);
      if (take) {
        const u32 e = (u32)((c * 32 + lane) * VEC + v);
        slots[w][used + __popc(m & lt)] = ((u64)kv << 32) | (0xffffffffu - e);
      }
      used += __popc(m);
    }
    tiesBefore += all;
  }
  __syncwarp();

  u64 s = lane < k ? slots[w][lane] : 0ull;
  s = warp_sort_desc(s, lane);
  if (lane < k) {
    const u32 e = 0xffffffffu - (u32)s;
    vals[row * vs + lane] = xr[e];
    idx[row * is + lane] = (IDX)e;
  }
}
