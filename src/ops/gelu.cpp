// GELU, tanh approximation: 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))).
#include <cmath>

#include "ops/ops.h"
#include "ops/vmath.h"

namespace xsa::ops {
namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654;
}

template <typename Real>
void gelu_forward(Real* out, const Real* inp, size_t n) {
  const Real k = Real(kSqrt2OverPi);
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) {
    Real x = inp[i];
    out[i] = Real(0.5) * x * (Real(1) + fast_tanh(k * (x + Real(0.044715) * x * x * x)));
  }
}

template <typename Real>
void gelu_backward(Real* dinp, const Real* inp, const Real* dout, size_t n) {
  // d/dx = 0.5 (1 + tanh(u)) + 0.5 x sech²(u) · √(2/π)(1 + 3·0.044715 x²), u = √(2/π)(x + 0.044715
  // x³)
  const Real k = Real(kSqrt2OverPi);
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) {
    Real x = inp[i];
    Real th = fast_tanh(k * (x + Real(0.044715) * x * x * x));
    Real sech2 = Real(1) - th * th;
    Real grad = Real(0.5) * (Real(1) + th) +
                Real(0.5) * x * sech2 * k * (Real(1) + Real(3 * 0.044715) * x * x);
    dinp[i] = grad * dout[i];
  }
}

#define XSA_INSTANTIATE(Real)                                   \
  template void gelu_forward<Real>(Real*, const Real*, size_t); \
  template void gelu_backward<Real>(Real*, const Real*, const Real*, size_t);
XSA_INSTANTIATE(float)
XSA_INSTANTIATE(double)

}  // namespace xsa::ops
