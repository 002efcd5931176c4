// conv1d.cu: causal depthwise conv1d over token-major activations. One
// kernel serves every entry point of the package: varlen prefill, dense
// batches, decode (one or several new tokens), and the split-QKV forms.
//
// Threads. A thread owns VEC adjacent channels (VEC·sizeof(T) ≤ 16 bytes,
// as wide as the layout's alignment and the launch picker allow) and a run
// of consecutive tokens of one sequence. It keeps the previous W-1 inputs of
// its channels in fp32 registers and slides that window along its tokens, so
// x is read once and y written once; the only extra traffic is a W-1 token
// halo at the start of a chunk, which the neighbouring chunk has just pulled
// into L2. Loads of UNROLL tokens are issued before any arithmetic so that
// each thread keeps several requests in flight; a one-token loop finishes
// the chunk. Single-token decode runs UNROLL = 1. In the prologue the taps,
// the bias, the halo and the first batch of tokens are issued before the
// slot index is waited on, and only the state's loads wait for it. MINB
// caps the registers (launch bounds) so that MINB blocks of 128 threads
// fit on an SM. For bf16, SiLU is one
// tanh.approx on a half-scale pre-activation; for f16 and f32 it uses the
// approximate ex2 and rcp units (relative error about 1e-7). 16-bit values
// are converted two at a time, straight from and to the loaded words.
// HINTS (chosen for decode) reads x through the non-coherent path and
// stores y as streaming.
//
// Ring (RING > 0, prefill with 16-byte aligned rows). Instead of register
// batches, thread 0 bulk-copies (cp.async.bulk) the block's slice of RING
// rows at a time into a Ring (tile.cuh) of STAGES stages in shared memory;
// the threads read their channels from shared memory, and each warp
// releases the stage when done, after which thread 0 refills it. A 16-token
// chunk is thus wholly in flight as soon as the block starts, without the
// registers a batch took (2-3% faster than register batches on the
// benchmark shapes; NOTES.md). With EVICT_LAST the copies ask L2 to evict
// their lines last.
//
// Grid. Channel blocks run along x, fastest, so that the blocks in flight
// read and write whole rows; slots along y, spilling into z past 65535
// (slot g = blockIdx.z·gridDim.y + blockIdx.y: no division; the surplus of
// that rounding exits). Slots are (sequence, chunk) pairs: with uniform
// sequences (dense batches, decode) slot g is chunk g % cps of sequence
// g / cps (decode: cps = 1, no division either). With cu_seqlens,
// sequence b owns the slots [cu[b]/C + b, cu[b+1]/C + b + 1): at least
// ceil(L_b/C) of them, and the grid is T/C + B slots long; a block finds its
// sequence by a binary search over cu_seqlens. Surplus slots exit at once.
// No chunk spans two sequences, and only chunk 0 of a sequence reaches back
// into the state.
//
// State. Chunk 0 of a sequence is its owner: it alone reads the initial
// window from the conv state and writes the final state (the last state_len
// entries of [old state | x], oldest first), so the pool is updated in place
// without races between blocks. Within the owner, the window is read first;
// columns older than the last W-1 (only when state_len > W-1) are written
// before the tokens are processed, in ascending order (column j's value
// comes from column j+L or from x, neither overwritten yet); the last W-1
// columns are written at the end, straight from the sliding window when the
// whole sequence is in this chunk (decode: no re-reads), else from x. Each
// row of x is read before the same thread writes that row of y, and nothing
// re-reads x afterwards, so an in-place decode (y = x, one chunk per
// sequence) is correct.
//
// Outputs. Channels [0, split1) go to out0, [split1, split2) to out1 and the
// rest to out2, each with its own row stride: the plain forms pass split1 =
// split2 = dim, the split-QKV forms the q/k/v boundaries.
//
// Decode modes (MODE). kShift is the rule above. kSpec (speculative
// decoding, modes[b] = accepted tokens) reads the window at state column
// accepted-1 and keeps old columns [accepted, accepted + state_len - L)
// before the new inputs; kCircular (modes[b] = cache seqlen) reads the
// window just before ring position p = cache_seqlen mod state_len and writes
// input i at (p + i) mod state_len. Both only change which columns the
// owner reads and writes; the same ascending order keeps them correct in
// place (a spec column's source lies to its right, a ring column's source is
// x).
//
// Guards. A sequence whose bounds are outside [0, n_tokens] or whose slot is
// beyond the pool is skipped and reported in *err (bit 1: slot, bit 2:
// cu_seqlens, bit 4: an accepted count outside [1, L] or a negative cache
// seqlen), so that unchecked indices never reach memory they do not own. A
// decreasing cu_seqlens is reported (bit 2) but not repaired: the binary
// search then may find the wrong sequence for a slot.
#include "kittens.cuh"
#include "tile.cuh"

typedef DTYPE T;
constexpr int W = WIDTH;                      // taps
constexpr int kShift = 0, kSpec = 1, kCircular = 2;  // MODE: the decode state rule

// Raw is the VEC channels of one token in storage format, moved as one
// access; 16-bit channels are converted two at a time, straight from and to
// the 32-bit words they are loaded in (unpack, pack).
using Raw = Vec<T, VEC>;

// kTanh: SiLU through one tanh.approx (relative error about 2^-11, far
// below bf16's 2^-9 rounding), on a pre-activation computed at half scale.
// f16 keeps the two-unit form: its outputs resolve 2^-11.
constexpr bool kTanh = SILU && same<T, bf16>;

KI Raw ld(const T* p) { return load<Raw>(p); }
KI void st(T* p, const Raw& r) { store(p, r); }

// With HINTS, x is read through the non-coherent path without allocating in
// L1, and y is stored as streaming (evict first): both are touched once.
// HINTS is off for in-place calls, where x is also written.
constexpr Cache kHint = HINTS ? Cache::stream : Cache::plain;
KI Raw ld_x(const T* p) { return load<Raw, kHint>(p); }
KI void st_y(T* p, const Raw& r) { store<kHint>(p, r); }

#if RING
constexpr int kBytes = VEC * (int)sizeof(T);  // bytes a thread moves per token
// The ring's bulk copies read x under Cache::last with EVICT_LAST, which the
// picker sets only where the caller opted in (cuda.Device.SetL2EvictLast):
// the lines outlive the kernel.
constexpr Cache kRingCache = EVICT_LAST ? Cache::last : Cache::plain;
#endif

// silu(v) = v / (1 + 2^(-v·log2 e)), through the approximate ex2 and rcp
// units (relative error about 1e-7).
KI float silu(float v) {
  float e, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(v * -1.4426950408889634f));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.f + e));
  return v * r;
}

// silu_half returns silu(2h) = h + h·tanh(h): with sigmoid(v) =
// (1 + tanh(v/2))/2, one MUFU operation instead of two. The caller computes
// h = v/2 by halving the taps and bias (exact).
KI float silu_half(float h) {
  float t;
  asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(h));
  return fmaf(h, t, h);
}

// Conv holds one thread's taps, bias and sliding window, in fp32.
struct Conv {
  float w[W][VEC], b[VEC];
  float win[W - 1][VEC];  // win[m] = x~[t - (W-1) + m] for the next token t

  // step consumes token x and returns its output.
  KI Raw step(const Raw& x) {
    float xv[VEC], acc[VEC];
    unpack(x, xv);
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      float a = b[i];
#pragma unroll
      for (int m = 0; m < W - 1; ++m) a = fmaf(w[m][i], win[m][i], a);
      a = fmaf(w[W - 1][i], xv[i], a);
#if SILU
      a = kTanh ? silu_half(a) : silu(a);
#endif
      acc[i] = a;
    }
#pragma unroll
    for (int m = 0; m < W - 2; ++m)
#pragma unroll
      for (int i = 0; i < VEC; ++i) win[m][i] = win[m + 1][i];
#pragma unroll
    for (int i = 0; i < VEC; ++i) win[W - 2][i] = xv[i];
    return pack<Raw>(acc);
  }
};

KI Raw zero_raw() {
  Raw r;
  r.zero();
  return r;
}

extern "C" __global__ void __launch_bounds__(128, MINB) conv1d_fwd(
    const T* x, int x_stride, int n_tokens, int dim,
    const T* __restrict__ w, const T* __restrict__ bias,
    T* out0, T* out1, T* out2, int os0, int os1, int os2, int split1, int split2,
    const int* cu, int seq_len, int n_seqs,
    const int* slots, const u8* has_init,
    const T* state_in, long long in_slot_stride, int in_col_stride,
    T* state_out, long long out_slot_stride, int out_col_stride,
    int n_slots, int state_len, int chunk, const int* modes, int* err) {
  wait_prior_grids();
  const int g = blockIdx.z * gridDim.y + blockIdx.y;  // slot
  const bool reporter = blockIdx.x == 0 && threadIdx.x == 0 && err != nullptr;
#if RING
  // The block's channels start at cb0; pitch is a ring row, row_bytes the
  // part of it inside dim. The barriers are set up before any thread can
  // leave: empty[] counts the warps that hold channels.
  extern __shared__ __align__(128) unsigned char stages[];
  __shared__ u64 full[STAGES], empty[STAGES];
  const Ring ring{full, empty, STAGES};
  const int cb0 = blockIdx.x * blockDim.x * VEC;
  const int pitch = blockDim.x * kBytes;
  const int live = min((int)blockDim.x, (dim - cb0) / VEC);  // threads with channels
  const int row_bytes = live * kBytes;
  const int in_warp = live - (int)(threadIdx.x & ~31u);
  const unsigned warp_mask = in_warp >= 32 ? 0xffffffffu : (1u << in_warp) - 1;
  if (threadIdx.x == 0) ring.init((live + 31) / 32);
  __syncthreads();
#endif

  // Which sequence and which chunk of it this block handles. The index
  // loads that depend only on the sequence are issued together.
  int b, k;
  long long start, end;
  if (cu != nullptr) {
    int lo = 0, hi = n_seqs - 1;  // the last b with cu[b]/chunk + b <= g
    while (lo < hi) {
      const int mid = (lo + hi + 1) >> 1;
      if (cu[mid] / chunk + mid <= g) lo = mid; else hi = mid - 1;
    }
    b = lo;
    start = cu[b];
    end = cu[b + 1];
    k = g - (int)(start / chunk) - b;
    if (reporter && g == 0 && (cu[0] != 0 || cu[n_seqs] != n_tokens)) atomicOr(err, 2);
    // Slot g < n_seqs (the grid has at least n_seqs slots) checks entry
    // g + 1, so a decrease is reported whatever sequences the search found.
    if (reporter && g < n_seqs && cu[g + 1] < cu[g]) atomicOr(err, 2);
  } else {
    const int cps = (seq_len + chunk - 1) / chunk;
    b = cps == 1 ? g : g / cps;  // decode: one chunk per sequence, no division
    k = g - b * cps;
    if (b >= n_seqs) return;  // the grid's z rounding
    start = (long long)b * seq_len;
    end = start + seq_len;
  }
  const int slot = slots != nullptr ? slots[b] : b;
  const bool flagged = has_init == nullptr || has_init[b] != 0;
  const int mv = MODE != kShift ? modes[b] : 0;  // accepted count or cache seqlen
  if (start < 0 || end < start || end > n_tokens) {
    if (reporter && k == 0) atomicOr(err, 2);
    return;
  }
  const long long tbeg = start + (long long)k * chunk;
  if (k < 0 || tbeg >= end) return;  // surplus slot, or an empty sequence
  const long long tend = end < tbeg + chunk ? end : tbeg + chunk;
  const int c0 = (blockIdx.x * blockDim.x + threadIdx.x) * VEC;
  if (c0 >= dim) return;
  const T* xc = x + c0;
  const bool owner = k == 0;

  // The taps (VEC·W contiguous values: W words), the bias, for a later
  // chunk the halo, and the first batch of tokens do not depend on the
  // slot: they are in flight while the slot index is waited on. Nothing
  // loaded is converted before then, so that the window (from the state or
  // the halo) and the first tokens arrive together.
  Raw wr[W], br, win[W - 1];
#pragma unroll
  for (int j = 0; j < W; ++j) wr[j] = ld(w + (long long)c0 * W + j * VEC);
  br = bias != nullptr ? ld(bias + c0) : zero_raw();
  if (!owner) {
#pragma unroll
    for (int m = 0; m < W - 1; ++m) win[m] = ld_x(xc + (tbeg - (W - 1) + m) * x_stride);
  }

#if !RING
  // Batches of UNROLL tokens, each loaded before any of it is computed; a
  // one-token loop finishes the chunk. The loop is rotated so that the
  // first batch is issued here, before the slot index is waited on: x
  // depends only on the sequence, and it is never a conv state, so its
  // loads may also pass the state writes below (decode B256: 16.5 → 16.0 µs
  // against issuing it after the slot index and the window's loads).
  long long t = tbeg;
  Raw buf[UNROLL];
  auto load_batch = [&] {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) buf[u] = ld_x(xc + (t + u) * x_stride);
  };
  if (t + UNROLL <= tend) load_batch();
#endif

  const bool stateful = state_in != nullptr || state_out != nullptr;
  if (slot < 0) return;  // pad slot: the sequence is skipped entirely
  if (stateful && slot >= n_slots) {
    if (reporter && k == 0) atomicOr(err, 1);
    return;
  }
  if ((MODE == kSpec && (mv < 1 || mv > end - start)) || (MODE == kCircular && mv < 0)) {
    if (reporter && k == 0) atomicOr(err, 4);
    return;
  }

  // This thread's output column.
  T* out;
  int os;
  if (c0 < split1) { out = out0 + c0; os = os0; }
  else if (c0 < split2) { out = out1 + (c0 - split1); os = os1; }
  else { out = out2 + (c0 - split2); os = os2; }

  const bool init = owner && state_in != nullptr && flagged;
  const T* si = init ? state_in + slot * in_slot_stride + c0 : nullptr;
  T* so = owner && state_out != nullptr ? state_out + slot * out_slot_stride + c0 : nullptr;
  const long long len = end - start;
  const int older = state_len - (W - 1);  // state columns before the window
  // The decode modes. Column j of the new row is entry len + j of
  // [old row | x]: an input when len + j >= state_len, else old column
  // old_col(len + j). Spec: the row keeps old columns [accepted,
  // accepted + state_len - len). Circular: the row is a ring starting at
  // rpos = (cache_seqlen + len) mod state_len; columns that hold no new
  // input are left alone.
  const int rpos = MODE == kCircular ? (int)(((long long)mv + len) % state_len) : 0;
  auto old_col = [&](long long h) { return MODE == kSpec ? h - len + mv : h; };
  auto new_col = [&](int j) { return MODE == kCircular ? (rpos + j < state_len ? rpos + j : rpos + j - state_len) : j; };
  if (owner) {
#pragma unroll
    for (int m = 0; m < W - 1; ++m) {
      // The window: x~[-(W-1) + m].
      int c = older + m;
      if (MODE == kSpec) c = mv - 1 + m;
      if (MODE == kCircular) c = (int)(((long long)mv + c) % state_len);
      win[m] = init ? ld(si + (long long)c * in_col_stride) : zero_raw();
    }
    // Final-state columns older than the last W-1: x~[len - state_len + j].
    // Written in ascending order, kOlderBatch columns at a time, every
    // source of a batch loaded before any of it is written: column j's
    // source, old_col(len + j) > j, lies right of every column written so
    // far. A column at a time, each load waits for the previous store (the
    // compiler cannot tell si from so; spec4 B32: 8.9 → 8.4 µs batched).
    // The ring (prefill) writes one column at a time: batched there, its
    // kernel ran 3-7% slower, not because of the writes (one block of a
    // sequence makes them); why is not established.
    if (so != nullptr) {
      constexpr int kOlderBatch = RING ? 1 : 4;
      for (int j0 = 0; j0 < older; j0 += kOlderBatch) {
        Raw v[kOlderBatch];
#pragma unroll
        for (int u = 0; u < kOlderBatch; ++u) {
          const long long h = len + j0 + u;  // index into [old state | x]
          if (j0 + u >= older) break;
          if (h >= state_len) v[u] = ld(xc + (start + h - state_len) * x_stride);
          else if (init) v[u] = ld(si + old_col(h) * in_col_stride);
          else v[u] = zero_raw();
        }
#pragma unroll
        for (int u = 0; u < kOlderBatch; ++u) {
          const int j = j0 + u;
          if (j >= older) break;
          if (MODE == kCircular && len + j < state_len) continue;
          st(so + (long long)new_col(j) * out_col_stride, v[u]);
        }
      }
    }
  }

#if RING
  // The ring: thread 0 bulk-copies stage i (RING rows of the block's
  // channels) into slot i % STAGES; once every warp has released the slot it
  // refills it with stage i + STAGES. The first STAGES stages are issued
  // before anything loaded is converted.
  const int nst = (int)((tend - tbeg + RING - 1) / RING);
  auto issue = [&](int i) {
    const int sl = RingPos::at(i, STAGES).slot;
    const long long r0 = tbeg + (long long)i * RING;
    const int rows = (int)(tend - r0 < RING ? tend - r0 : RING);
    u64* bar = ring.commit(sl, (u32)(rows * row_bytes));
    for (int r = 0; r < rows; ++r)
      bulk_load<kRingCache>(stages + (sl * RING + r) * pitch, x + (r0 + r) * x_stride + cb0, (u32)row_bytes, bar);
  };
  if (threadIdx.x == 0)
    for (int i = 0; i < STAGES && i < nst; ++i) issue(i);
#endif

  // fp32 taps and bias, halved when the SiLU takes the half-scale
  // pre-activation, and the window.
  constexpr float kScale = kTanh ? 0.5f : 1.f;
  Conv cv;
#pragma unroll
  for (int i = 0; i < VEC; ++i)
#pragma unroll
    for (int j = 0; j < W; ++j) cv.w[j][i] = kScale * wr[(i * W + j) / VEC].get((i * W + j) % VEC);
  unpack(br, cv.b);
#pragma unroll
  for (int i = 0; i < VEC; ++i) cv.b[i] *= kScale;
#pragma unroll
  for (int m = 0; m < W - 1; ++m) unpack(win[m], cv.win[m]);

#if RING
  const unsigned char* mine = stages + threadIdx.x * kBytes;
  auto lds = [&](int sl, int r) { return *reinterpret_cast<const Raw*>(mine + (sl * RING + r) * pitch); };
  for (int i = 0; i < nst; ++i) {
    const RingPos use = RingPos::at(i, STAGES);
    const int sl = use.slot;
    ring.wait(use);
    const long long r0 = tbeg + (long long)i * RING;
    if (r0 + RING <= tend) {
      Raw buf[RING];
#pragma unroll
      for (int u = 0; u < RING; ++u) buf[u] = lds(sl, u);
#pragma unroll
      for (int u = 0; u < RING; ++u) st_y(out + (r0 + u) * os, cv.step(buf[u]));
    } else {
      for (long long t = r0; t < tend; ++t) st_y(out + t * os, cv.step(lds(sl, (int)(t - r0))));
    }
    ring.release(sl, warp_mask);
    if (threadIdx.x == 0 && i + STAGES < nst) {
      ring.acquire(RingPos::at(i + STAGES, STAGES));
      issue(i + STAGES);
    }
  }
#else
  while (t + UNROLL <= tend) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) st_y(out + (t + u) * os, cv.step(buf[u]));
    t += UNROLL;
    if (t + UNROLL <= tend) load_batch();
  }
  for (; t < tend; ++t) st_y(out + t * os, cv.step(ld_x(xc + t * x_stride)));
#endif

  // The last W-1 final-state columns: x~[len-(W-1) .. len-1], which the
  // window holds once it has reached the sequence end. In spec mode, those
  // that are not inputs (len < W-1) are old columns instead.
  if (so != nullptr) {
    const bool whole = tend == end;
#pragma unroll
    for (int m = 0; m < W - 1; ++m) {
      const bool input = len + m >= W - 1;
      if (MODE == kCircular && !input) continue;
      Raw v;
      if (MODE == kSpec && !input) v = ld(si + old_col(len + older + m) * in_col_stride);
      else v = whole ? pack<Raw>(cv.win[m]) : ld(xc + (end - (W - 1) + m) * x_stride);
      st(so + (long long)new_col(older + m) * out_col_stride, v);
    }
  }
}
