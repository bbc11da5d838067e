// Row-major GEMM through the BLAS (OpenBLAS, or one put first with LD_PRELOAD) for float and
// double: C = alpha·op(A)·op(B) + beta·C, C [M, N]. The float64 products; the model's fp32
// products go to oneDNN when built with it (ops/matmul_bf16.h); attention's tiles have their own
// (ops/attention.cpp).
// Inside an OpenMP parallel region OpenBLAS (its OpenMP build) runs single-threaded, so kernels may
// call it per tile from their own threads.
#pragma once

#include <cblas.h>

namespace xsa::ops {

// A product's layout: C [M, N] = alpha·op(A)·op(B) + beta·C, row-major, op a transpose where asked,
// each operand's leading dimension (its row's stride).
struct GemmShape {
  bool trans_a = false, trans_b = false;
  int M = 0, N = 0, K = 0;
  int lda = 0, ldb = 0, ldc = 0;
};

inline void gemm(const GemmShape& s, float alpha, const float* A, const float* B, float beta,
                 float* C) {
  cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans,
              s.trans_b ? CblasTrans : CblasNoTrans, s.M, s.N, s.K, alpha, A, s.lda, B, s.ldb, beta,
              C, s.ldc);
}
inline void gemm(const GemmShape& s, double alpha, const double* A, const double* B, double beta,
                 double* C) {
  cblas_dgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans,
              s.trans_b ? CblasTrans : CblasNoTrans, s.M, s.N, s.K, alpha, A, s.lda, B, s.ldb, beta,
              C, s.ldc);
}

}  // namespace xsa::ops
