// routing.cu (moe): RoutingData, triton_kernels' routing metadata, on the
// counting sort of align_sort.cuh. Sorted position p of a pair of expert e
// is token_offs_raw[e] plus its rank in f order among e's pairs: gather[p]
// = f, scatter[f] = p, gammas[p] = weights[f] (bits copied). The expert
// scan carries two sums at once in one u64: the count in the low half
// (token_offs_raw), the count of block_m-row tiles in the high half
// (token_offs_pad); the counts sum to at most numel < 2^31, so the low half
// never carries. block_pid_map entry i, i below the tile total, is (i −
// token_offs_pad[e]) << 16 | e for the expert e whose tiles hold it (a
// binary search), −1 past it. The bitmatrix is written a word per thread.
//
// Weights and gammas move as u32 (their f32 bits). The partials are the
// whole workspace of the three-kernel path.

// routing_bits writes the bitmatrix rows of tokens [t0, t1), as thread g of
// G: bit e mod 32 of word e / 32 set where a slot of the token holds e.
KI void routing_bits(const int* ids, int t0, int t1, int k, int E, int words, int* bits, int g, int G) {
  for (int i = g; i < (t1 - t0) * words; i += G) {
    const int t = t0 + i / words, w = i % words;
    u32 word = 0;
    for (int j = 0; j < k; j++) {
      const int e = ids[t * k + j];
      if ((u32)e < (u32)E && (e >> 5) == w) word |= 1u << (e & 31);
    }
    bits[t * words + w] = (int)word;
  }
}

// routing_fill writes block_pid_map and the tail of the sorted arrays past
// the kept pairs, as thread g of G. toff(e) is token_offs_pad[e].
template <class TileOff>
KI void routing_fill(int* pid_map, int* gather, u32* gammas, TileOff toff, int kept, int tiles, int E, int max_tiles,
                     int numel, int g, int G) {
  for (int i = g; i < max_tiles; i += G) {
    int v = -1;
    if (i < tiles) {
      const int e = sort_find(E, i, toff);
      v = (int)(((u32)(i - toff(e)) << 16) | (u32)e);
    }
    pid_map[i] = v;
  }
  for (int p = kept + g; p < numel; p += G) {
    gather[p] = -1;
    if (gammas != nullptr) gammas[p] = 0;
  }
}

// routing_emit stores pair f of bucket e at sorted position p.
struct RoutingEmit {
  const u32* weights;
  int *gather, *scatter;
  u32* gammas;
  KI void operator()(int f, int e, int p) const {
    if (e < 0) {
      scatter[f] = -1;
      return;
    }
    gather[p] = f;
    scatter[f] = p;
    if (gammas != nullptr) gammas[p] = weights[f];
  }
};

// routing_fused does everything in one block, for pairs that fit one tile.
// Shared memory: packed offsets sv[E] (u64) | cur[WARPS][E].
extern "C" __global__ void __launch_bounds__(WARPS * 32)
routing_fused(const int* __restrict__ ids, const u32* __restrict__ weights, int T, int k, int E, int bm, int words,
              int max_tiles, int* __restrict__ bits, int* __restrict__ hist, int* __restrict__ offs_raw,
              int* __restrict__ offs_pad, int* __restrict__ pid_map, int* __restrict__ gather,
              int* __restrict__ scatter, u32* __restrict__ gammas) {
  wait_prior_grids();
  extern __shared__ u64 routing_smem[];
  __shared__ u64 wtot[32];
  u64* sv = routing_smem;
  int* cur = reinterpret_cast<int*>(sv + E);
  const int numel = T * k;
  routing_bits(ids, 0, T, k, E, words, bits, threadIdx.x, blockDim.x);
  for (int i = threadIdx.x; i < WARPS * E; i += blockDim.x) cur[i] = 0;
  __syncthreads();
  const SortRun run = sort_run(0, numel);
  int* mine = cur + (threadIdx.x >> 5) * E;
  sort_warp_count(ids, nullptr, run, E, mine);
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int c = 0;
#pragma unroll
    for (int w = 0; w < WARPS; w++) c += cur[w * E + e];
    hist[e] = c;
    sv[e] = ((u64)((c + bm - 1) / bm) << 32) | (u32)c;
  }
  __syncthreads();
  const u64 total = sort_scan(sv, E, wtot);
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    offs_raw[e] = (int)(u32)sv[e];
    offs_pad[e] = (int)(sv[e] >> 32);
  }
  if (threadIdx.x == 0) {
    offs_raw[E] = (int)(u32)total;
    offs_pad[E] = (int)(total >> 32);
  }
  sort_bases(cur, E, [&](int e) { return (int)(u32)sv[e]; });
  __syncthreads();
  routing_fill(pid_map, gather, gammas, [&](int e) { return (int)(sv[e] >> 32); }, (int)(u32)total, (int)(total >> 32),
               E, max_tiles, numel, threadIdx.x, blockDim.x);
  sort_warp_scatter(ids, nullptr, run, E, mine, RoutingEmit{weights, gather, scatter, gammas});
}

// routing_count writes the bitmatrix rows of tile blockIdx.x's tokens and
// its histogram to its row of partials (the workspace).
extern "C" __global__ void __launch_bounds__(WARPS * 32)
routing_count(const int* __restrict__ ids, int T, int k, int tile_tokens, int E, int words, int* __restrict__ bits,
              int* __restrict__ part) {
  wait_prior_grids();
  extern __shared__ int routing_hist[];
  const int t0 = blockIdx.x * tile_tokens, t1 = min(T, t0 + tile_tokens);
  routing_bits(ids, t0, t1, k, E, words, bits, threadIdx.x, blockDim.x);
  for (int e = threadIdx.x; e < E; e += blockDim.x) routing_hist[e] = 0;
  __syncthreads();
  sort_tile_hist(ids, nullptr, t0 * k, t1 * k, E, routing_hist);
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) part[(i64)blockIdx.x * E + e] = routing_hist[e];
}

// routing_scan (one block) scans the partials per expert, then the packed
// counts and tiles: hist, token_offs_raw, token_offs_pad. Shared memory: E
// u64.
extern "C" __global__ void __launch_bounds__(1024)
routing_scan(int tiles, int E, int bm, int* __restrict__ part, int* __restrict__ hist, int* __restrict__ offs_raw,
             int* __restrict__ offs_pad) {
  wait_prior_grids();
  extern __shared__ u64 routing_smem[];
  __shared__ u64 wtot[32];
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    const int c = sort_columns(part, tiles, E, e);
    hist[e] = c;
    routing_smem[e] = ((u64)((c + bm - 1) / bm) << 32) | (u32)c;
  }
  __syncthreads();
  const u64 total = sort_scan(routing_smem, E, wtot);
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    offs_raw[e] = (int)(u32)routing_smem[e];
    offs_pad[e] = (int)(routing_smem[e] >> 32);
  }
  if (threadIdx.x == 0) {
    offs_raw[E] = (int)(u32)total;
    offs_pad[E] = (int)(total >> 32);
  }
}

// routing_scatter places tile blockIdx.x's pairs and takes its share of the
// fills. Shared memory: cur[WARPS][E].
extern "C" __global__ void __launch_bounds__(WARPS * 32)
routing_scatter(const int* __restrict__ ids, const u32* __restrict__ weights, int numel, int tile, int E, int max_tiles,
                const int* __restrict__ part, const int* __restrict__ offs_raw, const int* __restrict__ offs_pad,
                int* __restrict__ pid_map, int* __restrict__ gather, int* __restrict__ scatter,
                u32* __restrict__ gammas) {
  wait_prior_grids();
  extern __shared__ int routing_hist[];
  int* cur = routing_hist;
  for (int i = threadIdx.x; i < WARPS * E; i += blockDim.x) cur[i] = 0;
  __syncthreads();
  const int lo = blockIdx.x * tile;
  const SortRun run = sort_run(lo, min(numel, lo + tile));
  int* mine = cur + (threadIdx.x >> 5) * E;
  sort_warp_count(ids, nullptr, run, E, mine);
  __syncthreads();
  const int* mypart = part + (i64)blockIdx.x * E;
  sort_bases(cur, E, [&](int e) { return offs_raw[e] + mypart[e]; });
  __syncthreads();
  routing_fill(pid_map, gather, gammas, [&](int e) { return offs_pad[e]; }, offs_raw[E], offs_pad[E], E, max_tiles,
               numel, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
  sort_warp_scatter(ids, nullptr, run, E, mine, RoutingEmit{weights, gather, scatter, gammas});
}
