// Matrix products: through oneDNN or the BLAS (fp32_product_library(), ops/matmul_bf16.h), one row
// (decoding) through a loop of ours. Weights are [out, in] (nn.Linear), so the forward is x · Wᵀ.
#include <type_traits>

#include "xsa/ops/gemm.h"
#include "xsa/ops/matmul_bf16.h"
#include "xsa/ops/ops.h"

// clang-format off: after every other include (ops/kernel_level.h)
#include "xsa/ops/kernel_level.h"
// clang-format on

namespace xsa::ops::XSA_LEVEL {
namespace {

// out [out_dim] (+)= weight [out_dim, in_dim] · inp: decoding one token is bound by reading the
// weights (120 MB per token for `small`). OpenBLAS's sgemv streams them at ~21 GB/s on the 2-core
// machine of docs/perf-log.md, which reads 36 GB/s; one row after the other, each read as one
// sequential stream and the rows split between the threads, reaches ~33. Each row's sum has one
// fixed order, so the result does not depend on the thread count.
template <typename Real>
void matvec(Real* out, const Real* inp, const Real* weight, int in_dim, int out_dim,
            bool accumulate) {
#pragma omp parallel for schedule(static) if ((size_t)out_dim * in_dim > 65536)
  for (int r = 0; r < out_dim; r++) {
    const Real* w = weight + (size_t)r * in_dim;
    Real sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < in_dim; i++) sum += w[i] * inp[i];
    out[r] = accumulate ? out[r] + sum : sum;
  }
}

}  // namespace

template <typename Real>
void matmul_forward(Real* out, const Real* inp, const Real* weight, int N, int in_dim, int out_dim,
                    bool accumulate) {
  if (N == 0) return;
  if (N == 1) {  // one token (decoding): stream the weights once, at memory speed
    matvec(out, inp, weight, in_dim, out_dim, accumulate);
    return;
  }
  if constexpr (std::is_same_v<Real, float>)
    if (fp32_product_library() == ProductLibrary::onednn)
      return matmul_forward_onednn(out, inp, weight, N, in_dim, out_dim, accumulate);
  gemm({false, true, N, out_dim, in_dim, in_dim, in_dim, out_dim}, Real(1), inp, weight,
       accumulate ? Real(1) : Real(0), out);
}

template <typename Real>
void matmul_backward(Real* dinp, Real* dweight, const Real* dout, const Real* inp,
                     const Real* weight, MatmulShape shape, bool accumulate) {
  const int N = shape.N, in_dim = shape.in_dim, out_dim = shape.out_dim;
  if (N == 0) return;
  // forward: out = inp · Wᵀ  =>  dinp = dout · W,  dW += doutᵀ · inp
  if constexpr (std::is_same_v<Real, float>)
    if (fp32_product_library() == ProductLibrary::onednn)
      return matmul_backward_onednn(dinp, dweight, dout, inp, weight, shape, accumulate);
  if (dinp)
    gemm({false, false, N, in_dim, out_dim, out_dim, in_dim, in_dim}, Real(1), dout, weight,
         Real(0), dinp);
  if (dweight)
    gemm({true, false, out_dim, in_dim, N, out_dim, in_dim, in_dim}, Real(1), dout, inp,
         accumulate ? Real(1) : Real(0), dweight);
}

template <typename Real>
void bias_forward(Real* out, const Real* bias, int N, int D) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    Real* row = out + (size_t)n * D;
#pragma omp simd
    for (int d = 0; d < D; d++) row[d] += bias[d];
  }
}

template <typename Real>
void bias_backward(Real* dbias, const Real* dout, int N, int D) {
  // Threads split the columns; each column sums its rows in order.
  constexpr int kChunk = 64;
#pragma omp parallel for schedule(static)
  for (int d0 = 0; d0 < D; d0 += kChunk) {
    const int d1 = d0 + kChunk < D ? d0 + kChunk : D;
    for (int n = 0; n < N; n++) {
      const Real* row = dout + (size_t)n * D;
#pragma omp simd
      for (int d = d0; d < d1; d++) dbias[d] += row[d];
    }
  }
}

#define XSA_INSTANTIATE(Real)                                                               \
  template void bias_forward<Real>(Real*, const Real*, int, int);                           \
  template void bias_backward<Real>(Real*, const Real*, int, int);                          \
  template void matmul_forward<Real>(Real*, const Real*, const Real*, int, int, int, bool); \
  template void matmul_backward<Real>(Real*, Real*, const Real*, const Real*, const Real*,  \
                                      MatmulShape, bool);
XSA_INSTANTIATE(float)
XSA_INSTANTIATE(double)

}  // namespace xsa::ops::XSA_LEVEL
XSA_LEVEL_END
