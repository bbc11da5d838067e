// AdamW as torch.optim.AdamW computes it, and a thread-count-independent sum of squares for the
// global gradient norm.
#include <algorithm>
#include <cmath>

#include "xsa/ops/matmul_bf16.h"
#include "xsa/ops/ops.h"

// clang-format off: after every other include (ops/kernel_level.h)
#include "xsa/ops/kernel_level.h"
// clang-format on

namespace xsa::ops::XSA_LEVEL {

namespace {

template <typename Real, bool kCopy>
void adamw_loop(Real* param, const Real* grad, Real* m, Real* v, size_t n, const AdamWSettings& s,
                bf16* copy) {
  const double bias1 = 1.0 - std::pow(s.beta1, (double)s.step);
  const double bias2_sqrt = std::sqrt(1.0 - std::pow(s.beta2, (double)s.step));
  const Real decay = Real(1.0 - s.lr * s.weight_decay);
  const Real step_size = Real(s.lr / bias1);
  const Real b1 = Real(s.beta1), b2 = Real(s.beta2), eps = Real(s.eps);
  const Real gscale = Real(s.grad_scale), inv_bias2_sqrt = Real(1.0 / bias2_sqrt);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) {
    Real g = grad[i] * gscale;
    m[i] = b1 * m[i] + (Real(1) - b1) * g;
    v[i] = b2 * v[i] + (Real(1) - b2) * g * g;
    Real denom = std::sqrt(v[i]) * inv_bias2_sqrt + eps;
    param[i] = param[i] * decay - step_size * m[i] / denom;
    if constexpr (kCopy) copy[i] = round_to_bf16((float)param[i]);
  }
}

}  // namespace

template <typename Real>
void adamw_update(Real* param, const Real* grad, Real* m, Real* v, size_t n, const AdamWSettings& s,
                  bf16* bf16_copy) {
  if (bf16_copy)
    adamw_loop<Real, true>(param, grad, m, v, n, s, bf16_copy);
  else
    adamw_loop<Real, false>(param, grad, m, v, n, s, nullptr);
}

template <typename Real>
double sum_of_squares(const Real* x, size_t n) {
  // A fixed number of chunks, summed in order: the same result for any thread count, and no
  // allocation (this runs every training step).
  constexpr int kChunks = 256;
  double partial[kChunks];
  size_t chunk = (n + kChunks - 1) / kChunks;
#pragma omp parallel for schedule(static)
  for (int c = 0; c < kChunks; c++) {
    size_t begin = std::min(n, c * chunk), end = std::min(n, (c + 1) * chunk);
    double s = 0;
    // Lanes summed side by side (an order fixed by the build, not by the threads): a single
    // running sum was one dependent add per element.
#pragma omp simd reduction(+ : s)
    for (size_t i = begin; i < end; i++) s += (double)x[i] * x[i];
    partial[c] = s;
  }
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

#define XSA_INSTANTIATE(Real)                                                                      \
  template void adamw_update<Real>(Real*, const Real*, Real*, Real*, size_t, const AdamWSettings&, \
                                   bf16*);                                                         \
  template double sum_of_squares<Real>(const Real*, size_t);
XSA_INSTANTIATE(float)
XSA_INSTANTIATE(double)

}  // namespace xsa::ops::XSA_LEVEL
XSA_LEVEL_END
