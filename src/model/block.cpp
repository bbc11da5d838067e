#include "xsa/model/block.h"

namespace xsa {
namespace {

// α_h = tanh(w_h) of a gated layer into the scratch; null for SA and plain XSA.
template <typename Real>
const Real* gate_alpha(Backend<Real>& be, const ModelConfig& cfg, const LayerWeights<Real>& W,
                       const BlockScratch<Real>& scratch) {
  if (!W.xsa_gate) return nullptr;
  be.gate_alpha(scratch.gate_alpha, W.xsa_gate, cfg.n_head);
  return scratch.gate_alpha;
}

template <typename Real>
ops::AttentionArgs<Real> attention_args(const ModelConfig& cfg, int layer,
                                        const LayerWeights<Real>& W, const BlockBuffers<Real>& buf,
                                        const BlockScratch<Real>& scratch, const Real* alpha, int B,
                                        int T) {
  ops::AttentionArgs<Real> a;
  a.B = B, a.T = T, a.C = cfg.n_embd, a.H = cfg.n_head, a.Hkv = cfg.kv_heads();
  a.exclusive = cfg.layer_attn[layer] != AttnKind::sa;
  a.qkv = buf.qkv, a.y = buf.att_y, a.z = a.exclusive ? scratch.att_z : nullptr;
  a.lse = buf.att_lse, a.alpha = alpha, a.sink = W.sink;
  return a;
}

}  // namespace

template <typename Real>
void block_forward(Backend<Real>& be, const ModelConfig& cfg, int layer,
                   const LayerWeights<Real>& W, const Real* x_in, Real* x_out,
                   const BlockBuffers<Real>& buf, const BlockScratch<Real>& scratch,
                   const RowShape<Real>& rows, const LayerCache<Real>* cache) {
  const int B = rows.B, T = rows.T, N = B * T, C = cfg.n_embd, H = cfg.n_head;
  const int Hkv = cfg.kv_heads(), QKV = cfg.qkv_dim(), Ck = Hkv * cfg.head_dim();
  // x_mid = x + attn(LN1(x)) W_o
  be.layernorm_forward_product_input(buf.ln1, buf.ln1_mean, buf.ln1_rstd, x_in, W.ln1_w, W.ln1_b, N,
                                     C);
  be.matmul_forward_product_input(buf.qkv, buf.ln1, W.qkv_w, N, C, QKV);
  if (W.qkv_b) be.bias_forward(buf.qkv, W.qkv_b, N, QKV);
  if (cfg.positions == Positions::rope)
    be.rope_forward(buf.qkv, rows.rope_cos, rows.rope_sin, B, T, C, H, Hkv);
  const ops::AttentionArgs<Real> args =
      attention_args(cfg, layer, W, buf, scratch, gate_alpha(be, cfg, W, scratch), B, T);
  if (cache) {  // the new rows' keys and values join the cache first: they see themselves
    const size_t slot0 = (size_t)cache->view.slot0 * Ck;
    be.copy_rows(cache->k + slot0, Ck, buf.qkv + C, QKV, N, Ck);
    be.copy_rows(cache->v + slot0, Ck, buf.qkv + C + Ck, QKV, N, Ck);
  }
  if (!cache || (cache->view.slot0 == 0 && !cache->view.spans)) {  // tiled
    if (args.exclusive) {  // z, which only W_o's products read, as a product input
      be.attention_forward_product_input(args);
      be.matmul_forward_residual_product_input(buf.resid_mid, x_in, args.z, W.attn_proj_w, N, C, C);
    } else {
      be.attention_forward(args);
      be.matmul_forward_residual(buf.resid_mid, x_in, buf.att_y, W.attn_proj_w, N, C, C);
    }
  } else {
    be.attention_forward_cached(args, cache->view);
    const Real* z = args.exclusive ? args.z : buf.att_y;
    be.matmul_forward_residual(buf.resid_mid, x_in, z, W.attn_proj_w, N, C, C);
  }
  if (W.attn_proj_b) be.bias_forward(buf.resid_mid, W.attn_proj_b, N, C);
  // x_out = x_mid + gelu(LN2(x_mid) W_fc) W_proj
  be.layernorm_forward_product_input(buf.ln2, buf.ln2_mean, buf.ln2_rstd, buf.resid_mid, W.ln2_w,
                                     W.ln2_b, N, C);
  be.matmul_forward_product_input(buf.fc, buf.ln2, W.fc_w, N, C, 4 * C);
  if (W.fc_b) be.bias_forward(buf.fc, W.fc_b, N, 4 * C);
  be.gelu_forward_product_input(buf.fc_gelu, buf.fc, N, 4 * C);
  be.matmul_forward_residual_product_input(x_out, buf.resid_mid, buf.fc_gelu, W.mlp_proj_w, N,
                                           4 * C, C);
  if (W.mlp_proj_b) be.bias_forward(x_out, W.mlp_proj_b, N, C);
}

template <typename Real>
void block_backward(Backend<Real>& be, const ModelConfig& cfg, int layer,
                    const LayerWeights<Real>& W, LayerWeights<Real>& dW, const Real* x_in,
                    const BlockBuffers<Real>& buf, const BlockScratch<Real>& scratch,
                    const RowShape<Real>& rows, Real* d_resid, Real* d_buf, Real* d_qkv, Real* d_fc,
                    bool accumulate) {
  const int B = rows.B, T = rows.T, N = B * T, C = cfg.n_embd, H = cfg.n_head;
  const int Hkv = cfg.kv_heads(), QKV = cfg.qkv_dim();
  // MLP block: d_resid holds ∂L/∂x_out and becomes ∂L/∂x_mid.
  be.matmul_backward_product_input(d_fc, dW.mlp_proj_w, d_resid, buf.fc_gelu, W.mlp_proj_w, N,
                                   4 * C, C, accumulate);
  if (dW.mlp_proj_b) be.bias_backward(dW.mlp_proj_b, d_resid, N, C);
  if (!dW.fc_b) {  // GELU's gradient only feeds W_fc's products; fc_gelu, read, is free for it
    const Real* d_pre = be.gelu_backward_product_input(d_fc, buf.fc, buf.fc_gelu, N, 4 * C);
    be.matmul_backward_product_inputs(d_buf, dW.fc_w, d_pre, buf.ln2, W.fc_w, N, C, 4 * C,
                                      accumulate);
  } else {
    be.gelu_backward(d_fc, buf.fc, d_fc, (size_t)N * 4 * C);
    be.matmul_backward_product_input(d_buf, dW.fc_w, d_fc, buf.ln2, W.fc_w, N, C, 4 * C,
                                     accumulate);
    be.bias_backward(dW.fc_b, d_fc, N, 4 * C);
  }
  be.layernorm_backward(d_resid, dW.ln2_w, dW.ln2_b, d_buf, buf.resid_mid, W.ln2_w, buf.ln2_mean,
                        buf.ln2_rstd, N, C);
  // Attention block: x_mid = x + z W_oᵀ. d_buf = ∂L/∂z; the attention backward applies XSA's
  // backward to it in place. XSA's z is not stored: the attention backward writes it again from
  // the rows of y and v it reads for XSA's backward (a separate pass over them, cold by then, cost
  // about 0.7 ms per `gpt2` layer), and W_o's gradient is formed after it. z feeds W_o's products
  // alone, so a bf16 backend writes it as their bf16 input, here and in the forward.
  const Real* alpha = gate_alpha(be, cfg, W, scratch);
  ops::AttentionArgs<Real> args = attention_args(cfg, layer, W, buf, scratch, alpha, B, T);
  const Real* z = args.exclusive ? nullptr : buf.att_y;  // XSA's: after the attention backward
  be.matmul_backward(d_buf, z ? dW.attn_proj_w : nullptr, d_resid, z, W.attn_proj_w, N, C, C,
                     accumulate);
  if (dW.attn_proj_b) be.bias_backward(dW.attn_proj_b, d_resid, N, C);
  args.dqkv = d_qkv, args.write_dqkv = true, args.d_out = d_buf;
  args.dalpha = alpha ? scratch.gate_dalpha : nullptr;
  args.dsink = W.sink ? scratch.sink_dlogit : nullptr;
  if (args.exclusive) {  // args.z = scratch.att_z: written again, as a product input
    be.attention_backward_product_input(args);
    be.matmul_backward_product_input(nullptr, dW.attn_proj_w, d_resid, scratch.att_z, W.attn_proj_w,
                                     N, C, C, accumulate);
  } else {
    be.attention_backward(args);
  }
  if (W.sink) be.sink_backward(dW.sink, scratch.sink_dlogit, B, H);
  if (alpha) be.gate_backward(dW.xsa_gate, scratch.gate_dalpha, alpha, N, H);
  if (cfg.positions == Positions::rope && !dW.qkv_b) {  // into d_fc, free by now
    const Real* d_rotated =
        be.rope_backward_product_input(d_qkv, rows.rope_cos, rows.rope_sin, B, T, C, H, Hkv, d_fc);
    be.matmul_backward_product_inputs(d_buf, dW.qkv_w, d_rotated, buf.ln1, W.qkv_w, N, C, QKV,
                                      accumulate);
  } else {
    if (cfg.positions == Positions::rope)
      be.rope_backward(d_qkv, rows.rope_cos, rows.rope_sin, B, T, C, H, Hkv);
    be.matmul_backward_product_input(d_buf, dW.qkv_w, d_qkv, buf.ln1, W.qkv_w, N, C, QKV,
                                     accumulate);
    if (dW.qkv_b) be.bias_backward(dW.qkv_b, d_qkv, N, QKV);
  }
  be.layernorm_backward(d_resid, dW.ln1_w, dW.ln1_b, d_buf, x_in, W.ln1_w, buf.ln1_mean,
                        buf.ln1_rstd, N, C);
}

#define XSA_INSTANTIATE(Real)                                                                     \
  template void block_forward<Real>(Backend<Real>&, const ModelConfig&, int,                      \
                                    const LayerWeights<Real>&, const Real*, Real*,                \
                                    const BlockBuffers<Real>&, const BlockScratch<Real>&,         \
                                    const RowShape<Real>&, const LayerCache<Real>*);              \
  template void block_backward<Real>(Backend<Real>&, const ModelConfig&, int,                     \
                                     const LayerWeights<Real>&, LayerWeights<Real>&, const Real*, \
                                     const BlockBuffers<Real>&, const BlockScratch<Real>&,        \
                                     const RowShape<Real>&, Real*, Real*, Real*, Real*, bool);
XSA_INSTANTIATE(float)
XSA_INSTANTIATE(double)

}  // namespace xsa
