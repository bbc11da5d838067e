// Causal multi-head attention in O(T) memory: the forward keeps y and the row log-sum-exp, the
// backward recomputes each probability from q, k and the lse (flash-attention's scheme, here as
// plain loops; the tiled kernels come with the speed work).
#include <cmath>
#include <limits>

#include "ops/ops.h"

namespace xsa::ops {
namespace {
template <typename Real>
Real dot(const Real* a, const Real* b, int n) {
  Real s = 0;
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}
}  // namespace

template <typename Real>
void attention_forward(Real* y, Real* lse, const Real* qkv, int B, int T, int C, int H) {
  int D = C / H;
  Real scale = Real(1) / std::sqrt(Real(D));
  size_t row_stride = 3 * (size_t)C;
#pragma omp parallel for collapse(3) schedule(static)
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < H; h++) {
      for (int i = 0; i < T; i++) {
        const Real* base = qkv + (size_t)b * T * row_stride;
        const Real* q = base + i * row_stride + h * D;
        Real* out = y + ((size_t)b * T + i) * C + h * D;
        // Online softmax: running max m, running sum l, out holds Σ exp(s_j − m) v_j.
        Real m = -std::numeric_limits<Real>::infinity(), l = 0;
        for (int d = 0; d < D; d++) out[d] = 0;
        for (int j = 0; j <= i; j++) {
          const Real* k = base + j * row_stride + C + h * D;
          const Real* v = base + j * row_stride + 2 * C + h * D;
          Real s = dot(q, k, D) * scale;
          if (s > m) {
            Real correction = std::exp(m - s);
            l *= correction;
            for (int d = 0; d < D; d++) out[d] *= correction;
            m = s;
          }
          Real p = std::exp(s - m);
          l += p;
          for (int d = 0; d < D; d++) out[d] += p * v[d];
        }
        Real inv_l = Real(1) / l;
        for (int d = 0; d < D; d++) out[d] *= inv_l;
        lse[((size_t)b * H + h) * T + i] = m + std::log(l);
      }
    }
  }
}

template <typename Real>
void attention_backward(Real* dqkv, const Real* dy, const Real* qkv, const Real* y, const Real* lse,
                        int B, int T, int C, int H) {
  // forward: s_ij = q_i·k_j·scale, p_ij = exp(s_ij − lse_i), y_i = Σ_j p_ij v_j.
  //   dv_j += p_ij dy_i;  dp_ij = dy_i·v_j;  ds_ij = p_ij (dp_ij − D_i) with D_i = dy_i·y_i
  //   dq_i += ds_ij·scale·k_j;  dk_j += ds_ij·scale·q_i.
  // One (b, h) per task: every write of a task stays inside its own head, so no races.
  int D = C / H;
  Real scale = Real(1) / std::sqrt(Real(D));
  size_t row_stride = 3 * (size_t)C;
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < H; h++) {
      const Real* base = qkv + (size_t)b * T * row_stride;
      Real* dbase = dqkv + (size_t)b * T * row_stride;
      for (int i = 0; i < T; i++) {
        const Real* q = base + i * row_stride + h * D;
        Real* dq = dbase + i * row_stride + h * D;
        const Real* dyi = dy + ((size_t)b * T + i) * C + h * D;
        const Real* yi = y + ((size_t)b * T + i) * C + h * D;
        Real Di = dot(dyi, yi, D);
        Real row_lse = lse[((size_t)b * H + h) * T + i];
        for (int j = 0; j <= i; j++) {
          const Real* k = base + j * row_stride + C + h * D;
          const Real* v = base + j * row_stride + 2 * C + h * D;
          Real* dk = dbase + j * row_stride + C + h * D;
          Real* dv = dbase + j * row_stride + 2 * C + h * D;
          Real p = std::exp(dot(q, k, D) * scale - row_lse);
          Real ds = p * (dot(dyi, v, D) - Di) * scale;
          for (int d = 0; d < D; d++) {
            dq[d] += ds * k[d];
            dk[d] += ds * q[d];
            dv[d] += p * dyi[d];
          }
        }
      }
    }
  }
}

#define XSA_INSTANTIATE(Real)                                                           \
  template void attention_forward<Real>(Real*, Real*, const Real*, int, int, int, int); \
  template void attention_backward<Real>(Real*, const Real*, const Real*, const Real*,  \
                                         const Real*, int, int, int, int);
XSA_INSTANTIATE(float)
XSA_INSTANTIATE(double)

}  // namespace xsa::ops
