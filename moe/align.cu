// align.cu (moe): AlignBlockSize, the block-aligned sort of vLLM's
// moe_align_block_size, on the counting sort of align_sort.cuh. Expert e's
// pairs start at off[e], the exclusive sum of the padded counts
// ⌈cnt/bs⌉·bs of the experts before it; what no pair fills (each expert's
// padding, everything past the padded total) holds numel, and each block of
// bs positions gets the expert whose range holds it (0 past the total).
// The fused and scatter kernels write those fills, grid-stride, beside the
// pairs: the per-expert padding (fewer than bs per expert), the tail, and
// the block experts by a binary search over off.
//
// The workspace (i32) of the three-kernel path: off[E + 1] | cnt[E] |
// partials[tiles][E].

// align_fill writes every position no pair takes and every block's expert,
// as thread g of G. off[E + 1] and cnt[E] may lie in shared or global
// memory.
KI void align_fill(int* sorted, int* expert_ids, const int* off, const int* cnt, int E, int bs, int numel, int S, int g,
                   int G) {
  for (int e = g; e < E; e += G) {
    for (int i = off[e] + cnt[e]; i < off[e + 1]; i++) sorted[i] = numel;
  }
  const int total = off[E];
  for (int i = total + g; i < S; i += G) sorted[i] = numel;
  for (int j = g; j < S / bs; j += G) {
    expert_ids[j] = (i64)j * bs < total ? sort_find(E, (i64)j * bs, [&](int e) { return off[e]; }) : 0;
  }
}

// align_fused does everything in one block, for pairs that fit one tile.
// Shared memory: cur[WARPS][E] | off[E + 1] | cnt[E].
extern "C" __global__ void __launch_bounds__(WARPS * 32)
align_fused(const int* __restrict__ ids, const int* __restrict__ emap, int numel, int E, int bs, int S,
            int* __restrict__ sorted, int* __restrict__ expert_ids, int* __restrict__ post_pad) {
  wait_prior_grids();
  extern __shared__ int align_smem[];
  __shared__ int wtot[32];
  int* cur = align_smem;
  int* off = cur + WARPS * E;
  int* cnt = off + E + 1;
  for (int i = threadIdx.x; i < WARPS * E; i += blockDim.x) cur[i] = 0;
  __syncthreads();
  const SortRun run = sort_run(0, numel);
  int* mine = cur + (threadIdx.x >> 5) * E;
  sort_warp_count(ids, emap, run, E, mine);
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int c = 0;
#pragma unroll
    for (int w = 0; w < WARPS; w++) c += cur[w * E + e];
    cnt[e] = c;
    off[e] = (c + bs - 1) / bs * bs;
  }
  __syncthreads();
  const int total = sort_scan(off, E, wtot);
  sort_bases(cur, E, [&](int e) { return off[e]; });
  if (threadIdx.x == 0) {
    off[E] = total;
    *post_pad = total;
  }
  __syncthreads();
  align_fill(sorted, expert_ids, off, cnt, E, bs, numel, S, threadIdx.x, blockDim.x);
  sort_warp_scatter(ids, emap, run, E, mine, [&](int f, int e, int p) {
    if (e >= 0) sorted[p] = f;
  });
}

// align_count writes tile blockIdx.x's histogram to its row of partials.
extern "C" __global__ void __launch_bounds__(WARPS * 32)
align_count(const int* __restrict__ ids, const int* __restrict__ emap, int numel, int tile, int E, int* __restrict__ ws) {
  wait_prior_grids();
  extern __shared__ int align_smem[];
  for (int e = threadIdx.x; e < E; e += blockDim.x) align_smem[e] = 0;
  __syncthreads();
  const int lo = blockIdx.x * tile;
  sort_tile_hist(ids, emap, lo, min(numel, lo + tile), E, align_smem);
  __syncthreads();
  int* part = ws + 2 * E + 1 + (i64)blockIdx.x * E;
  for (int e = threadIdx.x; e < E; e += blockDim.x) part[e] = align_smem[e];
}

// align_scan (one block) scans the partials per expert, then the padded
// counts: off, cnt and the padded total. Shared memory: E ints.
extern "C" __global__ void __launch_bounds__(1024)
align_scan(int tiles, int E, int bs, int* __restrict__ ws, int* __restrict__ post_pad) {
  wait_prior_grids();
  extern __shared__ int align_smem[];
  __shared__ int wtot[32];
  int *off = ws, *cnt = ws + E + 1, *part = cnt + E;
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    const int c = sort_columns(part, tiles, E, e);
    cnt[e] = c;
    align_smem[e] = (c + bs - 1) / bs * bs;
  }
  __syncthreads();
  const int total = sort_scan(align_smem, E, wtot);
  for (int e = threadIdx.x; e < E; e += blockDim.x) off[e] = align_smem[e];
  if (threadIdx.x == 0) {
    off[E] = total;
    *post_pad = total;
  }
}

// align_scatter places tile blockIdx.x's pairs and takes its share of the
// fills. Shared memory: cur[WARPS][E].
extern "C" __global__ void __launch_bounds__(WARPS * 32)
align_scatter(const int* __restrict__ ids, const int* __restrict__ emap, int numel, int tile, int E, int bs, int S,
              const int* __restrict__ ws, int* __restrict__ sorted, int* __restrict__ expert_ids) {
  wait_prior_grids();
  extern __shared__ int align_smem[];
  int* cur = align_smem;
  for (int i = threadIdx.x; i < WARPS * E; i += blockDim.x) cur[i] = 0;
  __syncthreads();
  const int lo = blockIdx.x * tile;
  const SortRun run = sort_run(lo, min(numel, lo + tile));
  int* mine = cur + (threadIdx.x >> 5) * E;
  sort_warp_count(ids, emap, run, E, mine);
  __syncthreads();
  const int *off = ws, *cnt = ws + E + 1, *part = cnt + E + (i64)blockIdx.x * E;
  sort_bases(cur, E, [&](int e) { return off[e] + part[e]; });
  __syncthreads();
  align_fill(sorted, expert_ids, off, cnt, E, bs, numel, S, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
  sort_warp_scatter(ids, emap, run, E, mine, [&](int f, int e, int p) {
    if (e >= 0) sorted[p] = f;
  });
}
