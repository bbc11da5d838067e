#include "xsa/model/block.h"

#include "xsa/util/error.h"

namespace xsa {

template <typename Real>
BlockStorage block_storage(const Backend<Real>& be, const BlockRun<Real>& run) {
  const Storage product = be.product_input_storage(run.rows.B * run.rows.T);
  const LayerAttention& attention = run.cfg.attention[run.layer];
  const bool exclusive = is_exclusive(attention.kind);
  const bool rope = run.cfg.positions == Positions::rope;
  BlockStorage s;
  // ReLU²'s output and input gradient stay fp32 (its kernels have no bf16 form): the products
  // convert them as they read them.
  const bool gelu = run.cfg.mlp == MlpActivation::gelu;
  s.ln1 = s.ln2 = product;
  s.fc_gelu = gelu ? product : Storage::fp32;
  // With gated-attn the gate reads z too: it is no longer a product input.
  s.att_z = exclusive && !attention.output_gate ? product : Storage::fp32;
  s.d_fc_pre = run.W.fc_b || !gelu ? Storage::fp32 : product;
  s.d_qkv = rope && !run.W.qkv_b && !run.W.q_norm_w ? product : Storage::fp32;
  return s;
}

template <typename Real>
void check_backend_runs(const ModelConfig& cfg, const Backend<Real>& backend) {
  if (has_rivals(cfg) && !backend.supports(Op::rivals, Storage::fp32))
    fail("the {} backend does not run XSA's rivals ({}); run them with --device cpu",
         to_string(backend.device()),
         rivals_string(options_on_any_layer(cfg.attention, cfg.n_layer)));
  if (options_on_any_layer(cfg.attention, cfg.n_layer).qk_norm &&
      !backend.supports(Op::qk_norm, Storage::fp32))
    fail("the {} backend does not run QK-norm yet; run it with --device cpu",
         to_string(backend.device()));
}

namespace {

// α_h = tanh(w_h) of a gated layer into the scratch; null for SA and plain XSA.
template <typename Real>
const Real* xsa_alpha(Backend<Real>& be, const BlockRun<Real>& run) {
  if (!run.W.xsa_gate) return nullptr;
  be.xsa_alpha(run.scratch.xsa_alpha, run.W.xsa_gate, run.cfg.n_head);
  return run.scratch.xsa_alpha;
}

template <typename Real>
ops::AttentionArgs<Real> attention_args(const BlockRun<Real>& run, Storage z_storage,
                                        const Real* alpha) {
  const ModelConfig& cfg = run.cfg;
  ops::AttentionArgs<Real> a;
  a.B = run.rows.B, a.T = run.rows.T, a.C = cfg.n_embd, a.H = cfg.n_head, a.Hkv = cfg.kv_heads();
  a.exclusive = is_exclusive(cfg.attention[run.layer].kind);
  a.no_self = cfg.attention[run.layer].no_self;
  a.qkv = run.buf.qkv, a.y = run.buf.att_y;
  Real* z = run.buf.att_z ? run.buf.att_z : run.scratch.att_z;  // kept for gated-attn
  a.z = a.exclusive ? Tensor<Real>(z, z_storage) : Tensor<Real>();
  a.lse = run.buf.att_lse, a.alpha = alpha, a.sink = run.W.sink;
  return a;
}

// The value residual (docs/SPEC.md §8) on the layer's v columns of qkv, for the mixing's forward
// and backward.
template <typename Real>
ops::ValueMixArgs<Real> value_mix_args(const BlockRun<Real>& run) {
  const ModelConfig& cfg = run.cfg;
  const int Ck = cfg.kv_heads() * cfg.head_dim();
  ops::ValueMixArgs<Real> a;
  a.qkv = run.buf.qkv, a.v_raw = run.buf.v_raw, a.v_first = run.scratch.v_first;
  a.lambda = run.W.value_lambda;
  a.N = run.rows.B * run.rows.T, a.ld = cfg.qkv_dim(), a.at = cfg.n_embd + Ck, a.width = Ck;
  return a;
}

// Whether the layer keeps the first layer's values (layer 0, where a later layer mixes them in).
inline bool keeps_first_values(const ModelConfig& cfg, int layer) {
  return layer == 0 && any_layer_mixes_values(cfg.attention, cfg.n_layer);
}

// Whether a layer above this one mixes in the first layer's values (and so, running backward
// first, has written their gradient).
inline bool later_layer_mixes_values(const ModelConfig& cfg, int layer) {
  for (int l = layer + 1; l < cfg.n_layer; l++)
    if (mixes_first_values(cfg.attention, l)) return true;
  return false;
}

// QK-norm on the layer's q and k columns of qkv (ops/args.h); raw and rstd kept where the layer
// has them (training).
template <typename Real>
ops::QkNormArgs<Real> qk_norm_args(const BlockRun<Real>& run) {
  const ModelConfig& cfg = run.cfg;
  ops::QkNormArgs<Real> a;
  a.qkv = run.buf.qkv, a.raw = run.buf.qk_raw, a.rstd = run.buf.qk_rstd;
  a.q_scale = run.W.q_norm_w, a.k_scale = run.W.k_norm_w;
  a.N = run.rows.B * run.rows.T, a.ld = cfg.qkv_dim(), a.H = cfg.n_head, a.Hkv = cfg.kv_heads();
  a.D = cfg.head_dim();
  return a;
}

template <typename Real>
RopeArgs<Real> rope_args(const BlockRun<Real>& run) {
  const ModelConfig& cfg = run.cfg;
  return {run.rows.rope_cos, run.rows.rope_sin, run.rows.B,    run.rows.T,
          cfg.n_embd,        cfg.n_head,        cfg.kv_heads()};
}

// x_mid = x + attn(LN1(x)) W_o, from ln1 (written) to resid_mid.
template <typename Real>
void attention_block_forward(Backend<Real>& be, const BlockRun<Real>& run, const BlockStorage& s,
                             const Real* x_in, const LayerCache<Real>* cache) {
  const BlockBuffers<Real>& buf = run.buf;
  const LayerWeights<Real>& W = run.W;
  const int N = run.rows.B * run.rows.T, C = run.cfg.n_embd, QKV = run.cfg.qkv_dim();
  const int Ck = run.cfg.kv_heads() * run.cfg.head_dim();
  be.matmul_forward(buf.qkv, {buf.ln1, s.ln1}, W.qkv_w, {N, C, QKV}, false);
  if (W.qkv_b) be.bias_forward(buf.qkv, W.qkv_b, N, QKV);
  if (W.value_embed) {  // each token's row of E joins its values, before they are mixed or cached
    be.gather_rows(run.scratch.value_embed_rows, W.value_embed, run.rows.tokens, N, Ck);
    be.add_rows(buf.qkv + C + Ck, QKV, run.scratch.value_embed_rows, Ck, N, Ck);
  }
  if (W.q_norm_w) be.qk_norm_forward(qk_norm_args(run));
  if (run.cfg.positions == Positions::rope) be.rope_forward(buf.qkv, rope_args(run));
  // Values mixed before the attention (and the cache) sees them.
  if (keeps_first_values(run.cfg, run.layer))
    be.copy_rows(run.scratch.v_first, Ck, buf.qkv + C + Ck, QKV, N, Ck);
  if (W.value_lambda) be.value_mix_forward(value_mix_args(run));
  const ops::AttentionArgs<Real> args = attention_args(run, s.att_z, xsa_alpha(be, run));
  if (cache) {  // the new rows' keys and values join the cache first: they see themselves
    const size_t slot0 = (size_t)cache->view.slot0 * Ck;
    be.copy_rows(cache->k + slot0, Ck, buf.qkv + C, QKV, N, Ck);
    be.copy_rows(cache->v + slot0, Ck, buf.qkv + C + Ck, QKV, N, Ck);
  }
  if (!cache || (cache->view.slot0 == 0 && !cache->view.spans))  // tiled
    be.attention_forward(args);
  else
    be.attention_forward_cached(args, cache->view);
  Tensor<const Real> z = args.exclusive ? args.z : Tensor<Real>(buf.att_y);
  if (W.output_gate_w) {  // gated-attn: W_o reads z ⊙ σ(LN1(x) W_gᵀ)
    be.matmul_forward(buf.output_gate_pre, {buf.ln1, s.ln1}, W.output_gate_w, {N, C, C}, false);
    be.output_gate_forward(run.scratch.att_output_gated, z.data, buf.output_gate_pre,
                           (size_t)N * C);
    z = Tensor<Real>(run.scratch.att_output_gated);
  }
  be.matmul_forward_residual(buf.resid_mid, x_in, z, W.attn_proj_w, {N, C, C});
  if (W.attn_proj_b) be.bias_forward(buf.resid_mid, W.attn_proj_b, N, C);
}

}  // namespace

template <typename Real>
void block_forward(Backend<Real>& be, const BlockRun<Real>& run, const Real* x_in, Real* x_out,
                   const LayerCache<Real>* cache) {
  const BlockBuffers<Real>& buf = run.buf;
  const LayerWeights<Real>& W = run.W;
  const int N = run.rows.B * run.rows.T, C = run.cfg.n_embd;
  // A cached forward past the first rows writes z in fp32 (attention_forward_cached).
  BlockStorage s = block_storage(be, run);
  if (cache && (cache->view.slot0 != 0 || cache->view.spans)) s.att_z = Storage::fp32;
  be.layernorm_forward({buf.ln1, s.ln1},
                       {x_in, W.ln1_w, W.ln1_b, buf.ln1_mean, buf.ln1_rstd, N, C});
  attention_block_forward(be, run, s, x_in, cache);
  // x_out = x_mid + gelu(LN2(x_mid) W_fc) W_proj
  be.layernorm_forward({buf.ln2, s.ln2},
                       {buf.resid_mid, W.ln2_w, W.ln2_b, buf.ln2_mean, buf.ln2_rstd, N, C});
  be.matmul_forward(buf.fc, {buf.ln2, s.ln2}, W.fc_w, {N, C, 4 * C}, false);
  if (W.fc_b) be.bias_forward(buf.fc, W.fc_b, N, 4 * C);
  if (run.cfg.mlp == MlpActivation::relu2)
    be.relu2_forward(buf.fc_gelu, buf.fc, (size_t)N * 4 * C);
  else
    be.gelu_forward({buf.fc_gelu, s.fc_gelu}, buf.fc, (size_t)N * 4 * C);
  be.matmul_forward_residual(x_out, buf.resid_mid, {buf.fc_gelu, s.fc_gelu}, W.mlp_proj_w,
                             {N, 4 * C, C});
  if (W.mlp_proj_b) be.bias_forward(x_out, W.mlp_proj_b, N, C);
}

namespace {

// MLP block: d_resid holds ∂L/∂x_out and becomes ∂L/∂x_mid (LN2's backward adds into it).
template <typename Real>
void mlp_block_backward(Backend<Real>& be, const BlockRun<Real>& run, const BlockStorage& s,
                        const BlockGradients<Real>& g) {
  const BlockBuffers<Real>& buf = run.buf;
  const LayerWeights<Real>& W = run.W;
  LayerWeights<Real>& dW = g.dW;
  const int N = run.rows.B * run.rows.T, C = run.cfg.n_embd;
  be.matmul_backward(g.d_fc, dW.mlp_proj_w, g.d_resid, {buf.fc_gelu, s.fc_gelu}, W.mlp_proj_w,
                     {N, 4 * C, C}, g.accumulate);
  if (dW.mlp_proj_b) be.bias_backward(dW.mlp_proj_b, g.d_resid, N, C);
  // GELU's input gradient: in place, or (bf16) into fc_gelu, read by now.
  const Tensor<Real> d_pre =
      s.d_fc_pre == Storage::fp32 ? Tensor<Real>(g.d_fc) : Tensor<Real>(buf.fc_gelu, s.d_fc_pre);
  if (run.cfg.mlp == MlpActivation::relu2)  // in place (fp32: d_pre is d_fc)
    be.relu2_backward(g.d_fc, buf.fc, g.d_fc, (size_t)N * 4 * C);
  else
    be.gelu_backward(d_pre, buf.fc, g.d_fc, (size_t)N * 4 * C);
  be.matmul_backward(g.d_buf, dW.fc_w, d_pre, {buf.ln2, s.ln2}, W.fc_w, {N, C, 4 * C},
                     g.accumulate);
  if (dW.fc_b) be.bias_backward(dW.fc_b, g.d_fc, N, 4 * C);
  be.layernorm_backward(g.d_resid, dW.ln2_w, dW.ln2_b, g.d_buf,
                        {buf.resid_mid, W.ln2_w, W.ln2_b, buf.ln2_mean, buf.ln2_rstd, N, C});
}

// gated-attn's backward, from d_output_gated = ∂L/∂(W_o's input) and the attention output u (y, or
// XSA's kept z): d_buf = ∂L/∂u for the attention backward, d_output_gated becomes
// ∂L/∂output_gate_pre, and W_o's gradient from its input formed again.
template <typename Real>
void gated_output_backward(Backend<Real>& be, const BlockRun<Real>& run,
                           const BlockGradients<Real>& g, const Real* u) {
  const int N = run.rows.B * run.rows.T, C = run.cfg.n_embd;
  const BlockScratch<Real>& s = run.scratch;
  be.output_gate_backward(g.d_buf, s.d_output_gated, s.d_output_gated, u, run.buf.output_gate_pre,
                          (size_t)N * C);
  be.output_gate_forward(s.att_output_gated, u, run.buf.output_gate_pre, (size_t)N * C);
  be.matmul_backward(nullptr, g.dW.attn_proj_w, g.d_resid, s.att_output_gated, run.W.attn_proj_w,
                     {N, C, C}, g.accumulate);
}

// The value residual's backward on d_qkv's v columns (∂L/∂v' from the attention): a later layer
// passes (1 − λ) of it to the first layer's values, which adds what all of them passed.
template <typename Real>
void value_residual_backward(Backend<Real>& be, const BlockRun<Real>& run,
                             const BlockGradients<Real>& g) {
  if (run.W.value_lambda) {
    ops::ValueMixArgs<Real> a = value_mix_args(run);
    a.dqkv = g.d_qkv, a.d_first = run.scratch.d_v_first, a.dlambda = g.dW.value_lambda;
    a.accumulate_first = later_layer_mixes_values(run.cfg, run.layer);
    be.value_mix_backward(a);
  } else if (keeps_first_values(run.cfg, run.layer)) {
    const int Ck = run.cfg.kv_heads() * run.cfg.head_dim(), QKV = run.cfg.qkv_dim();
    be.add_rows(g.d_qkv + run.cfg.n_embd + Ck, QKV, run.scratch.d_v_first, Ck,
                run.rows.B * run.rows.T, Ck);
  }
}

}  // namespace

template <typename Real>
void block_backward(Backend<Real>& be, const BlockRun<Real>& run, const Real* x_in,
                    const BlockGradients<Real>& g) {
  const BlockBuffers<Real>& buf = run.buf;
  const LayerWeights<Real>& W = run.W;
  LayerWeights<Real>& dW = g.dW;
  const int B = run.rows.B, T = run.rows.T, N = B * T, C = run.cfg.n_embd, H = run.cfg.n_head;
  const int QKV = run.cfg.qkv_dim();
  const BlockStorage s = block_storage(be, run);
  mlp_block_backward(be, run, s, g);
  // Attention block: x_mid = x + z W_oᵀ. d_buf = ∂L/∂z; the attention backward applies XSA's
  // backward to it in place. XSA's z is not stored: the attention backward writes it again from
  // the rows of y and v it reads for XSA's backward (a separate pass over them, cold by then;
  // perf-log #3), and W_o's gradient is formed after it.
  const Real* alpha = xsa_alpha(be, run);
  ops::AttentionArgs<Real> args = attention_args(run, s.att_z, alpha);
  // W_o's input is stored only for SA without a gate; XSA's z comes after the attention backward.
  const Real* y = args.exclusive || W.output_gate_w ? nullptr : buf.att_y;
  be.matmul_backward(W.output_gate_w ? run.scratch.d_output_gated : g.d_buf,
                     y ? dW.attn_proj_w : nullptr, g.d_resid, y, W.attn_proj_w, {N, C, C},
                     g.accumulate);
  if (dW.attn_proj_b) be.bias_backward(dW.attn_proj_b, g.d_resid, N, C);
  if (W.output_gate_w) gated_output_backward(be, run, g, args.exclusive ? buf.att_z : buf.att_y);
  args.dqkv = g.d_qkv, args.write_dqkv = true, args.d_out = g.d_buf;
  args.dalpha = alpha ? run.scratch.xsa_dalpha : nullptr;
  args.dsink = W.sink ? run.scratch.sink_dlogit : nullptr;
  be.attention_backward(args);
  if (args.exclusive && !W.output_gate_w)
    be.matmul_backward(nullptr, dW.attn_proj_w, g.d_resid, args.z, W.attn_proj_w, {N, C, C},
                       g.accumulate);
  if (W.sink) be.sink_backward(dW.sink, run.scratch.sink_dlogit, B, H);
  if (alpha) be.xsa_alpha_backward(dW.xsa_gate, run.scratch.xsa_dalpha, alpha, N, H);
  value_residual_backward(be, run, g);
  if (W.value_embed) {  // ∂L/∂E[t] += ∂L/∂v of every row of token t (after the mix's backward)
    const int Ck = run.cfg.kv_heads() * run.cfg.head_dim();
    be.copy_rows(run.scratch.value_embed_rows, Ck, g.d_qkv + C + Ck, QKV, N, Ck);
    be.encoder_backward(dW.value_embed, run.scratch.value_embed_rows, run.rows.tokens, N, Ck);
  }
  // RoPE's backward: in place, or (bf16) into d_fc, free by now.
  const Tensor<Real> d_rotated =
      s.d_qkv == Storage::fp32 ? Tensor<Real>(g.d_qkv) : Tensor<Real>(g.d_fc, s.d_qkv);
  if (run.cfg.positions == Positions::rope) be.rope_backward(d_rotated, g.d_qkv, rope_args(run));
  if (W.q_norm_w) {  // in place on d_qkv (fp32 then: d_rotated is d_qkv)
    ops::QkNormArgs<Real> a = qk_norm_args(run);
    a.dqkv = g.d_qkv, a.dq_scale = dW.q_norm_w, a.dk_scale = dW.k_norm_w;
    be.qk_norm_backward(a);
  }
  be.matmul_backward(g.d_buf, dW.qkv_w, d_rotated, {buf.ln1, s.ln1}, W.qkv_w, {N, C, QKV},
                     g.accumulate);
  if (dW.qkv_b) be.bias_backward(dW.qkv_b, g.d_qkv, N, QKV);
  if (W.output_gate_w) {  // the gate's share of ∂L/∂LN1(x), through att_output_gated (free by now)
    be.matmul_backward(run.scratch.att_output_gated, dW.output_gate_w, run.scratch.d_output_gated,
                       {buf.ln1, s.ln1}, W.output_gate_w, {N, C, C}, /*accumulate=*/true);
    be.add_rows(g.d_buf, C, run.scratch.att_output_gated, C, N, C);
  }
  be.layernorm_backward(g.d_resid, dW.ln1_w, dW.ln1_b, g.d_buf,
                        {x_in, W.ln1_w, W.ln1_b, buf.ln1_mean, buf.ln1_rstd, N, C});
}

#define XSA_INSTANTIATE(Real)                                                                  \
  template void check_backend_runs<Real>(const ModelConfig&, const Backend<Real>&);            \
  template BlockStorage block_storage<Real>(const Backend<Real>&, const BlockRun<Real>&);      \
  template void block_forward<Real>(Backend<Real>&, const BlockRun<Real>&, const Real*, Real*, \
                                    const LayerCache<Real>*);                                  \
  template void block_backward<Real>(Backend<Real>&, const BlockRun<Real>&, const Real*,       \
                                     const BlockGradients<Real>&);
XSA_INSTANTIATE(float)
XSA_INSTANTIATE(double)

}  // namespace xsa
