#include "xsa/model/gpt.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "xsa/util/error.h"

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
  auto take_if = [&](bool needed, Real*& view, size_t n) {  // a rival's buffer, else null
    if (needed)
      take(view, n);
    else
      view = nullptr;
  };
  const LayerAttention any = options_on_any_layer(cfg.attention, cfg.n_layer);
  const bool mixes = any_layer_mixes_values(cfg.attention, cfg.n_layer);
  const bool training = mode == GptMode::training;
  const size_t Ck = (size_t)cfg.kv_heads() * D;
  a.layers.resize(cfg.n_layer);
  a.resid.resize(cfg.n_layer + 1);
  for (Real*& r : a.resid) take(r, N * C);
  for (BlockBuffers<Real>& L : a.layers) {
    take(L.ln1, N * C), take(L.ln1_mean, N), take(L.ln1_rstd, N);
    take(L.qkv, N * cfg.qkv_dim()), take(L.att_y, N * C), take(L.att_lse, (size_t)B * H * T);
    take(L.resid_mid, N * C);
    take(L.ln2, N * C), take(L.ln2_mean, N), take(L.ln2_rstd, N);
    take(L.fc, N * 4 * C), take(L.fc_gelu, N * 4 * C);
    const int l = (int)(&L - a.layers.data());
    const LayerAttention& attention = cfg.attention[l];
    take_if(attention.output_gate, L.output_gate_pre, N * C);
    take_if(attention.output_gate && is_exclusive(attention.kind), L.att_z, N * C);
    take_if(mixes_first_values(cfg.attention, l), L.v_raw, N * Ck);
    take_if(attention.qk_norm && training, L.qk_raw, N * (C + Ck));
    take_if(attention.qk_norm && training, L.qk_rstd, N * (H + cfg.kv_heads()));
  }
  take(a.lnf, N * C), take(a.lnf_mean, N), take(a.lnf_rstd, N);
  take(a.losses, N);
  take(a.rope_cos, (size_t)T * D / 2), take(a.rope_sin, (size_t)T * D / 2);
  BlockScratch<Real>& s = a.scratch;
  take(s.att_z, N * C);
  take(s.xsa_alpha, H), take(s.xsa_dalpha, N * H), take(s.sink_dlogit, (size_t)B * H);
  take_if(any.output_gate, s.att_output_gated, N * C);
  take_if(any.output_gate && training, s.d_output_gated, N * C);
  take_if(mixes, s.v_first, N * Ck);
  take_if(mixes && training, s.d_v_first, N * Ck);
  take_if(any.value_embed, s.value_embed_rows, N * Ck);
  take(a.logits, (size_t)head_rows * cfg.padded_vocab);
  a.d_resid = a.d_buf = a.d_qkv = a.d_fc = nullptr;
  if (training) {
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
Gpt<Real>::Gpt(const ModelConfig& cfg, int B, int T, GptMode mode, Backend<Real>& backend)
    : cfg_(validated(cfg)),
      backend_(backend),
      B_(B),
      T_(T),
      mode_(mode),
      params_(cfg_, mode == GptMode::training, backend) {
  check_backend_runs(cfg_, backend);
  if (B <= 0) fail("--batch {} must be positive", B);
  if (T <= 0 || T > cfg.seq_len)
    fail("sequence length {} must be between 1 and the model's {}", T, cfg.seq_len);
  head_rows_ = head_chunk_rows(cfg_, B * T);
  const size_t n = carve_activations<Real>(acts_, nullptr, cfg_, B, T, head_rows_, mode);
  act_memory_ = DeviceBuffer<Real>(backend, n, MemoryUse::activations);
  carve_activations<Real>(acts_, act_memory_.data(), cfg_, B, T, head_rows_, mode);
  backend_.rope_table(acts_.rope_cos, acts_.rope_sin, T, cfg_.head_dim(), cfg_.rope_theta);
  if (cfg_.positions == Positions::learned)
    for (int n = 0; n < B * T; n++) positions_.push_back(n % T);
  if (mode == GptMode::training) {
    std::vector<const Real*> overwritten = {params_.dw.wte};
    for (const LayerWeights<Real>& L : params_.dw.layers)
      overwritten.insert(overwritten.end(), {L.qkv_w, L.attn_proj_w, L.fc_w, L.mlp_proj_w});
    const Real* grads = params_.grads.data();
    for (const TensorInfo& t : params_.layout) {
      if (std::find(overwritten.begin(), overwritten.end(), grads + t.offset) != overwritten.end())
        continue;
      const size_t end = t.offset + align_elements<Real>(t.numel);
      if (!accumulated_grads_.empty() && accumulated_grads_.back().second == t.offset)
        accumulated_grads_.back().second = end;
      else
        accumulated_grads_.emplace_back(t.offset, end);
    }
  }
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
  // speed, small enough that B×T×V logits never exist together for large batches. The rows are
  // split evenly over the chunks (a short last chunk ran its products at half speed).
  const int most = std::max(64, (1 << 25) / cfg.padded_vocab);
  const int chunks = (N + most - 1) / most;
  return std::max(1, std::min(N, (N + chunks - 1) / chunks));
}

template <typename Real>
double Gpt<Real>::forward(const int32_t* inputs, const int32_t* targets) {
  const double total = run_forward(inputs, targets, Real(0), /*accumulate=*/true);  // no backward
  return target_count_ ? total / target_count_ : 0.0;
}

template <typename Real>
double Gpt<Real>::forward_backward(const int32_t* inputs, const int32_t* targets,
                                   int64_t loss_tokens, bool accumulate) {
  XSA_CHECK(mode_ == GptMode::training, "forward_backward on a model built for inference");
  int64_t count = 0;
  for (int n = 0; n < B_ * T_; n++) count += targets[n] >= 0;
  const int64_t denominator = loss_tokens > 0 ? loss_tokens : count;
  // In a first micro-batch with targets the products write the weight matrices' gradients (the
  // layers' and the head's: nearly all of them), so only the rest is zeroed; that saves zeroing
  // them and the products' reading them. Without targets nothing writes them: all are zeroed.
  if (!accumulate) {
    if (count > 0) {
      for (auto [begin, end] : accumulated_grads_)
        backend_.fill_zero(params_.grads.data() + begin, end - begin);
    } else {
      params_.grads.zero();
    }
  }
  if (denominator == 0) {  // nothing to learn from: no loss, no gradient
    target_count_ = 0;
    return 0.0;
  }
  const double total = run_forward(inputs, targets, Real(1.0 / denominator), accumulate);
  if (target_count_ > 0) backward(inputs, accumulate);
  return total / denominator;
}

template <typename Real>
double Gpt<Real>::run_forward(const int32_t* inputs, const int32_t* targets, Real dloss,
                              bool accumulate) {
  const int B = B_, T = T_, N = B * T, C = cfg_.n_embd;
  const int V = cfg_.vocab_size, Vp = cfg_.padded_vocab;
  Backend<Real>& be = backend_;
  Weights<Real>& w = params_.w;
  Activations<Real>& a = acts_;
  for (int n = 0; n < N; n++) {
    XSA_CHECK(inputs[n] >= 0 && inputs[n] < V, "input token {} at position {} outside [0, {})",
              inputs[n], n, V);
    XSA_CHECK(targets[n] >= -1 && targets[n] < V, "target {} at position {} outside [-1, {})",
              targets[n], n, V);
  }

  be.encoder_forward(a.resid[0], inputs, w.wte, N, C);
  if (w.wpe) be.embedding_add(a.resid[0], positions_.data(), w.wpe, N, C);
  const RowShape<Real> rows{B, T, a.rope_cos, a.rope_sin, inputs};
  for (int l = 0; l < cfg_.n_layer; l++)
    block_forward(be, {cfg_, l, w.layers[l], a.layers[l], a.scratch, rows}, a.resid[l],
                  a.resid[l + 1]);
  be.layernorm_forward(a.lnf,
                       {a.resid[cfg_.n_layer], w.lnf_w, w.lnf_b, a.lnf_mean, a.lnf_rstd, N, C});

  target_count_ = 0;
  for (int n = 0; n < N; n++) target_count_ += targets[n] >= 0;
  if (target_count_ == 0) return 0.0;

  // Tied head with fused softmax-cross-entropy, chunk by chunk. With dloss the head's backward
  // runs here too (dlnf into d_buf, dwte accumulated), so a chunk's logits are used and dropped.
  for (int r0 = 0; r0 < N; r0 += head_rows_) {
    int rows = std::min(head_rows_, N - r0);
    ClassifierArgs<Real> head;
    head.logits = a.logits, head.losses = a.losses + r0, head.targets = targets + r0;
    head.inp = a.lnf + (size_t)r0 * C, head.wte = w.wte;
    // Inference has no gradient buffers: null, not null plus an offset.
    head.dinp = a.d_buf ? a.d_buf + (size_t)r0 * C : nullptr, head.dwte = params_.dw.wte;
    head.rows = rows, head.C = C, head.V = V, head.Vp = Vp;
    head.dloss = dloss, head.accumulate = accumulate || r0 > 0;
    head.softcap = Real(cfg_.logit_softcap);
    be.classifier_forward_backward(head);
  }
  return be.sum(a.losses, N);  // in order, so the loss does not depend on the thread count
}

template <typename Real>
void Gpt<Real>::backward(const int32_t* inputs, bool accumulate) {
  const int N = B_ * T_, C = cfg_.n_embd;
  Backend<Real>& be = backend_;
  Weights<Real>& w = params_.w;
  Weights<Real>& dw = params_.dw;
  Activations<Real>& a = acts_;
  // d_buf holds ∂L/∂lnf from the fused head.
  be.fill_zero(a.d_resid, (size_t)N * C);
  be.layernorm_backward(a.d_resid, dw.lnf_w, dw.lnf_b, a.d_buf,
                        {a.resid[cfg_.n_layer], w.lnf_w, w.lnf_b, a.lnf_mean, a.lnf_rstd, N, C});
  const RowShape<Real> rows{B_, T_, a.rope_cos, a.rope_sin, inputs};
  for (int l = cfg_.n_layer - 1; l >= 0; l--) {
    block_backward(be, {cfg_, l, w.layers[l], a.layers[l], a.scratch, rows}, a.resid[l],
                   {dw.layers[l], a.d_resid, a.d_buf, a.d_qkv, a.d_fc, accumulate});
    if (layer_grads_hook_) layer_grads_hook_(l);
  }
  be.encoder_backward(dw.wte, a.d_resid, inputs, N, C);
  if (dw.wpe) be.encoder_backward(dw.wpe, a.d_resid, positions_.data(), N, C);
}

template <typename Real>
void Gpt<Real>::logits_row(int n, Real* out) const {
  XSA_CHECK(n >= 0 && n < B_ * T_, "row {} outside the batch", n);
  // Into the logits chunk, which holds nothing between calls, then to the host.
  backend_.matmul_forward(acts_.logits, acts_.lnf + (size_t)n * cfg_.n_embd, params_.w.wte,
                          {1, cfg_.n_embd, cfg_.padded_vocab}, false);
  if (cfg_.logit_softcap > 0)
    backend_.softcap_forward(acts_.logits, 1, cfg_.vocab_size, cfg_.padded_vocab,
                             Real(cfg_.logit_softcap));
  backend_.to_host(out, acts_.logits, cfg_.padded_vocab);
}

template class Gpt<float>;
template class Gpt<double>;

}  // namespace xsa
