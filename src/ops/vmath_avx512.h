// vmath.h's exp and the bf16 rounding of ops/bf16.h on 16 lanes of AVX-512, for the kernels whose
// loops are written with intrinsics (the cross-entropy's rows, the bf16 conversion). Included only
// by kernel files, and used only in their avx512 level (ops/kernel_level.h); each function carries
// its own instruction set as a target attribute as well, AVX512_BF16's reached only after a check
// of cpu_level() (util/cpu.h).
#pragma once

#include <cstdint>

#if defined(__x86_64__)
// GCC 12's AVX-512 headers start masked intrinsics from _mm512_undefined_ps(), a self-assignment
// that -Wuninitialized reports wherever they are inlined (GCC bug 105593); nothing is read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop
#define XSA_AVX512_TARGET __attribute__((target("avx512f")))
#define XSA_AVX512_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#endif

// In the avx512 level's namespace (ops/kernel_level.h), the only code that calls them.
namespace xsa::ops::avx512 {

#if defined(__x86_64__)
// The first n of 16 lanes (all for n ≥ 16).
inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

// fast_exp (vmath.h) on 16 lanes: the same clamp, reduction and polynomial, with vscalefps for the
// final 2^k (exact, since k stays within [-126, 127]; a NaN passes through the clamp and p).
XSA_AVX512_TARGET inline __m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(88.0f), _mm512_max_ps(_mm512_set1_ps(-87.0f), x));
  const __m512 k = _mm512_roundscale_ps(
      _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
      _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fmadd_ps(k, _mm512_set1_ps(2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, k);
}

// round_to_bf16 on 16 lanes, bit for bit. AVX512_BF16's conversion rounds the same way (to nearest,
// ties to even; a NaN keeps its upper half, quieted) except that it flushes denormals to zero, so
// the rare vector that holds one takes round_to_bf16's integer arithmetic in those lanes.
XSA_AVX512_BF16_TARGET inline __m256i bf16x16(__m512 x) {
  __m256i out = (__m256i)_mm512_cvtneps_pbh(x);
  const __m512i u = _mm512_castps_si512(x);
  const __m512i magnitude = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 denormal = _mm512_cmplt_epu32_mask(  // 0 < |x| < 2^-126
      _mm512_sub_epi32(magnitude, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x007fffff));
  if (denormal) {
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
    out = _mm256_mask_mov_epi16(out, denormal, _mm512_cvtepi32_epi16(rounded));
  }
  return out;
}
#endif

}  // namespace xsa::ops::avx512
