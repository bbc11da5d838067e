// QK-norm (ops/args.h, QkNormArgs): RMSNorm of each query and key head before RoPE, forward beside
// backward. Memory-bound and small beside the attention: plain loops over rows, threads over rows;
// each head's statistics summed in double, so a float head of 128 loses nothing to the sum.
#include <algorithm>
#include <cmath>
#include <vector>

#include "xsa/ops/ops.h"

// clang-format off: after every other include (ops/kernel_level.h)
#include "xsa/ops/kernel_level.h"
// clang-format on

namespace xsa::ops::XSA_LEVEL {
namespace {

// Rows per chunk of the scales' gradient: each chunk sums its rows in order, then the chunks are
// added in order, the same sums for any thread count.
constexpr int kRowChunk = 64;

}  // namespace

template <typename Real>
void qk_norm_forward(const QkNormArgs<Real>& a) {
  const int heads = a.H + a.Hkv, D = a.D;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < a.N; n++) {
    Real* row = a.qkv + (size_t)n * a.ld;
    if (a.raw) std::copy(row, row + (size_t)heads * D, a.raw + (size_t)n * heads * D);
    for (int h = 0; h < heads; h++) {
      Real* x = row + (size_t)h * D;
      const Real* g = h < a.H ? a.q_scale : a.k_scale;
      double squares = 0;
      for (int j = 0; j < D; j++) squares += (double)x[j] * x[j];
      const Real r = Real(1 / std::sqrt(squares / D + kQkNormEps));
      if (a.rstd) a.rstd[(size_t)n * heads + h] = r;
      for (int j = 0; j < D; j++) x[j] = x[j] * r * g[j];
    }
  }
}

template <typename Real>
void qk_norm_backward(const QkNormArgs<Real>& a) {
  const int heads = a.H + a.Hkv, D = a.D;
  const int chunks = (a.N + kRowChunk - 1) / kRowChunk;
  // The scales' gradient first (it reads ∂L/∂out before the rows are overwritten): per chunk
  // [q | k] × D partial sums, then in order.
  // Kept per calling thread: the backward runs every layer of every step, and allocates nothing
  // after the first. The team reads it through a pointer (each thread has its own thread_local).
  static thread_local std::vector<double> storage;
  storage.assign((size_t)chunks * 2 * D, 0.0);
  double* const partial = storage.data();
#pragma omp parallel for schedule(static)
  for (int c = 0; c < chunks; c++) {
    double* dq = partial + (size_t)c * 2 * D;
    double* dk = dq + D;
    for (int n = c * kRowChunk; n < std::min(a.N, (c + 1) * kRowChunk); n++) {
      const Real* d = a.dqkv + (size_t)n * a.ld;
      const Real* x = a.raw + (size_t)n * heads * D;
      for (int h = 0; h < heads; h++) {
        const double r = a.rstd[(size_t)n * heads + h];
        double* sum = h < a.H ? dq : dk;
        for (int j = 0; j < D; j++) sum[j] += (double)d[h * D + j] * (x[h * D + j] * r);
      }
    }
  }
  for (int c = 0; c < chunks; c++)
    for (int j = 0; j < D; j++) {
      a.dq_scale[j] += Real(partial[(size_t)c * 2 * D + j]);
      a.dk_scale[j] += Real(partial[(size_t)c * 2 * D + D + j]);
    }
    // ∂L/∂x = rstd (d̂ − x̂ mean(d̂ ⊙ x̂)), d̂ = ∂L/∂out ⊙ g, in place.
#pragma omp parallel for schedule(static)
  for (int n = 0; n < a.N; n++) {
    Real* d = a.dqkv + (size_t)n * a.ld;
    const Real* x = a.raw + (size_t)n * heads * D;
    for (int h = 0; h < heads; h++) {
      const Real* g = h < a.H ? a.q_scale : a.k_scale;
      const double r = a.rstd[(size_t)n * heads + h];
      double dot = 0;
      for (int j = 0; j < D; j++) dot += (double)d[h * D + j] * g[j] * (x[h * D + j] * r);
      const double mean = dot / D;
      for (int j = 0; j < D; j++) {
        const double xhat = x[h * D + j] * r;
        d[h * D + j] = Real(r * ((double)d[h * D + j] * g[j] - xhat * mean));
      }
    }
  }
}

#define XSA_INSTANTIATE(Real)                                   \
  template void qk_norm_forward<Real>(const QkNormArgs<Real>&); \
  template void qk_norm_backward<Real>(const QkNormArgs<Real>&);
XSA_INSTANTIATE(float)
XSA_INSTANTIATE(double)

}  // namespace xsa::ops::XSA_LEVEL
XSA_LEVEL_END
