// Matrix products through OpenBLAS. Weights are [out, in] (nn.Linear), so the forward is x · Wᵀ.
#include "ops/gemm.h"
#include "ops/ops.h"

namespace xsa::ops {

template <typename Real>
void matmul_forward(Real* out, const Real* inp, const Real* weight, int N, int in_dim, int out_dim,
                    bool accumulate) {
  if (N == 0) return;
  if (N == 1) {  // one token (decoding): GEMV streams the weights once, GEMM would pack them first
    gemv(out_dim, in_dim, Real(1), weight, in_dim, inp, accumulate ? Real(1) : Real(0), out);
    return;
  }
  gemm(false, true, N, out_dim, in_dim, Real(1), inp, in_dim, weight, in_dim,
       accumulate ? Real(1) : Real(0), out, out_dim);
}

template <typename Real>
void matmul_backward(Real* dinp, Real* dweight, const Real* dout, const Real* inp,
                     const Real* weight, int N, int in_dim, int out_dim) {
  if (N == 0) return;
  // forward: out = inp · Wᵀ  =>  dinp = dout · W,  dW += doutᵀ · inp
  if (dinp)
    gemm(false, false, N, in_dim, out_dim, Real(1), dout, out_dim, weight, in_dim, Real(0), dinp,
         in_dim);
  gemm(true, false, out_dim, in_dim, N, Real(1), dout, out_dim, inp, in_dim, Real(1), dweight,
       in_dim);
}

#define XSA_INSTANTIATE(Real)                                                                   \
  template void matmul_forward<Real>(Real*, const Real*, const Real*, int, int, int, bool);     \
  template void matmul_backward<Real>(Real*, Real*, const Real*, const Real*, const Real*, int, \
                                      int, int);
XSA_INSTANTIATE(float)
XSA_INSTANTIATE(double)

}  // namespace xsa::ops
