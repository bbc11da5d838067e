// The exclusive step for one token and head (shared/SPEC.md §2), shared by the batch kernels in
// xsa.cpp and the fused attention epilogue/prologue in attention.cpp.
#pragma once

#include <algorithm>
#include <cmath>

namespace xsa::ops {

inline constexpr double kXsaEpsilon = 1e-6;

// z = y − (y·u) u with u = v / max(‖v‖, 1e-6). z may alias y.
template <typename Real>
inline void xsa_row_forward(Real* z, const Real* y, const Real* v, int D) {
  double vv = 0, yv = 0;
  for (int d = 0; d < D; d++) vv += (double)v[d] * v[d], yv += (double)y[d] * v[d];
  const double norm = std::max(std::sqrt(vv), kXsaEpsilon);
  const double s_over_n = yv / (norm * norm);  // s/n, so that s·u = (s/n)·v
  for (int d = 0; d < D; d++) z[d] = Real(y[d] - s_over_n * v[d]);
}

// With g = ∂L/∂z:  dy = g − (g·u) u (overwrites; may alias g);  a = −s g − (g·u) y;
// dv += (a − (a·u) u)/n, or a/1e-6 when ‖v‖ ≤ 1e-6 (the Jacobian of u = v/‖v‖).
template <typename Real>
inline void xsa_row_backward(Real* dy, Real* dv, const Real* g, const Real* y, const Real* v, int D) {
  double vv = 0, yv = 0, gv = 0;
  for (int d = 0; d < D; d++) vv += (double)v[d] * v[d], yv += (double)y[d] * v[d], gv += (double)g[d] * v[d];
  const double raw_norm = std::sqrt(vv);
  const bool degenerate = !(raw_norm > kXsaEpsilon);
  const double norm = degenerate ? kXsaEpsilon : raw_norm;
  const double s = yv / norm, gu = gv / norm;  // s = y·u, gu = g·u
  double au = 0;                               // a·u
  for (int d = 0; d < D; d++) au += (-s * g[d] - gu * y[d]) * (v[d] / norm);
  for (int d = 0; d < D; d++) {
    const double u = v[d] / norm, a = -s * g[d] - gu * y[d];
    dv[d] += Real(degenerate ? a / kXsaEpsilon : (a - au * u) / norm);
    dy[d] = Real(g[d] - gu * u);  // last: dy may alias g
  }
}

}  // namespace xsa::ops
