// bf16, the upper half of an IEEE float, and float's rounding to it: the storage of mixed
// precision's product inputs (ops/matmul_bf16.h) and of llm.c's bf16 files.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace xsa::ops {

using bf16 = uint16_t;  // the upper half of an IEEE float

// Round to nearest, ties to even (NaN stays a quiet NaN), as AVX512_BF16's vcvtneps2bf16 but
// keeping denormals. Inline and branch-free so that a loop over it vectorizes.
inline bf16 round_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (bf16)(nan ? (u >> 16) | 0x40u : rounded);
}

// x as an output of type Out holds it: itself, or rounded to bf16 (the kernels that write a
// product's input in either precision).
template <typename Out, typename Real>
inline Out stored_as(Real x) {
  if constexpr (std::is_same_v<Out, bf16>)
    return round_to_bf16(x);
  else
    return x;
}

}  // namespace xsa::ops
