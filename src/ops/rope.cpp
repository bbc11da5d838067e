// Rotary position embedding, rotate-half pairing: element j pairs with j + D/2 (j < D/2),
//   q'_j       = q_j cos − q_{j+D/2} sin
//   q'_{j+D/2} = q_{j+D/2} cos + q_j sin
// with angle(t, j) = t · theta^(−2j/D). Applied to q and k of every head, in place.
#include <cmath>
#include <type_traits>

#include "xsa/ops/matmul_bf16.h"
#include "xsa/ops/ops.h"

// clang-format off: after every other include (ops/kernel_level.h)
#include "xsa/ops/kernel_level.h"
// clang-format on

namespace xsa::ops::XSA_LEVEL {

template <typename Real>
void rope_table(Real* cos, Real* sin, int T, int D, double theta) {
  int half = D / 2;
  for (int t = 0; t < T; t++) {
    for (int j = 0; j < half; j++) {
      double angle = t * std::pow(theta, -2.0 * j / D);
      cos[(size_t)t * half + j] = Real(std::cos(angle));
      sin[(size_t)t * half + j] = Real(std::sin(angle));
    }
  }
}

namespace {
// Rotates both q and k of every (b, t, head) by +angle (forward) or −angle (backward: the
// transpose), from `in` into `out` (the same rows in place), each result stored as Out: itself, or
// rounded to bf16 with the row's v rounded beside it (a product's input).
template <typename Real, typename Out>
void rotate_qk(Out* out, const Real* in, const RopeArgs<Real>& a, Real direction) {
  const int B = a.B, T = a.T, C = a.C, H = a.H, Hk = a.Hkv > 0 ? a.Hkv : H;
  const int D = C / H, half = D / 2, ld = C + 2 * Hk * D;
  const Real *cos = a.cos, *sin = a.sin;
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      const Real* c_row = cos + (size_t)t * half;
      const Real* s_row = sin + (size_t)t * half;
      const Real* row = in + ((size_t)b * T + t) * ld;
      Out* out_row = out + ((size_t)b * T + t) * ld;
      for (int part = 0; part < 2; part++) {  // q (H heads), then k (Hkv heads)
        for (int h = 0; h < (part ? Hk : H); h++) {
          const Real* x = row + part * C + h * D;
          Out* o = out_row + part * C + h * D;
          for (int j = 0; j < half; j++) {
            Real lo = x[j], hi = x[j + half], s = direction * s_row[j];
            o[j] = stored_as<Out>(lo * c_row[j] - hi * s);
            o[j + half] = stored_as<Out>(hi * c_row[j] + lo * s);
          }
        }
      }
      if constexpr (std::is_same_v<Out, bf16>)
        for (int c = C + Hk * D; c < ld; c++) out_row[c] = round_to_bf16(row[c]);
    }
  }
}
}  // namespace

template <typename Real>
void rope_forward(Real* qkv, const RopeArgs<Real>& args) {
  rotate_qk(qkv, qkv, args, Real(1));
}

template <typename Real>
void rope_backward(Real* dqkv, const RopeArgs<Real>& args) {
  // The rotation is orthogonal, so its backward is the rotation by −angle.
  rotate_qk(dqkv, dqkv, args, Real(-1));
}

void rope_backward_bf16(bf16* out, const float* dqkv, const RopeArgs<float>& args) {
  rotate_qk(out, dqkv, args, -1.0f);
}

#define XSA_INSTANTIATE(Real)                                     \
  template void rope_table<Real>(Real*, Real*, int, int, double); \
  template void rope_forward<Real>(Real*, const RopeArgs<Real>&); \
  template void rope_backward<Real>(Real*, const RopeArgs<Real>&);
XSA_INSTANTIATE(float)
XSA_INSTANTIATE(double)

}  // namespace xsa::ops::XSA_LEVEL
XSA_LEVEL_END
