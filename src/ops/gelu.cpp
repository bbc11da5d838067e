// The MLP's activations, forward beside backward: GELU, tanh approximation:
// 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))); and ReLU², relu(x)² (docs/SPEC.md §11: the modern
// small-model recipe's, modded-nanogpt and nanochat).
#include <algorithm>
#include <cmath>

#include "xsa/ops/matmul_bf16.h"
#include "xsa/ops/ops.h"
#include "xsa/ops/vmath.h"

// clang-format off: after every other include (ops/kernel_level.h)
#include "xsa/ops/kernel_level.h"
// clang-format on

namespace xsa::ops::XSA_LEVEL {
namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654;

// Blocks of 4096 elements over the threads, each block one vectorized loop.
constexpr size_t kBlock = 4096;

// The forward with each output stored as Out: itself, or rounded to bf16 (a product's input).
template <typename Real, typename Out>
void gelu_elements(Out* out, const Real* inp, size_t n) {
  const Real k = Real(kSqrt2OverPi);
  const size_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (size_t blk = 0; blk < blocks; blk++) {
    const int len = (int)std::min(kBlock, n - blk * kBlock);
    const Real* x = inp + blk * kBlock;
    Out* o = out + blk * kBlock;
#pragma omp simd
    for (int i = 0; i < len; i++) {
      o[i] =
          stored_as<Out>(Real(0.5) * x[i] *
                         (Real(1) + fast_tanh(k * (x[i] + Real(0.044715) * x[i] * x[i] * x[i]))));
    }
  }
}

}  // namespace

template <typename Real>
void gelu_forward(Real* out, const Real* inp, size_t n) {
  gelu_elements(out, inp, n);
}

void gelu_forward_bf16(bf16* out, const float* inp, size_t n) {
  gelu_elements(out, inp, n);
}

namespace {

// The backward with each input gradient stored as Out: itself, or rounded to bf16 (a product's
// input). dinp may be dout (in place) when Out is Real.
template <typename Real, typename Out>
void gelu_backward_elements(Out* dinp, const Real* inp, const Real* dout, size_t n) {
  // d/dx = 0.5 (1 + tanh(u)) + 0.5 x sech²(u) · √(2/π)(1 + 3·0.044715 x²), u = √(2/π)(x + 0.044715
  // x³)
  const Real k = Real(kSqrt2OverPi);
  const size_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (size_t blk = 0; blk < blocks; blk++) {
    const int len = (int)std::min(kBlock, n - blk * kBlock);
    const Real* x = inp + blk * kBlock;
    const Real* g = dout + blk * kBlock;
    Out* dx = dinp + blk * kBlock;
#pragma omp simd
    for (int i = 0; i < len; i++) {
      const Real th = fast_tanh(k * (x[i] + Real(0.044715) * x[i] * x[i] * x[i]));
      const Real sech2 = Real(1) - th * th;
      dx[i] = stored_as<Out>(
          (Real(0.5) * (Real(1) + th) +
           Real(0.5) * x[i] * sech2 * k * (Real(1) + Real(3 * 0.044715) * x[i] * x[i])) *
          g[i]);
    }
  }
}

}  // namespace

template <typename Real>
void gelu_backward(Real* dinp, const Real* inp, const Real* dout, size_t n) {
  gelu_backward_elements(dinp, inp, dout, n);
}

void gelu_backward_bf16(bf16* dinp, const float* inp, const float* dout, size_t n) {
  gelu_backward_elements(dinp, inp, dout, n);
}

template <typename Real>
void relu2_forward(Real* out, const Real* inp, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) {
    const Real x = inp[i] > Real(0) ? inp[i] : Real(0);
    out[i] = x * x;
  }
}

// dinp = 2 relu(x) · dout; dinp may be dout.
template <typename Real>
void relu2_backward(Real* dinp, const Real* inp, const Real* dout, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) {
    const Real x = inp[i] > Real(0) ? inp[i] : Real(0);
    dinp[i] = Real(2) * x * dout[i];
  }
}

#define XSA_INSTANTIATE(Real)                                                 \
  template void gelu_forward<Real>(Real*, const Real*, size_t);               \
  template void gelu_backward<Real>(Real*, const Real*, const Real*, size_t); \
  template void relu2_forward<Real>(Real*, const Real*, size_t);              \
  template void relu2_backward<Real>(Real*, const Real*, const Real*, size_t);
XSA_INSTANTIATE(float)
XSA_INSTANTIATE(double)

}  // namespace xsa::ops::XSA_LEVEL
XSA_LEVEL_END
