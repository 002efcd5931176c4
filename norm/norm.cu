// norm.cu: every row normalization of the family, from one template.
//
// Each row is normalized on its own, so the work is a memory-bound sweep:
// read the row once, reduce it to one or two fp32 statistics, write it once.
// What differs between the ops is small and chosen by defines: which value is
// normalized (x, or x + residual rounded to the storage dtype, or that sum kept
// in fp32), which statistics are reduced (sum of squares, mean then centred
// squares, or the dot product dy·y of L2 backward), and how an element is
// finished (times a weight, 1 + weight, plus a bias).
//
// Two entries share that vocabulary; the Go picker chooses between them.
//  * norm_rows holds the row in registers. A group of GROUP lanes (a power
//    of two up to 32, several rows per warp) or, with GROUP = 0, the whole
//    block owns one row at a time; each thread keeps VPT accesses of VEC
//    elements, packed as stored (two 16-bit values to a register) and widened
//    to fp32 where used. A thread meets the same columns in every row, so its
//    weights and biases are loaded once, before the first row, or, with
//    RELOAD, for each row where they are used (a block that serves one row
//    then holds no registers for them through its loads and reductions, and
//    more blocks fit on an SM). With PREFETCH each row's loads are issued
//    before the previous row is reduced, so that memory does not wait on
//    reductions (at the cost of a second row of registers). Statistics
//    reduce with shuffles (group_sum) or across the block with one barrier
//    per row (see Scratch and row_stats). The grid strides over the rows,
//    or, with WAVES, gives each group exactly one row (or none past the
//    end): then the row loop and its 64-bit bookkeeping compile away and
//    the row's loads are the first thing the kernel does, which matters
//    where a row is a few hundred bytes and the kernel a few hundred
//    instructions a warp. Loops stay warp-uniform so that every shuffle
//    sees all 32 lanes.
//  * norm_rows_looped serves rows too long for registers: one block per row
//    walks the row in strides of the block. With CACHE the first pass parks the
//    values in shared memory and the later passes read them there; without,
//    later passes read global memory again (the row was just read: L2 hits).
//    A thread only ever touches its own accesses of the cache, so the cache
//    needs no barrier.
// In place is safe on both paths: every access is read by the thread that
// later writes it, and a row's outputs are written only after its last read
// (without CACHE the residual is written in the last pass for that reason).
//
// Accesses are 16 bytes (VEC = 16/sizeof(DTYPE)) when every row starts
// 16-byte aligned, else single elements. Partial accesses at the end of a row
// fall back to element loads; with EVEN (N a multiple of VEC) there are none
// and that code is left out. All arithmetic is fp32.
//
// With HINT, 16-byte row reads (x and the second input) ask L2 to evict
// their lines last (Cache::last), as the first-pass loads of torch.compile's
// reductions do. It pays where the data stream through L2 (rmsnorm
// 16384x8192 bf16 on an H200: 134.1 -> 129.3 µs); the picker sets it
// (pickConfig) only where the caller opted in (cuda.Device.SetL2EvictLast),
// since the lines outlive the kernel. The hint on the weights gained nothing
// more.
//
// With ONEPASS (the picker sets it for 16-bit LayerNorm in norm_rows),
// each warp (or group) reduces its sum and sum of squares in one pass,
// around a shift: the unit's first element (see row_stats). fp32 data and
// norm_rows_looped keep two passes. A warp per row (no barrier) is left out:
// it lost to a block per row in one pass (bf16 layernorm 16384x4096 on an
// H200: 75.55 µs against 68.77).
//
// Defines: DTYPE (bf16, f16, float); KIND (0 RMS: rmsnorm and L2 forward,
// 1 LAYER, 2 L2_BWD); ADD (0 none, 1 sum rounded to DTYPE, 2 sum kept in
// fp32); WEIGHT (0 none, 1 w, 2 1 + w); BIAS (0, 1); VEC; EVEN (N is a
// multiple of VEC); VPT; GROUP; PREFETCH (norm_rows loads the next row
// before reducing this one); WAVES (norm_rows serves one row per group);
// RELOAD (norm_rows loads weights and biases for each row); HINT (row reads
// ask L2 to evict them last); ONEPASS (16-bit LayerNorm statistics in one
// pass); FULL (norm_rows: every lane holds VPT whole accesses of the row,
// so its loads need no conditions); EARLY (norm_rows forms RMSNorm's x·w
// before the reduction); TIE (RMS rows: the row's first sum waits for the
// weights); OFF32 (norm_rows: every row offset the grid forms fits in int);
// NCOLS (norm_rows: the rows are NCOLS long and contiguous, 0: from the
// arguments); EXACT (norm_rows in WAVES: the groups cover the rows exactly,
// so no row is checked); LOOPED (which entry this build holds); CACHE;
// THREADS (the block bound); PAD (rows are zero-padded to n_out > n); STATS
// (rstd_out or mean_out is given). The last two keep an unpadded launch without
// statistics free of the checks after its stores (a dozen instructions a
// warp, in a kernel of a few hundred where rows are short).
#include "kittens.cuh"

#define OP_RMS 0  // values of KIND
#define OP_LAYER 1
#define OP_L2_BWD 2

using Elem = DTYPE;

static_assert(VEC == 1 || VEC * sizeof(Elem) == 16, "an access is one element or 16 bytes");
static_assert(GROUP == 0 || (GROUP <= 32 && (GROUP & (GROUP - 1)) == 0), "GROUP is 0 or a power of two up to 32");

// Access is one access of VEC elements as stored, in 32-bit words (16-bit
// elements two to a register). A single 16-bit element is kept in a word of
// its own: the looped cache holds it so (see cacheBytesPerAccess).
using Access = Vec<Elem, VEC, (VEC * sizeof(Elem) >= 16 ? 16 : 4), true>;

// Held is how registers (and the looped cache) keep the value being
// normalized: as stored, except the fp32 sum of the pad kernel (a type of
// its own, which launder leaves alone).
#if ADD == 2
struct Held : Vec<float, VEC> {};
#else
using Held = Access;
#endif

// launder hides how values were made from the compiler, so that it keeps
// the packed words across a reduction and widens them again where they are
// used, instead of keeping fp32 copies alive (twice the registers for 16-bit
// data, and registers bound the occupancy that hides memory latency).
// (Skipping it where a thread holds one access, 8 16-bit elements, lost
// up to 3% on the one-row shapes it was meant for.)
KI void launder(Access& a) {
#pragma unroll
  for (int q = 0; q < (int)(sizeof(a.w) / 4); ++q) asm volatile("" : "+r"(a.w[q]));
}
#if ADD == 2
KI void launder(Held&) {}  // already fp32
#endif

// Row reads (x, the second input) are coherent loads, since x may also be
// written by this kernel (in place); with HINT they ask L2 to evict the line
// last.
// Weights and biases are read-only here and go through the read-only path,
// as a volatile load (Cache::nc): the compiler otherwise sinks them toward
// their first use, which in a block of one row put their L2 round trip
// after the row's instead of beside it.
constexpr Cache kRowCache = HINT ? Cache::last : Cache::plain;

// whole reports whether access i of a row of n is whole: loaded and stored
// as one 16-byte access (with EVEN, every access is).
KI bool whole(int i, int n) { return VEC > 1 && (EVEN || i * VEC + VEC <= n); }

// load_access reads access i of a row as stored; elements at or past n read
// +0. rowRead marks the rows read (x, the second input), not the weights,
// which should stay in L1. (A template, so that the 16-byte loads are only
// instantiated where an access is 16 bytes.)
template <int V = VEC>
KI void load_access(const Elem* row, int i, int n, Access& a, bool rowRead) {
  const int e0 = i * V;
  if constexpr (V > 1) {
    if (whole(i, n)) {
      a = rowRead ? load<Access, kRowCache>(row + e0) : load<Access, Cache::nc>(row + e0);
      return;
    }
  }
  a.zero();
#pragma unroll
  for (int t = 0; t < VEC; ++t)
    if (e0 + t < n) a.put(t, row[e0 + t]);
}

// store_access writes access i of a row, rounding once; elements at or past
// n are left alone.
KI void store_access(Elem* row, int i, int n, const float (&f)[VEC]) {
  const int e0 = i * VEC;
  if constexpr (VEC > 1) {
    if (whole(i, n)) {
      store(row + e0, pack<Access>(f));
      return;
    }
  }
#pragma unroll
  for (int t = 0; t < VEC; ++t)
    if (e0 + t < n) row[e0 + t] = from_float<Elem>(f[t]);
}

// zero_pad writes +0.0 to the columns [n, n_out) of an output row (rmsnorm_pad).
KI void zero_pad(Elem* row, int lane, int threads, int n, int n_out) {
  for (int i = n / VEC + lane; i * VEC < n_out; i += threads) {
    const int e0 = i * VEC;
    if constexpr (VEC > 1) {
      if (e0 >= n && e0 + VEC <= n_out) {
        Access z;
        z.zero();  // +0.0 in every dtype
        store(row + e0, z);
        continue;
      }
    }
#pragma unroll
    for (int t = 0; t < VEC; ++t)
      if (e0 + t >= n && e0 + t < n_out) row[e0 + t] = from_float<Elem>(0.f);
  }
}

// Inputs are one access of the op's row inputs as stored: x, and the second
// input (the residual, or y for L2 backward; left unread otherwise).
struct Inputs {
  Access x, x2;
};

KI void load_inputs(const Elem* x, const Elem* x2, int i, int n, Inputs& in) {
  load_access(x, i, n, in.x, true);
#if ADD != 0 || KIND == OP_L2_BWD
  load_access(x2, i, n, in.x2, true);
#endif
}

// held_of forms the value being normalized: x, or x + residual rounded to
// the dtype, or that sum in fp32. (A template, so that the 16-bit pair
// branch is only instantiated for 16-bit E.)
template <class E = Elem>
KI Held held_of(const Inputs& in) {
  Held h;
#if ADD == 0
  h = in.x;
#elif ADD == 1
  if constexpr (sizeof(E) == 2 && VEC > 1) {
    // Pairs round in one instruction (one cvt of two elements, not two
    // cvts, shifts and an or).
#pragma unroll
    for (int t = 0; t < VEC; t += 2) h.set2(t, in.x.get(t) + in.x2.get(t), in.x.get(t + 1) + in.x2.get(t + 1));
  } else {
    h.zero();
#pragma unroll
    for (int t = 0; t < VEC; ++t) h.set(t, in.x.get(t) + in.x2.get(t));
  }
#else
#pragma unroll
  for (int t = 0; t < VEC; ++t) h.set(t, in.x.get(t) + in.x2.get(t));
#endif
  return h;
}

// fetch reads access i: h is the value being normalized, h2 the second input.
KI void fetch(const Elem* x, const Elem* x2, int i, int n, Held& h, Access& h2) {
  Inputs in;
  load_inputs(x, x2, i, n, in);
  h = held_of(in);
  h2 = in.x2;
}

// first_stat is one access's share of the first reduction. Elements past the
// row's end are zeros and add nothing.
KI float first_stat(const Held& h, const Access& h2) {
  float s = 0.f;
#pragma unroll
  for (int t = 0; t < VEC; ++t) {
    const float a = h.get(t);
#if KIND == OP_RMS
    s = fmaf(a, a, s);
#elif KIND == OP_LAYER
    s += a;
#else
    s = fmaf(a, h2.get(t), s);
#endif
  }
  return s;
}

// centred_squares is one access's share of the LayerNorm variance.
KI float centred_squares(const Held& h, int i, int n, float mean) {
  float s = 0.f;
#pragma unroll
  for (int t = 0; t < VEC; ++t) {
    const float d = i * VEC + t < n ? h.get(t) - mean : 0.f;
    s = fmaf(d, d, s);
  }
  return s;
}

// onePass: LayerNorm of 16-bit data in norm_rows takes its statistics in one
// pass around a shift (ONEPASS, set by the picker; see row_stats).
constexpr bool onePass = ONEPASS;
static_assert(!ONEPASS || (KIND == OP_LAYER && sizeof(Elem) == 2 && !LOOPED), "one pass is for 16-bit LayerNorm rows");

// shifted_sums adds one access's elements less the shift, and their squares,
// to s1 and s2 (one-pass LayerNorm). Elements past the row's end are zeros,
// not values: they add +0 instead. (A branch around the additions took the
// striding LayerNorm kernel from 97 to 108 registers, and slower than two
// passes.)
KI void shifted_sums(const Held& h, int i, int n, float shift, float& s1, float& s2) {
#pragma unroll
  for (int t = 0; t < VEC; ++t) {
    const float d = (EVEN ? i * VEC < n : i * VEC + t < n) ? h.get(t) - shift : 0.f;
    s1 += d;
    s2 = fmaf(d, d, s2);
  }
}

// store_held writes the value being normalized (the fused sum) to a row.
KI void store_held(Elem* row, int i, int n, const Held& h) {
  float a[VEC];
#pragma unroll
  for (int t = 0; t < VEC; ++t) a[t] = h.get(t);
  store_access(row, i, n, a);
}

// Per-row statistics: mean (LayerNorm), the reciprocal r the row is scaled
// by (rstd_in for L2 backward) and the dot product of L2 backward.
struct RowStats {
  float mean, r, dot;
};

// Columns are one access's weight and bias as stored (when the op has them).
struct Columns {
  Access w, b;
};

// A lane whose access lies past the row (a group wider than the row's
// accesses) reads the last access's columns, which it never stores: its own
// would lie past the end of w and bias on the 16-byte path of an EVEN row.
KI void load_columns(const Elem* w, const Elem* bias, int i, int n, Columns& c) {
  i = min(i, (n + VEC - 1) / VEC - 1);
#if WEIGHT != 0
  load_access(w, i, n, c.w, false);
#endif
#if BIAS
  load_access(bias, i, n, c.b, false);
#endif
}

// finish computes one access of the output row.
// gain is element t's weight factor: 1, w or 1 + w.
KI float gain(const Columns& c, int t) {
#if WEIGHT == 0
  return 1.f;
#elif WEIGHT == 1
  return c.w.get(t);
#else
  return 1.f + c.w.get(t);
#endif
}

KI void finish(const Held& h, const Access& h2, const Columns& c, const RowStats& st, float (&o)[VEC]) {
#pragma unroll
  for (int t = 0; t < VEC; ++t) {
    const float a = h.get(t);
#if KIND == OP_L2_BWD
    o[t] = st.r * (a - st.dot * h2.get(t));
#else
    const float g = gain(c, t);
#if BIAS
    const float b = c.b.get(t);
#else
    const float b = 0.f;
#endif
    o[t] = (a - st.mean) * st.r * g + b;  // mean is 0 except for LayerNorm
#endif
  }
}

// Scratch is a block's shared memory for its row statistics: the per-warp
// partial sums, or LayerNorm's per-warp statistics (sum, centred squares,
// mean, element count), in two buffers that consecutive rows alternate, so
// that a row's writes cannot overtake the previous row's reads without a
// second barrier: a thread writes buffer b again only after passing the
// next row's barrier, which every thread reaches after its reads of b.
struct Scratch {
#if KIND == OP_LAYER
  float4 warp[2][32];
#else
  float sum[2][32];
#endif
};

// block_total is block_sum (the same additions in the same order) with one
// barrier instead of two: buf is the row's buffer of Scratch::sum. Blocks
// are whole warps (the picker's sizes are multiples of 32).
KI float block_total(float v, float* buf) {
  const int lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) buf[threadIdx.x >> 5] = v;
  __syncthreads();
  return warp_sum(lane < nw ? buf[lane] : 0.f);
}

// warp_elements counts the row elements of this thread's warp when each lane
// takes the accesses lane, lane + threads, ... (up to `per` of them): the
// weight of the warp's statistics in LayerNorm's merge.
KI int warp_elements(int n, int threads, int per) {
  const int first = threadIdx.x & ~31;
  int c = 0;
  for (int k = 0; k < per; ++k) c += min(max(n - (first + k * threads) * VEC, 0), 32 * VEC);
  return c;
}

// unit_sum sums over this thread's unit: its group, or its warp of the block.
KI float unit_sum(float v) {
#if GROUP > 0
  return group_sum<GROUP>(v);
#else
  return warp_sum(v);
#endif
}

// row_stats finishes a row's statistics from this thread's partial sums: s1
// of first_stat, or for one-pass LayerNorm s1 and s2 of shifted_sums around
// shift. Two-pass LayerNorm needs a second pass over the centred values;
// `centred` computes this thread's share around a given mean (the entry
// knows where the values are). Sums are divided by denom (N, or 1 for
// L2Norm's plain sum). The mean is a division, not a product with 1/N: that
// keeps the mean of an exactly summed row exact, which matters where a
// near-constant row divides by sqrt(eps). Squares, which nothing subtracts
// from afterwards, are multiplied by rdenom (1/N rounded to fp32; within
// an ulp of the quotient), which spares the division's dozen instructions
// and its slow-path branch in every row. With GROUP = 0, `parity` picks the
// Scratch buffer and `count` is warp_elements.
template <class Centred>
KI RowStats row_stats(float s1, float s2, float shift, Scratch& sc, int parity, int count, float rin, float eps,
                      float denom, float rdenom, Centred centred) {
  RowStats st{0.f, 0.f, 0.f};
#if KIND == OP_LAYER
  // First the statistics of this thread's unit (the group that holds the
  // row, or a warp of the block): its element count c, sum, mean and M2 =
  // sum (a - mean)^2.
  const float c = GROUP > 0 ? denom : (float)count;
  float sum, mean, m2;
  if constexpr (onePass) {
    // One pass around the shift K, the unit's first element: with t1 =
    // sum (a - K) and t2 = sum (a - K)^2, mean = K + t1/c and M2 = t2 -
    // t1^2/c. The subtraction cancels about (mean - K)^2 / var ulps of t2: a
    // few where K is a typical value, many where it is an outlier.
    // Simulated in fp32 with this kernel's order of additions against
    // float64, rstd was off by 9e-5 at worst (rows whose first value lies 50
    // sigma out): below a 16-bit output's rounding (bf16 2^-9, f16 2^-12
    // relative), so 16-bit data take it, which drops the second pass over
    // the row and its wait for the unit's mean. fp32 outputs, good to 1e-5,
    // keep two passes. A constant unit
    // stays exact: t1 = t2 = 0. M2 is clamped at 0 by a comparison, not
    // fmaxf, which would turn the NaN of a row holding a NaN or an inf into
    // 0 (and rstd into 1/sqrt(eps)) where the two-pass statistics give NaN.
    const float t1 = unit_sum(s1), t2 = unit_sum(s2);
    const float d = c > 0.f ? t1 / c : 0.f;
    sum = fmaf(c, shift, t1);
    mean = shift + d;
    m2 = fmaf(-t1, d, t2);
    m2 = m2 < 0.f ? 0.f : m2;
  } else {
    sum = unit_sum(s1);
    mean = c > 0.f ? sum / c : 0.f;
    m2 = unit_sum(centred(mean));
  }
#if GROUP > 0
  st.mean = mean;
  st.r = rsqrtf(m2 * rdenom + eps);
#else
  // One barrier per row: each warp publishes (sum, M2_w, m_w, c_w) of its
  // own elements, centred on its own mean m_w as the two-pass formula
  // centres the row; then every warp merges them (Chan et al.): M2 = sum_w
  // M2_w + sum_w c_w (m_w - mean)^2. Two block-wide reductions cost four
  // barriers (two with a second buffer), and their second pass waits for
  // the whole block's mean. Every term of the merge is non-negative, so
  // nothing cancels; what is left is the rounding of m_w and mean (a few
  // ulps of the values' offset), which moves the variance by about eps_f32 *
  // |mean| / sigma / sqrt(c_w) relatively: rstd off by 3.5e-5 at worst in
  // an fp32 simulation of rows N(1e4, 1), whose fp32 inputs are themselves
  // good to 6e-4 sigma only. A constant row stays exact: m_w = mean and
  // M2_w = 0.
  const int lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  float4* buf = sc.warp[parity];
  if (lane == 0) buf[threadIdx.x >> 5] = make_float4(sum, m2, mean, c);
  __syncthreads();
  // Each warp merges all of them, a warp's statistics to a lane (lane-order
  // xor sums give every lane and every warp the same bits).
  const float4 p = lane < nw ? buf[lane] : make_float4(0.f, 0.f, 0.f, 0.f);
  st.mean = warp_sum(p.x) / denom;
  const float dm = p.z - st.mean;
  st.r = rsqrtf(warp_sum(fmaf(p.w * dm, dm, p.y)) * rdenom + eps);
#endif
#else
#if GROUP > 0
  s1 = group_sum<GROUP>(s1);
#else
  s1 = block_total(s1, sc.sum[parity]);
#endif
#if KIND == OP_RMS
  st.r = rsqrtf(s1 * rdenom + eps);
#else
  st.dot = s1;
  st.r = rin;
#endif
#endif
  return st;
}

// write_stats writes a row's statistics where they are asked for.
KI void write_stats(const RowStats& st, float* rstd_out, float* mean_out, i64 row) {
  if (rstd_out) rstd_out[row] = st.r;
  if (mean_out) mean_out[row] = st.mean;
}

#define NORM_PARAMS                                                                                             \
  Elem *y, Elem *res_out, const Elem *x, const Elem *x2, const Elem *__restrict__ w, const Elem *__restrict__ bias, \
      float *rstd_out, float *mean_out, const float *rstd_in, int rows, int n, int n_out, i64 ldy, i64 ldro,   \
      i64 ldx, i64 ldx2, float eps, float denom, float rdenom

#if !LOOPED
static_assert(!EARLY || (KIND == OP_RMS && WEIGHT != 0 && !RELOAD), "EARLY is for RMS rows with weights in registers");
static_assert(!TIE || (KIND == OP_RMS && WEIGHT != 0 && !RELOAD), "TIE ties RMS rows' sums to weights in registers");
static_assert(!EXACT || WAVES, "EXACT is for groups or blocks that serve one row");

// Idx holds rows and row offsets: 32-bit where every offset fits (OFF32).
#if OFF32
typedef int Idx;
#else
typedef i64 Idx;
#endif

extern "C" __global__ void __launch_bounds__(THREADS) norm_rows(NORM_PARAMS) {
  wait_prior_grids();
#if NCOLS
  n = NCOLS;  // contiguous rows of a length known at compile time
  ldx = ldx2 = ldy = ldro = NCOLS;
#endif
  __shared__ Scratch scratch;
  const int accesses = (n + VEC - 1) / VEC;
  // Rows are i64 so that row + step cannot overflow near 2^31 rows (with
  // OFF32, int: the grid's groups serve one row each and all offsets fit).
#if GROUP > 0
  const int lane = threadIdx.x % GROUP, threads = GROUP;
  const int per_block = blockDim.x / GROUP;
  Idx row = (Idx)blockIdx.x * per_block + threadIdx.x / GROUP;
  Idx first = row - (threadIdx.x % 32) / GROUP;  // the warp's first row: uniform across the warp
  const int step = gridDim.x * per_block;
#else
  const int lane = threadIdx.x, threads = blockDim.x;
  Idx row = blockIdx.x, first = row;
  const int step = gridDim.x;
#endif
  const int count = warp_elements(n, threads, VPT);
  int parity = 0;

  // load_row issues the loads of one row (zeros past the end); the loop
  // issues the next row's before it reduces the current one, so that memory
  // stays busy through the reduction. A row past the end has pointers too,
  // never dereferenced: computed once, outside the conditions, they cost a
  // few instructions instead of a copy in each predicated access.
  //
  // With FULL every access a lane holds lies in the row, so the loads go
  // without a per-access condition; a block that owns a row in WAVES
  // (GROUP = 0) always has one too, since the grid is then the rows. Its
  // loads then issue back to back, where each condition had made a branch
  // of its own between them. (Groups keep the row condition unless they
  // cover the rows exactly, EXACT; see kernelKey.withConfig and withRows.)
  auto load_row = [&](Idx rw, Inputs (&in)[VPT]) {
    const Elem *xr = x + rw * (Idx)ldx, *x2r = x2 + rw * (Idx)ldx2;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int i = lane + k * threads;
      if (((FULL && WAVES && GROUP == 0) || EXACT || rw < rows) && (FULL || i < accesses)) {
        load_inputs(xr, x2r, i, n, in[k]);
      } else {
        in[k].x.zero();
        in[k].x2.zero();
      }
    }
  };
  Inputs cur[VPT];
#if PREFETCH || WAVES
  load_row(row, cur);  // before the columns: the row is what the first reduction waits for
#endif
#if !RELOAD
  Columns cols[VPT];
#pragma unroll
  for (int k = 0; k < VPT; ++k) load_columns(w, bias, lane + k * threads, n, cols[k]);
#endif

  // With WAVES the body runs once, also for a warp whose rows all lie past
  // the end (its loads and stores are all skipped).
  for (; WAVES || first < rows; row += step, first += step, parity ^= 1) {
#if !PREFETCH && !WAVES
    load_row(row, cur);
#endif
    const bool live = EXACT || row < rows;
    Elem *yr = y + row * (Idx)ldy, *ror = res_out + row * (Idx)ldro;
#if KIND == OP_L2_BWD
    const float rin = live ? rstd_in[row] : 0.f;
#else
    const float rin = 0.f;
#endif

    Held h[VPT];
    Access h2[VPT];
    float s1 = 0.f, s2 = 0.f, shift = 0.f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      h[k] = held_of(cur[k]);
      h2[k] = cur[k].x2;
      if constexpr (!onePass) s1 += first_stat(h[k], h2[k]);
    }
    if constexpr (onePass) {
      // The shift: the first element of the unit (group, or warp), held by
      // its first lane as access 0 (a zero where the unit is past the end).
      constexpr int unit = GROUP > 0 ? GROUP : 32;
      shift = __shfl_sync(0xffffffffu, h[0].get(0), (threadIdx.x & 31) & ~(unit - 1));
      // An infinite shift would make every difference of the unit NaN,
      // and the mean NaN where it is that infinity: such a unit (and a
      // NaN one, whose statistics are NaN anyway) goes without.
      if (!(fabsf(shift) <= 3.402823466e38f)) shift = 0.f;
#pragma unroll
      for (int k = 0; k < VPT; ++k) shifted_sums(h[k], lane + k * threads, n, shift, s1, s2);
    }
#if ADD != 0
#pragma unroll
    for (int k = 0; k < VPT; ++k)
      if (live && (FULL || lane + k * threads < accesses)) store_held(ror, lane + k * threads, n, h[k]);
#endif
#if PREFETCH
    load_row(row + step, cur);  // the next row, in flight during this one's reductions
#endif

#if EARLY
    // RMSNorm's outputs are x·w·r: x·w is formed now, before the reduction.
    // Without a use of the weights before it, ptxas sank a thread's first
    // weight load into the store's condition, after the reduction, where
    // its L2 round trip added to the row's (one-row 8192-wide shapes were
    // 2% slower). The products take the registers the packed x and w took.
    float pre[VPT][VEC];
#pragma unroll
    for (int k = 0; k < VPT; ++k)
#pragma unroll
      for (int t = 0; t < VEC; ++t) pre[k][t] = h[k].get(t) * gain(cols[k], t);
#endif
#if TIE
    // The sum adds +0 made of the weights' bits and the sign bit of rows
    // (zero, but not to the compiler), so that the loads of the weights
    // issue before it and overlap the row's own; EARLY's products do not
    // hold them there, since the compilers move them to their use after
    // the reduction (see kernelKey.withConfig and withRows).
    u32 wbits = 0;
#pragma unroll
    for (int k = 0; k < VPT; ++k) wbits |= cols[k].w.w[0];
    s1 += __uint_as_float(wbits & (u32)(rows >> 31));
#endif
#pragma unroll
    for (int k = 0; k < VPT; ++k) launder(h[k]), launder(h2[k]);
    const RowStats st = row_stats(s1, s2, shift, scratch, parity, count, rin, eps, denom, rdenom, [&](float mean) {
      float c2 = 0.f;
#pragma unroll
      for (int k = 0; k < VPT; ++k)
        if (live && (FULL || lane + k * threads < accesses)) c2 += centred_squares(h[k], lane + k * threads, n, mean);
      return c2;
    });

#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int i = lane + k * threads;
      float o[VEC];
#if EARLY
#pragma unroll
      for (int t = 0; t < VEC; ++t) o[t] = pre[k][t] * st.r;
#else
#if RELOAD
      Columns ck;
      load_columns(w, bias, i, n, ck);
#else
      Columns& ck = cols[k];
#endif
      launder(h[k]), launder(ck.w), launder(ck.b);
      finish(h[k], h2[k], ck, st, o);
#endif
      if (live && (FULL || i < accesses)) store_access(yr, i, n, o);
    }
#if PAD
    if (live) zero_pad(yr, lane, threads, n, n_out);
#endif
#if STATS
    if (live && lane == 0) write_stats(st, rstd_out, mean_out, row);
#endif
#if WAVES
    break;
#endif
  }
}

#else  // LOOPED

// copy_words parks an access in the cache word by word: parked whole, the
// first pass of bf16 rows was unrolled half as far.
template <class V> KI void copy_words(V& dst, const V& src) {
#pragma unroll
  for (int q = 0; q < (int)(sizeof(src.w) / 4); ++q) dst.w[q] = src.w[q];
}

extern "C" __global__ void __launch_bounds__(THREADS) norm_rows_looped(NORM_PARAMS) {
  wait_prior_grids();
  __shared__ Scratch scratch;
  // The cache: access i of the row at cache_h[i] (and y at cache_y[i] for L2
  // backward). Each thread reads back only what it parked itself.
  extern __shared__ __align__(16) unsigned char cache_bytes[];
  const int accesses = (n + VEC - 1) / VEC;
  Held* cache_h = reinterpret_cast<Held*>(cache_bytes);
  Access* cache_y = reinterpret_cast<Access*>(cache_h + accesses);
  const int lane = threadIdx.x, threads = blockDim.x;
  const int count = warp_elements(n, threads, (accesses + threads - 1) / threads);
  int parity = 0;
  for (int row = blockIdx.x; row < rows; row += gridDim.x, parity ^= 1) {
    const Elem* xr = x + (i64)row * ldx;
    const Elem* x2r = x2 + (i64)row * ldx2;
    Elem* yr = y + (i64)row * ldy;
    Elem* ror = res_out + (i64)row * ldro;
#if KIND == OP_L2_BWD
    const float rin = rstd_in[row];
#else
    const float rin = 0.f;
#endif
    // values returns access i of the row as the first pass saw it.
    auto values = [&](int i, Held& h, Access& h2) {
#if CACHE
      h = cache_h[i];
#if KIND == OP_L2_BWD
      h2 = cache_y[i];
#endif
#else
      fetch(xr, x2r, i, n, h, h2);
#endif
    };

    float s1 = 0.f;
    for (int i = lane; i < accesses; i += threads) {
      Held h;
      Access h2;
      fetch(xr, x2r, i, n, h, h2);
      s1 += first_stat(h, h2);
#if CACHE
      copy_words(cache_h[i], h);
#if KIND == OP_L2_BWD
      copy_words(cache_y[i], h2);
#endif
#if ADD != 0
      store_held(ror, i, n, h);
#endif
#endif
    }

    const RowStats st = row_stats(s1, 0.f, 0.f, scratch, parity, count, rin, eps, denom, rdenom, [&](float mean) {
      float s2 = 0.f;
      for (int i = lane; i < accesses; i += threads) {
        Held h;
        Access h2;
        values(i, h, h2);
        s2 += centred_squares(h, i, n, mean);
      }
      return s2;
    });

    for (int i = lane; i < accesses; i += threads) {
      Held h;
      Access h2;
      Columns c;
      values(i, h, h2);
      load_columns(w, bias, i, n, c);
#if !CACHE && ADD != 0
      store_held(ror, i, n, h);
#endif
      float o[VEC];
      finish(h, h2, c, st, o);
      store_access(yr, i, n, o);
    }
#if PAD
    zero_pad(yr, lane, threads, n, n_out);
#endif
#if STATS
    if (lane == 0) write_stats(st, rstd_out, mean_out, row);
#endif
  }
}
#endif  // LOOPED
