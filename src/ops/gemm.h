// Row-major GEMM through OpenBLAS for float and double: C = alpha·op(A)·op(B) + beta·C, C [M, N].
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

// y = alpha·A·x + beta·y with A [M, N] row-major: one row against a matrix (decoding a token).
inline void gemv(int M, int N, float alpha, const float* A, int lda, const float* x, float beta,
                 float* y) {
  cblas_sgemv(CblasRowMajor, CblasNoTrans, M, N, alpha, A, lda, x, 1, beta, y, 1);
}
inline void gemv(int M, int N, double alpha, const double* A, int lda, const double* x, double beta,
                 double* y) {
  cblas_dgemv(CblasRowMajor, CblasNoTrans, M, N, alpha, A, lda, x, 1, beta, y, 1);
}

}  // namespace xsa::ops
