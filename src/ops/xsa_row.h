// The exclusive step for one token and head (docs/SPEC.md §2), shared by the batch kernels in
// xsa.cpp (which the tiled attention calls as a pass after its tiles) and the per-row epilogue of
// the cached attention in attention.cpp.
#pragma once

#include <algorithm>
#include <cmath>

#include "xsa/ops/matmul_bf16.h"

namespace xsa::ops {

inline constexpr double kXsaEpsilon = 1e-6;

// Always inlined: called from a kernel file's avx512 level (ops/kernel_level.h), these functions
// must become part of it. Left to the compiler's judgement they were called out of line, and an
// out-of-line copy of a header's function keeps the build's baseline (AVX2).
#define XSA_ROW_INLINE __attribute__((always_inline)) inline

// z = y − (y·u) u with u = v / max(‖v‖, 1e-6). z may alias y.
// Dot products accumulate in Real, vectorized: over a head (D ≤ a few hundred) float's rounding
// stays near 1e-7 relative, far inside the 1e-5 the kernels are held to.
// alpha scales the removal (gated XSA: z = y − α (y·u) u, α = tanh(w) per head); 1 is plain XSA.
// kD > 0 fixes the head size at compile time (the batch kernels' common sizes: loops of known
// length, unrolled); D is then ignored.
// Out: z's storage, Real or (a bf16 product input, matmul_bf16.h) bf16, rounded as it is written.
template <typename Real, int kD = 0, typename Out = Real>
XSA_ROW_INLINE void xsa_row_forward(Out* z, const Real* y, const Real* v, int D, Real alpha = 1) {
  if constexpr (kD > 0) D = kD;
  Real vv = 0, yv = 0;
#pragma omp simd reduction(+ : vv, yv)
  for (int d = 0; d < D; d++) vv += v[d] * v[d], yv += y[d] * v[d];
  // s·u = (y·v / n²) v with n² = max(‖v‖², 1e-12); dividing by vv itself (not a squared sqrt) makes
  // z exactly 0 when y = v, as at the first position.
  const Real s_over_n = alpha * yv / std::max(vv, Real(kXsaEpsilon * kXsaEpsilon));
#pragma omp simd
  for (int d = 0; d < D; d++) z[d] = stored_as<Out>(y[d] - s_over_n * v[d]);
}

// With g = ∂L/∂z:  dy = g − α (g·u) u (overwrites; may alias g);  a = −α (s g + (g·u) y);
// dv += (a − (a·u) u)/n, or a/1e-6 when ‖v‖ ≤ 1e-6 (the Jacobian of u = v/‖v‖), or dv = ... with
// write_dv; returns this row's ∂L/∂α = −s (g·u).
template <typename Real, int kD = 0>
XSA_ROW_INLINE Real xsa_row_backward(Real* dy, Real* dv, const Real* g, const Real* y,
                                     const Real* v, int D, Real alpha = 1, bool write_dv = false) {
  if constexpr (kD > 0) D = kD;
  Real vv = 0, yv = 0, gv = 0;
#pragma omp simd reduction(+ : vv, yv, gv)
  for (int d = 0; d < D; d++) vv += v[d] * v[d], yv += y[d] * v[d], gv += g[d] * v[d];
  const Real raw_norm = std::sqrt(vv);
  const bool degenerate = !(raw_norm > Real(kXsaEpsilon));
  const Real norm = degenerate ? Real(kXsaEpsilon) : raw_norm, inv_n = Real(1) / norm;
  const Real s = yv * inv_n, gu = gv * inv_n;  // s = y·u, gu = g·u
  // a·u = −α (s (g·u) + (g·u)(y·u)) = −2 α s gu, so dv = (a + 2 α s gu u)/n.
  const Real au = degenerate ? Real(0) : -2 * alpha * s * gu;
#pragma omp simd
  for (int d = 0; d < D; d++) {
    const Real u = v[d] * inv_n, a = -alpha * (s * g[d] + gu * y[d]);
    dv[d] = (write_dv ? Real(0) : dv[d]) + (a - au * u) * inv_n;
    dy[d] = g[d] - alpha * gu * u;  // last: dy may alias g
  }
  return -s * gu;
}

}  // namespace xsa::ops
