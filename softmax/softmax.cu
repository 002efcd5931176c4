// softmax.cu: y = softmax(x·scale) over each row of an [M, N] matrix.
//
// Values are v = x·scale, and each exponential e^(v − m) is computed as
// 2^((v − m)·log2 e): a subtraction (or one FFMA), a multiply and an ex2.
// (Folding log2 e into the scale saves the multiply, but x·scale·log2 e
// overflows to ±inf for |x·scale| > FLT_MAX/log2 e ≈ 2.4e38: a row masked
// with the dtype's lowest finite value, as Hugging Face models mask, then
// came out NaN where torch gives the uniform distribution.) Every thread
// reduces its elements to a pair (m, s): the largest value it saw and the
// sum of e^(v − m). Pairs
// merge associatively (each sum is rescaled to the largest max), so one
// merge serves the lanes of a group, the warps of a block and the blocks of
// a cluster. One entry covers three shapes of work:
//
//   * short rows (G > 0): G lanes of a warp own a row, 32/G rows per warp
//     and many per block; the pairs meet through shuffles only.
//   * long rows (G == 0): a whole block owns a row, or a 1/C share of it
//     when launched as a cluster of C blocks; warp pairs meet in shared
//     memory and block pairs through distributed shared memory, so a row
//     spread over several SMs is still read from memory once.
//   * a share longer than the block's register tile streams: a first pass
//     keeps a running (m, s) over the tiles (s rescaled whenever m grows), a
//     second pass reads the tiles again and writes them.
//
// (softmax_bulk, at the end of this file, is a fourth shape for rows that
// suit Hopper's bulk copies: shared memory instead of registers holds the
// row; see its own note.)
//
// In the first two cases a thread's elements stay in registers between the
// reduction and the write: x is read once and y written once. Each thread
// keeps R vectors of V elements (one 2- to 16-byte access each), all loads
// issued before the first use. Without a cluster, blocks are persistent
// (PREFETCH): a grid sized to the GPU walks the rows, and a block loads its
// next rows while it reduces the current ones, so memory stays busy through
// the barriers. Lane groups may also be compiled for their launch's rows:
// 32-bit offsets, the row length as a constant, no row checks, one unit a
// block (OFF32, NCOLS, EXACT, ONCE; config.go's withRows says when). Positions
// past the row read as −inf. The max subtracted is
// "safe" (0 when it is −inf), so −inf elements and padding add 2^(−inf) = 0
// without an inf − inf; a row of −inf still ends as 0/0 = NaN, +inf gives
// inf − inf = NaN, and a NaN poisons its partial sum, which every merge
// carries on to the whole row. A difference v − m of finite values may
// overflow to −inf (or do so once times log2 e): its exponential is then 0,
// as it should be.
#include "tile.cuh"

// The host passes every define; these defaults let the file compile alone.
#ifndef DTYPE
#define DTYPE bf16 // element type of x and y
#endif
#ifndef VEC
#define VEC 8 // elements per vector access
#endif
#ifndef NVEC
#define NVEC 2 // vectors per thread per tile
#endif
#ifndef GROUP
#define GROUP 0 // lanes per row, or 0: the whole block (and its cluster)
#endif
#ifndef MAXT
#define MAXT 1024 // launch bound: most threads per block
#endif
#ifndef PREFETCH
#define PREFETCH 0 // load a block's next unit while reducing the current one
#endif
#ifndef BULK
#define BULK 0 // softmax_bulk: each block copies its share of a row into shared memory
#endif
#ifndef EVICT_LAST
#define EVICT_LAST 0 // 16-byte and bulk reads of x ask L2 to evict their lines last
#endif
#ifndef FULL
#define FULL 0 // every block's share of a row is exactly one register tile (resident path)
#endif
#ifndef OFF32
#define OFF32 0 // lane groups: every row offset the grid forms fits in int
#endif
#ifndef NCOLS
#define NCOLS 0 // lane groups: rows of NCOLS elements, contiguous (0: from the arguments)
#endif
#ifndef EXACT
#define EXACT 0 // lane groups: the units hold whole rows only (no row past the last)
#endif
#ifndef ONCE
#define ONCE 0 // lane groups: the grid is the units, one a block
#endif

typedef DTYPE T;
constexpr int V = VEC, R = NVEC, G = GROUP;

static_assert((V & (V - 1)) == 0 && V * sizeof(T) <= 16, "a vector is a power of two of at most 16 bytes");
static_assert(G >= 0 && G <= 32 && (G & (G - 1)) == 0, "G is 0 or a power of two up to 32");

constexpr int E = R * V; // elements a thread holds per tile

static_assert(G > 0 || !(OFF32 || NCOLS || EXACT || ONCE), "rows are compiled in only for lane groups");
static_assert(!ONCE || !BULK, "ONCE is for softmax_fwd");

// Idx holds row offsets: 32-bit where every offset fits (OFF32).
#if OFF32
typedef int Idx;
#else
typedef i64 Idx;
#endif
constexpr float kLog2e = 1.4426950408889634f;

KI float ex2(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
KI float lg2(float x) { float y; asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
KI float safe(float m) { return m == -kinf() ? 0.f : m; }
// expo is e^d.
KI float expo(float d) { return ex2(d * kLog2e); }

// Stat is a partial reduction of values v = x·scale: their max m and the sum
// s of e^(v − safe(m)).
struct Stat { float m, s; };

// group_merge merges the pairs of each aligned group of W lanes: the max
// first, then each lane rescales its sum to it once and the sums add up. One
// ex2 a lane, where merging pairs step by step took two a step (a 256-thread
// block's merge spent more ex2 than its 16 elements a thread). The xor
// butterfly adds the same two values at each step in every lane, so all
// lanes agree bit for bit. A lane with (−inf, 0) adds 0; a +inf max makes
// that lane's e^(inf − inf) a NaN, which the sum carries to the row.
template <int W> KI Stat group_merge(Stat a) {
  float m = a.m;
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float s = a.s * expo(a.m - safe(m));
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return Stat{m, s};
}

// block_merge merges the pairs of all threads of the block; scratch holds 32.
KI Stat block_merge(Stat a, Stat* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  a = group_merge<32>(a);
  if (lane == 0) scratch[warp] = a;
  __syncthreads();
  return group_merge<32>(lane < nw ? scratch[lane] : Stat{-kinf(), 0.f});
}

// cluster_merge merges the block pairs of a cluster through the slot each
// block publishes in its shared memory. Every block merges in the same order
// and so agrees on the result. The slot is read again only after the next
// unit's cluster barrier, so a unit needs one barrier; the kernel ends with
// one more, so that no block leaves while another may still read its slot.
KI Stat cluster_merge(Stat a, Stat* slot, u32 nblk) {
  if (threadIdx.x == 0) *slot = a;
  cluster_sync();
  const u32 lane = threadIdx.x & 31;
  Stat b{-kinf(), 0.f};
  if (lane < nblk) b = Stat{dsmem_load_f32(&slot->m, lane), dsmem_load_f32(&slot->s, lane)};
  return group_merge<32>(b);
}

// Vector: V elements moved as one access of V·sizeof(T) bytes.
using Vector = Vec<T, V>;

// A tile is lanes·E columns from base: vector r of a lane sits at column
// base + (r·lanes + lane)·V, so each vector step is one coalesced sweep. Raw
// holds a tile as loaded, before conversion: the in-flight copy of the next
// unit while the current one is reduced.
struct Raw { Vector v[R]; };

KI int col(int base, int lanes, int lane, int r) { return base + (r * lanes + lane) * V; }

// kXCache is how x is read: with EVICT_LAST, 16-byte and bulk reads ask L2
// to evict their lines last (a coherent load: y may be x). The lines outlive
// the kernel, so the picker sets EVICT_LAST only where the caller opted in
// (cuda.Device.SetL2EvictLast).
constexpr Cache kXCache = EVICT_LAST && V * sizeof(T) == 16 ? Cache::last : Cache::plain;

// vload reads a whole vector of x.
KI Vector vload(const T* p) { return load<Vector, kXCache>(p); }

// With Whole the tile lies inside the row (FULL, resident path): its loads
// go without conditions, back to back, where each condition made a branch
// of its own between them; a group past the last row reads the last row
// (clamped by the caller) and stores nothing.
template <bool Whole>
KI void fetch(const T* row, int base, int lanes, int lane, int end, Raw& raw) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int c = col(base, lanes, lane, r);
    if (Whole || c + V <= end) {
      raw.v[r] = vload(row + c);
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) raw.v[r].put(i, c + i < end ? row[c + i] : T{});
    }
  }
}

// unpack_tile converts a fetched tile to values (x·scale in fp32), −inf past end.
template <bool Whole>
KI void unpack_tile(const Raw& raw, int base, int lanes, int lane, int end, float scale, float (&v)[E]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int c = col(base, lanes, lane, r);
    if (Whole || c + V <= end) {
#pragma unroll
      for (int i = 0; i < V; ++i) v[r * V + i] = raw.v[r].get(i) * scale;
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) v[r * V + i] = c + i < end ? raw.v[r].get(i) * scale : -kinf();
    }
  }
}

// load_tile is fetch then unpack_tile in one step, for tiles used at once: no raw
// copy stays live, which saves the registers of the largest tiles.
template <bool Whole>
KI void load_tile(const T* row, int base, int lanes, int lane, int end, float scale, float (&v)[E]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int c = col(base, lanes, lane, r);
    if (Whole || c + V <= end) {
      const Vector u = vload(row + c);
#pragma unroll
      for (int i = 0; i < V; ++i) v[r * V + i] = u.get(i) * scale;
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) v[r * V + i] = c + i < end ? to_float(row[c + i]) * scale : -kinf();
    }
  }
}

KI void store_tile(T* row, int base, int lanes, int lane, int end, const float (&v)[E]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int c = col(base, lanes, lane, r);
    float f[V];
#pragma unroll
    for (int i = 0; i < V; ++i) f[i] = v[r * V + i];
    const Vector u = pack<Vector>(f);
    if (c + V <= end) {
      store(row + c, u);
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i)
        if (c + i < end) row[c + i] = u.at(i);
    }
  }
}

// Work comes in units: with G > 0 a unit is blockDim/G consecutive rows (one
// per lane group), with G == 0 one row (a 1/C share of it per block of a
// cluster). A block, or cluster, takes units first, first + step, ... so a
// grid sized to the GPU walks the whole matrix. With PREFETCH the loads of a
// block's next unit are issued before the current unit is reduced, which
// keeps memory busy through the reduction's barriers.
struct Work {
  int lanes, lane;  // threads sharing a row, and this thread's place among them
  int per, sub;     // rows per unit, and this thread's row in the unit
  int begin, share; // this block's first column and its share of the columns
  int units, first, step;
};

KI Work work(int rows, int n, int chunk) {
  Work w;
#if GROUP > 0
  (void)chunk;
  w.lanes = G, w.lane = threadIdx.x % G, w.per = blockDim.x / G, w.sub = threadIdx.x / G;
  w.begin = 0, w.share = n;
  w.units = (rows + w.per - 1) / w.per, w.first = blockIdx.x, w.step = gridDim.x;
#else
  const u32 nblk = cluster_nctarank();
  w.lanes = blockDim.x, w.lane = threadIdx.x, w.per = 1, w.sub = 0;
  w.begin = (int)cluster_ctarank() * chunk, w.share = max(0, min(n - w.begin, chunk));
  w.units = rows, w.first = blockIdx.x / nblk, w.step = gridDim.x / nblk;
#endif
  return w;
}

// merge_all merges the partials of one row: within the lane group, or over
// the block and its cluster. Scratch comes in two halves used alternately by
// consecutive units, so one barrier per unit suffices.
KI Stat merge_all(Stat own, Stat* scratch, int it) {
#if GROUP > 0
  (void)scratch, (void)it;
  return group_merge<G>(own);
#else
  Stat* half = scratch + (it & 1) * 33;
  Stat all = block_merge(own, half);
  const u32 nblk = cluster_nctarank();
  if (nblk > 1) all = cluster_merge(all, half + 32, nblk);
  return all;
#endif
}

#if !BULK
// softmax_fwd: x and y are [rows, n] with row strides ldx and ldy (elements;
// y may be x). chunk is the columns each block of a cluster owns (a multiple
// of V). Dynamic shared memory: 66 Stats when G == 0.
extern "C" __global__ void __launch_bounds__(MAXT, MAXT < 1024 ? 1024 / MAXT : 1) // at most 64 registers
softmax_fwd(const T* x, T* y, int rows, int n, i64 ldx, i64 ldy, int chunk, float scale) {
  wait_prior_grids();
#if NCOLS
  n = NCOLS;  // contiguous rows of a length known at compile time
  ldx = ldy = NCOLS;
#endif
  extern __shared__ Stat scratch[];
  const Work w = work(rows, n, chunk);
  const int tile = w.lanes * E, rowmax = rows - 1;
  float v[E];
  int it = 0;

  if (w.share > tile) { // streaming: two passes over each unit
    for (int u = w.first; u < w.units; u += w.step, ++it) {
      const int row = u * w.per + w.sub;
      const i64 r = min(row, rowmax);
      const T* xr = x + r * ldx;
      T* yr = y + r * ldy;
      const int end = row <= rowmax ? w.begin + w.share : w.begin;
      Stat own{-kinf(), 0.f};
      for (int b = w.begin; b < end; b += tile) {
        load_tile<false>(xr, b, w.lanes, w.lane, end, scale, v);
        float m = own.m;
#pragma unroll
        for (int i = 0; i < E; ++i) m = fmaxf(m, v[i]);
        const float ms = safe(m);
        float s = own.s * expo(own.m - ms);
#pragma unroll
        for (int i = 0; i < E; ++i) s += expo(v[i] - ms);
        own = Stat{m, s};
      }
      const Stat all = merge_all(own, scratch, it);
      const float ms = safe(all.m), inv = 1.f / all.s;
      for (int b = w.begin; b < end; b += tile) {
        load_tile<false>(xr, b, w.lanes, w.lane, end, scale, v);
#pragma unroll
        for (int i = 0; i < E; ++i) v[i] = expo(v[i] - ms) * inv;
        store_tile(yr, b, w.lanes, w.lane, end, v);
      }
    }
  } else { // resident: the tile stays in registers between reduction and write
    // clamp is a row's index in x, and a row past the last (an idle group
    // that still joins the shuffles) the last row's; its end is 0.
    auto clamp = [&](int row) { return EXACT ? row : min(row, rowmax); };
    auto row_end = [&](int row) { return EXACT || row <= rowmax ? w.begin + w.share : 0; };
#if PREFETCH
    Raw raw;
    if (ONCE || w.first < w.units) {
      const int row = w.first * w.per + w.sub;
      fetch<FULL>(x + (Idx)clamp(row) * (Idx)ldx, w.begin, w.lanes, w.lane, row_end(row), raw);
    }
#endif
    for (int u = w.first; ONCE || u < w.units; u += w.step, ++it) {
      const int row = u * w.per + w.sub;
      const Idx r = clamp(row);
      const int end = row_end(row);
#if PREFETCH
      unpack_tile<FULL>(raw, w.begin, w.lanes, w.lane, end, scale, v);
      const int next = (u + w.step) * w.per + w.sub;
      if (!ONCE && u + w.step < w.units)
        fetch<FULL>(x + (Idx)clamp(next) * (Idx)ldx, w.begin, w.lanes, w.lane, row_end(next), raw);
#else
      load_tile<FULL>(x + r * (Idx)ldx, w.begin, w.lanes, w.lane, end, scale, v);
#endif
      Stat own{-kinf(), 0.f};
#pragma unroll
      for (int i = 0; i < E; ++i) own.m = fmaxf(own.m, v[i]);
      const float oms = safe(own.m);
#pragma unroll
      for (int i = 0; i < E; ++i) {
        v[i] = expo(v[i] - oms);
        own.s += v[i];
      }
      const Stat all = merge_all(own, scratch, it);
      const float f = expo(own.m - safe(all.m)) / all.s; // rebases e^(v − own.m) onto the row's max
#pragma unroll
      for (int i = 0; i < E; ++i) v[i] *= f;
      store_tile(y + r * (Idx)ldy, w.begin, w.lanes, w.lane, end, v);
      if (ONCE) break;
    }
  }
#if GROUP == 0
  if (cluster_nctarank() > 1) cluster_sync(); // no block leaves while another may still read its slots
#endif
}
#endif // !BULK

#if BULK
// softmax_bulk: the same contract as softmax_fwd for rows whose every start
// (in x and y) is 16-byte aligned and whose length is a multiple of V = 16
// bytes. A cluster of C blocks owns a row, each block a chunk of it (chunk
// elements, a multiple of V), and a cluster walks rows first, first + step,
// ...; for many rows the host sizes the grid to one wave of resident
// clusters, so that clusters walk several rows and none waits for a later
// wave.
//
// Shared memory holds a Ring (tile.cuh) of `slots` slots of `piece`
// vectors; the block's share of each row comes as pieces of that size,
// piece g of the block's sequence into slot g mod slots, each a bulk copy
// that completes on the slot's full mbarrier. The last warp of the block is
// the producer: one lane issues every copy, each as soon as the consumer
// warps have all released its slot, and leaves. The copies need no
// registers, so every free slot is in flight at once, and with more slots
// than pieces per row the next row streams in while this one is reduced,
// merged and written. The consumer warps fold each piece into their partial
// (max, sum of e^(v − m)) as it lands; the partials meet through shared
// memory (warps, behind a named barrier that leaves the producer out) and
// distributed shared memory (blocks, see exchange); then y is written from
// shared memory with 16-byte stores, each warp freeing a slot once it has
// written it out. After each piece written a warp folds in one piece of the
// next row if it has landed (a non-blocking test), so that by the time the
// row is written the next one is mostly reduced. No warp waits for another
// per piece: only for its data and, once a row, for the merge (256×262144
// bf16 in 3-block clusters: 105.0 µs so, 123.6 with a block barrier per
// piece). x is read from memory once.
//
// Dynamic shared memory: kBulkHead bytes (the mbarriers, merge scratch and
// the cluster's block pairs), then the slots.
constexpr int kMaxSlots = 28, kBulkHead = 1024;
static_assert(V * sizeof(T) == 16, "bulk rows move 16-byte vectors");

// top2 is the element-wise max (NEG: min) of two words of packed elements
// (one f32, or two 16-bit values); a NaN loses to a number, as in fmaxf.
template <bool NEG> KI u32 top2(u32 a, u32 b, float) {
  const float x = __uint_as_float(a), y = __uint_as_float(b);
  return __float_as_uint(NEG ? fminf(x, y) : fmaxf(x, y));
}
template <bool NEG> KI u32 top2(u32 a, u32 b, bf16) {
  u32 r;
  if constexpr (NEG) asm("min.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  else asm("max.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
template <bool NEG> KI u32 top2(u32 a, u32 b, f16) {
  u32 r;
  if constexpr (NEG) asm("min.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  else asm("max.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
template <bool NEG> KI Vector top(const Vector& a, const Vector& b) {
  Vector r;
#pragma unroll
  for (int q = 0; q < 4; ++q) r.w[q] = top2<NEG>(a.w[q], b.w[q], T{});
  return r;
}

// top_value is the largest (NEG: smallest) element of a vector, as a float.
template <bool NEG> KI float top_value(const Vector& a) {
  Vector u;
  u.w[0] = top2<NEG>(top2<NEG>(a.w[0], a.w[1], T{}), top2<NEG>(a.w[2], a.w[3], T{}), T{});
  if constexpr (sizeof(T) == 4) return u.get(0);
  const float lo = u.get(0), hi = u.get(1);
  return NEG ? fminf(lo, hi) : fmaxf(lo, hi);
}

// fold adds a thread's vectors of one landed piece (len vectors at v) to its
// partial. Values are x·scale, and each exponential is an FFMA, a multiply
// and an ex2. Four vectors at a time are read once from shared memory: their
// max first, then the partial's sum rescaled and theirs added. The max is
// taken of the raw elements, packed where they are 16-bit, and scaled once:
// x ↦ x·scale is monotonic (rounding included), so max(x)·scale is
// max(x·scale) for scale > 0, and min(x)·scale is for scale < 0 (NEG).
template <bool NEG> KI Stat fold(Stat own, const Vector* v, int len, int tid, int nt, float scale) {
  constexpr int B = 4;
  for (int i = tid; i < len; i += B * nt) {
    Vector u[B];
    bool in[B];
    u[0] = v[i], in[0] = true;
    Vector t = u[0];
#pragma unroll
    for (int k = 1; k < B; ++k) {
      in[k] = i + k * nt < len;
      u[k] = in[k] ? v[i + k * nt] : u[0]; // a repeat leaves the max as it is
      t = top<NEG>(t, u[k]);
    }
    const float m = fmaxf(own.m, top_value<NEG>(t) * scale), ms = safe(m);
    float s = own.s * expo(own.m - ms);
#pragma unroll
    for (int k = 0; k < B; ++k)
      if (in[k]) {
#pragma unroll
        for (int e = 0; e < V; ++e) s += expo(fmaf(u[k].get(e), scale, -ms));
      }
    own = Stat{m, s};
  }
  return own;
}

// fold_any is fold for the sign of scale.
KI Stat fold_any(Stat own, const Vector* v, int len, int tid, int nt, float scale) {
  return scale < 0.f ? fold<true>(own, v, len, tid, nt, scale) : fold<false>(own, v, len, tid, nt, scale);
}

// emit writes a thread's vectors of one piece: e^(x·scale − ms)/s. 16-bit
// outputs fold the division into the exponent, 2^((x·scale − ms)·log2 e −
// log2 s), whose rounding is far below theirs; f32 outputs multiply by 1/s,
// which keeps fp32 precision.
KI void emit(T* out, const Vector* v, int len, int tid, int nt, float scale, float ms, float s) {
  const float inv = 1.f / s, ls = sizeof(T) == 4 ? 0.f : lg2(s);
#pragma unroll 2
  for (int i = tid; i < len; i += nt) {
    const Vector u = v[i];
    float y[V];
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const float d = fmaf(u.get(e), scale, -ms);
      if constexpr (sizeof(T) == 4) {
        y[e] = expo(d) * inv;
      } else {
        y[e] = ex2(fmaf(d, kLog2e, -ls));
      }
    }
    store(out + i * V, pack<Vector>(y));
  }
}

// The head: full[kMaxSlots] and empty[kMaxSlots]
// mbarriers, xbar[2], the warps' merge scratch (two halves of 16 Stats) and
// xstat (two sets of 16 block Stats, one per cluster block).
constexpr int kFull = 0, kEmpty = 8 * kMaxSlots, kXbar = 16 * kMaxSlots, kScratch = kXbar + 16, kXstat = kScratch + 32 * 8;
static_assert(kXstat + 32 * 8 <= kBulkHead, "the head holds the barriers and the scratch");

// consumer_merge merges the pairs of the nc consumer threads (a named
// barrier leaves the producer warp out); scratch holds 16.
KI Stat consumer_merge(Stat a, Stat* scratch, int nc) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  a = group_merge<32>(a);
  if (lane == 0) scratch[warp] = a;
  asm volatile("bar.sync 1, %0;" :: "r"(nc) : "memory");
  return group_merge<32>(lane < (nc >> 5) ? scratch[lane] : Stat{-kinf(), 0.f});
}

// exchange merges the block pairs of a cluster without a cluster barrier,
// which would have to wait for the producer warp: lane q of warp 0 stores
// the block's pair into slot `me` of block q's xstat set b and arrives on
// block q's xbar[b] (nblk arrivals complete its phase); every block then
// reads the nblk pairs in rank order, so all agree. Sets alternate by row: a
// block reaches row r + 2 only after every block published row r + 1, which
// each does after reading row r.
//
// No block leaves while a peer's store or arrival may still reach it: its
// last wait completes only once every peer has arrived for the last row,
// and each arrival is a peer's last access to this block (its store comes
// before it, released at cluster scope). compute-sanitizer's racecheck does
// not follow this and reports every such store as a write into a block that
// "might have already exited"; memcheck and synccheck report nothing. A
// cluster barrier at the end of the kernel silences racecheck but cost 1–6%
// on the bulk shapes (16×262144 f32: 18.72 → 19.84 µs), so the kernel has
// none.
KI Stat exchange(Stat all, unsigned char* dsm, int it, u32 me, u32 nblk) {
  const int lane = threadIdx.x & 31, b = it & 1;
  Stat* xs = reinterpret_cast<Stat*>(dsm + kXstat) + b * 16;
  u64* xb = reinterpret_cast<u64*>(dsm + kXbar) + b;
  if (threadIdx.x < 32 && lane < (int)nblk) {
    const u32 st = cluster_map(xs + me, lane), bar = cluster_map(xb, lane);
    asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};" :: "r"(st), "f"(all.m), "f"(all.s) : "memory");
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" :: "r"(bar) : "memory");
  }
  mbar_wait_cluster(xb, (it >> 1) & 1);
  return group_merge<32>(lane < (int)nblk ? xs[lane] : Stat{-kinf(), 0.f});
}

// softmax_bulk: as softmax_fwd, plus piece (vectors per slot, the same in
// every block of a cluster) and slots (at least a row's pieces, at most
// kMaxSlots). Its blocks are nc consumer threads and the producer warp.
extern "C" __global__ void __launch_bounds__(MAXT, 1)
softmax_bulk(const T* x, T* y, int rows, int n, i64 ldx, i64 ldy, int chunk, float scale, int piece, int slots) {
  wait_prior_grids();
  extern __shared__ __align__(128) unsigned char dsm[];
  const Ring ring{reinterpret_cast<u64*>(dsm + kFull), reinterpret_cast<u64*>(dsm + kEmpty), slots};
  Stat* scratch = reinterpret_cast<Stat*>(dsm + kScratch);
  Vector* pieces = reinterpret_cast<Vector*>(dsm + kBulkHead); // slot s holds pieces[s·piece, (s + 1)·piece)
  const u32 nblk = cluster_nctarank(), me = cluster_ctarank();
  const int tid = threadIdx.x, nc = blockDim.x - 32;
  const int begin = (int)me * chunk;
  const int nv = max(0, min(n - begin, chunk)) / V;    // vectors of this block's share of a row
  const int np = (nv + piece - 1) / piece;              // its pieces per row
  const int first = blockIdx.x / nblk, step = gridDim.x / nblk;
  const int nrows = first < rows ? (rows - 1 - first) / step + 1 : 0;
  const i64 total = (i64)nrows * np;                    // pieces this block loads
  auto span = [&](int p) { return min(piece, nv - p * piece); }; // vectors of piece p

  if (tid == 0) {
    ring.init(nc >> 5);
    for (int b = 0; b < 2; ++b) mbar_init(reinterpret_cast<u64*>(dsm + kXbar) + b, nblk);
  }
  if (nblk > 1) {
    cluster_sync(); // every block's barriers are initialized before a peer arrives on them
  } else {
    __syncthreads();
  }

  if (tid >= nc) { // the producer warp
    if (tid == nc) {
      int pr = 0, pp = 0; // piece pp of row iteration pr goes into slot pos.slot
      RingPos pos;
      for (i64 g = 0; g < total; ++g) {
        ring.acquire(pos);
        const u32 bytes = (u32)span(pp) * 16u;
        const T* src = x + (i64)(first + pr * step) * ldx + begin + pp * piece * V;
        bulk_load<kXCache>(pieces + pos.slot * piece, src, bytes, ring.commit(pos.slot, bytes));
        if (++pp == np) pp = 0, ++pr;
        pos.next(slots);
      }
    }
    return;
  }

  RingPos rd;          // the next piece this thread folds in
  int done = 0;        // pieces of the current row folded in
  Stat own{-kinf(), 0.f};
  int ws = 0;          // slot of the current row's first piece
  for (int it = 0; it < nrows; ++it) {
    for (; done < np; ++done) {
      ring.wait(rd);
      own = fold_any(own, pieces + rd.slot * piece, span(done), tid, nc, scale);
      rd.next(slots);
    }
    Stat all = consumer_merge(own, scratch + (it & 1) * 16, nc);
    if (nblk > 1) all = exchange(all, dsm, it, me, nblk);
    const float ms = safe(all.m);
    own = Stat{-kinf(), 0.f}, done = 0;
    const bool ahead = it + 1 < nrows;
    T* yr = y + (i64)(first + it * step) * ldy + begin;
    int s = ws;
    for (int p = 0; p < np; ++p) {
      emit(yr + p * piece * V, pieces + s * piece, span(p), tid, nc, scale, ms, all.s);
      ring.release(s);
      if (++s == slots) s = 0;
      if (ahead && done < np && ring.ready(rd)) {
        own = fold_any(own, pieces + rd.slot * piece, span(done), tid, nc, scale);
        ++done;
        rd.next(slots);
      }
    }
    ws = s;
  }
}
#endif // BULK
