// kittens.cuh: the shared device vocabulary. Storage types for the 16-bit
// and 8-bit floats, one-instruction conversions to and from fp32 (round to
// nearest even; fp8 saturates to the finite range), Vec: the vectors every
// global load and store moves, with their cache hints, and warp/block
// reductions in fp32.
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

// same<A, B> is std::is_same_v (NVRTC has no standard headers).
template <class A, class B> constexpr bool same = false;
template <class A> constexpr bool same<A, A> = true;

// bits_of returns a 16- or 8-bit element's bits; of_bits<T> makes such a T
// of the low bits of a word.
KI u32 bits_of(bf16 v) { return v.bits; }
KI u32 bits_of(f16 v) { return v.bits; }
KI u32 bits_of(fp8e4m3 v) { return v.bits; }
KI u32 bits_of(fp8e5m2 v) { return v.bits; }
template <class T> KI T of_bits(u32 b);
template <> KI bf16 of_bits<bf16>(u32 b) { return bf16{(u16)b}; }
template <> KI f16 of_bits<f16>(u32 b) { return f16{(u16)b}; }
template <> KI fp8e4m3 of_bits<fp8e4m3>(u32 b) { return fp8e4m3{(u8)b}; }
template <> KI fp8e5m2 of_bits<fp8e5m2>(u32 b) { return fp8e5m2{(u8)b}; }

// Bits<B>::t is the machine type of B bytes (1 to 16); VecBits<B, P>::t is
// B bytes moved in pieces of P: one such type where P is B, else a struct
// of them.
template <int B> struct Bits;
template <> struct Bits<1> { typedef u8 t; };
template <> struct Bits<2> { typedef u16 t; };
template <> struct Bits<4> { typedef u32 t; };
template <> struct Bits<8> { typedef uint2 t; };
template <> struct Bits<16> { typedef uint4 t; };
template <int B, int P, bool One = B == P> struct VecBits { struct t { typename Bits<P>::t q[B / P]; }; };
template <int B, int P> struct VecBits<B, P, true> { typedef typename Bits<B>::t t; };

// Vec<T, N> is N elements of T that move between registers and memory as
// one access: a load or store of N·sizeof(T) bytes (1 to 16; a larger plain
// Vec moves as 16-byte pieces), aligned to its size up to 16. A smaller
// alignment A makes the compiler split it into accesses of A bytes.
//
// A Vec is at once its bits as moved (b: one access, or pieces of A bytes),
// its elements (e[]) and, where the elements fill whole 32-bit words, those
// words (w[]): a pair of 16-bit values then stays in one register from the
// load to the store and converts to or from two floats in one instruction
// (get, set2). Words = true keeps a smaller vector padded to a word (a
// register-only holder: it is never loaded or stored as a Vec). Loads and
// stores copy b: register-capped kernels' allocation depends on that form
// (conv1d's decode spilled five times as much when its vectors moved as
// arrays of words).
//
//   at(i), put(i, x)   element i as stored
//   get(i), set(i, f)  element i as fp32 (rounded to nearest even)
//   set2(i, lo, hi)    elements i and i + 1 (i even)
//   zero()             every element +0
template <class T, int N, int A = (N * (int)sizeof(T) < 16 ? N * (int)sizeof(T) : 16),
          bool Words = (N * sizeof(T)) % 4 == 0 && A >= 4>
struct alignas(A) Vec {
  static_assert(A >= 4 && (A & (A - 1)) == 0, "words are at least word-aligned");
  typedef T elem;
  static constexpr int n = N, bytes = N * (int)sizeof(T);
  static constexpr int size = (bytes + 3) / 4 * 4, piece = A < 16 ? A : 16;
  static_assert(size % (size < piece ? size : piece) == 0, "a vector moves as whole pieces");
  union {
    typename VecBits<size, (size < piece ? size : piece)>::t b;
    T e[N];
    u32 w[size / 4];
  };

  KI T at(int i) const {
    if constexpr (sizeof(T) == 4) {
      return e[i];
    } else {
      constexpr int per = 4 / sizeof(T);
      return of_bits<T>(w[i / per] >> (8 * (int)sizeof(T) * (i % per)));
    }
  }
  KI void put(int i, T x) {
    if constexpr (sizeof(T) == 4) {
      e[i] = x;
    } else {
      constexpr int per = 4 / sizeof(T), width = 8 * sizeof(T);
      const int s = width * (i % per);
      w[i / per] = (w[i / per] & ~(((1u << width) - 1) << s)) | (bits_of(x) << s);
    }
  }
  KI float get(int i) const {
    if constexpr (same<T, bf16>) {
      const u32 x = w[i / 2];  // a bf16 is the top half of an fp32: a shift or a mask widens it
      return __uint_as_float(i % 2 ? x & 0xffff0000u : x << 16);
    } else {
      return to_float(at(i));
    }
  }
  KI void set(int i, float f) { put(i, from_float<T>(f)); }
  KI void set2(int i, float lo, float hi) {
    if constexpr (same<T, bf16> || same<T, f16>) {
      w[i / 2] = pack2<T>(lo, hi);
    } else {
      set(i, lo);
      set(i + 1, hi);
    }
  }
  KI void zero() {
#pragma unroll
    for (int q = 0; q < size / 4; ++q) w[q] = 0;
  }
};
template <class T, int N, int A>
struct alignas(A) Vec<T, N, A, false> {
  static_assert(A >= (int)alignof(T) && (A & (A - 1)) == 0, "elements are at least element-aligned");
  typedef T elem;
  static constexpr int n = N, bytes = N * (int)sizeof(T);
  static constexpr int piece = A < 16 ? A : 16;
  static_assert(bytes % (bytes < piece ? bytes : piece) == 0, "a vector moves as whole pieces");
  union {
    typename VecBits<bytes, (bytes < piece ? bytes : piece)>::t b;
    T e[N];
  };

  KI T at(int i) const { return e[i]; }
  KI void put(int i, T x) { e[i] = x; }
  KI float get(int i) const { return to_float(e[i]); }
  KI void set(int i, float f) { e[i] = from_float<T>(f); }
  KI void set2(int i, float lo, float hi) { set(i, lo), set(i + 1, hi); }
  KI void zero() {
#pragma unroll
    for (int i = 0; i < N; ++i) e[i] = of_bits<T>(0);
  }
};

// unpack widens a Vec to fp32; pack rounds fp32 values to one, pairs of
// 16-bit values in one instruction.
template <class V> KI void unpack(const V& v, float (&f)[V::n]) {
#pragma unroll
  for (int i = 0; i < V::n; ++i) f[i] = v.get(i);
}
template <class V> KI V pack(const float (&f)[V::n]) {
  V v;
#pragma unroll
  for (int i = 0; i + 1 < V::n; i += 2) v.set2(i, f[i], f[i + 1]);
  if constexpr (V::n % 2 == 1) v.set(V::n - 1, f[V::n - 1]);
  return v;
}

// Cache is the cache hint of a global load or store:
//   plain   a coherent access the compiler places (it may read __restrict__
//           data through the read-only path);
//   nc      loads: read-only while the kernel runs, kept in L1 (data every
//           block reads again, such as weights) [ld.global.nc];
//   stream  loads: read-only, read once, not kept in L1
//           [ld.global.nc.L1::no_allocate]; stores: written once, evicted
//           first [st.global.cs];
//   last    loads: coherent (the kernel may write the data too), and L2
//           evicts the line last [ld.global.L2::cache_hint, l2_evict_last].
//           Such lines outlive the kernel, so kernels take these reads only
//           where the caller opted in (cuda.Device.SetL2EvictLast).
// Hinted accesses are one instruction each, issued where the code puts them
// (asm volatile); their Vec is one aligned access of at most 16 bytes.
enum class Cache { plain, nc, stream, last };

// l2_evict_last is the cache policy that asks L2 to evict the lines an access
// brings in last (every access it tags: fraction 1.0). It is what
// torch.compile's (Triton's) reductions read their inputs with; on launches
// larger than L2 it made our streaming reads 1-4% faster (rmsnorm
// 16384x8192 bf16 on an H200: 134.4 -> 129.5 µs), for reasons not
// established. A launch that fits in L2 lost as much, so the pickers set it
// behind a define. Its lines keep their priority after the kernel ends and
// crowd out later kernels' data, and handing them back after use
// (applypriority) cost more than the hint gains, so evict-last reads are
// taken only where the caller opted in (cuda.Device.SetL2EvictLast).
KI u64 l2_evict_last() {
  u64 policy;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// load reads a Vec at p (aligned for it) under hint H.
template <class V, Cache H = Cache::plain> KI V load(const typename V::elem* p) {
  if constexpr (H == Cache::plain) {
    V v;
    v.b = *reinterpret_cast<const decltype(v.b)*>(p);
    return v;
  } else {
    static_assert(sizeof(V) == V::bytes && alignof(V) == V::bytes && V::bytes >= 2 && V::bytes <= 16,
                  "a hinted load is one aligned access of 2 to 16 bytes");
    V v;
    u32* u = reinterpret_cast<u32*>(&v);
    u16* h = reinterpret_cast<u16*>(&v);
    if constexpr (H == Cache::nc) {
      if constexpr (V::bytes == 16) asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(u[0]), "=r"(u[1]), "=r"(u[2]), "=r"(u[3]) : "l"(p));
      if constexpr (V::bytes == 8) asm volatile("ld.global.nc.v2.u32 {%0,%1}, [%2];" : "=r"(u[0]), "=r"(u[1]) : "l"(p));
      if constexpr (V::bytes == 4) asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(u[0]) : "l"(p));
      if constexpr (V::bytes == 2) asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(h[0]) : "l"(p));
    } else if constexpr (H == Cache::stream) {
      if constexpr (V::bytes == 16) asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(u[0]), "=r"(u[1]), "=r"(u[2]), "=r"(u[3]) : "l"(p));
      if constexpr (V::bytes == 8) asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(u[0]), "=r"(u[1]) : "l"(p));
      if constexpr (V::bytes == 4) asm volatile("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(u[0]) : "l"(p));
      if constexpr (V::bytes == 2) asm volatile("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(h[0]) : "l"(p));
    } else {
      static_assert(H == Cache::last, "a load hint");
      const u64 pol = l2_evict_last();
      if constexpr (V::bytes == 16) asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;" : "=r"(u[0]), "=r"(u[1]), "=r"(u[2]), "=r"(u[3]) : "l"(p), "l"(pol));
      if constexpr (V::bytes == 8) asm volatile("ld.global.L2::cache_hint.v2.u32 {%0,%1}, [%2], %3;" : "=r"(u[0]), "=r"(u[1]) : "l"(p), "l"(pol));
      if constexpr (V::bytes == 4) asm volatile("ld.global.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(u[0]) : "l"(p), "l"(pol));
      if constexpr (V::bytes == 2) asm volatile("ld.global.L2::cache_hint.u16 %0, [%1], %2;" : "=h"(h[0]) : "l"(p), "l"(pol));
    }
    return v;
  }
}

// store writes v at p (aligned for it) under hint H (plain or stream).
template <Cache H = Cache::plain, class V> KI void store(typename V::elem* p, const V& v) {
  if constexpr (H == Cache::plain) {
    *reinterpret_cast<decltype(v.b)*>(p) = v.b;
  } else {
    static_assert(H == Cache::stream, "a store hint");
    static_assert(sizeof(V) == V::bytes && alignof(V) == V::bytes && V::bytes >= 2 && V::bytes <= 16,
                  "a hinted store is one aligned access of 2 to 16 bytes");
    const u32* u = reinterpret_cast<const u32*>(&v);
    const u16* h = reinterpret_cast<const u16*>(&v);
    if constexpr (V::bytes == 16) asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" :: "l"(p), "r"(u[0]), "r"(u[1]), "r"(u[2]), "r"(u[3]) : "memory");
    if constexpr (V::bytes == 8) asm volatile("st.global.cs.v2.u32 [%0], {%1,%2};" :: "l"(p), "r"(u[0]), "r"(u[1]) : "memory");
    if constexpr (V::bytes == 4) asm volatile("st.global.cs.u32 [%0], %1;" :: "l"(p), "r"(u[0]) : "memory");
    if constexpr (V::bytes == 2) asm volatile("st.global.cs.u16 [%0], %1;" :: "l"(p), "h"(h[0]) : "memory");
  }
}

// Warp-wide integer verbs (every lane must take part): the sum of v over
// the warp (redux.sync, sm_80 and later), the mask of the lanes below this
// one, and the mask of the lanes holding the same v (match.any).
KI u32 redux_add(u32 v) {
  u32 r;
  asm volatile("redux.sync.add.u32 %0, %1, 0xffffffff;" : "=r"(r) : "r"(v));
  return r;
}
KI u32 lanemask_lt() {
  u32 r;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(r));
  return r;
}
KI u32 match_any(u32 v) {
  u32 r;
  asm volatile("match.any.sync.b32 %0, %1, 0xffffffff;" : "=r"(r) : "r"(v));
  return r;
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
