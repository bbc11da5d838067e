// The exclusive step of XSA (shared/SPEC.md §2), per token i and head h:
//   n = max(‖v‖, 1e-6), u = v/n, s = y·u, z = y − s u
// so z carries no component along the token's own value.
#include <cmath>

#include "ops/ops.h"

namespace xsa::ops {

template <typename Real>
void xsa_forward(Real* z, const Real* y, const Real* qkv, int B, int T, int C, int H) {
  int D = C / H;
  int N = B * T;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    for (int h = 0; h < H; h++) {
      const Real* v = qkv + (size_t)n * 3 * C + 2 * C + h * D;
      const Real* yh = y + (size_t)n * C + h * D;
      Real* zh = z + (size_t)n * C + h * D;
      double vv = 0, yv = 0;
      for (int d = 0; d < D; d++) {
        vv += (double)v[d] * v[d];
        yv += (double)yh[d] * v[d];
      }
      double norm = std::max(std::sqrt(vv), kXsaEps);
      double s_over_n = yv / (norm * norm);  // s/n, so that s·u = (s/n)·v
      for (int d = 0; d < D; d++) zh[d] = Real(yh[d] - s_over_n * v[d]);
    }
  }
}

template <typename Real>
void xsa_backward(Real* dy, Real* dqkv, const Real* dz, const Real* y, const Real* qkv, int B,
                  int T, int C, int H) {
  // With g = ∂L/∂z:
  //   ∂L/∂y = g − (g·u) u
  //   a = ∂L/∂u = −s g − (g·u) y
  //   ∂L/∂v (own) = (a − (a·u) u)/n   (the Jacobian of u = v/‖v‖), or a/1e-6 when ‖v‖ ≤ 1e-6.
  int D = C / H;
  int N = B * T;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    for (int h = 0; h < H; h++) {
      const Real* v = qkv + (size_t)n * 3 * C + 2 * C + h * D;
      Real* dv = dqkv + (size_t)n * 3 * C + 2 * C + h * D;
      const Real* yh = y + (size_t)n * C + h * D;
      const Real* g = dz + (size_t)n * C + h * D;
      Real* dyh = dy + (size_t)n * C + h * D;
      double vv = 0, yv = 0, gv = 0;
      for (int d = 0; d < D; d++) {
        vv += (double)v[d] * v[d];
        yv += (double)yh[d] * v[d];
        gv += (double)g[d] * v[d];
      }
      double raw_norm = std::sqrt(vv);
      bool degenerate = !(raw_norm > kXsaEps);
      double norm = degenerate ? kXsaEps : raw_norm;
      double s = yv / norm, gu = gv / norm;  // s = y·u, gu = g·u
      double au = 0;                         // a·u
      for (int d = 0; d < D; d++) {
        double u = v[d] / norm;
        dyh[d] = Real(g[d] - gu * u);
        au += (-s * g[d] - gu * yh[d]) * u;
      }
      for (int d = 0; d < D; d++) {
        double u = v[d] / norm;
        double a = -s * g[d] - gu * yh[d];
        dv[d] += Real(degenerate ? a / kXsaEps : (a - au * u) / norm);
      }
    }
  }
}

#define XSA_INSTANTIATE(Real)                                                                     \
  template void xsa_forward<Real>(Real*, const Real*, const Real*, int, int, int, int);           \
  template void xsa_backward<Real>(Real*, Real*, const Real*, const Real*, const Real*, int, int, \
                                   int, int);
XSA_INSTANTIATE(float)
XSA_INSTANTIATE(double)

}  // namespace xsa::ops
