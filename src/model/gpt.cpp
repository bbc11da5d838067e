#include "model/gpt.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/ops.h"
#include "util/error.h"

namespace xsa {
namespace {

// Lays the activations out in one buffer. Called once with base = nullptr to measure, once to
// point the views; the same code does both, so sizes and views cannot disagree.
template <typename Real>
size_t carve_activations(Activations<Real>& a, Real* base, const ModelConfig& cfg, int B, int T,
                         int head_rows, GptMode mode) {
  const size_t N = (size_t)B * T, C = cfg.n_embd, H = cfg.n_head, D = cfg.head_dim();
  size_t offset = 0;
  auto take = [&](Real*& view, size_t n) {
    view = base ? base + offset : nullptr;
    offset += align_elements<Real>(n);
  };
  a.layers.resize(cfg.n_layer);
  a.resid.resize(cfg.n_layer + 1);
  for (Real*& r : a.resid) take(r, N * C);
  for (auto& L : a.layers) {
    take(L.ln1, N * C), take(L.ln1_mean, N), take(L.ln1_rstd, N);
    take(L.qkv, N * cfg.qkv_dim()), take(L.att_y, N * C), take(L.att_lse, (size_t)B * H * T);
    take(L.resid_mid, N * C);
    take(L.ln2, N * C), take(L.ln2_mean, N), take(L.ln2_rstd, N);
    take(L.fc, N * 4 * C), take(L.fc_gelu, N * 4 * C);
  }
  take(a.lnf, N * C), take(a.lnf_mean, N), take(a.lnf_rstd, N);
  take(a.losses, N);
  take(a.rope_cos, (size_t)T * D / 2), take(a.rope_sin, (size_t)T * D / 2);
  take(a.att_z, N * C);
  take(a.gate_alpha, H), take(a.gate_dalpha, N * H), take(a.sink_dlogit, (size_t)B * H);
  take(a.logits, (size_t)head_rows * cfg.padded_vocab);
  a.d_resid = a.d_buf = a.d_qkv = a.d_fc = nullptr;
  if (mode == GptMode::training) {
    take(a.d_resid, N * C), take(a.d_buf, N * C);
    take(a.d_qkv, N * cfg.qkv_dim()), take(a.d_fc, N * 4 * C);
  }
  return offset;
}

// Validates before any member is built from the config (the parameter table sizes come from it).
const ModelConfig& validated(const ModelConfig& cfg) {
  cfg.validate();
  return cfg;
}

}  // namespace

template <typename Real>
Gpt<Real>::Gpt(const ModelConfig& cfg, int B, int T, GptMode mode)
    : cfg_(validated(cfg)), B_(B), T_(T), mode_(mode), params_(cfg_, mode == GptMode::training) {
  if (B <= 0) fail("--batch {} must be positive", B);
  if (T <= 0 || T > cfg.seq_len)
    fail("sequence length {} must be between 1 and the model's {}", T, cfg.seq_len);
  head_rows_ = head_chunk_rows(cfg_, B * T);
  act_memory_.reset(carve_activations<Real>(acts_, nullptr, cfg_, B, T, head_rows_, mode));
  carve_activations<Real>(acts_, act_memory_.data(), cfg_, B, T, head_rows_, mode);
  ops::rope_table(acts_.rope_cos, acts_.rope_sin, T, cfg_.head_dim(), cfg_.rope_theta);
}

template <typename Real>
double Gpt<Real>::memory_bytes(const ModelConfig& cfg, int B, int T, GptMode mode) {
  Activations<Real> unused;
  const size_t activations =
      carve_activations<Real>(unused, nullptr, cfg, B, T, head_chunk_rows(cfg, B * T), mode);
  const double copies = mode == GptMode::training ? 4.0 : 1.0;  // params, grads, m, v
  return sizeof(Real) * (copies * param_arena_size(param_layout(cfg)) + activations);
}

template <typename Real>
int Gpt<Real>::head_chunk_rows(const ModelConfig& cfg, int N) {
  // Up to 32 M logits (128 MB in float) at once: large enough that the head's GEMMs run at full
  // speed, small enough that B×T×V logits never exist together for large batches.
  return std::min(N, std::max(64, (1 << 25) / cfg.padded_vocab));
}

template <typename Real>
double Gpt<Real>::forward(const int32_t* inputs, const int32_t* targets) {
  return run_forward(inputs, targets, false);
}

template <typename Real>
double Gpt<Real>::forward_backward(const int32_t* inputs, const int32_t* targets) {
  XSA_CHECK(mode_ == GptMode::training, "forward_backward on a model built for inference");
  params_.grads.zero();
  double loss = run_forward(inputs, targets, true);
  backward(inputs);
  return loss;
}

template <typename Real>
double Gpt<Real>::run_forward(const int32_t* inputs, const int32_t* targets, bool need_grad) {
  const int B = B_, T = T_, N = B * T, C = cfg_.n_embd, H = cfg_.n_head;
  const int V = cfg_.vocab_size, Vp = cfg_.padded_vocab;
  const int Hkv = cfg_.kv_heads(), QKV = cfg_.qkv_dim();
  Weights<Real>& w = params_.w;
  Activations<Real>& a = acts_;
  for (int n = 0; n < N; n++) {
    XSA_CHECK(inputs[n] >= 0 && inputs[n] < V, "input token {} at position {} outside [0, {})",
              inputs[n], n, V);
    XSA_CHECK(targets[n] >= -1 && targets[n] < V, "target {} at position {} outside [-1, {})",
              targets[n], n, V);
  }

  ops::encoder_forward(a.resid[0], inputs, w.wte, N, C);
  for (int l = 0; l < cfg_.n_layer; l++) {
    const LayerWeights<Real>& W = w.layers[l];
    LayerActivations<Real>& L = a.layers[l];
    const Real* x = a.resid[l];
    // x_mid = x + attn(LN1(x))
    ops::layernorm_forward(L.ln1, L.ln1_mean, L.ln1_rstd, x, W.ln1_w, W.ln1_b, N, C);
    ops::matmul_forward(L.qkv, L.ln1, W.qkv_w, N, C, QKV);
    ops::rope_forward(L.qkv, a.rope_cos, a.rope_sin, B, T, C, H, Hkv);
    const bool exclusive = cfg_.layer_attn[l] != AttnKind::sa;
    const Real* alpha = gate_alpha(l);
    ops::attention_forward(L.att_y, exclusive ? a.att_z : nullptr, L.att_lse, L.qkv, B, T, C, H,
                           alpha, W.sink, Hkv);
    const Real* z = exclusive ? a.att_z : L.att_y;
    std::memcpy(L.resid_mid, x, sizeof(Real) * N * C);
    ops::matmul_forward(L.resid_mid, z, W.attn_proj_w, N, C, C, /*accumulate=*/true);
    // x_out = x_mid + mlp(LN2(x_mid))
    ops::layernorm_forward(L.ln2, L.ln2_mean, L.ln2_rstd, L.resid_mid, W.ln2_w, W.ln2_b, N, C);
    ops::matmul_forward(L.fc, L.ln2, W.fc_w, N, C, 4 * C);
    ops::gelu_forward(L.fc_gelu, L.fc, (size_t)N * 4 * C);
    std::memcpy(a.resid[l + 1], L.resid_mid, sizeof(Real) * N * C);
    ops::matmul_forward(a.resid[l + 1], L.fc_gelu, W.mlp_proj_w, N, 4 * C, C, /*accumulate=*/true);
  }
  ops::layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, a.resid[cfg_.n_layer], w.lnf_w, w.lnf_b, N,
                         C);

  target_count_ = 0;
  for (int n = 0; n < N; n++) target_count_ += targets[n] >= 0;
  if (target_count_ == 0) return 0.0;

  // Tied head with fused softmax-cross-entropy, chunk by chunk. With need_grad the head's backward
  // runs here too (dlnf into d_buf, dwte accumulated), so a chunk's logits are used and dropped.
  const Real dloss = need_grad ? Real(1.0 / target_count_) : Real(0);
  for (int r0 = 0; r0 < N; r0 += head_rows_) {
    int rows = std::min(head_rows_, N - r0);
    const Real* lnf_rows = a.lnf + (size_t)r0 * C;
    ops::matmul_forward(a.logits, lnf_rows, w.wte, rows, C, Vp);
    ops::crossentropy_forward_backward(a.logits, a.losses + r0, targets + r0, rows, V, Vp, dloss);
    if (need_grad) {
      ops::matmul_backward(a.d_buf + (size_t)r0 * C, params_.dw.wte, a.logits, lnf_rows, w.wte,
                           rows, C, Vp);
    }
  }
  double total = 0;  // in order, so the loss does not depend on the thread count
  for (int n = 0; n < N; n++) total += a.losses[n];
  return total / target_count_;
}

template <typename Real>
void Gpt<Real>::backward(const int32_t* inputs) {
  const int B = B_, T = T_, N = B * T, C = cfg_.n_embd, H = cfg_.n_head;
  Weights<Real>& w = params_.w;
  Weights<Real>& dw = params_.dw;
  Activations<Real>& a = acts_;
  const size_t NC = (size_t)N * C;
  const int Hkv = cfg_.kv_heads(), QKV = cfg_.qkv_dim();

  // d_buf holds ∂L/∂lnf from the fused head.
  std::memset(a.d_resid, 0, sizeof(Real) * NC);
  ops::layernorm_backward(a.d_resid, dw.lnf_w, dw.lnf_b, a.d_buf, a.resid[cfg_.n_layer], w.lnf_w,
                          a.lnf_mean, a.lnf_rstd, N, C);
  for (int l = cfg_.n_layer - 1; l >= 0; l--) {
    const LayerWeights<Real>& W = w.layers[l];
    LayerWeights<Real>& dW = dw.layers[l];
    LayerActivations<Real>& L = a.layers[l];
    // MLP block: x_out = x_mid + fc_gelu · W_projᵀ, fc_gelu = gelu(LN2(x_mid) · W_fcᵀ).
    // d_resid holds ∂L/∂x_out and becomes ∂L/∂x_mid.
    ops::matmul_backward(a.d_fc, dW.mlp_proj_w, a.d_resid, L.fc_gelu, W.mlp_proj_w, N, 4 * C, C);
    ops::gelu_backward(a.d_fc, L.fc, a.d_fc, (size_t)N * 4 * C);
    ops::matmul_backward(a.d_buf, dW.fc_w, a.d_fc, L.ln2, W.fc_w, N, C, 4 * C);
    ops::layernorm_backward(a.d_resid, dW.ln2_w, dW.ln2_b, a.d_buf, L.resid_mid, W.ln2_w,
                            L.ln2_mean, L.ln2_rstd, N, C);
    // Attention block: x_mid = x + z · W_oᵀ. z is recomputed from y (not stored) for XSA.
    const bool exclusive = cfg_.layer_attn[l] != AttnKind::sa;
    const Real* alpha = gate_alpha(l);
    const Real* z = L.att_y;
    if (exclusive) {
      ops::xsa_forward(a.att_z, L.att_y, L.qkv, B, T, C, H, alpha, Hkv);
      z = a.att_z;
    }
    // d_buf = ∂L/∂z; the attention backward applies XSA's backward to it in place.
    ops::matmul_backward(a.d_buf, dW.attn_proj_w, a.d_resid, z, W.attn_proj_w, N, C, C);
    std::memset(a.d_qkv, 0, sizeof(Real) * N * QKV);
    ops::attention_backward(a.d_qkv, a.d_buf, L.qkv, L.att_y, L.att_lse, B, T, C, H, exclusive,
                            alpha, alpha ? a.gate_dalpha : nullptr, W.sink,
                            W.sink ? a.sink_dlogit : nullptr, Hkv);
    if (W.sink)  // summed over the batch rows in order
      for (int h = 0; h < H; h++)
        for (int b = 0; b < B; b++) dW.sink[h] += a.sink_dlogit[(size_t)b * H + h];
    if (alpha) {  // α = tanh(w): ∂L/∂w_h = (1 − α_h²) Σ_tokens ∂L/∂α_h, summed in token order
      for (int h = 0; h < H; h++) {
        double sum = 0;
        for (int n = 0; n < N; n++) sum += a.gate_dalpha[(size_t)n * H + h];
        dW.xsa_gate[h] += Real((1.0 - (double)alpha[h] * alpha[h]) * sum);
      }
    }
    ops::rope_backward(a.d_qkv, a.rope_cos, a.rope_sin, B, T, C, H, Hkv);
    ops::matmul_backward(a.d_buf, dW.qkv_w, a.d_qkv, L.ln1, W.qkv_w, N, C, QKV);
    ops::layernorm_backward(a.d_resid, dW.ln1_w, dW.ln1_b, a.d_buf, a.resid[l], W.ln1_w, L.ln1_mean,
                            L.ln1_rstd, N, C);
  }
  ops::encoder_backward(dw.wte, a.d_resid, inputs, N, C);
}

template <typename Real>
const Real* Gpt<Real>::gate_alpha(int layer) {
  const Real* w = params_.w.layers[layer].xsa_gate;
  if (!w) return nullptr;
  for (int h = 0; h < cfg_.n_head; h++) acts_.gate_alpha[h] = std::tanh(w[h]);
  return acts_.gate_alpha;
}

template <typename Real>
void Gpt<Real>::logits_row(int n, Real* out) const {
  XSA_CHECK(n >= 0 && n < B_ * T_, "row {} outside the batch", n);
  ops::matmul_forward(out, acts_.lnf + (size_t)n * cfg_.n_embd, params_.w.wte, 1, cfg_.n_embd,
                      cfg_.padded_vocab);
}

template class Gpt<float>;
template class Gpt<double>;

}  // namespace xsa
