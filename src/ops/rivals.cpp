// XSA's rivals outside the attention (docs/SPEC.md §8): gated-attn's output gate and the value
// residual's mixing, forward beside backward (listed in src/ops/op_list.txt). Elementwise and
// memory-bound: plain loops, summed in a fixed order.
#include <cmath>

#include "xsa/ops/ops.h"

// clang-format off: after every other include (ops/kernel_level.h)
#include "xsa/ops/kernel_level.h"
// clang-format on

namespace xsa::ops::XSA_LEVEL {
namespace {

template <typename Real>
Real sigmoid(Real x) {
  return Real(1) / (Real(1) + std::exp(-x));  // exp overflows to ∞ for x ≪ 0: σ = 0, as it is
}

}  // namespace

template <typename Real>
void output_gate_forward(Real* out, const Real* u, const Real* pre, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) out[i] = u[i] * sigmoid(pre[i]);
}

template <typename Real>
void output_gate_backward(Real* d_u, Real* d_pre, const Real* d_out, const Real* u, const Real* pre,
                          size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) {
    const Real s = sigmoid(pre[i]), g = d_out[i];  // read before d_pre (maybe d_out) is written
    d_u[i] = g * s;
    d_pre[i] = g * u[i] * s * (Real(1) - s);
  }
}

template <typename Real>
void add_rows(Real* dst, size_t dst_stride, const Real* src, size_t src_stride, int rows,
              int width) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; r++) {
    Real* d = dst + (size_t)r * dst_stride;
    const Real* s = src + (size_t)r * src_stride;
    for (int c = 0; c < width; c++) d[c] += s[c];
  }
}

template <typename Real>
void value_mix_forward(const ValueMixArgs<Real>& a) {
  const Real lambda = a.lambda[0];
#pragma omp parallel for schedule(static)
  for (int n = 0; n < a.N; n++) {
    Real* v = a.qkv + (size_t)n * a.ld + a.at;
    Real* raw = a.v_raw + (size_t)n * a.width;
    const Real* first = a.v_first + (size_t)n * a.width;
    for (int c = 0; c < a.width; c++) {
      raw[c] = v[c];
      v[c] = lambda * v[c] + (Real(1) - lambda) * first[c];
    }
  }
}

template <typename Real>
void value_mix_backward(const ValueMixArgs<Real>& a) {
  const Real lambda = a.lambda[0];
  // ∂L/∂λ first, over the rows in order (the thread count changes nothing), in double.
  double dlambda = 0;
  for (int n = 0; n < a.N; n++) {
    const Real* dv = a.dqkv + (size_t)n * a.ld + a.at;
    const Real* raw = a.v_raw + (size_t)n * a.width;
    const Real* first = a.v_first + (size_t)n * a.width;
    for (int c = 0; c < a.width; c++) dlambda += (double)dv[c] * ((double)raw[c] - first[c]);
  }
  a.dlambda[0] += Real(dlambda);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < a.N; n++) {
    Real* dv = a.dqkv + (size_t)n * a.ld + a.at;
    Real* d_first = a.d_first + (size_t)n * a.width;
    for (int c = 0; c < a.width; c++) {
      const Real to_first = (Real(1) - lambda) * dv[c];
      d_first[c] = a.accumulate_first ? d_first[c] + to_first : to_first;
      dv[c] *= lambda;
    }
  }
}

#define XSA_INSTANTIATE(Real)                                                                   \
  template void output_gate_forward<Real>(Real*, const Real*, const Real*, size_t);             \
  template void output_gate_backward<Real>(Real*, Real*, const Real*, const Real*, const Real*, \
                                           size_t);                                             \
  template void add_rows<Real>(Real*, size_t, const Real*, size_t, int, int);                   \
  template void value_mix_forward<Real>(const ValueMixArgs<Real>&);                             \
  template void value_mix_backward<Real>(const ValueMixArgs<Real>&);
XSA_INSTANTIATE(float)
XSA_INSTANTIATE(double)

}  // namespace xsa::ops::XSA_LEVEL
XSA_LEVEL_END
