// LayerNorm with weight and bias, eps 1e-5. Statistics in double for stability in fp32.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "xsa/ops/matmul_bf16.h"
#include "xsa/ops/ops.h"
#include "xsa/ops/parallel.h"

// clang-format off: after every other include (ops/kernel_level.h)
#include "xsa/ops/kernel_level.h"
// clang-format on

namespace xsa::ops::XSA_LEVEL {

namespace {

constexpr double kEps = 1e-5;

// Each row's statistics are sums in double over its channels in order, one dependent add per
// channel: a row alone waits on the adder's latency. kGroup rows side by side keep that many
// independent sums going, each still summed in channel order, so every float result is the same
// as one row at a time (docs/perf-log.md #21: the forward 2.8× faster on `small`'s rows).
constexpr int kGroup = 8;

template <typename Real, int Rows, typename Out = Real>
void normalize_rows(Out* out, Real* mean, Real* rstd, const Real* inp, const Real* weight,
                    const Real* bias, int C) {
  double sum[Rows] = {}, var[Rows] = {}, m[Rows], s[Rows];
  for (int c = 0; c < C; c++)
#pragma omp simd
    for (int r = 0; r < Rows; r++) sum[r] += inp[(size_t)r * C + c];
  for (int r = 0; r < Rows; r++) m[r] = sum[r] / C;
  for (int c = 0; c < C; c++)
#pragma omp simd
    for (int r = 0; r < Rows; r++) {
      const double d = inp[(size_t)r * C + c] - m[r];
      var[r] += d * d;
    }
  for (int r = 0; r < Rows; r++) {
    s[r] = 1.0 / std::sqrt(var[r] / C + kEps);
    const Real* x = inp + (size_t)r * C;
    Out* o = out + (size_t)r * C;
    for (int c = 0; c < C; c++)
      o[c] = stored_as<Out>(Real((x[c] - m[r]) * s[r]) * weight[c] + bias[c]);
    mean[r] = Real(m[r]);
    rstd[r] = Real(s[r]);
  }
}

// Σ dxhat and Σ dxhat·xhat of LayerNorm's backward for Rows rows side by side (as above; unrolled
// over the rows rather than vectorized: the lanes' strided loads cost more than they gave), then
// each row's input gradient.
template <typename Real, int Rows>
void layernorm_backward_rows(Real* dinp, const Real* dout, const Real* inp, const Real* weight,
                             const Real* mean, const Real* rstd, int C) {
  double sum_dxhat[Rows] = {}, sum_dxhat_xhat[Rows] = {};
  for (int c = 0; c < C; c++)
#pragma GCC unroll 8
    for (int r = 0; r < Rows; r++) {
      const double dxhat = (double)dout[(size_t)r * C + c] * weight[c];
      sum_dxhat[r] += dxhat;
      sum_dxhat_xhat[r] += dxhat * (inp[(size_t)r * C + c] - (double)mean[r]) * (double)rstd[r];
    }
  for (int r = 0; r < Rows; r++) {
    const double m = mean[r], s = rstd[r];
    const double mean_dxhat = sum_dxhat[r] / C, mean_dxhat_xhat = sum_dxhat_xhat[r] / C;
    const Real* x = inp + (size_t)r * C;
    const Real* g = dout + (size_t)r * C;
    Real* dx = dinp + (size_t)r * C;
    for (int c = 0; c < C; c++) {
      double xhat = (x[c] - m) * s;
      double dxhat = (double)g[c] * weight[c];
      dx[c] += Real(s * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat));
    }
  }
}

// LayerNorm's weight and bias gradients for kChannelBlock channels, summed down the rows in order
// with the sums in registers (GCC's vector types: a loop over arrays kept them on the stack). The
// same expressions, in the same order, as the scalar loop over the remaining channels.
constexpr int kChannelBlock = 32;
void parameter_gradient_block(float* dweight, float* dbias, const float* dout, const float* inp,
                              const float* mean, const float* rstd, int N, int C) {
  typedef float floats8 __attribute__((vector_size(32)));
  typedef double doubles8 __attribute__((vector_size(64)));
  constexpr int kVectors = kChannelBlock / 8;
  doubles8 dw[kVectors] = {}, db[kVectors] = {};
  for (int n = 0; n < N; n++) {
    const float m = mean[n], s = rstd[n];
    for (int k = 0; k < kVectors; k++) {
      floats8 g, x;
      std::memcpy(&g, dout + (size_t)n * C + 8 * k, sizeof g);
      std::memcpy(&x, inp + (size_t)n * C + 8 * k, sizeof x);
      const doubles8 gc = __builtin_convertvector(g, doubles8);
      dw[k] += gc * __builtin_convertvector(x - m, doubles8) * (double)s;
      db[k] += gc;
    }
  }
  for (int k = 0; k < kVectors; k++)
    for (int i = 0; i < 8; i++) {
      dweight[8 * k + i] += float(dw[k][i]);
      dbias[8 * k + i] += float(db[k][i]);
    }
}

// The forward over N rows, each output stored as Out.
template <typename Real, typename Out>
void layernorm_rows(Out* out, Real* mean, Real* rstd, const Real* inp, const Real* weight,
                    const Real* bias, int N, int C) {
  const int groups = N / kGroup;
#pragma omp parallel for schedule(static)
  for (int g = 0; g < groups; g++) {
    const size_t n = (size_t)g * kGroup;
    normalize_rows<Real, kGroup, Out>(out + n * C, mean + n, rstd + n, inp + n * C, weight, bias,
                                      C);
  }
  for (int n = groups * kGroup; n < N; n++)
    normalize_rows<Real, 1, Out>(out + (size_t)n * C, mean + n, rstd + n, inp + (size_t)n * C,
                                 weight, bias, C);
}

}  // namespace

template <typename Real>
void layernorm_forward(Real* out, Real* mean, Real* rstd, const Real* inp, const Real* weight,
                       const Real* bias, int N, int C) {
  layernorm_rows(out, mean, rstd, inp, weight, bias, N, C);
}

void layernorm_forward_bf16(bf16* out, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int N, int C) {
  layernorm_rows(out, mean, rstd, inp, weight, bias, N, C);
}

template <typename Real>
void layernorm_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout,
                        const LayerNormArgs<Real>& args) {
  const Real *inp = args.inp, *weight = args.weight, *mean = args.mean, *rstd = args.rstd;
  const int N = args.N, C = args.C;
  // forward: xhat = (x − mean)·rstd, out = xhat·w + b.
  // dxhat = dout·w; dx = rstd·(dxhat − mean(dxhat) − xhat·mean(dxhat·xhat)).
  const int groups = N / kGroup;
#pragma omp parallel for schedule(static)
  for (int g = 0; g < groups; g++) {
    const size_t n = (size_t)g * kGroup;
    layernorm_backward_rows<Real, kGroup>(dinp + n * C, dout + n * C, inp + n * C, weight, mean + n,
                                          rstd + n, C);
  }
  for (int n = groups * kGroup; n < N; n++) {
    layernorm_backward_rows<Real, 1>(dinp + (size_t)n * C, dout + (size_t)n * C,
                                     inp + (size_t)n * C, weight, mean + n, rstd + n, C);
  }
  // Parameter gradients reduce over rows, each channel's sum in row order. The threads split the
  // channels; each walks the rows in order with a block of its channels side by side, whose sums
  // stay in registers (a thread's whole share side by side kept them in memory, loaded and stored
  // at every row: half of this function's time).
#pragma omp parallel
  {
    const ThreadShare mine = this_threads_share(C, 8);
    int c = (int)mine.begin;
    if constexpr (std::is_same_v<Real, float>)
      for (; c + kChannelBlock <= (int)mine.end; c += kChannelBlock)
        parameter_gradient_block(dweight + c, dbias + c, dout + c, inp + c, mean, rstd, N, C);
    for (; c < (int)mine.end; c++) {
      double dw = 0, db = 0;
      for (int n = 0; n < N; n++) {
        const double gc = dout[(size_t)n * C + c];
        const Real m = mean[n], s = rstd[n];
        dw += gc * (inp[(size_t)n * C + c] - m) * s;
        db += gc;
      }
      dweight[c] += Real(dw);
      dbias[c] += Real(db);
    }
  }
}

#define XSA_INSTANTIATE(Real)                                                          \
  template void layernorm_forward<Real>(Real*, Real*, Real*, const Real*, const Real*, \
                                        const Real*, int, int);                        \
  template void layernorm_backward<Real>(Real*, Real*, Real*, const Real*,             \
                                         const LayerNormArgs<Real>&);
XSA_INSTANTIATE(float)
XSA_INSTANTIATE(double)

}  // namespace xsa::ops::XSA_LEVEL
XSA_LEVEL_END
