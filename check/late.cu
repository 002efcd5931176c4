// late.cu: the kernel that check.Run queues ahead of a case replayed from a
// CUDA graph with dependent launches. It lets the case's first kernel launch
// at once, holds the GPU for a while, and only then writes every tensor's
// starting bytes, which the harness has scrambled until then. A kernel that
// touched global memory before wait_prior_grids would read the scrambled
// bytes, or have its writes overwritten, and the replay would differ from
// the direct launch.
#include "kittens.cuh"

// restore_late copies n stretches after spinning ns nanoseconds. Stretch i
// is table[3i] (destination), table[3i+1] (source, 16-byte aligned like the
// destination) and table[3i+2] (bytes).
extern "C" __global__ void restore_late(const u64* table, int n, u64 ns) {
  wait_prior_grids();
  spin_ns(ns);
  const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x, step = (u64)gridDim.x * blockDim.x;
  for (int i = 0; i < n; i++) {
    u8* dst = reinterpret_cast<u8*>(table[3 * i]);
    const u8* src = reinterpret_cast<const u8*>(table[3 * i + 1]);
    const u64 bytes = table[3 * i + 2], whole = bytes / 16;
    for (u64 j = tid; j < whole; j += step) store(dst + 16 * j, load<Vec<u8, 16>>(src + 16 * j));
    for (u64 j = whole * 16 + tid; j < bytes; j += step) dst[j] = src[j];
  }
}
