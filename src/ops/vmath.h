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
  float k = std::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - k * 0.693359375f + k * 2.12194440e-4f;  // ln 2 split in two for an exact k·ln2
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // NaN passes the clamp; converting it to int is undefined (UBSan stops there), so its k is 0:
  // p is NaN already and so is the result.
  k = k == k ? k : 0.0f;
  return p * std::bit_cast<float>(((int32_t)k + 127) << 23);
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

// Reductions of short rows (a head's 64 values, a tile's 64 keys) keep kSumLanes partial results
// side by side and combine them at the end as a tree: in a fixed order, and without the chain of
// dependent operations that both a plain loop and an `omp simd` reduction (one vector whose lanes
// GCC then combines in order) leave.
inline constexpr int kSumLanes = 16;

// The largest of x[0..n) and init. Written as a comparison rather than std::max, which GCC keeps
// scalar even under `omp simd reduction(max)` (one dependent vmaxss per element: 15× slower on a
// vocabulary row). NaNs are passed over, as std::max(m, x) passes them.
template <typename Real>
inline Real max_of(const Real* x, int n, Real init) {
  Real lanes[kSumLanes];
  for (int l = 0; l < kSumLanes; l++) lanes[l] = init;
  int i0 = 0;
  for (; i0 + kSumLanes <= n; i0 += kSumLanes) {
#pragma omp simd
    for (int l = 0; l < kSumLanes; l++) lanes[l] = x[i0 + l] > lanes[l] ? x[i0 + l] : lanes[l];
  }
  for (int l = 0; i0 + l < n; l++) lanes[l] = x[i0 + l] > lanes[l] ? x[i0 + l] : lanes[l];
  for (int width = kSumLanes / 2; width > 0; width /= 2)
    for (int l = 0; l < width; l++)
      lanes[l] = lanes[l + width] > lanes[l] ? lanes[l + width] : lanes[l];
  return lanes[0];
}

// The sum of kSumLanes partial sums, as a tree.
template <typename Real>
inline Real tree_sum(Real (&lanes)[kSumLanes]) {
  for (int width = kSumLanes / 2; width > 0; width /= 2)
    for (int l = 0; l < width; l++) lanes[l] += lanes[l + width];
  return lanes[0];
}

// Σ a[i]·b[i] over i < n, in lanes.
template <typename Real>
inline Real dot_in_lanes(const Real* a, const Real* b, int n) {
  Real lanes[kSumLanes] = {};
  int i0 = 0;
  for (; i0 + kSumLanes <= n; i0 += kSumLanes) {
#pragma omp simd
    for (int l = 0; l < kSumLanes; l++) lanes[l] += a[i0 + l] * b[i0 + l];
  }
  for (int l = 0; i0 + l < n; l++) lanes[l] += a[i0 + l] * b[i0 + l];
  return tree_sum(lanes);
}

}  // namespace xsa::ops
