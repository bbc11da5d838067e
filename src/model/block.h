// One transformer block, forward beside backward: x_mid = x + attn(LN1(x)) W_o,
// x_out = x_mid + gelu(LN2(x_mid) W_fc) W_proj, with SA or XSA (gated, with sinks, grouped-query)
// per layer. The forward is written once: training runs it over B sequences of T tokens keeping
// every layer's buffers for the backward; the cached decoder runs it over new rows in place,
// reusing one set of buffers, and hands it its key/value cache.
#pragma once

#include "xsa/backend/backend.h"
#include "xsa/model/model_config.h"
#include "xsa/model/params.h"

namespace xsa {

// Where a block's forward writes (N = B·T rows). Training keeps one set per layer (the backward
// reads them); the decoder passes one set for every layer, with resid_mid = x and ln1 = ln2. Every
// buffer is sized for fp32; how ln1, ln2 and fc_gelu are stored is the activation plan's
// (BlockStorage). Once its weight gradient is formed, the backward reuses fc_gelu for GELU's input
// gradient where that is stored apart (bf16).
template <typename Real>
struct BlockBuffers {
  Real* ln1;        // [N, C]
  Real* ln1_mean;   // [N]
  Real* ln1_rstd;   // [N]
  Real* qkv;        // [N, C + 2·Hkv·D] (q | k | v) after RoPE on q and k
  Real* att_y;      // [N, C] attention output y, before the exclusive step
  Real* att_lse;    // [B, H, T] row log-sum-exp of the scores
  Real* resid_mid;  // [N, C] residual stream after the attention block
  Real* ln2;        // [N, C]
  Real* ln2_mean;   // [N]
  Real* ln2_rstd;   // [N]
  Real* fc;         // [N, 4C] before GELU
  Real* fc_gelu;    // [N, 4C]
  // XSA's rivals (docs/SPEC.md §8), null where the layer has none:
  Real* output_gate_pre = nullptr;  // [N, C] gated-attn: LN1(x) W_gᵀ, the gate before its sigmoid
  Real* att_z = nullptr;            // [N, C] gated-attn with XSA: z, kept for the gate's backward
  Real* v_raw = nullptr;  // [N, Hkv·D] value-residual, layers ≥ 1: the layer's own values
  // QK-norm, training only (the decoder keeps nothing): q and k before it, and each head's rstd.
  Real* qk_raw = nullptr;   // [N, C + Hkv·D]
  Real* qk_rstd = nullptr;  // [N, H + Hkv]
};

// Scratch shared by all layers.
template <typename Real>
struct BlockScratch {
  Real* att_z;        // [N, C] exclusive output z (SA: unused); the backward recomputes it
  Real* xsa_alpha;    // [H] α_h = tanh(w_h) of the gated layer at hand
  Real* xsa_dalpha;   // [N, H] backward: per-token ∂L/∂α_h
  Real* sink_dlogit;  // [B, H] backward: ∂L/∂b_h per sequence
  // XSA's rivals, null where the model has none:
  Real* att_output_gated = nullptr;  // [N, C] gated-attn: W_o's input y ⊙ σ(output_gate_pre)
  Real* d_output_gated = nullptr;  // [N, C] backward: ∂L/∂(W_o's input), then ∂L/∂output_gate_pre
  Real* v_first = nullptr;         // [N, Hkv·D] value-residual: the first layer's values
  Real* d_v_first = nullptr;  // [N, Hkv·D] backward: the later layers' gradient of v_first
  // value-embed: the rows' table rows (forward), then their value gradients (backward).
  Real* value_embed_rows = nullptr;  // [N, Hkv·D]
};

// Refuses, in one line, a model whose rivals of XSA the backend does not run.
template <typename Real>
void check_backend_runs(const ModelConfig& cfg, const Backend<Real>& backend);

// The rows' rotary tables: cos, sin [T, D/2], row (b, t) at t. The decoder gathers each new row's
// position into a table of its own with B = 1. tokens: the rows' token ids (host), which value
// embeddings look up.
template <typename Real>
struct RowShape {
  int B, T;
  const Real* rope_cos;
  const Real* rope_sin;
  const int32_t* tokens;
};

// The decoder's key/value cache of one layer: slots [capacity, Hkv·D]; the rows write theirs at
// view.slot0 + r and see what view (ops::KvCache) says. A fresh sequence (slot0 0, no spans) runs
// the tiled training kernel.
template <typename Real>
struct LayerCache {
  Real* k;
  Real* v;
  ops::KvCache<Real> view;
};

// The activation plan: how each of a block's activations is stored, declared here once. The
// product inputs (backend.h: activations only matrix products read) take the backend's
// product-input storage for the rows at hand; every other activation is fp32. Backward: GELU's
// input gradient is a product input where fc has no bias (its gradient would read it), RoPE's
// output gradient where qkv has no bias and no QK-norm (whose backward reads it); stored bf16
// they go to a buffer free at that point (fc_gelu, d_fc) instead of in place.
struct BlockStorage {
  Storage ln1, ln2, fc_gelu, att_z;  // forward
  Storage d_fc_pre, d_qkv;           // backward
};
template <typename Real>
struct BlockRun;
template <typename Real>
BlockStorage block_storage(const Backend<Real>& be, const BlockRun<Real>& run);

// One block at one call: what the forward and the backward both read.
template <typename Real>
struct BlockRun {
  const ModelConfig& cfg;
  int layer;
  const LayerWeights<Real>& W;
  const BlockBuffers<Real>& buf;
  const BlockScratch<Real>& scratch;
  const RowShape<Real>& rows;
};

// The backward's outputs and scratch. d_resid [N, C] holds ∂L/∂x_out and becomes ∂L/∂x_in; d_buf
// [N, C], d_qkv [N, QKV] and d_fc [N, 4C] are scratch. Parameter gradients accumulate into dW,
// except that with accumulate false the four matrices' gradients are overwritten (a step's first
// micro-batch: they need no zeroing and are not read).
template <typename Real>
struct BlockGradients {
  LayerWeights<Real>& dW;
  Real* d_resid;
  Real* d_buf;
  Real* d_qkv;
  Real* d_fc;
  bool accumulate;
};

// x_out = block(x_in); x_out may be x_in (in place) and buf.resid_mid may be x_in too.
template <typename Real>
void block_forward(Backend<Real>& be, const BlockRun<Real>& run, const Real* x_in, Real* x_out,
                   const LayerCache<Real>* cache = nullptr);

// The backward of block_forward over the buffers it kept.
template <typename Real>
void block_backward(Backend<Real>& be, const BlockRun<Real>& run, const Real* x_in,
                    const BlockGradients<Real>& grads);

}  // namespace xsa
