// The engine's kernels: graph-agnostic forward and backward passes, one family per file
// (ops/<family>.cpp), each templated on the scalar type and instantiated for float (training) and
// double (the gradient-check path). Plain, obviously-correct twins of every kernel live in
// ops/reference.h; the tests hold these kernels to them.
//
// Conventions (as in llm.c): outputs first, then inputs, then sizes. Shapes are given per pointer,
// row-major. N = B*T rows. Activation gradients overwrite, except where a comment says
// "accumulates" (the residual stream and parameter gradients).
#pragma once

#include <cstddef>
#include <cstdint>

#include "xsa/ops/attention.h"

namespace xsa::ops {

// ---- matmul.cpp: y = x · Wᵀ with W stored [out, in] like nn.Linear (OpenBLAS GEMM) ----
// out [N, out_dim] = inp [N, in_dim] · weightᵀ; with accumulate, out += instead of =.
template <typename Real>
void matmul_forward(Real* out, const Real* inp, const Real* weight, int N, int in_dim, int out_dim,
                    bool accumulate = false);
// dinp [N, in_dim] = dout · weight (overwrite; skipped when dinp is null);
// dweight [out_dim, in_dim] accumulates doutᵀ · inp, or is overwritten by it (accumulate false: a
// step's first contribution, so that the gradients need no zeroing and are not read first).
template <typename Real>
void matmul_backward(Real* dinp, Real* dweight, const Real* dout, const Real* inp,
                     const Real* weight, int N, int in_dim, int out_dim, bool accumulate = true);

// out [N, D] += bias [D] on every row (linear layers with biases, as GPT-2's).
template <typename Real>
void bias_forward(Real* out, const Real* bias, int N, int D);
// dbias [D] accumulates Σ_n dout [N, D], rows in order (the thread count changes nothing).
template <typename Real>
void bias_backward(Real* dbias, const Real* dout, int N, int D);

// ---- encoder.cpp: token embedding, and rows copied between strided layouts ----
// dst row r (dst_stride apart) = the first `width` values of src row r (src_stride apart).
template <typename Real>
void copy_rows(Real* dst, size_t dst_stride, const Real* src, size_t src_stride, int rows,
               int width);
// out [N, C] = wte[tokens[n]]
template <typename Real>
void encoder_forward(Real* out, const int32_t* tokens, const Real* wte, int N, int C);
// dwte [V, C] accumulates dout rows at their tokens.
template <typename Real>
void encoder_backward(Real* dwte, const Real* dout, const int32_t* tokens, int N, int C);
// out [N, C] += table[index[n]] (learned positions: table wpe, index the positions); its backward
// is encoder_backward with the same index.
template <typename Real>
void embedding_add(Real* out, const int32_t* index, const Real* table, int N, int C);

// ---- layernorm.cpp ----
// out [N, C], mean [N], rstd [N] from inp [N, C], weight [C], bias [C]; eps 1e-5.
template <typename Real>
void layernorm_forward(Real* out, Real* mean, Real* rstd, const Real* inp, const Real* weight,
                       const Real* bias, int N, int C);
// dinp [N, C] accumulates (it is the residual stream); dweight, dbias [C] accumulate.
template <typename Real>
void layernorm_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                        const Real* weight, const Real* mean, const Real* rstd, int N, int C);

// ---- rope.cpp: rotary positions, rotate-half pairing (j with j + D/2) over the whole head ----
// cos, sin [T, D/2]: angle(t, j) = t · theta^(-2j/D), computed in double.
template <typename Real>
void rope_table(Real* cos, Real* sin, int T, int D, double theta);
// Rotates q and k of qkv [B, T, 3C] in place (v untouched). Position of row (b, t) is t.
template <typename Real>
void rope_forward(Real* qkv, const Real* cos, const Real* sin, int B, int T, int C, int H,
                  int Hkv = 0);
// dqkv [B, T, 3C]: the q and k parts are rotated back in place (the transpose rotation).
template <typename Real>
void rope_backward(Real* dqkv, const Real* cos, const Real* sin, int B, int T, int C, int H,
                   int Hkv = 0);

// ---- attention.cpp: causal attention with SA, XSA, gated XSA, sinks, GQA (ops/attention.h) ----

// ---- xsa.cpp: the exclusive step z = y − (y·u) u, u = v/max(‖v‖, 1e-6), per token and head ----
// (row functions in ops/xsa_row.h; the cached attention applies them per row, the tiled kernels
// call these batch forms in a separate pass, docs/perf-log.md #3)

// z [B, T, C] from y [B, T, C] and the v part of qkv [B, T, 3C]. z may alias y.
template <typename Real>
void xsa_forward(Real* z, const Real* y, const Real* qkv, int B, int T, int C, int H,
                 const Real* alpha = nullptr, int Hkv = 0);
// dy [B, T, C] = g − (g·u) u (overwrite); the v part of dqkv [B, T, 3C] accumulates the
// own-value gradient (with write_dv, a kv group's first head writes it); g = dz [B, T, C].
template <typename Real>
// With alpha [H] (gated XSA), dalpha [B·T, H] receives each token's ∂L/∂α_h = −s (g·u)
// (overwritten). With z [B, T, C], the forward's z is written again on the way (xsa_forward's
// bits, from the rows of y and v this pass has in cache anyway).
void xsa_backward(Real* dy, Real* dqkv, const Real* dz, const Real* y, const Real* qkv, int B,
                  int T, int C, int H, const Real* alpha = nullptr, Real* dalpha = nullptr,
                  int Hkv = 0, bool write_dv = false, Real* z = nullptr);

// ---- gelu.cpp: tanh approximation ----
template <typename Real>
void gelu_forward(Real* out, const Real* inp, size_t n);
// dinp = gelu'(inp) · dout (overwrite).
template <typename Real>
void gelu_backward(Real* dinp, const Real* inp, const Real* dout, size_t n);

// ---- crossentropy.cpp: fused softmax + cross-entropy over the real vocabulary ----
// logits [N, Vp] with V real columns (padded columns never win). losses [N] = −log p[target];
// rows whose target is −1 get loss 0. When dloss != 0 the logits are replaced by their
// gradient (p − onehot(target)) · dloss (0 on padded columns and ignored rows).
template <typename Real>
void crossentropy_forward_backward(Real* logits, Real* losses, const int32_t* targets, int N, int V,
                                   int Vp, Real dloss);

// ---- adamw.cpp ----
struct AdamWSettings {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;  // the caller passes 0 for tensors that do not decay
  double grad_scale = 1.0;    // global-norm clipping folds in here
  int64_t step = 1;           // 1-based, for bias correction
};
// Decoupled AdamW as torch.optim.AdamW: p *= 1 − lr·wd; m, v moments; bias-corrected update.
// With bf16_copy (mixed precision's copy of the weights) each updated value is also written there,
// rounded to bf16, in the same pass.
template <typename Real>
void adamw_update(Real* param, const Real* grad, Real* m, Real* v, size_t n, const AdamWSettings& s,
                  uint16_t* bf16_copy = nullptr);
// Σ g² in double, summed in fixed chunks so the result does not depend on the thread count.
template <typename Real>
double sum_of_squares(const Real* x, size_t n);

}  // namespace xsa::ops
