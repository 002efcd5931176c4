// softmax.cu: y = softmax(x·scale) over each row of an [M, N] matrix.
//
// Every thread reduces its elements to a pair (m, s): the largest scaled
// value it saw and the sum of exp(v − m). Pairs merge associatively (the
// sum of the smaller max is rescaled to the larger), so one merge serves the
// lanes of a group, the warps of a block and the blocks of a cluster. One
// entry covers three shapes of work:
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
// the barriers. Positions past the row read as −inf. The max subtracted is
// "safe" (0 when it is −inf), so −inf elements and padding add exp(−inf) = 0
// without an inf − inf; a row of −inf still ends as 0/0 = NaN, +inf gives
// inf − inf = NaN, and a NaN poisons its partial sum, which every merge
// carries on to the whole row.
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

typedef DTYPE T;
constexpr int V = VEC, R = NVEC, G = GROUP;

static_assert((V & (V - 1)) == 0 && V * sizeof(T) <= 16, "a vector is a power of two of at most 16 bytes");
static_assert(G >= 0 && G <= 32 && (G & (G - 1)) == 0, "G is 0 or a power of two up to 32");

constexpr int E = R * V; // elements a thread holds per tile
constexpr float kLog2e = 1.4426950408889634f;

KI float ex2(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
// expm returns exp(v − m) for a safe m.
KI float expm(float v, float m) { return ex2((v - m) * kLog2e); }
KI float safe(float m) { return m == -kinf() ? 0.f : m; }

// Stat is a partial reduction: max m and the sum s of exp(v − safe(m)).
struct Stat { float m, s; };

// Stats are in natural units on the register path; the bulk path keeps its
// values (and so m) premultiplied by log2 e, and its sums are of 2^(v − m).
#if BULK
constexpr float kStatUnit = 1.f;
#else
constexpr float kStatUnit = kLog2e;
#endif

KI Stat merge(Stat a, Stat b) {
  const float m = fmaxf(a.m, b.m), ms = safe(m);
  return Stat{m, a.s * ex2((a.m - ms) * kStatUnit) + b.s * ex2((b.m - ms) * kStatUnit)};
}

template <int W> KI Stat group_merge(Stat a) {
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1)
    a = merge(a, Stat{__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o)});
  return a;
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

// Vectors: V elements moved as one access of V·sizeof(T) bytes.
template <int B> struct Bits;
template <> struct Bits<2> { typedef u16 t; };
template <> struct Bits<4> { typedef u32 t; };
template <> struct Bits<8> { typedef uint2 t; };
template <> struct Bits<16> { typedef uint4 t; };
typedef Bits<V * sizeof(T)>::t VecBits;
union Vec { VecBits bits; T e[V]; };

// A tile is lanes·E columns from base: vector r of a lane sits at column
// base + (r·lanes + lane)·V, so each vector step is one coalesced sweep. Raw
// holds a tile as loaded, before conversion: the in-flight copy of the next
// unit while the current one is reduced.
struct Raw { Vec v[R]; };

KI int col(int base, int lanes, int lane, int r) { return base + (r * lanes + lane) * V; }

KI void fetch(const T* row, int base, int lanes, int lane, int end, Raw& raw) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int c = col(base, lanes, lane, r);
    if (c + V <= end) {
      raw.v[r].bits = *reinterpret_cast<const VecBits*>(row + c);
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) raw.v[r].e[i] = c + i < end ? row[c + i] : T{};
    }
  }
}

// unpack converts a fetched tile to scaled fp32, −inf past end.
KI void unpack(const Raw& raw, int base, int lanes, int lane, int end, float scale, float (&v)[E]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int c = col(base, lanes, lane, r);
    if (c + V <= end) {
#pragma unroll
      for (int i = 0; i < V; ++i) v[r * V + i] = to_float(raw.v[r].e[i]) * scale;
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) v[r * V + i] = c + i < end ? to_float(raw.v[r].e[i]) * scale : -kinf();
    }
  }
}

// load_tile is fetch then unpack in one step, for tiles used at once: no raw
// copy stays live, which saves the registers of the largest tiles.
KI void load_tile(const T* row, int base, int lanes, int lane, int end, float scale, float (&v)[E]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int c = col(base, lanes, lane, r);
    if (c + V <= end) {
      Vec u;
      u.bits = *reinterpret_cast<const VecBits*>(row + c);
#pragma unroll
      for (int i = 0; i < V; ++i) v[r * V + i] = to_float(u.e[i]) * scale;
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
    Vec u;
#pragma unroll
    for (int i = 0; i < V; ++i) u.e[i] = from_float<T>(v[r * V + i]);
    if (c + V <= end) {
      *reinterpret_cast<VecBits*>(row + c) = u.bits;
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i)
        if (c + i < end) row[c + i] = u.e[i];
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
        load_tile(xr, b, w.lanes, w.lane, end, scale, v);
        float m = own.m;
#pragma unroll
        for (int i = 0; i < E; ++i) m = fmaxf(m, v[i]);
        const float ms = safe(m);
        float s = own.s * expm(own.m, ms);
#pragma unroll
        for (int i = 0; i < E; ++i) s += expm(v[i], ms);
        own = Stat{m, s};
      }
      const Stat all = merge_all(own, scratch, it);
      const float ms = safe(all.m), inv = 1.f / all.s;
      for (int b = w.begin; b < end; b += tile) {
        load_tile(xr, b, w.lanes, w.lane, end, scale, v);
#pragma unroll
        for (int i = 0; i < E; ++i) v[i] = expm(v[i], ms) * inv;
        store_tile(yr, b, w.lanes, w.lane, end, v);
      }
    }
  } else { // resident: the tile stays in registers between reduction and write
#if PREFETCH
    Raw raw;
    if (w.first < w.units) {
      const int row = w.first * w.per + w.sub;
      fetch(x + (i64)min(row, rowmax) * ldx, w.begin, w.lanes, w.lane, row <= rowmax ? w.begin + w.share : 0, raw);
    }
#endif
    for (int u = w.first; u < w.units; u += w.step, ++it) {
      const int row = u * w.per + w.sub; // past the last row: an idle group that still joins the shuffles
      const i64 r = min(row, rowmax);
      const int end = row <= rowmax ? w.begin + w.share : 0;
#if PREFETCH
      unpack(raw, w.begin, w.lanes, w.lane, end, scale, v);
      const int next = (u + w.step) * w.per + w.sub;
      if (u + w.step < w.units)
        fetch(x + (i64)min(next, rowmax) * ldx, w.begin, w.lanes, w.lane, next <= rowmax ? w.begin + w.share : 0, raw);
#else
      load_tile(x + r * ldx, w.begin, w.lanes, w.lane, end, scale, v);
#endif
      Stat own{-kinf(), 0.f};
#pragma unroll
      for (int i = 0; i < E; ++i) own.m = fmaxf(own.m, v[i]);
      const float oms = safe(own.m);
#pragma unroll
      for (int i = 0; i < E; ++i) {
        v[i] = expm(v[i], oms);
        own.s += v[i];
      }
      const Stat all = merge_all(own, scratch, it);
      const float f = expm(own.m, safe(all.m)) / all.s; // rebases exp(v − own.m) onto the row's max
#pragma unroll
      for (int i = 0; i < E; ++i) v[i] *= f;
      store_tile(y + r * ldy, w.begin, w.lanes, w.lane, end, v);
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
// ... Shared memory holds a ring of `slots` slots of `piece` vectors; the
// block's share of each row comes as pieces of that size, piece g of the
// block's sequence into slot g mod slots, each a bulk copy that one thread
// issues and that completes on the slot's mbarrier. The copies need no
// registers, so all slots are in flight at once; with more slots than
// pieces per row, the next row's first pieces arrive while this one is
// reduced and its blocks wait for each other. The block reduces each piece
// as it lands (its max, then its sum of 2^(v − m)); the partials meet as in
// softmax_fwd (warps through shared memory, blocks through DSMEM); then y is
// written from shared memory with 16-byte stores, and each slot, once every
// thread has written it out, is refilled with the piece `slots` later. x is
// read from memory once.
//
// Dynamic shared memory: kBulkHead bytes (mbarriers, the merge scratch), then
// the slots.
constexpr int kMaxSlots = 16, kBulkHead = 768;
static_assert(V * sizeof(T) == 16, "bulk rows move 16-byte vectors");

KI void bulk_load(void* dst, const void* src, u32 bytes, u64* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(smem_addr(dst)), "l"(src), "r"(bytes), "r"(smem_addr(bar)) : "memory");
}

// softmax_bulk: as softmax_fwd, plus piece (vectors per slot, the same in
// every block of a cluster) and slots (at most kMaxSlots).
extern "C" __global__ void __launch_bounds__(MAXT, 1)
softmax_bulk(const T* x, T* y, int rows, int n, i64 ldx, i64 ldy, int chunk, float scale, int piece, int slots) {
  extern __shared__ __align__(128) unsigned char dsm[];
  u64* bar = reinterpret_cast<u64*>(dsm);                       // kMaxSlots mbarriers
  Stat* scratch = reinterpret_cast<Stat*>(dsm + 8 * kMaxSlots); // 66 Stats
  Vec* ring = reinterpret_cast<Vec*>(dsm + kBulkHead);
  const u32 nblk = cluster_nctarank();
  const int tid = threadIdx.x, nt = blockDim.x;
  const int begin = (int)cluster_ctarank() * chunk;
  const int nv = max(0, min(n - begin, chunk)) / V;    // vectors of this block's share of a row
  const int np = (nv + piece - 1) / piece;              // its pieces per row
  const int first = blockIdx.x / nblk, step = gridDim.x / nblk;
  const int nrows = first < rows ? (rows - 1 - first) / step + 1 : 0;
  const i64 total = (i64)nrows * np;                    // pieces this block loads
  auto span = [&](int p) { return min(piece, nv - p * piece); }; // vectors of piece p

  if (tid == 0) {
    for (int s = 0; s < slots; ++s) mbar_init(&bar[s], 1);
  }
  __syncthreads();
  // The ring's bookkeeping counts (no divisions): thread 0 loads piece pp of
  // row iteration pr into slot ps next; a reader's slot s flips its phase
  // each time s wraps to 0.
  int pr = 0, pp = 0, ps = 0;
  auto issue = [&]() {
    const u32 bytes = (u32)span(pp) * 16u;
    mbar_expect_tx(&bar[ps], bytes);
    bulk_load(ring + ps * piece, x + (i64)(first + pr * step) * ldx + begin + pp * piece * V, bytes, &bar[ps]);
    if (++pp == np) pp = 0, ++pr;
    if (++ps == slots) ps = 0;
  };
  if (tid == 0) {
    for (int k = 0; k < slots && k < total; ++k) issue();
  }

  // Values are x·scale·log2 e, so that each exponential is one FFMA and an
  // ex2: 2^(x·a − m) with a = scale·log2 e, m the row's max of x·a.
  const float a2 = scale * kLog2e;
  int s0 = 0;   // slot of this row's first piece
  u32 ph0 = 0;  // and its phase
  for (int it = 0; it < nrows; ++it) {
    const int row = first + it * step;
    Stat own{-kinf(), 0.f};
    int s = s0;
    u32 ph = ph0;
    for (int p = 0; p < np; ++p) {
      const int len = span(p);
      const Vec* v = ring + s * piece;
      mbar_wait(&bar[s], ph);
      float m = own.m;
      for (int i = tid; i < len; i += nt) {
        const Vec u = v[i];
#pragma unroll
        for (int e = 0; e < V; ++e) m = fmaxf(m, to_float(u.e[e]) * a2);
      }
      const float ms = safe(m);
      float sum = own.s * ex2(own.m - ms);
      for (int i = tid; i < len; i += nt) {
        const Vec u = v[i];
#pragma unroll
        for (int e = 0; e < V; ++e) sum += ex2(fmaf(to_float(u.e[e]), a2, -ms));
      }
      own = Stat{m, sum};
      if (++s == slots) s = 0, ph ^= 1;
    }
    Stat* half = scratch + (it & 1) * 33;
    Stat all = block_merge(own, half);
    if (nblk > 1) all = cluster_merge(all, half + 32, nblk);
    const float ms = safe(all.m), inv = 1.f / all.s;
    T* yr = y + (i64)row * ldy + begin;
    s = s0;
    for (int p = 0; p < np; ++p) {
      const int len = span(p);
      const Vec* v = ring + s * piece;
      VecBits* out = reinterpret_cast<VecBits*>(yr + p * piece * V);
      for (int i = tid; i < len; i += nt) {
        Vec u = v[i];
#pragma unroll
        for (int e = 0; e < V; ++e) u.e[e] = from_float<T>(ex2(fmaf(to_float(u.e[e]), a2, -ms)) * inv);
        out[i] = u.bits;
      }
      if ((i64)it * np + p + slots < total) { // a piece is left to load into this slot
        __syncthreads();                        // every thread is done with the slot
        if (tid == 0) issue();
      }
      if (++s == slots) s = 0;
    }
    s0 += np;
    if (s0 >= slots) s0 -= slots, ph0 ^= 1;
  }
  if (nblk > 1) cluster_sync(); // no block leaves while another may still read its slots
}
#endif // BULK
