// Arrays rounded to bf16 and back (mixed precision's product inputs, llm.c's bf16 files).
#include <cstring>

#include "xsa/ops/ops.h"
#include "xsa/ops/parallel.h"
#include "xsa/ops/vmath_avx512.h"
#include "xsa/util/cpu.h"

// clang-format off: after every other include (ops/kernel_level.h)
#include "xsa/ops/kernel_level.h"
// clang-format on

namespace xsa::ops::XSA_LEVEL {

#if XSA_LEVEL_IS_AVX512
namespace {
// round_to_bf16 over x[0..n) with AVX512_BF16's conversion (the same bits; vmath_avx512.h).
XSA_AVX512_BF16_TARGET void to_bf16_avx512(const float* x, bf16* out, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i*)(out + i), bf16x16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 k = first_lanes((int64_t)(n - i));
    _mm256_mask_storeu_epi16(out + i, k, bf16x16(_mm512_maskz_loadu_ps(k, x + i)));
  }
}
}  // namespace
#endif

void to_bf16(const float* x, bf16* out, size_t n) {
  split_across_threads(n, [&](size_t begin, size_t end) {
#if XSA_LEVEL_IS_AVX512
    if (cpu_level() >= CpuLevel::avx512_bf16)
      return to_bf16_avx512(x + begin, out + begin, end - begin);
#endif
#pragma omp simd
    for (size_t i = begin; i < end; i++) out[i] = round_to_bf16(x[i]);
  });
}

void from_bf16(const bf16* x, float* out, size_t n) {
  split_across_threads(n, [&](size_t begin, size_t end) {
#pragma omp simd
    for (size_t i = begin; i < end; i++) {
      const uint32_t u = (uint32_t)x[i] << 16;
      std::memcpy(&out[i], &u, 4);
    }
  });
}

}  // namespace xsa::ops::XSA_LEVEL
XSA_LEVEL_END
