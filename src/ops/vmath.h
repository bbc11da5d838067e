// Vectorizable elementwise math for the fused kernels. std::exp on float calls libm once per
// element (no SIMD without -ffast-math); this exp is branch-free arithmetic that the compiler
// turns into AVX-512/AVX2 code under `#pragma omp simd`, accurate to about 2 ulp (Cephes' expf
// polynomial). The double instantiation (the gradient-check path) uses std::exp.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace xsa::ops {

inline float fast_exp(float x) {
  // exp(x) = 2^k · exp(r), k = round(x / ln 2), |r| ≤ ln 2 / 2.
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);  // below: ~1.6e-38, underflow is harmless here
  // k rounded by adding 1.5 · 2^23: the sum's low mantissa bits hold k (|k| < 2^22), so 2^k's
  // exponent comes from them by integer arithmetic: no float-to-int conversion, whose NaN is
  // undefined (a NaN x gives a NaN p, and so the result, whatever those bits), and no floor.
  constexpr float kRound = 12582912.0f;
  const float j = x * 1.44269504088896341f + kRound;
  const float k = j - kRound;
  float r = x - k * 0.693359375f + k * 2.12194440e-4f;  // ln 2 split in two for an exact k·ln2
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // j's bits are those of 1.5 · 2^23 plus k, whose shift by 23 leaves (k + 127) << 23: 2^k.
  return p * std::bit_cast<float>((std::bit_cast<uint32_t>(j) + 127u) << 23);
}
inline double fast_exp(double x) {
  return std::exp(x);
}

// tanh(u) = 1 − 2 / (exp(2u) + 1): exact limits ±1 for large |u|, absolute error ~1e-7 near 0.
inline float fast_tanh(float u) {
  return 1.0f - 2.0f / (fast_exp(2.0f * u) + 1.0f);
}
inline double fast_tanh(double u) {
  return std::tanh(u);
}

// The largest of x[0..n) and init. Written as a comparison rather than std::max, which GCC keeps
// scalar even under `omp simd reduction(max)` (one dependent vmaxss per element: 15× slower on a
// vocabulary row). NaNs are passed over, as std::max(m, x) passes them.
template <typename Real>
inline Real max_of(const Real* x, int n, Real init) {
  Real m = init;
#pragma omp simd reduction(max : m)
  for (int i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
  return m;
}

}  // namespace xsa::ops
