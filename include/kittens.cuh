// kittens.cuh: the shared device vocabulary. Storage types for the 16-bit
// and 8-bit floats, one-instruction conversions to and from fp32 (round to
// nearest even; fp8 saturates to the finite range), 16-byte packs for
// coalesced vector access, and warp/block reductions in fp32.
#pragma once

typedef signed char i8;
typedef unsigned char u8;
typedef short i16;
typedef unsigned short u16;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

#define KI __device__ __forceinline__

// wait_prior_grids is the first thing every kernel of the library does. A
// kernel built for dependent launches (jit.Kernel.Dependent defines
// KITTENS_PDL; cuda.Stream.SetDependentLaunch, compute capability 9.0 and
// later) may start while the kernel queued before it is still running: it
// waits here until every grid it depends on has finished and its writes are
// visible, so nothing before this call may read or write global memory.
// Then it lets the next kernel on the stream be launched at once, so that
// its launch overlaps this kernel's work instead of following its end.
// Other builds compile it to nothing: the two instructions cost about 2% on
// kernels of many short blocks even where no launch depends on another
// (rmsnorm 16384x128 and 65536x128 on an H100 and an H200).
KI void wait_prior_grids() {
#if defined(KITTENS_PDL) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// spin_ns busy-waits for ns nanoseconds of the GPU's global timer.
KI void spin_ns(u64 ns) {
  u64 t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

// Storage types. Arithmetic always happens in fp32.
struct __align__(2) bf16 { u16 bits; };
struct __align__(2) f16 { u16 bits; };
struct __align__(1) fp8e4m3 { u8 bits; };
struct __align__(1) fp8e5m2 { u8 bits; };

KI float to_float(float v) { return v; }
KI float to_float(bf16 v) { return __uint_as_float(((u32)v.bits) << 16); }
KI float to_float(f16 v) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits)); return f; }
KI float to_float(fp8e4m3 v) {
  u32 h; u16 in = v.bits;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h) : "h"(in)); // low byte -> low half
  return to_float(f16{(u16)(h & 0xffff)});
}
KI float to_float(fp8e5m2 v) { return to_float(f16{(u16)(((u16)v.bits) << 8)}); }

template <class Elem> KI Elem from_float(float v);
template <> KI float from_float<float>(float v) { return v; }
template <> KI bf16 from_float<bf16>(float v) { u16 r; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(v)); return bf16{r}; }
template <> KI f16 from_float<f16>(float v) { u16 r; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(v)); return f16{r}; }
template <> KI fp8e4m3 from_float<fp8e4m3>(float v) {
  u16 r; asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %1;" : "=h"(r) : "f"(v)); return fp8e4m3{(u8)(r & 0xff)};
}
template <> KI fp8e5m2 from_float<fp8e5m2>(float v) {
  u16 r; asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %1;" : "=h"(r) : "f"(v)); return fp8e5m2{(u8)(r & 0xff)};
}

// pack2 rounds two floats to the 16-bit pair (lo in the low half) in one
// instruction; unpack2 widens such a pair. A bf16 is the top half of an
// fp32: a shift or a mask widens it.
template <class Elem> KI u32 pack2(float lo, float hi);
template <> KI u32 pack2<bf16>(float lo, float hi) {
  u32 r; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r;
}
template <> KI u32 pack2<f16>(float lo, float hi) {
  u32 r; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r;
}
template <class Elem> KI void unpack2(u32 w, float& lo, float& hi);
template <> KI void unpack2<bf16>(u32 w, float& lo, float& hi) {
  lo = __uint_as_float(w << 16);
  hi = __uint_as_float(w & 0xffff0000u);
}
template <> KI void unpack2<f16>(u32 w, float& lo, float& hi) {
  lo = to_float(f16{(u16)(w & 0xffff)});
  hi = to_float(f16{(u16)(w >> 16)});
}

// Pack<Elem> is 16 bytes of T: the unit of every vectorized load and store.
template <class Elem> struct __align__(16) Pack {
  static constexpr int N = 16 / sizeof(Elem);
  Elem v[N];
};

// Loads that bypass L1 (data read once) and plain/streaming stores.
template <class Elem> KI Pack<Elem> load_pack(const Elem* p) {
  Pack<Elem> r; uint4 u;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w) : "l"(p));
  *reinterpret_cast<uint4*>(&r) = u; return r;
}
// load_pack_rw reads data the same kernel may also write (no .nc).
template <class Elem> KI Pack<Elem> load_pack_rw(const Elem* p) {
  Pack<Elem> r; *reinterpret_cast<uint4*>(&r) = *reinterpret_cast<const uint4*>(p); return r;
}
template <class Elem> KI void store_pack(Elem* p, const Pack<Elem>& v) {
  *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(&v);
}

// L2 evict-last reads, the policy torch.compile's (Triton's) reductions read
// their inputs with. l2_evict_last is the cache policy that asks L2 to evict
// the lines an access brings in last (every access it tags: fraction 1.0).
// load16_evict_last reads 16 bytes (16-byte aligned) as 4 words under it; it
// is a coherent load (no .nc), so it may read what the same kernel writes;
// tile.cuh's bulk_load<true> is the bulk copy under it. On an H200 the hint made norm's large row reads 2-7%
// faster (16384x8192 bf16: rmsnorm 134.4 -> 129.5 µs, fused_add_rmsnorm
// 265.1 -> 254.1, layernorm 135.9 -> 130.5), where each block serves one
// row and the launch moves more than L2 holds; it lost 1-3% where the data
// fit in L2. An L1-only evict-last hint changed nothing and L2 evict-first
// lost. On calls larger than L2, in place too, it also gained in act
// (0.5-1.8% on unary ops), softmax (2-4%), conv1d's ring (1-2%) and rope's
// [B, H, S, D] launches (0.5-3%); rope's serving layout lost 1.6-5%. Why it
// helps is not established. It is not the next launch hitting what this one
// kept (rotating a second input set changed no gain), nor the written lines
// leaving early (evict-first stores lost, with and without it). Its lines keep
// their priority after the kernel ends, ahead of the next kernels' data:
// later kernels whose data would fit in 16-40 MiB of L2 ran 3-12% slower
// until other kernels' traffic (GEMMs; not a copy) replaced them, as after
// torch.compile's own rmsnorm. Handing each back after use (applypriority)
// cost 2-20% on an H200, so they are left (PERFORMANCE.md, lever 7).
// Callers set it behind a define their picker chooses.
KI u64 l2_evict_last() {
  u64 policy;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
KI void load16_evict_last(const void* p, u32* u) {
  asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
               : "=r"(u[0]), "=r"(u[1]), "=r"(u[2]), "=r"(u[3])
               : "l"(p), "l"(l2_evict_last()));
}
// load_hinted reads a T at p (aligned for T) with a coherent load: under the
// L2 evict-last policy where EvictLast is set and T is 16 bytes
// (load16_evict_last), plainly otherwise. It is the one hinted read every
// family's picker switches with its define.
template <bool EvictLast, class T> KI T load_hinted(const void* p) {
  if constexpr (EvictLast && sizeof(T) == 16) {
    T v;
    load16_evict_last(p, reinterpret_cast<u32*>(&v));
    return v;
  } else {
    return *reinterpret_cast<const T*>(p);
  }
}

// Warp and block reductions (fp32).
KI float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
KI float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Reductions over groups of W lanes (W a power of two ≤ 32), W-aligned.
template <int W> KI float group_sum(float v) {
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <int W> KI float group_max(float v) {
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// block_sum returns the sum over all threads of the block to every thread.
// scratch needs 32 floats of shared memory; the block is a multiple of 32.
KI float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nw ? scratch[lane] : 0.f;
  return warp_sum(v);
}
KI float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nw ? scratch[lane] : -__int_as_float(0x7f800000);
  return warp_max(v);
}

KI float kinf() { return __int_as_float(0x7f800000); }
KI float knan() { return __int_as_float(0x7fffffff); }
