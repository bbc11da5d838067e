// Candidate libraries for bf16 matrix products, on the `small` model's GEMM shapes (forward
// products of a 2048-row batch, a head chunk of 667 rows, and two backward products): OpenBLAS
// sgemm (fp32, today's path), oneDNN matmul (bf16 inputs, fp32 output) and libxsmm's bsgemm.
// Inputs are converted to bf16 beforehand (not timed). Prints GFLOP/s per shape (median of
// `reps`, default 7; libxsmm at most 3) and the bf16 result's largest error against fp32, relative
// to the result's largest entry. Built when libdnnl-dev and libxsmm-dev are installed:
//   cmake --build build --target bf16_gemm_bench && OMP_NUM_THREADS=2 ./build/bf16_gemm_bench
#include <cblas.h>
#include <libxsmm.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dnnl.hpp>
#include <random>
#include <vector>

using clk = std::chrono::steady_clock;

static uint16_t to_bf16(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

template <typename F>
double median_ms(F&& f, int reps) {
  f();
  std::vector<double> t;
  for (int r = 0; r < reps; r++) {
    auto t0 = clk::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(clk::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 7;
  struct Shape {
    const char* what;
    int M, N, K;
    bool bt;
  };
  // Row-major C[M,N] = A[M,K] · B, B given as [N,K] (bt: weights, transposed) or [K,N].
  const Shape shapes[] = {{"qkv fwd", 2048, 1152, 384, true},  {"fc fwd", 2048, 1536, 384, true},
                          {"proj fwd", 2048, 384, 1536, true}, {"head fwd", 667, 50304, 384, true},
                          {"fc dW", 1536, 384, 2048, false},   {"fc dX", 2048, 384, 1536, false}};
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  std::printf(
      "threads %d; OpenBLAS %s kernels; oneDNN %d.%d.%d, ISA %d (dnnl::cpu_isa)\n| shape | M N K | "
      "sgemm GF/s | oneDNN bf16 GF/s | libxsmm bf16 GF/s | oneDNN/sgemm | max rel err |\n"
      "|---|---|---|---|---|---|---|\n",
      omp_get_max_threads(), openblas_get_corename(), dnnl_version()->major, dnnl_version()->minor,
      dnnl_version()->patch, (int)dnnl::get_effective_cpu_isa());
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0, 1);
  for (const Shape& s : shapes) {
    std::vector<float> A((size_t)s.M * s.K), B((size_t)s.N * s.K), C((size_t)s.M * s.N),
        C2(C.size());
    for (auto& x : A) x = nd(rng);
    for (auto& x : B) x = nd(rng);
    std::vector<uint16_t> Ab(A.size()), Bb(B.size());
    for (size_t i = 0; i < A.size(); i++) Ab[i] = to_bf16(A[i]);
    for (size_t i = 0; i < B.size(); i++) Bb[i] = to_bf16(B[i]);
    const double flops = 2.0 * s.M * s.N * s.K;
    const int ldb = s.bt ? s.K : s.N;
    double t_s = median_ms(
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, s.bt ? CblasTrans : CblasNoTrans, s.M, s.N, s.K,
                      1.f, A.data(), s.K, B.data(), ldb, 0.f, C.data(), s.N);
        },
        reps);
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    dnnl::memory::desc a_md({s.M, s.K}, dt::bf16, tag::ab);
    dnnl::memory::desc b_md({s.K, s.N}, dt::bf16, s.bt ? tag::ba : tag::ab);
    dnnl::memory::desc c_md({s.M, s.N}, dt::f32, tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), eng);
    dnnl::matmul prim(pd);
    dnnl::memory am(a_md, eng, Ab.data()), bm(b_md, eng, Bb.data()), cm(c_md, eng, C2.data());
    double t_d = median_ms(
        [&] {
          prim.execute(strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
          strm.wait();
        },
        reps);
    double err = 0, scale = 0;
    for (size_t i = 0; i < C.size(); i++)
      err = std::max(err, (double)std::fabs(C[i] - C2[i])),
      scale = std::max(scale, (double)std::fabs(C[i]));
    // libxsmm is column-major: C^T[N,M] = B^T · A^T.
    std::vector<float> C3(C.size());
    const char ta = s.bt ? 'T' : 'N', tb = 'N';
    const float alpha = 1, beta = 0;
    const libxsmm_blasint m = s.N, n = s.M, k = s.K, lda = ldb, ldb2 = s.K, ldc = s.N;
    double t_x = median_ms(
        [&] {
          libxsmm_bsgemm(&ta, &tb, &m, &n, &k, &alpha, (const libxsmm_bfloat16*)Bb.data(), &lda,
                         (const libxsmm_bfloat16*)Ab.data(), &ldb2, &beta, C3.data(), &ldc);
        },
        std::min(reps, 3));
    std::printf("| %s | %d %d %d | %.1f | %.1f | %.1f | %.2f | %.1e |\n", s.what, s.M, s.N, s.K,
                flops / t_s / 1e6, flops / t_d / 1e6, flops / t_x / 1e6, t_s / t_d, err / scale);
  }
}
