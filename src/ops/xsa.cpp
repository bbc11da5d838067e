// The exclusive step of XSA over a whole batch (docs/SPEC.md §2): z = y − (y·u) u per token and
// head, from the row functions of ops/xsa_row.h. The tiled attention runs these batch forms as a
// parallel pass after its tiles (forward) and before them (backward); the model also calls
// xsa_forward to recompute z for W_o's gradient.
#include "xsa/ops/matmul_bf16.h"
#include "xsa/ops/ops.h"
#include "xsa/ops/xsa_row.h"

// clang-format off: after every other include (ops/kernel_level.h)
#include "xsa/ops/kernel_level.h"
// clang-format on

namespace xsa::ops::XSA_LEVEL {

namespace {

// The batch loops for one head size: kD > 0 fixed at compile time, 0 any.
template <int kD, typename Real, typename Out>
void xsa_forward_rows(Out* z, const Real* y, const Real* qkv, int B, int T, int C, int H,
                      const Real* alpha, int Hkv) {
  const int Hk = Hkv > 0 ? Hkv : H, group = H / Hk, D = C / H, N = B * T, ld = C + 2 * Hk * D;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++)
    for (int h = 0; h < H; h++)
      xsa_row_forward<Real, kD, Out>(z + (size_t)n * C + h * D, y + (size_t)n * C + h * D,
                                     qkv + (size_t)n * ld + C + Hk * D + (h / group) * D, D,
                                     alpha ? alpha[h] : Real(1));
}

template <int kD, typename Real, typename Out>
void xsa_backward_rows(Real* dy, Real* dqkv, const Real* dz, const Real* y, const Real* qkv, int B,
                       int T, int C, int H, const Real* alpha, Real* dalpha, int Hkv, bool write_dv,
                       Out* z) {
  // A token's heads run in one iteration: under GQA several of them add into the same shared v.
  const int Hk = Hkv > 0 ? Hkv : H, group = H / Hk, D = C / H, N = B * T, ld = C + 2 * Hk * D;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++)
    for (int h = 0; h < H; h++) {
      const size_t v_at = (size_t)n * ld + C + Hk * D + (h / group) * D;
      if (z)
        xsa_row_forward<Real, kD, Out>(z + (size_t)n * C + h * D, y + (size_t)n * C + h * D,
                                       qkv + v_at, D, alpha ? alpha[h] : Real(1));
      const Real d_alpha = xsa_row_backward<Real, kD>(
          dy + (size_t)n * C + h * D, dqkv + v_at, dz + (size_t)n * C + h * D,
          y + (size_t)n * C + h * D, qkv + v_at, D, alpha ? alpha[h] : Real(1),
          write_dv && h % group == 0);  // a group's first head writes
      if (dalpha) dalpha[(size_t)n * H + h] = d_alpha;
    }
}

// The head sizes with loops of fixed length, for either storage of z.
template <typename Real, typename Out>
void xsa_forward_any(Out* z, const Real* y, const Real* qkv, int B, int T, int C, int H,
                     const Real* alpha, int Hkv) {
  if (C / H == 64) return xsa_forward_rows<64>(z, y, qkv, B, T, C, H, alpha, Hkv);
  if (C / H == 128) return xsa_forward_rows<128>(z, y, qkv, B, T, C, H, alpha, Hkv);
  xsa_forward_rows<0>(z, y, qkv, B, T, C, H, alpha, Hkv);
}

template <typename Real, typename Out>
void xsa_backward_any(Real* dy, Real* dqkv, const Real* dz, const Real* y, const Real* qkv, int B,
                      int T, int C, int H, const Real* alpha, Real* dalpha, int Hkv, bool write_dv,
                      Out* z) {
  if (C / H == 64)
    return xsa_backward_rows<64>(dy, dqkv, dz, y, qkv, B, T, C, H, alpha, dalpha, Hkv, write_dv, z);
  if (C / H == 128)
    return xsa_backward_rows<128>(dy, dqkv, dz, y, qkv, B, T, C, H, alpha, dalpha, Hkv, write_dv,
                                  z);
  xsa_backward_rows<0>(dy, dqkv, dz, y, qkv, B, T, C, H, alpha, dalpha, Hkv, write_dv, z);
}

}  // namespace

template <typename Real>
void xsa_forward(Real* z, const Real* y, const Real* qkv, int B, int T, int C, int H,
                 const Real* alpha, int Hkv) {
  xsa_forward_any(z, y, qkv, B, T, C, H, alpha, Hkv);
}

template <typename Real>
void xsa_backward(Real* dy, Real* dqkv, const Real* dz, const Real* y, const Real* qkv, int B,
                  int T, int C, int H, const Real* alpha, Real* dalpha, int Hkv, bool write_dv,
                  Real* z) {
  xsa_backward_any(dy, dqkv, dz, y, qkv, B, T, C, H, alpha, dalpha, Hkv, write_dv, z);
}

void xsa_forward_bf16(bf16* z, const float* y, const float* qkv, int B, int T, int C, int H,
                      const float* alpha, int Hkv) {
  xsa_forward_any(z, y, qkv, B, T, C, H, alpha, Hkv);
}

void xsa_backward_bf16(float* dy, float* dqkv, const float* dz, const float* y, const float* qkv,
                       int B, int T, int C, int H, const float* alpha, float* dalpha, int Hkv,
                       bool write_dv, bf16* z) {
  xsa_backward_any(dy, dqkv, dz, y, qkv, B, T, C, H, alpha, dalpha, Hkv, write_dv, z);
}

#define XSA_INSTANTIATE(Real)                                                                     \
  template void xsa_forward<Real>(Real*, const Real*, const Real*, int, int, int, int,            \
                                  const Real*, int);                                              \
  template void xsa_backward<Real>(Real*, Real*, const Real*, const Real*, const Real*, int, int, \
                                   int, int, const Real*, Real*, int, bool, Real*);
XSA_INSTANTIATE(float)
XSA_INSTANTIATE(double)

}  // namespace xsa::ops::XSA_LEVEL
XSA_LEVEL_END
