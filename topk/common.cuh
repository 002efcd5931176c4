// common.cuh (topk): what both top-k kernels share. The Go side prepends this
// text to each kernel's source, so it is not an NVRTC header.
//
// Every element becomes a 32-bit unsigned *order key*: comparing keys as
// unsigned integers ranks the elements the way torch.topk does. Positive
// floats get their sign bit set, negative floats are bit-inverted, so the
// integer order is the numeric order; every NaN (any sign, any payload) maps
// to the all-ones key, above +inf; -0 is folded onto +0 so that the two zeros
// tie (and ties go to the lower index). The smallest key a real element can
// have is that of -inf (0x007fffff, or 0x03ff/0x007f for 16-bit types), so
// key 0 is free to mark padding. 16-bit types use 16-bit keys, which lets the
// radix passes stop after two bytes.
//
// A key and an index combine into one 64-bit *composite* that is larger for
// the element that ranks first: key in the high bits, the index inverted in
// the low bits (lower index, larger composite). All composites of a row are
// distinct, so sorting them descending is exactly torch's order with ties
// broken by the lower index.
#include "kittens.cuh"
#include "tile.cuh"

KI u32 order_key(float v) {
  u32 u = __float_as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0xffffffffu;  // NaN
  if (u == 0x80000000u) u = 0;                               // -0 ties +0
  return u ^ ((u & 0x80000000u) ? 0xffffffffu : 0x80000000u);
}
template <u32 INF> KI u32 order_key16(u32 u) {
  if ((u & 0x7fffu) > INF) return 0xffffu;  // NaN
  if (u == 0x8000u) u = 0;
  return (u ^ ((u & 0x8000u) ? 0xffffu : 0x8000u)) & 0xffffu;
}
KI u32 order_key(bf16 v) { return order_key16<0x7f80u>(v.bits); }
KI u32 order_key(f16 v) { return order_key16<0x7c00u>(v.bits); }

// KEY_BITS is the width of DTYPE's order key.
template <class E> struct KeyBits { static constexpr int value = 16; };
template <> struct KeyBits<float> { static constexpr int value = 32; };
#define KEY_BITS (KeyBits<DTYPE>::value)

// Warp helpers (all lanes must take part).
KI u64 shfl_xor_u64(u64 v, int m) {
  u32 lo = __shfl_xor_sync(0xffffffffu, (u32)v, m);
  u32 hi = __shfl_xor_sync(0xffffffffu, (u32)(v >> 32), m);
  return ((u64)hi << 32) | lo;
}
