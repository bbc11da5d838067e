// Row-major GEMM through the BLAS (OpenBLAS, or one put first with LD_PRELOAD) for float and
// double: C = alpha·op(A)·op(B) + beta·C, C [M, N]. The float64 products; the model's fp32
// products go to oneDNN when built with it (ops/matmul_bf16.h); attention's tiles have their own
// (ops/attention.cpp).
// Inside an OpenMP parallel region OpenBLAS (its OpenMP build) runs single-threaded, so kernels may
// call it per tile from their own threads.
#pragma once

#include <cblas.h>

namespace xsa::ops {

inline void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                 int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline void gemm(bool trans_a, bool trans_b, int M, int N, int K, double alpha, const double* A,
                 int lda, const double* B, int ldb, double beta, double* C, int ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace xsa::ops
