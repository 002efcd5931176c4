// radix.cu (topk): top-k of long rows (vocabulary logits) and of any row the
// warp kernel does not take (k > 32). One thread-block cluster of C blocks
// owns a row; block r of the cluster scans the contiguous slice
// [r·slice, (r+1)·slice).
//
// It is a radix select, one byte at a time, on the composite of each element
// (order key, then inverted index; see common.cuh). Because composites are
// distinct, selecting the k-th largest composite yields exactly k elements and
// settles ties by index with no separate tie pass. Each pass histograms the
// next byte of the elements that still match the selected prefix: warps count
// into nsub sub-histograms in shared memory (warp w into w mod nsub), folded
// into the block's histogram at the end of the pass. After a cluster barrier
// every block sums the C histograms over distributed shared memory and runs
// the same suffix scan, so all blocks agree on the next byte without another
// barrier. Elements whose prefix now ranks above the selected one are
// winners: they are appended, in the pass after their selection, to a list in
// block 0's shared memory (remote atomics). The search stops as soon as the
// selected prefix holds exactly the k-th element boundary (often after 2 or 3
// bytes), and the last pass appends the rest.
//
// Data: the first two passes read the slice from global memory (the second
// mostly from L2). While the prefixes and the next byte lie inside the order
// key, as on these passes, the per-element work uses 32-bit masks (KeyPass)
// and skips a whole group of loads when no lane holds a candidate. The second
// pass also copies the block's candidates, whose count the first pass's local
// histogram already gave, into a shared buffer when they fit; later passes
// then touch only that buffer. Rows whose candidates do not fit (heavy ties)
// keep reading global memory: slower, still exact. Finally block 0 sorts the k
// composites (bitonic, in shared memory) and writes values (copied from x by
// index, so bit-exact) and indices.
//
// Histograms are double-buffered: pass t writes buffer t&1 while the other
// blocks may still be reading buffer (t−1)&1, and a pass's writes are ordered
// before the remote reads by the one cluster barrier between them.
//
// Defines: DTYPE, IDX, VEC (1 or 16/sizeof(DTYPE)), THREADS (≥ 256), UNROLL,
// MATCH (1: lanes combine equal bytes with match.any before counting),
// FASTKEY (1: the 32-bit KeyPass path). The Go side sets MATCH 0 and FASTKEY 1,
// the faster pair on an H200; both settings are exact.
// Dynamic shared memory: k2 survivors and cap buffer entries (u64 each), then
// (2 + nsub)·256 u32 histogram words.

#define NB 256
#define MAX_CLUSTER 8

KI u32 cl_load_u32(u32 addr) {
  u32 v;
  asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(addr));
  return v;
}
KI u32 cl_atomic_add(u32 addr, u32 v) {
  u32 old;
  asm volatile("atom.shared::cluster.add.u32 %0, [%1], %2;" : "=r"(old) : "r"(addr), "r"(v) : "memory");
  return old;
}
KI u32 smem_add(u32* p, u32 v) {
  u32 old;
  asm volatile("atom.shared.add.u32 %0, [%1], %2;" : "=r"(old) : "r"(smem_addr(p)), "r"(v) : "memory");
  return old;
}
KI void cl_store_u64(u32 addr, u64 v) {
  asm volatile("st.shared::cluster.u64 [%0], %1;" :: "r"(addr), "l"(v) : "memory");
}

// Pass describes one pass: candidates are the elements whose first dprev
// composite bits equal pprev; of those, the ones whose first d bits exceed p
// (or equal it, on the final pass) are winners, and the ones equal to p are
// histogrammed on their next byte (and optionally buffered).
struct Pass {
  u64 pprev, p;
  int dprev, d, tb;  // tb: total composite bits
  bool fin, build;
};

KI u64 prefix(u64 comp, int d, int tb) { return d == 0 ? 0ull : comp >> (tb - d); }

// Shared state of one block.
struct Block {
  u32* sub;      // this warp's sub-histogram for the pass
  u64* buf;      // candidate buffer
  u32* nbuf;     // its fill
  u32 survAddr;  // block 0's survivor list (cluster address)
  u32 nsurvAddr; // block 0's survivor count (cluster address)
};

// record files one element's verdict, for the whole warp at once: a next
// (still a candidate) is counted under its next byte dig in the warp's
// sub-histogram and, when the pass builds the buffer, copied there; a winner
// is appended to block 0's survivor list.
KI void record(bool win, bool next, u32 dig, u64 comp, const Pass& s, const Block& b, int lane) {
  const u32 lt = lanemask_lt();
  if (!s.fin) {
#if MATCH
    const u32 same = match_any(next ? dig : 0xffffffffu);
    if (next && (same & lt) == 0) smem_add(&b.sub[dig], (u32)__popc(same));
#else
    if (next) smem_add(&b.sub[dig], 1u);
#endif
  }
  const u32 wm = __ballot_sync(0xffffffffu, win);
  if (wm) {
    u32 base = 0;
    if (lane == 0) base = cl_atomic_add(b.nsurvAddr, __popc(wm));
    base = __shfl_sync(0xffffffffu, base, 0);
    if (win) cl_store_u64(b.survAddr + 8u * (base + __popc(wm & lt)), comp);
  }
  if (s.build) {
    const u32 bm = __ballot_sync(0xffffffffu, next);
    if (bm) {
      u32 base = 0;
      if (lane == 0) base = smem_add(b.nbuf, (u32)__popc(bm));
      base = __shfl_sync(0xffffffffu, base, 0);
      if (next) b.buf[base + __popc(bm & lt)] = comp;
    }
  }
}

// visit handles one element given as a composite; every lane of the warp
// must call it together.
KI void visit(u64 comp, bool valid, const Pass& s, const Block& b, int lane) {
  const bool cand = valid && prefix(comp, s.dprev, s.tb) == s.pprev;
  if (!__any_sync(0xffffffffu, cand)) return;
  const u64 pre = prefix(comp, s.d, s.tb);
  const bool win = cand && (pre > s.p || (s.fin && pre == s.p));
  const bool next = cand && !s.fin && pre == s.p;
  const u32 dig = s.fin ? 0u : (u32)(comp >> (s.tb - s.d - 8)) & (NB - 1);
  record(win, next, dig, comp, s, b, lane);
}

// KeyPass restates a pass whose prefixes and next byte all lie inside the
// order key (the passes that read global memory, on all but tie-heavy rows)
// as 32-bit masks and values, so the per-element work needs no 64-bit shifts.
struct KeyPass {
  u32 maskPrev, cmpPrev, mask, cmp;
  int shift;  // the next byte is (key >> shift) & 255
};

// key_mask is the mask of the first d bits of an order key.
KI u32 key_mask(int d) {
  const u64 ones = (1ull << KEY_BITS) - 1;
  return (u32)(ones & ~((1ull << (KEY_BITS - d)) - 1));
}

// key_pass builds the KeyPass of s; it is meaningful when s.d ≤ KEY_BITS
// (and, unless s.fin, s.d + 8 ≤ KEY_BITS).
KI KeyPass key_pass(const Pass& s) {
  const int dprev = s.dprev < KEY_BITS ? s.dprev : KEY_BITS, d = s.d < KEY_BITS ? s.d : KEY_BITS;
  KeyPass kp;
  kp.maskPrev = key_mask(dprev);
  kp.cmpPrev = (u32)(s.pprev << (KEY_BITS - dprev));
  kp.mask = key_mask(d);
  kp.cmp = (u32)(s.p << (KEY_BITS - d));
  kp.shift = s.d + 8 <= KEY_BITS ? KEY_BITS - s.d - 8 : 0;
  return kp;
}

// visit_key is visit for a KeyPass; e is the element's column.
KI void visit_key(u32 key, u32 e, bool valid, const Pass& s, const KeyPass& kp, const Block& b, int lane, int ib,
                  u64 imax) {
  const bool cand = valid && (key & kp.maskPrev) == kp.cmpPrev;
  if (!__any_sync(0xffffffffu, cand)) return;
  const u32 hi = key & kp.mask;
  const bool win = cand && (hi > kp.cmp || (s.fin && hi == kp.cmp));
  const bool next = cand && !s.fin && hi == kp.cmp;
  record(win, next, (key >> kp.shift) & (NB - 1), ((u64)key << ib) | (imax - e), s, b, lane);
}

static_assert(VEC == 1 || VEC * sizeof(DTYPE) == 16, "VEC is 1 or a 16-byte vector");
static_assert(THREADS >= NB && THREADS % 32 == 0, "the bin scan needs 256 threads");

extern "C" __global__ void __launch_bounds__(THREADS, 1)
topk_radix(const DTYPE* __restrict__ x, i64 xs, DTYPE* __restrict__ vals, i64 vs, IDX* __restrict__ idx, i64 is,
           int M, int N, int k, int ib, int slice, int cap, int k2, int nsub) {
  wait_prior_grids();
  extern __shared__ __align__(16) u8 smem[];
  u64* surv = reinterpret_cast<u64*>(smem);
  u64* buf = surv + k2;
  u32* hist = reinterpret_cast<u32*>(buf + cap);  // two local histograms
  u32* subs = hist + 2 * NB;                      // nsub sub-histograms
  __shared__ u32 wsum[NB / 32];
  __shared__ u32 ctl[6];  // selected bin, its count, winners above it, its local count, nsurv, nbuf
  enum { SEL_BIN, SEL_CNT, SEL_ABOVE, SEL_LOCAL, NSURV, NBUF };

  const int tid = threadIdx.x, lane = tid & 31;
  const u32 rank = cluster_ctarank(), C = cluster_nctarank();
  const int lo = (int)rank * slice, hi = N < lo + slice ? N : lo + slice;
  const int tb = KEY_BITS + ib;
  const u64 imax = ib >= 32 ? 0xffffffffull : ((1ull << ib) - 1);

  Block blk;
  blk.sub = subs + ((tid >> 5) & (nsub - 1)) * NB;
  blk.buf = buf;
  blk.nbuf = &ctl[NBUF];
  blk.survAddr = cluster_map(surv, 0);
  blk.nsurvAddr = cluster_map(&ctl[NSURV], 0);

  for (i64 row = blockIdx.y; row < M; row += gridDim.y) {
    const DTYPE* xr = x + row * xs;
    for (int i = tid; i < nsub * NB; i += THREADS) subs[i] = 0;
    if (tid == 0) ctl[NSURV] = ctl[NBUF] = 0;
    cluster_sync();  // everyone has started and reset; the survivor list is empty

    Pass s{0ull, 0ull, 0, 0, tb, false, false};
    u32 above = 0;
    bool fromBuf = false;
    for (int pass = 0;; pass++) {
      u32* local = hist + (pass & 1) * NB;
      if (fromBuf) {
        const int n = (int)ctl[NBUF];
        for (int j0 = 0; j0 < n; j0 += THREADS) {
          const int j = j0 + tid;
          visit(j < n ? buf[j] : 0ull, j < n, s, blk, lane);
        }
      } else {
        const bool keyOnly = FASTKEY && s.d <= KEY_BITS && (s.fin || s.d + 8 <= KEY_BITS);
        const KeyPass kp = key_pass(s);
        for (int s0 = lo; s0 < hi; s0 += THREADS * VEC * UNROLL) {
          DTYPE v[UNROLL][VEC];
#pragma unroll
          for (int u = 0; u < UNROLL; u++) {
            const int e0 = s0 + (u * THREADS + tid) * VEC;
            if (VEC > 1 && e0 + VEC <= hi) {
              const Vec<DTYPE, VEC> pk = load<Vec<DTYPE, VEC>, Cache::stream>(xr + e0);
#pragma unroll
              for (int q = 0; q < VEC; q++) v[u][q] = pk.at(q);
            } else {
#pragma unroll
              for (int q = 0; q < VEC; q++) v[u][q] = e0 + q < hi ? xr[e0 + q] : DTYPE{};
            }
          }
          if (keyOnly) {
            // Skip the whole group when no lane holds a candidate (the
            // common case after the first pass).
            u32 kk[UNROLL][VEC];
            bool any = false;
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
#pragma unroll
              for (int q = 0; q < VEC; q++) {
                const int e = s0 + (u * THREADS + tid) * VEC + q;
                kk[u][q] = order_key(v[u][q]);
                any |= e < hi && (kk[u][q] & kp.maskPrev) == kp.cmpPrev;
              }
            }
            if (__any_sync(0xffffffffu, any)) {
#pragma unroll
              for (int u = 0; u < UNROLL; u++) {
#pragma unroll
                for (int q = 0; q < VEC; q++) {
                  const int e = s0 + (u * THREADS + tid) * VEC + q;
                  visit_key(kk[u][q], (u32)e, e < hi, s, kp, blk, lane, ib, imax);
                }
              }
            }
          } else {
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
#pragma unroll
              for (int q = 0; q < VEC; q++) {
                const int e = s0 + (u * THREADS + tid) * VEC + q;
                const u64 comp = ((u64)order_key(v[u][q]) << ib) | (imax - (u64)(u32)e);
                visit(comp, e < hi, s, blk, lane);
              }
            }
          }
        }
      }
      if (s.fin) break;
      if (s.build) fromBuf = true;
      // Fold the sub-histograms into this pass's local histogram, and clear
      // them for the next pass.
      __syncthreads();
      for (int i = tid; i < NB; i += THREADS) {
        u32 c = 0;
        for (int h = 0; h < nsub; h++) {
          c += subs[h * NB + i];
          subs[h * NB + i] = 0;
        }
        local[i] = c;
      }
      cluster_sync();  // all local histograms (and buffer fills) are complete

      // Merge the C histograms; scan bins from the top; pick the bin holding
      // the k-th composite. Thread t < 256 owns bin 255 − t.
      const int bin = NB - 1 - tid;
      u32 c = 0, inc = 0;
      if (tid < NB) {
        u32 part[MAX_CLUSTER];  // issue every remote load before the first add
#pragma unroll
        for (int r = 0; r < MAX_CLUSTER; r++) part[r] = r < (int)C ? cl_load_u32(cluster_map(&local[bin], r)) : 0u;
#pragma unroll
        for (int r = 0; r < MAX_CLUSTER; r++) c += part[r];
        inc = c;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const u32 t = __shfl_up_sync(0xffffffffu, inc, o);
          if (lane >= o) inc += t;
        }
        if (lane == 31) wsum[tid >> 5] = inc;
      }
      __syncthreads();
      if (tid < NB) {
        for (int w = 0; w < (tid >> 5); w++) inc += wsum[w];
        const u32 exc = inc - c, need = (u32)k - above;
        if (exc < need && need <= inc) {
          ctl[SEL_BIN] = (u32)bin;
          ctl[SEL_CNT] = c;
          ctl[SEL_ABOVE] = above + exc;
          ctl[SEL_LOCAL] = local[bin];
        }
      }
      __syncthreads();
      above = ctl[SEL_ABOVE];
      s.pprev = s.p;
      s.dprev = s.d;
      s.p = (s.p << 8) | ctl[SEL_BIN];
      s.d += 8;
      s.fin = above + ctl[SEL_CNT] == (u32)k;
      s.build = !fromBuf && !s.fin && ctl[SEL_LOCAL] <= (u32)cap;
      __syncthreads();
    }
    cluster_sync();  // every winner is in block 0's list

    if (rank == 0) {
      // Bitonic sort of the k composites, descending; zeros pad to k2.
      for (int i = (int)ctl[NSURV] + tid; i < k2; i += THREADS) surv[i] = 0ull;
      __syncthreads();
      for (int size = 2; size <= k2; size <<= 1) {
        for (int st = size >> 1; st > 0; st >>= 1) {
          for (int i = tid; i < k2 / 2; i += THREADS) {
            const int a = 2 * i - (i & (st - 1)), b = a + st;
            const bool desc = (a & size) == 0;
            const u64 va = surv[a], vb = surv[b];
            if ((va < vb) == desc) {
              surv[a] = vb;
              surv[b] = va;
            }
          }
          __syncthreads();
        }
      }
      for (int i = tid; i < k; i += THREADS) {
        const u32 e = (u32)(imax - (surv[i] & imax));
        vals[row * vs + i] = xr[e];
        idx[row * is + i] = (IDX)e;
      }
    }
    __syncthreads();
  }
}
