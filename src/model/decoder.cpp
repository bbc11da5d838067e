#include "xsa/model/decoder.h"

#include <algorithm>
#include <cstring>

#include "xsa/util/error.h"

namespace xsa {
namespace {

// Offsets (in elements) of every buffer in the decoder's one allocation.
struct DecoderLayout {
  std::vector<size_t> k_cache, v_cache;
  size_t x, ln, mean, rstd, qkv, y, z, lse, fc, fc_gelu, cos, sin, alpha, rope_cos, rope_sin,
      output_gate_pre, att_output_gated, kept_z, v_first, v_raw, value_embed_rows, last_logits, out,
      total;
};

template <typename Real>
DecoderLayout decoder_layout(const ModelConfig& cfg, int capacity, int rows, bool staging) {
  const size_t C = cfg.n_embd, H = cfg.n_head, half = cfg.head_dim() / 2,
               kv = (size_t)cfg.kv_heads() * cfg.head_dim();
  DecoderLayout v;
  size_t offset = 0;
  auto take = [&](size_t& at, size_t n) {
    at = offset;
    offset += align_elements<Real>(n);
  };
  v.k_cache.resize(cfg.n_layer), v.v_cache.resize(cfg.n_layer);
  for (int l = 0; l < cfg.n_layer; l++)
    take(v.k_cache[l], (size_t)capacity * kv), take(v.v_cache[l], (size_t)capacity * kv);
  take(v.x, rows * C), take(v.ln, rows * C), take(v.mean, rows), take(v.rstd, rows);
  take(v.qkv, rows * (size_t)cfg.qkv_dim()), take(v.y, rows * C), take(v.z, rows * C);
  take(v.lse, H * rows), take(v.fc, rows * 4 * C), take(v.fc_gelu, rows * 4 * C);
  take(v.cos, rows * half), take(v.sin, rows * half), take(v.alpha, H);
  take(v.rope_cos, (size_t)cfg.seq_len * half), take(v.rope_sin, (size_t)cfg.seq_len * half);
  // XSA's rivals (the buffers are shared by the layers): gated-attn's gate and its W_o input,
  // XSA's z kept for it; value-residual's first values and each layer's own.
  const bool gated = options_on_any_layer(cfg.attention, cfg.n_layer).output_gate;
  const bool mixed = any_layer_mixes_values(cfg.attention, cfg.n_layer);
  take(v.output_gate_pre, gated ? rows * C : 0), take(v.att_output_gated, gated ? rows * C : 0);
  take(v.kept_z, gated ? rows * C : 0);
  take(v.v_first, mixed ? rows * kv : 0), take(v.v_raw, mixed ? rows * kv : 0);
  const bool value_embed = options_on_any_layer(cfg.attention, cfg.n_layer).value_embed;
  take(v.value_embed_rows, value_embed ? rows * kv : 0);
  take(v.last_logits, cfg.padded_vocab);
  take(v.out, staging ? rows * std::max(C, (size_t)cfg.padded_vocab) : 0);
  v.total = offset;
  return v;
}

}  // namespace

template <typename Real>
Decoder<Real>::Decoder(const ModelConfig& cfg, const Weights<Real>& weights, int capacity,
                       int max_rows, Backend<Real>& backend)
    : cfg_(cfg), w_(weights), backend_(backend), capacity_(capacity), max_rows_(max_rows) {
  cfg_.validate();
  check_backend_runs(cfg_, backend);
  if (capacity <= 0) fail("key/value cache capacity {} must be positive", capacity);
  if (max_rows <= 0) fail("rows per pass {} must be positive", max_rows);
  const bool staging = !backend.host_addressable();
  const DecoderLayout v = decoder_layout<Real>(cfg_, capacity, max_rows, staging);
  memory_ = DeviceBuffer<Real>(backend, v.total, MemoryUse::activations);
  Real* base = memory_.data();
  for (int l = 0; l < cfg_.n_layer; l++)
    cache_.push_back({base + v.k_cache[l], base + v.v_cache[l], {}});
  x_ = base + v.x;
  // The block runs in place on x_: the residual stream after attention is x_ itself, and both
  // LayerNorms share one output.
  buf_ = {base + v.ln, base + v.mean, base + v.rstd, base + v.qkv,  base + v.y,  base + v.lse,
          x_,          base + v.ln,   base + v.mean, base + v.rstd, base + v.fc, base + v.fc_gelu};
  scratch_ = {base + v.z, base + v.alpha, nullptr, nullptr};
  if (options_on_any_layer(cfg_.attention, cfg_.n_layer).output_gate) {
    buf_.output_gate_pre = base + v.output_gate_pre,
    scratch_.att_output_gated = base + v.att_output_gated;
    buf_.att_z = base + v.kept_z;  // z for the gate (every layer: SA layers do not write it)
  }
  if (any_layer_mixes_values(cfg_.attention, cfg_.n_layer))
    scratch_.v_first = base + v.v_first, buf_.v_raw = base + v.v_raw;
  if (options_on_any_layer(cfg_.attention, cfg_.n_layer).value_embed)
    scratch_.value_embed_rows = base + v.value_embed_rows;
  cos_ = base + v.cos, sin_ = base + v.sin;
  rope_cos_ = base + v.rope_cos, rope_sin_ = base + v.rope_sin;
  last_logits_ = base + v.last_logits;
  if (staging) out_ = base + v.out, host_logits_.resize(cfg_.padded_vocab);
  backend_.rope_table(rope_cos_, rope_sin_, cfg_.seq_len, cfg_.head_dim(), cfg_.rope_theta);
  pos_.resize(max_rows);
}

template <typename Real>
void Decoder<Real>::cap_logits(Real* logits, int rows) const {
  if (cfg_.logit_softcap > 0)
    backend_.softcap_forward(logits, rows, cfg_.vocab_size, cfg_.padded_vocab,
                             Real(cfg_.logit_softcap));
}

template <typename Real>
Real* Decoder<Real>::device_out(Real* host_out) const {
  return out_ ? out_ : host_out;
}

template <typename Real>
void Decoder<Real>::finish_out(Real* host_out, size_t n) const {
  if (out_) backend_.to_host(host_out, out_, n);
}

template <typename Real>
void Decoder<Real>::truncate(int n) {
  XSA_CHECK(n >= 0 && n <= length_, "truncate to {} outside [0, {}]", n, length_);
  length_ = n;
}

template <typename Real>
void Decoder<Real>::check_tokens(const int32_t* tokens, int n) const {
  for (int i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= cfg_.vocab_size)
      fail("token id {} is outside the model's vocabulary [0, {})", tokens[i], cfg_.vocab_size);
}

template <typename Real>
const Real* Decoder<Real>::append(const int32_t* tokens, int n) {
  append_all(tokens, n, nullptr);
  if (host_logits_.empty()) return last_logits_;
  backend_.to_host(host_logits_.data(), last_logits_, cfg_.padded_vocab);
  return host_logits_.data();
}

template <typename Real>
void Decoder<Real>::append_all(const int32_t* tokens, int n, Real* logits) {
  XSA_CHECK(n > 0, "append of {} tokens", n);
  if (length_ + n > cfg_.seq_len)
    fail("{} tokens do not fit the model's context of {} ({} already in it)", n, cfg_.seq_len,
         length_);
  if (length_ + n > capacity_)
    fail("{} tokens do not fit the key/value cache of {} ({} already in it)", n, capacity_,
         length_);
  check_tokens(tokens, n);
  for (int done = 0; done < n;) {
    const int rows = std::min(max_rows_, n - done);
    for (int r = 0; r < rows; r++) pos_[r] = length_ + r;
    if (logits)
      pass(tokens + done, rows, pos_.data(), length_, nullptr,
           logits + (size_t)done * cfg_.padded_vocab, Output::all_logits);
    else
      pass(tokens + done, rows, pos_.data(), length_, nullptr, last_logits_, Output::last_logits);
    length_ += rows, done += rows;
  }
  if (logits)
    backend_.from_host(last_logits_, logits + (size_t)(n - 1) * cfg_.padded_vocab,
                       cfg_.padded_vocab);
}

template <typename Real>
void Decoder<Real>::branch(const std::vector<Segment>& segments, Real* features) {
  // Flattened rows: the token, its position, and the slots it sees besides the prefix.
  std::vector<int32_t> tokens;
  std::vector<int> pos;
  std::vector<ops::SlotSpan> spans;
  std::vector<int> begin(segments.size());
  for (size_t s = 0; s < segments.size(); s++) {
    const Segment& seg = segments[s];
    int start = length_;  // position of the segment's first token
    ops::SlotSpan span;
    if (seg.parent >= 0) {
      XSA_CHECK(seg.parent < (int)s && segments[seg.parent].parent < 0,
                "segment {}: parent {} must be an earlier segment without a parent", s, seg.parent);
      span.parent_begin = begin[seg.parent];
      span.parent_end = span.parent_begin + (int)segments[seg.parent].tokens.size();
      start += (int)segments[seg.parent].tokens.size();
    }
    if (start + (int)seg.tokens.size() > cfg_.seq_len)
      fail("a sequence of {} tokens does not fit the model's context of {}",
           start + seg.tokens.size(), cfg_.seq_len);
    begin[s] = length_ + (int)tokens.size();
    span.first = begin[s];
    for (size_t i = 0; i < seg.tokens.size(); i++) {
      tokens.push_back(seg.tokens[i]);
      pos.push_back(start + (int)i);
      spans.push_back(span);
    }
  }
  const int total = (int)tokens.size();
  if (total == 0) return;
  if (length_ + total > capacity_)
    fail("{} tokens side by side do not fit the key/value cache of {} after {}", total, capacity_,
         length_);
  check_tokens(tokens.data(), total);
  const int prefix = length_;
  for (int done = 0; done < total;) {
    const int rows = std::min(max_rows_, total - done);
    // Rows write their keys and values at slots length_ + r: advance length_ over earlier passes'
    // rows so that they stay in the cache for the rows of later passes that see them.
    pass(tokens.data() + done, rows, pos.data() + done, prefix, spans.data() + done,
         features + (size_t)done * cfg_.n_embd, Output::features);
    length_ += rows, done += rows;
  }
  length_ = prefix;
}

template <typename Real>
void Decoder<Real>::head(const Real* features, int rows, Real* logits) const {
  const int C = cfg_.n_embd, Vp = cfg_.padded_vocab;
  if (!out_) {
    backend_.matmul_forward(logits, features, w_.wte, {rows, C, Vp}, false);
    cap_logits(logits, rows);
    return;
  }
  for (int r0 = 0; r0 < rows; r0 += max_rows_) {  // through the device, max_rows at a time
    const int n = std::min(max_rows_, rows - r0);
    backend_.from_host(x_, features + (size_t)r0 * C, (size_t)n * C);
    backend_.matmul_forward(out_, x_, w_.wte, {n, C, Vp}, false);
    cap_logits(out_, n);
    backend_.to_host(logits + (size_t)r0 * Vp, out_, (size_t)n * Vp);
  }
}

template <typename Real>
void Decoder<Real>::pass(const int32_t* tokens, int n, const int* pos, int prefix,
                         const ops::SlotSpan* spans, Real* out, Output what) {
  const int C = cfg_.n_embd, half = cfg_.head_dim() / 2, Vp = cfg_.padded_vocab;
  Backend<Real>& be = backend_;
  const Weights<Real>& w = w_;
  be.gather_rows(cos_, rope_cos_, pos, n, half);
  be.gather_rows(sin_, rope_sin_, pos, n, half);
  be.encoder_forward(x_, tokens, w.wte, n, C);
  if (w.wpe) be.embedding_add(x_, pos, w.wpe, n, C);
  const RowShape<Real> rows{1, n, cos_, sin_, tokens};
  for (int l = 0; l < cfg_.n_layer; l++) {
    // This pass's rows write their keys and values from slot length_ on.
    LayerCache<Real> cache = cache_[l];
    cache.view = {cache.k, cache.v, prefix, length_, spans};
    block_forward(be, {cfg_, l, w.layers[l], buf_, scratch_, rows}, x_, x_, &cache);
  }
  Real* ln = buf_.ln1;
  if (what == Output::last_logits) {  // only the last row's features and logits
    const size_t last = (size_t)(n - 1) * C;
    be.layernorm_forward(ln, {x_ + last, w.lnf_w, w.lnf_b, buf_.ln1_mean, buf_.ln1_rstd, 1, C});
    be.matmul_forward(out, ln, w.wte, {1, C, Vp}, false);  // out is last_logits_ (device)
    cap_logits(out, 1);
    return;
  }
  Real* dev = device_out(out);
  Real* features = what == Output::features ? dev : ln;
  be.layernorm_forward(features, {x_, w.lnf_w, w.lnf_b, buf_.ln1_mean, buf_.ln1_rstd, n, C});
  if (what == Output::all_logits) {
    be.matmul_forward(dev, features, w.wte, {n, C, Vp}, false);
    cap_logits(dev, n);
  }
  finish_out(out, (size_t)n * (what == Output::features ? C : Vp));
}

template class Decoder<float>;
template class Decoder<double>;

}  // namespace xsa
