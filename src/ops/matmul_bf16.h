// Matrix products with bf16 inputs and fp32 accumulation and output (oneDNN's matmul), for mixed
// precision: the inputs are bf16 copies (weights refreshed after each update, activations
// converted as they are produced), everything else stays fp32. Weights are [out, in] like
// nn.Linear, as in matmul.cpp, whose float kernels these mirror. Built when oneDNN
// (libdnnl-dev) is there; bf16_available() says so at run time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace xsa::ops {

using bf16 = uint16_t;  // the upper half of an IEEE float

// Round to nearest, ties to even (NaN stays a quiet NaN), as AVX512_BF16's vcvtneps2bf16 but
// keeping denormals. Inline and branch-free so that a loop over it vectorizes.
inline bf16 round_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (bf16)(nan ? (u >> 16) | 0x40u : rounded);
}

// x as an output of type Out holds it: itself, or rounded to bf16 (the kernels that write a
// product's input in either precision).
template <typename Out, typename Real>
inline Out stored_as(Real x) {
  if constexpr (std::is_same_v<Out, bf16>)
    return round_to_bf16(x);
  else
    return x;
}

// round_to_bf16 over an array, split across the threads when it is large and no parallel region
// is running; and back, exactly.
void to_bf16(const float* x, bf16* out, size_t n);
void from_bf16(const bf16* x, float* out, size_t n);

// crossentropy_forward_backward (ops.h) whose gradient (p − onehot)·dloss goes, rounded, into
// grad [N, Vp]; the logits are only read (their memory is not written back) and each row's
// gradient is rounded while its exps are in cache, which saves two passes over the chunk.
void crossentropy_forward_backward_bf16(float* logits, bf16* grad, float* losses,
                                        const int32_t* targets, int N, int V, int Vp, float dloss);

// XSA's z written as a product input (the bf16 backend's, when only W_o's products read it):
// xsa_forward, and xsa_backward's writing of z again, with each z rounded to bf16 as it is written.
void xsa_forward_bf16(bf16* z, const float* y, const float* qkv, int B, int T, int C, int H,
                      const float* alpha, int Hkv);
void xsa_backward_bf16(float* dy, float* dqkv, const float* dz, const float* y, const float* qkv,
                       int B, int T, int C, int H, const float* alpha, float* dalpha, int Hkv,
                       bool write_dv, bf16* z);

// Producers of product inputs: layernorm_forward and gelu_forward (ops.h) with their outputs, which
// only products read, rounded to bf16 as they are written (the products' input conversions done
// once, in the producer's pass). The same bits as the fp32 op's output through to_bf16.
void layernorm_forward_bf16(bf16* out, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int N, int C);
void gelu_forward_bf16(bf16* out, const float* inp, size_t n);
// And gradients that only products read: gelu_backward's and rope_backward's (ops.h) written
// rounded to bf16 into out (not in place); rope_backward_bf16 rounds each row's v beside its
// rotated q and k.
void gelu_backward_bf16(bf16* dinp, const float* inp, const float* dout, size_t n);
void rope_backward_bf16(bf16* out, const float* dqkv, const float* cos, const float* sin, int B,
                        int T, int C, int H, int Hkv);

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
// wide as one block of rows per thread (perf-log #31). Off: one product on oneDNN's own threads,
// as before, kept to measure against (kernels_bench's BM_ProductsGpt2).
void set_bf16_column_blocks(bool on);
// dinp [N, in_dim] = dout · W (skipped when dinp is null); dweight [out_dim, in_dim] += doutᵀ ·
// inp, or = with accumulate false (as ops::matmul_backward).
void matmul_backward_bf16(float* dinp, float* dweight, const bf16* dout, const bf16* inp,
                          const bf16* weight, int N, int in_dim, int out_dim,
                          bool accumulate = true);

}  // namespace xsa::ops
