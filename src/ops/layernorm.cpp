// LayerNorm with weight and bias, eps 1e-5. Statistics in double for stability in fp32.
#include <algorithm>
#include <cmath>
#include <vector>

#include "xsa/ops/ops.h"

namespace xsa::ops {

template <typename Real>
void layernorm_forward(Real* out, Real* mean, Real* rstd, const Real* inp, const Real* weight,
                       const Real* bias, int N, int C) {
  constexpr double kEps = 1e-5;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const Real* x = inp + (size_t)n * C;
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < C; c++) sum += x[c];
    double m = sum / C;
    double var = 0;
#pragma omp simd reduction(+ : var)
    for (int c = 0; c < C; c++) var += (x[c] - m) * (x[c] - m);
    double s = 1.0 / std::sqrt(var / C + kEps);
    Real* o = out + (size_t)n * C;
    for (int c = 0; c < C; c++) o[c] = Real((x[c] - m) * s) * weight[c] + bias[c];
    mean[n] = Real(m);
    rstd[n] = Real(s);
  }
}

template <typename Real>
void layernorm_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                        const Real* weight, const Real* mean, const Real* rstd, int N, int C) {
  // forward: xhat = (x − mean)·rstd, out = xhat·w + b.
  // dxhat = dout·w; dx = rstd·(dxhat − mean(dxhat) − xhat·mean(dxhat·xhat)).
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const Real* x = inp + (size_t)n * C;
    const Real* g = dout + (size_t)n * C;
    double m = mean[n], s = rstd[n];
    double sum_dxhat = 0, sum_dxhat_xhat = 0;
#pragma omp simd reduction(+ : sum_dxhat, sum_dxhat_xhat)
    for (int c = 0; c < C; c++) {
      double dxhat = (double)g[c] * weight[c];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * (x[c] - m) * s;
    }
    double mean_dxhat = sum_dxhat / C, mean_dxhat_xhat = sum_dxhat_xhat / C;
    Real* dx = dinp + (size_t)n * C;
    for (int c = 0; c < C; c++) {
      double xhat = (x[c] - m) * s;
      double dxhat = (double)g[c] * weight[c];
      dx[c] += Real(s * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat));
    }
  }
  // Parameter gradients reduce over rows: a fixed number of row chunks, each summed into its own
  // row of partial sums (contiguous in the channels, so it vectorizes), then the chunks in order.
  // The sum order depends on neither the thread count nor the schedule.
  constexpr int kRowChunks = 32;
  static thread_local std::vector<double> partial_sums;  // the calling thread's, kept
  partial_sums.assign((size_t)2 * kRowChunks * C, 0.0);
  double* const partial = partial_sums.data();
  const int rows_per_chunk = (N + kRowChunks - 1) / kRowChunks;
#pragma omp parallel for schedule(static)
  for (int k = 0; k < kRowChunks; k++) {
    double* dw = partial + (size_t)2 * k * C;
    double* db = dw + C;
    for (int n = k * rows_per_chunk; n < std::min(N, (k + 1) * rows_per_chunk); n++) {
      const Real* g = dout + (size_t)n * C;
      const Real* x = inp + (size_t)n * C;
      const double m = mean[n], s = rstd[n];
#pragma omp simd
      for (int c = 0; c < C; c++) {
        dw[c] += (double)g[c] * ((x[c] - m) * s);
        db[c] += g[c];
      }
    }
  }
#pragma omp parallel for schedule(static) if (C >= 256)
  for (int c = 0; c < C; c++) {
    double dw = 0, db = 0;
    for (int k = 0; k < kRowChunks; k++) {
      dw += partial[(size_t)2 * k * C + c];
      db += partial[(size_t)(2 * k + 1) * C + c];
    }
    dweight[c] += Real(dw);
    dbias[c] += Real(db);
  }
}

#define XSA_INSTANTIATE(Real)                                                           \
  template void layernorm_forward<Real>(Real*, Real*, Real*, const Real*, const Real*,  \
                                        const Real*, int, int);                         \
  template void layernorm_backward<Real>(Real*, Real*, Real*, const Real*, const Real*, \
                                         const Real*, const Real*, const Real*, int, int);
XSA_INSTANTIATE(float)
XSA_INSTANTIATE(double)

}  // namespace xsa::ops
