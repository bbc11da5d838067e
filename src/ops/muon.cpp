// Muon's elementwise steps (docs/SPEC.md §11): the Nesterov momentum, the Newton–Schulz
// iteration's matrix polynomial and the update; the iteration's products are the backend's own
// (newton_schulz_by_ops, backend/backend.h). Memory-bound: plain loops, each element computed the
// same way on any thread count.
#include <cmath>

#include "xsa/ops/ops.h"

// clang-format off: after every other include (ops/kernel_level.h)
#include "xsa/ops/kernel_level.h"
// clang-format on

namespace xsa::ops::XSA_LEVEL {

template <typename Real>
void muon_momentum(Real* m, Real* u, const Real* grad, size_t n, const MuonSettings& s) {
  const Real beta = Real(s.momentum), rest = Real(1 - s.momentum), scale = Real(s.grad_scale);
#pragma omp parallel for schedule(static) if (n > 65536)
  for (size_t i = 0; i < n; i++) {
    const Real g = grad[i] * scale;
    m[i] = beta * m[i] + rest * g;
    u[i] = rest * g + beta * m[i];
  }
}

template <typename Real>
void newton_schulz_poly(Real* poly, const Real* gram, const Real* gram2, int k,
                        const NewtonSchulzCoefficients& c) {
  const Real a = Real(c.a), b = Real(c.b), cc = Real(c.c);
#pragma omp parallel for schedule(static) if ((size_t)k * k > 65536)
  for (int i = 0; i < k; i++)
    for (int j = 0; j < k; j++) {
      const size_t at = (size_t)i * k + j;
      poly[at] = b * gram[at] + cc * gram2[at] + (i == j ? a : Real(0));
    }
}

template <typename Real>
void muon_apply(Real* w, const Real* o, size_t n, const MuonSettings& s) {
  const Real keep = Real(s.keep), step = Real(s.step);
#pragma omp parallel for schedule(static) if (n > 65536)
  for (size_t i = 0; i < n; i++) w[i] = w[i] * keep - step * o[i];
}

#define XSA_INSTANTIATE(Real)                                                                \
  template void muon_momentum<Real>(Real*, Real*, const Real*, size_t, const MuonSettings&); \
  template void newton_schulz_poly<Real>(Real*, const Real*, const Real*, int,               \
                                         const NewtonSchulzCoefficients&);                   \
  template void muon_apply<Real>(Real*, const Real*, size_t, const MuonSettings&);
XSA_INSTANTIATE(float)
XSA_INSTANTIATE(double)

}  // namespace xsa::ops::XSA_LEVEL
XSA_LEVEL_END
