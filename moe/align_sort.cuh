// align_sort.cuh (moe): the stable counting sort by expert that align.cu
// (AlignBlockSize) and routing.cu (RoutingData) are built on. The Go side
// prepends this text to each of them, so it is not an NVRTC header.
//
// The flat pairs f = t·k + j of ids [T, k] are cut into tiles of whole
// tokens, one block each. Sorting the pairs by expert, ascending f within an
// expert, is a counting sort in three kernels:
//   count    each tile's per-expert histogram → partials[tile][e];
//   scan     one block: per expert, the exclusive sum of its partials over
//            the tiles (in place); then the exclusive sum over the experts
//            of what each op gives an expert (its padded count, its tiles);
//   scatter  each tile again, every warp over its own contiguous run of
//            pairs: per-warp counts in shared memory, summed over the warps
//            before it onto the tile's base, then the run walked 32 pairs at
//            a time in order, each pair ranked among the pairs of its expert
//            in those 32 by match.any. A pair's position is thus its rank in
//            f order among its expert's pairs, without an atomic on it.
// When the pairs fit one tile, one block does the three steps (the fused
// kernels): a single launch at decode sizes.
//
// A pair whose expert is dropped (an id outside [0, E), or an expert the
// expert map leaves to another rank) has the bucket −1: counted nowhere.
//
// Defines: WARPS (warps per block of the fused, count and scatter kernels).
#include "kittens.cuh"

KI u64 sort_shfl_up(u64 v, int d) {
  const u32 lo = __shfl_up_sync(0xffffffffu, (u32)v, d), hi = __shfl_up_sync(0xffffffffu, (u32)(v >> 32), d);
  return ((u64)hi << 32) | lo;
}
KI int sort_shfl_up(int v, int d) { return __shfl_up_sync(0xffffffffu, v, d); }

// sort_bucket is the expert of pair f: ids[f] through emap (when not null),
// or −1 where it is dropped.
KI int sort_bucket(const int* __restrict__ ids, const int* __restrict__ emap, int f, int E) {
  int e = ids[f];
  if ((u32)e >= (u32)E) return -1;
  if (emap != nullptr) {
    e = emap[e];
    if ((u32)e >= (u32)E) return -1;
  }
  return e;
}

// sort_tile_hist adds the pairs [lo, hi) to the block's histogram h[E]
// (zeroed, and synchronized after by the caller): one shared atomic per
// distinct expert of each 32 pairs.
KI void sort_tile_hist(const int* ids, const int* emap, int lo, int hi, int E, int* h) {
  const int lane = threadIdx.x & 31;
  for (int f0 = lo + (int)(threadIdx.x & ~31u); f0 < hi; f0 += blockDim.x) {
    const int f = f0 + lane;
    const int e = f < hi ? sort_bucket(ids, emap, f, E) : -1;
    const u32 m = match_any((u32)e);
    if (e >= 0 && lane == __ffs(m) - 1) atomicAdd(&h[e], __popc(m));
  }
}

// SortRun is one warp's contiguous run of pairs [lo, hi) within a tile.
struct SortRun {
  int lo, hi;
};
KI SortRun sort_run(int lo, int hi) {
  const int per = (hi - lo + WARPS - 1) / WARPS, a = min(hi, lo + (int)(threadIdx.x >> 5) * per);
  return {a, min(hi, a + per)};
}

// sort_warp_count adds the warp's run to its own counts cur[E].
KI void sort_warp_count(const int* ids, const int* emap, SortRun r, int E, int* cur) {
  const int lane = threadIdx.x & 31;
  for (int f0 = r.lo; f0 < r.hi; f0 += 32) {
    const int f = f0 + lane;
    const int e = f < r.hi ? sort_bucket(ids, emap, f, E) : -1;
    const u32 m = match_any((u32)e);
    if (e >= 0 && lane == __ffs(m) - 1) cur[e] += __popc(m);
    __syncwarp();
  }
}

// sort_bases turns the per-warp counts cur[WARPS][E] into each warp's first
// position per expert: base(e) for warp 0, then each warp after the pairs of
// the warps before it.
template <class Base> KI void sort_bases(int* cur, int E, Base base) {
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int s = base(e);
#pragma unroll
    for (int w = 0; w < WARPS; w++) {
      const int c = cur[w * E + e];
      cur[w * E + e] = s;
      s += c;
    }
  }
}

// sort_warp_scatter walks the warp's run in order and calls emit(f, e, p)
// for each pair: e its bucket and p its position (cur[e] plus its rank
// among the pairs of e before it), or e = p = −1 where it is dropped.
template <class Emit> KI void sort_warp_scatter(const int* ids, const int* emap, SortRun r, int E, int* cur, Emit emit) {
  const int lane = threadIdx.x & 31;
  const u32 below = lanemask_lt();
  for (int f0 = r.lo; f0 < r.hi; f0 += 32) {
    const int f = f0 + lane;
    const bool in = f < r.hi;
    const int e = in ? sort_bucket(ids, emap, f, E) : -1;
    const u32 m = match_any((u32)e);
    if (in) emit(f, e, e >= 0 ? cur[e] + __popc(m & below) : -1);
    __syncwarp();
    if (e >= 0 && lane == __ffs(m) - 1) cur[e] += __popc(m);
    __syncwarp();
  }
}

// sort_columns replaces column e of partials [tiles][E] by its exclusive
// prefix sums over the tiles and returns the column's sum (expert e's
// count). Loads go out eight at a time, ahead of the stores.
KI int sort_columns(int* part, int tiles, int E, int e) {
  int s = 0, b = 0;
  for (; b + 8 <= tiles; b += 8) {
    int c[8];
#pragma unroll
    for (int i = 0; i < 8; i++) c[i] = part[(i64)(b + i) * E + e];
#pragma unroll
    for (int i = 0; i < 8; i++) {
      part[(i64)(b + i) * E + e] = s;
      s += c[i];
    }
  }
  for (; b < tiles; b++) {
    const int c = part[(i64)b * E + e];
    part[(i64)b * E + e] = s;
    s += c;
  }
  return s;
}

// sort_scan replaces v[0, n) (shared memory) by its exclusive prefix sums,
// over the whole block, and returns the total to every thread. Each thread
// sums a run of consecutive entries; the runs are scanned by warp shuffles
// and wtot (32 entries). It synchronizes the block before it returns.
template <class V> KI V sort_scan(V* v, int n, V* wtot) {
  const int per = (n + blockDim.x - 1) / blockDim.x, a = min(n, (int)threadIdx.x * per), b = min(n, a + per);
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  V s = 0;
  for (int i = a; i < b; i++) s += v[i];
  V x = s;  // inclusive over the warp's threads
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const V y = sort_shfl_up(x, d);
    if (lane >= d) x += y;
  }
  if (lane == 31) wtot[w] = x;
  __syncthreads();
  if (w == 0) {
    V t = lane < nw ? wtot[lane] : 0;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const V y = sort_shfl_up(t, d);
      if (lane >= d) t += y;
    }
    wtot[lane] = t;
  }
  __syncthreads();
  V run = x - s + (w > 0 ? wtot[w - 1] : 0);
  const V total = wtot[nw - 1];
  for (int i = a; i < b; i++) {
    const V c = v[i];
    v[i] = run;
    run += c;
  }
  __syncthreads();
  return total;
}

// sort_find returns the last e in [0, n) with off(e) ≤ key, for
// nondecreasing off with off(0) ≤ key: the expert whose range holds key
// (experts without pairs have empty ranges and are passed over).
template <class Off> KI int sort_find(int n, i64 key, Off off) {
  int lo = 0, hi = n;
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if ((i64)off(mid) <= key) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}
