#include "model/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/ops.h"
#include "util/error.h"

namespace xsa {
namespace {

struct DecoderViews {
  std::vector<size_t> k_cache, v_cache;
  size_t x, ln, mean, rstd, qkv, y, z, lse, fc, fc_gelu, cos, sin, alpha, rope_cos, rope_sin,
      last_logits;
};

// Offsets (in elements) of every buffer in the decoder's one allocation; returns the total.
template <typename Real>
size_t decoder_layout(DecoderViews& v, const ModelConfig& cfg, int capacity, int rows) {
  const size_t C = cfg.n_embd, H = cfg.n_head, half = cfg.head_dim() / 2,
               kv = (size_t)cfg.kv_heads() * cfg.head_dim();
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
  take(v.last_logits, cfg.padded_vocab);
  return offset;
}

}  // namespace

template <typename Real>
Decoder<Real>::Decoder(const ModelConfig& cfg, const Weights<Real>& weights, int capacity,
                       int max_rows)
    : cfg_(cfg), w_(weights), capacity_(capacity), max_rows_(max_rows) {
  cfg_.validate();
  if (capacity <= 0) fail("key/value cache capacity {} must be positive", capacity);
  if (max_rows <= 0) fail("rows per pass {} must be positive", max_rows);
  DecoderViews v;
  memory_.reset(decoder_layout<Real>(v, cfg_, capacity, max_rows));
  Real* base = memory_.data();
  for (int l = 0; l < cfg_.n_layer; l++) {
    k_cache_.push_back(base + v.k_cache[l]);
    v_cache_.push_back(base + v.v_cache[l]);
  }
  x_ = base + v.x, ln_ = base + v.ln, mean_ = base + v.mean, rstd_ = base + v.rstd;
  qkv_ = base + v.qkv, y_ = base + v.y, z_ = base + v.z, lse_ = base + v.lse;
  fc_ = base + v.fc, fc_gelu_ = base + v.fc_gelu, cos_ = base + v.cos, sin_ = base + v.sin;
  alpha_ = base + v.alpha, rope_cos_ = base + v.rope_cos, rope_sin_ = base + v.rope_sin;
  last_logits_ = base + v.last_logits;
  ops::rope_table(rope_cos_, rope_sin_, cfg_.seq_len, cfg_.head_dim(), cfg_.rope_theta);
  pos_.resize(max_rows);
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
  return last_logits_;
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
    std::memcpy(last_logits_, logits + (size_t)(n - 1) * cfg_.padded_vocab,
                sizeof(Real) * cfg_.padded_vocab);
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
  ops::matmul_forward(logits, features, w_.wte, rows, cfg_.n_embd, cfg_.padded_vocab);
}

template <typename Real>
void Decoder<Real>::pass(const int32_t* tokens, int n, const int* pos, int prefix,
                         const ops::SlotSpan* spans, Real* out, Output what) {
  const int C = cfg_.n_embd, H = cfg_.n_head, Hkv = cfg_.kv_heads(), QKV = cfg_.qkv_dim();
  const int half = cfg_.head_dim() / 2, Ck = Hkv * cfg_.head_dim(), Vp = cfg_.padded_vocab;
  const Weights<Real>& w = w_;
  const int slot0 = length_;  // this pass's rows write their keys and values from here on
  for (int r = 0; r < n; r++) {
    std::memcpy(cos_ + (size_t)r * half, rope_cos_ + (size_t)pos[r] * half, sizeof(Real) * half);
    std::memcpy(sin_ + (size_t)r * half, rope_sin_ + (size_t)pos[r] * half, sizeof(Real) * half);
  }
  ops::encoder_forward(x_, tokens, w.wte, n, C);
  for (int l = 0; l < cfg_.n_layer; l++) {
    const LayerWeights<Real>& W = w.layers[l];
    ops::layernorm_forward(ln_, mean_, rstd_, x_, W.ln1_w, W.ln1_b, n, C);
    ops::matmul_forward(qkv_, ln_, W.qkv_w, n, C, QKV);
    ops::rope_forward(qkv_, cos_, sin_, 1, n, C, H, Hkv);
    for (int r = 0; r < n; r++) {
      const Real* row = qkv_ + (size_t)r * QKV;
      std::memcpy(k_cache_[l] + (size_t)(slot0 + r) * Ck, row + C, sizeof(Real) * Ck);
      std::memcpy(v_cache_[l] + (size_t)(slot0 + r) * Ck, row + C + Ck, sizeof(Real) * Ck);
    }
    const bool exclusive = cfg_.layer_attn[l] != AttnKind::sa;
    const Real* alpha = nullptr;
    if (W.xsa_gate) {
      for (int h = 0; h < H; h++) alpha_[h] = std::tanh(W.xsa_gate[h]);
      alpha = alpha_;
    }
    Real* z = exclusive ? z_ : nullptr;
    if (slot0 == 0 && !spans)  // a fresh sequence: the training kernel, tiled
      ops::attention_forward(y_, z, lse_, qkv_, 1, n, C, H, alpha, W.sink, Hkv);
    else
      ops::attention_forward_cached(y_, z, qkv_, k_cache_[l], v_cache_[l], n, prefix, slot0, spans,
                                    C, H, alpha, W.sink, Hkv);
    ops::matmul_forward(x_, exclusive ? z_ : y_, W.attn_proj_w, n, C, C, /*accumulate=*/true);
    ops::layernorm_forward(ln_, mean_, rstd_, x_, W.ln2_w, W.ln2_b, n, C);
    ops::matmul_forward(fc_, ln_, W.fc_w, n, C, 4 * C);
    ops::gelu_forward(fc_gelu_, fc_, (size_t)n * 4 * C);
    ops::matmul_forward(x_, fc_gelu_, W.mlp_proj_w, n, 4 * C, C, /*accumulate=*/true);
  }
  if (what == Output::last_logits) {  // only the last row's features and logits
    const size_t last = (size_t)(n - 1) * C;
    ops::layernorm_forward(ln_, mean_, rstd_, x_ + last, w.lnf_w, w.lnf_b, 1, C);
    ops::matmul_forward(out, ln_, w.wte, 1, C, Vp);
    return;
  }
  Real* features = what == Output::features ? out : ln_;
  ops::layernorm_forward(features, mean_, rstd_, x_, w.lnf_w, w.lnf_b, n, C);
  if (what == Output::all_logits) ops::matmul_forward(out, features, w.wte, n, C, Vp);
}

template class Decoder<float>;
template class Decoder<double>;

}  // namespace xsa
