// oneDNN's matrix products. Mixed precision's take bf16 inputs with fp32 accumulation and output:
// the inputs are bf16 copies (weights refreshed after each update, activations converted as they
// are produced), everything else stays fp32. The model's fp32 products go through oneDNN too when
// fp32_product_library() says so. Weights are [out, in] like nn.Linear, as in matmul.cpp. Built
// when oneDNN (libdnnl-dev) is there; bf16_available() says whether bf16 runs here.
#pragma once

#include <string>

#include "xsa/ops/bf16.h"
#include "xsa/ops/ops.h"

namespace xsa::ops {

// Where the model's fp32 products (matmul_forward, matmul_backward) run: oneDNN's matmul when
// xsa was built with oneDNN (faster than OpenBLAS's sgemm on the model's shapes on every CPU
// measured: docs/portability.md), else the BLAS. XSA_GEMM=blas or XSA_GEMM=onednn chooses; a
// choice made once per process, never by timing, so that a run repeats bit for bit. Attention's
// tile products and every float64 product use the BLAS.
enum class ProductLibrary { blas, onednn };
ProductLibrary fp32_product_library();
// One line for run headers and benchmarks: which library runs which products, and its kernels.
std::string products_summary();
// matmul_forward and matmul_backward (src/ops/op_list.txt) in fp32 through oneDNN, with the same
// blocks per thread as the bf16 products.
void matmul_forward_onednn(float* out, const float* inp, const float* weight, int N, int in_dim,
                           int out_dim, bool accumulate);
void matmul_backward_onednn(float* dinp, float* dweight, const float* dout, const float* inp,
                            const float* weight, MatmulShape shape, bool accumulate);

// Whether this build and this CPU run bf16 products at speed: oneDNN present and the CPU has
// AVX512_BF16 or AMX-BF16. When not, `why` names what is missing.
bool bf16_available(std::string* why = nullptr);

// out [N, out_dim] (+)= inp [N, in_dim] · Wᵀ, W [out_dim, in_dim].
void matmul_forward_bf16(float* out, const bf16* inp, const bf16* weight, int N, int in_dim,
                         int out_dim, bool accumulate);
// out [N, out_dim] = residual [N, out_dim] + inp [N, in_dim] · Wᵀ, the residual added to the
// finished product (one rounding): in one pass, or, in place (out = residual), in two.
void matmul_residual_bf16(float* out, const float* residual, const bf16* inp, const bf16* weight,
                          int N, int in_dim, int out_dim);
// Products wide enough run as one block of columns per thread, each block a single-threaded
// oneDNN product (the default; perf-log #30), and weight gradients at least four times as tall as
// wide as one block of rows per thread (perf-log #31); in bf16 and in fp32. Off: one product on
// oneDNN's own threads, as before, kept to measure against (kernels_bench's BM_ProductsGpt2).
void set_bf16_column_blocks(bool on);
// dinp [N, in_dim] = dout · W (skipped when dinp is null); dweight [out_dim, in_dim] += doutᵀ ·
// inp, or = with accumulate false (as ops::matmul_backward).
void matmul_backward_bf16(float* dinp, float* dweight, const bf16* dout, const bf16* inp,
                          const bf16* weight, MatmulShape shape, bool accumulate = true);

}  // namespace xsa::ops
