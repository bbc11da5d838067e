// The exclusive step of XSA over a whole batch (docs/SPEC.md §2): z = y − (y·u) u per token and
// head, from the row functions of ops/xsa_row.h. The tiled attention runs these batch forms as a
// parallel pass after its tiles (forward) and before them (backward); the model also calls
// xsa_forward to recompute z for W_o's gradient.
#include <type_traits>

#include "xsa/ops/matmul_bf16.h"
#include "xsa/ops/ops.h"
#include "xsa/ops/xsa_row.h"
#include "xsa/util/error.h"

// clang-format off: after every other include (ops/kernel_level.h)
#include "xsa/ops/kernel_level.h"
// clang-format on

namespace xsa::ops::XSA_LEVEL {

namespace {

// The batch loops for one head size (kD > 0 fixed at compile time, 0 any), z in storage Out.
template <int kD, typename Real, typename Out>
void xsa_forward_rows(const AttentionArgs<Real>& a, Out* z) {
  const int H = a.H, C = a.C, Hk = a.Hkv > 0 ? a.Hkv : H, group = H / Hk, D = C / H;
  const int N = a.B * a.T, ld = C + 2 * Hk * D;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++)
    for (int h = 0; h < H; h++)
      xsa_row_forward<Real, kD, Out>(z + (size_t)n * C + h * D, a.y + (size_t)n * C + h * D,
                                     a.qkv + (size_t)n * ld + C + Hk * D + (h / group) * D, D,
                                     a.alpha ? a.alpha[h] : Real(1));
}

template <int kD, typename Real, typename Out>
void xsa_backward_rows(const AttentionArgs<Real>& a, Out* z) {
  // A token's heads run in one iteration: under GQA several of them add into the same shared v.
  const int H = a.H, C = a.C, Hk = a.Hkv > 0 ? a.Hkv : H, group = H / Hk, D = C / H;
  const int N = a.B * a.T, ld = C + 2 * Hk * D;
  Real* g = a.d_out;  // ∂L/∂z in, ∂L/∂y out
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++)
    for (int h = 0; h < H; h++) {
      const size_t v_at = (size_t)n * ld + C + Hk * D + (h / group) * D, at = (size_t)n * C + h * D;
      const Real alpha = a.alpha ? a.alpha[h] : Real(1);
      if (z) xsa_row_forward<Real, kD, Out>(z + at, a.y + at, a.qkv + v_at, D, alpha);
      const Real d_alpha =
          xsa_row_backward<Real, kD>(g + at, a.dqkv + v_at, g + at, a.y + at, a.qkv + v_at, D,
                                     alpha, a.write_dqkv && h % group == 0);  // group's first head
      if (a.dalpha) a.dalpha[(size_t)n * H + h] = d_alpha;
    }
}

// The head sizes with loops of fixed length.
template <typename Real, typename Out>
void xsa_forward_any(const AttentionArgs<Real>& a, Out* z) {
  if (a.C / a.H == 32) return xsa_forward_rows<32>(a, z);  // the demo's and the study's heads
  if (a.C / a.H == 64) return xsa_forward_rows<64>(a, z);
  if (a.C / a.H == 128) return xsa_forward_rows<128>(a, z);
  xsa_forward_rows<0>(a, z);
}

template <typename Real, typename Out>
void xsa_backward_any(const AttentionArgs<Real>& a, Out* z) {
  if (a.C / a.H == 32) return xsa_backward_rows<32>(a, z);  // the demo's and the study's heads
  if (a.C / a.H == 64) return xsa_backward_rows<64>(a, z);
  if (a.C / a.H == 128) return xsa_backward_rows<128>(a, z);
  xsa_backward_rows<0>(a, z);
}

// z as its storage says: bf16 (float only) or Real.
template <typename Real>
bool z_in_bf16(const AttentionArgs<Real>& a) {
  constexpr bool is_float = std::is_same_v<Real, float>;
  XSA_CHECK(!a.z.bf16() || is_float, "a bf16 z for a float64 kernel");
  return is_float && a.z.bf16();
}

}  // namespace

template <typename Real>
void xsa_forward(const AttentionArgs<Real>& args) {
  if (z_in_bf16(args)) return xsa_forward_any(args, args.z.as_bf16());
  xsa_forward_any(args, args.z.data);
}

template <typename Real>
void xsa_backward(const AttentionArgs<Real>& args) {
  if (z_in_bf16(args) && args.z.data) return xsa_backward_any(args, args.z.as_bf16());
  xsa_backward_any(args, args.z.data);
}

#define XSA_INSTANTIATE(Real)                                  \
  template void xsa_forward<Real>(const AttentionArgs<Real>&); \
  template void xsa_backward<Real>(const AttentionArgs<Real>&);
XSA_INSTANTIATE(float)
XSA_INSTANTIATE(double)

}  // namespace xsa::ops::XSA_LEVEL
XSA_LEVEL_END
