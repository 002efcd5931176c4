// tile.cuh: Hopper tile plumbing. mbarriers in shared memory and the
// producer/consumer ring built on them, TMA tile loads (cp.async.bulk.tensor)
// and plain bulk copies that complete on an mbarrier, and the
// thread-block-cluster queries, barriers and shared-memory mapping. Tensor
// maps arrive as `const __grid_constant__ TensorMap` kernel parameters.
#pragma once
#include "kittens.cuh"

struct __align__(64) TensorMap { u64 raw[16]; };

KI u32 smem_addr(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// mbarrier: init with the number of arriving threads, arm with the bytes the
// TMA will deliver (or arrive plainly, for a count of threads), then wait on
// the phase parity.
KI void mbar_init(u64* bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_addr(bar)), "r"(count));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
KI void mbar_expect_tx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_addr(bar)), "r"(bytes) : "memory");
}
KI void mbar_arrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(smem_addr(bar)) : "memory");
}
KI void mbar_wait(u64* bar, u32 phase) {
  asm volatile(
      "{\n .reg .pred p;\n WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra WAIT_%=;\n}\n" :: "r"(smem_addr(bar)), "r"(phase) : "memory");
}
// mbar_test tests, without waiting, whether the phase of the given parity
// has completed.
KI bool mbar_test(u64* bar, u32 phase) {
  u32 ok;
  asm volatile("{\n .reg .pred p;\n mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
               : "=r"(ok) : "r"(smem_addr(bar)), "r"(phase) : "memory");
  return ok != 0;
}
// mbar_wait_cluster waits like mbar_wait for a phase whose arrivals came
// from other blocks of the cluster, with acquire at cluster scope so that
// their stores before arriving are seen.
KI void mbar_wait_cluster(u64* bar, u32 phase) {
  asm volatile(
      "{\n .reg .pred p;\n WAIT_%=:\n"
      " mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra WAIT_%=;\n}\n" :: "r"(smem_addr(bar)), "r"(phase) : "memory");
}

// tma_load_2d copies the box at (x innermost, y) of a 2-D tensor map into
// shared memory, completing on bar.
KI void tma_load_2d(void* dst, const TensorMap* map, u64* bar, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
      :: "r"(smem_addr(dst)), "l"(map), "r"(smem_addr(bar)), "r"(x), "r"(y) : "memory");
}

// bulk_load copies bytes (a multiple of 16; src and dst 16-byte aligned)
// from global memory into shared memory, completing on bar, which the
// issuing thread has armed for them (mbar_expect_tx, or Ring::commit). With
// Cache::last its reads ask L2 to evict the lines last (see Cache in
// kittens.cuh).
template <Cache H = Cache::plain> KI void bulk_load(void* dst, const void* src, u32 bytes, u64* bar) {
  if constexpr (H == Cache::last) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
                 :: "r"(smem_addr(dst)), "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(l2_evict_last()) : "memory");
  } else {
    static_assert(H == Cache::plain, "bulk copies read plainly or under Cache::last");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(smem_addr(dst)), "l"(src), "r"(bytes), "r"(smem_addr(bar)) : "memory");
  }
}

// Ring is a producer/consumer ring of `slots` shared-memory buffers (the
// caller lays them out), each guarded by two mbarriers: full[s] completes
// when the bytes committed to slot s have landed, empty[s] when every
// consumer warp has released it. The producer and each consumer walk the
// slots with a RingPos of their own, which holds the slot and the parity of
// its lap; they meet only through the barriers.
//
//   producer:  ring.acquire(pos);                  // slot pos.slot is free
//              u64* bar = ring.commit(pos.slot, bytes);
//              bulk_load(..., bar) for those bytes; pos.next(ring.slots);
//   consumer:  ring.wait(pos) (or ring.ready(pos), without waiting);
//              read slot pos.slot; pos.next(ring.slots);
//              ... once done with the slot s: ring.release(s, mask);
//
// A consumer may release a slot long after it waited for it: the waiting
// and the releasing positions are apart. One thread calls init before a
// barrier of the block (or the cluster) that every user passes.
struct RingPos {
  int slot = 0;
  u32 lap = 0;  // parity of the lap: the phase of full[slot] to wait for
  KI void next(int slots) {
    if (++slot == slots) slot = 0, lap ^= 1;
  }
  // at is the position of the n-th fill (or use) of a ring: cheap where
  // slots is a compile-time power of two.
  KI static RingPos at(int n, int slots) { return RingPos{n % slots, (u32)(n / slots) & 1}; }
};

struct Ring {
  u64* full;
  u64* empty;
  int slots;

  // init sets up the barriers: one producer arrival (with the bytes) fills a
  // slot, `consumers` warp arrivals free it.
  KI void init(u32 consumers) const {
    for (int s = 0; s < slots; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], consumers);
  }
  // acquire waits until the producer's slot is free: every consumer released
  // it in the previous lap. On the first lap it returns at once (the phase
  // before a barrier's first counts as complete); a producer that counts its
  // fills may skip it there.
  KI void acquire(const RingPos& p) const { mbar_wait(&empty[p.slot], p.lap ^ 1); }
  // commit arms the slot for `bytes` (a multiple of 16) and returns the
  // barrier the copies that bring them complete on.
  KI u64* commit(int slot, u32 bytes) const {
    mbar_expect_tx(&full[slot], bytes);
    return &full[slot];
  }
  // wait waits until the consumer's slot is full; ready tests it.
  KI void wait(const RingPos& p) const { mbar_wait(&full[p.slot], p.lap); }
  KI bool ready(const RingPos& p) const { return mbar_test(&full[p.slot], p.lap); }
  // release frees a slot for the producer once this warp (the lanes in
  // mask) is done with it: lane 0 arrives for the warp.
  KI void release(int slot, u32 mask = 0xffffffffu) const {
    __syncwarp(mask);
    if ((threadIdx.x & 31) == 0) mbar_arrive(&empty[slot]);
  }
};

// Cluster queries and the cluster-wide barrier. Before Hopper there are no
// clusters: every block is a cluster of one, whose barrier is the block's,
// and the pickers choose no cluster larger than one there; what only a
// larger cluster reaches traps if it is reached all the same. So kernels
// that merge over a cluster when it has more than one block compile for
// every architecture.
#if __CUDA_ARCH__ >= 900
KI u32 cluster_ctarank() { u32 r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r; }
KI u32 cluster_nctarank() { u32 r; asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r)); return r; }
KI void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// cluster_map returns the shared::cluster address of p's offset in the
// shared memory of cluster block `rank`, for ld/st/atom/mbarrier.*.shared::cluster.
KI u32 cluster_map(const void* p, u32 rank) {
  u32 r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(smem_addr(p)), "r"(rank));
  return r;
}
// dsmem_load_f32 reads a float from the same shared-memory offset in the
// shared memory of cluster block `rank`.
KI float dsmem_load_f32(const float* local, u32 rank) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(cluster_map(local, rank)) : "memory");
  return v;
}
#else
KI u32 cluster_ctarank() { return 0; }
KI u32 cluster_nctarank() { return 1; }
KI void cluster_sync() { __syncthreads(); }
KI u32 cluster_map(const void*, u32) { __trap(); return 0; }
KI float dsmem_load_f32(const float* local, u32 rank) { return rank == 0 ? *local : (__trap(), 0.f); }
#endif
