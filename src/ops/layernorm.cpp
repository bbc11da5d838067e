// LayerNorm with weight and bias, eps 1e-5. Statistics in double for stability in fp32.
#include <cmath>
#include <vector>

#include "xsa/ops/ops.h"
#include "xsa/ops/parallel.h"

namespace xsa::ops {

template <typename Real>
void layernorm_forward(Real* out, Real* mean, Real* rstd, const Real* inp, const Real* weight,
                       const Real* bias, int N, int C) {
  constexpr double kEps = 1e-5;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const Real* x = inp + (size_t)n * C;
    double sum = 0;
    for (int c = 0; c < C; c++) sum += x[c];
    double m = sum / C;
    double var = 0;
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
  // Parameter gradients reduce over rows, each channel's sum in row order. The threads split the
  // channels; each walks the rows in order with its channels side by side, so the loop vectorizes
  // and reads rows contiguously (one channel at a time down the rows was scalar and strided).
#pragma omp parallel
  {
    const ThreadShare mine = this_threads_share(C, 8);
    const int c0 = (int)mine.begin, c1 = (int)mine.end;
    static thread_local std::vector<double> sums;  // each thread's, kept between steps
    sums.assign((size_t)2 * (c1 - c0), 0.0);
    double* const dw = sums.data() - c0;
    double* const db = dw + (c1 - c0);
    for (int n = 0; n < N; n++) {
      const Real* g = dout + (size_t)n * C;
      const Real* x = inp + (size_t)n * C;
      const Real m = mean[n], s = rstd[n];
#pragma omp simd
      for (int c = c0; c < c1; c++) {
        const double gc = g[c];
        dw[c] += gc * (x[c] - m) * s;
        db[c] += gc;
      }
    }
    for (int c = c0; c < c1; c++) {
      dweight[c] += Real(dw[c]);
      dbias[c] += Real(db[c]);
    }
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
