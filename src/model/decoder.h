// Inference with a key/value cache: the forward pass of Gpt, one sequence at a time, computing only
// the tokens it has not seen. Each layer keeps every position's key (after RoPE) and value; a new
// token costs one row through the matrices plus attention over the cache. XSA removes from each
// token's attention output its own value, which the cache already holds, so SA and XSA decode
// alike. The weights are borrowed (from a Gpt or a loaded ParamArena), never copied.
#pragma once

#include <cstdint>
#include <vector>

#include "xsa/backend/backend.h"
#include "xsa/model/block.h"
#include "xsa/model/model_config.h"
#include "xsa/model/params.h"

namespace xsa {

template <typename Real>
class Decoder {
 public:
  // capacity: key/value slots per layer, at least the positions of the longest sequence (≤ the
  // model's seq_len) plus room for branch(); max_rows: rows per forward pass (longer inputs run in
  // several passes).
  // The backend must be the one whose memory holds the weights.
  Decoder(const ModelConfig& cfg, const Weights<Real>& weights, int capacity, int max_rows = 256,
          Backend<Real>& backend = cpu_backend<Real>());

  const ModelConfig& config() const { return cfg_; }
  int length() const { return length_; }  // positions in the cache
  int capacity() const { return capacity_; }
  // Forgets every position from n on (n ≤ length()).
  void truncate(int n);

  // Appends tokens to the sequence (positions length() …) and returns the logits [V_pad] that
  // follow the last one, in host memory; valid until the next call. Throws Error when the sequence
  // would pass the model's context (seq_len) or the cache.
  const Real* append(const int32_t* tokens, int n);
  // Like append, but writes the logits after every token: logits [n, V_pad] (host memory).
  void append_all(const int32_t* tokens, int n, Real* logits);

  // Sequences side by side in one pass, after the cached sequence: a segment sees the cache, its
  // parent (an earlier segment of the same call whose own parent is −1) and its own earlier tokens,
  // never another segment. E.g. a question as one segment and each answer as a segment continuing
  // it. features [Σ tokens, C] receives, segment after segment, each token's final features (after
  // ln_f), which head() turns into logits for the rows that need them. The cache is left holding
  // the sequence as before. Throws Error when the segments together pass the cache's capacity or
  // one passes the model's context.
  struct Segment {
    std::vector<int32_t> tokens;
    int parent = -1;
  };
  void branch(const std::vector<Segment>& segments, Real* features);
  // logits [rows, V_pad] of final features [rows, C] (the tied head), both in host memory.
  void head(const Real* features, int rows, Real* logits) const;

 private:
  enum class Output { last_logits, all_logits, features };
  // One pass over n ≤ max_rows rows written at slots length_ + r, at positions pos[r]; prefix and
  // spans as in ops::attention_forward_cached. Writes the last row's logits [V_pad], every row's
  // logits [n, V_pad] or every row's final features [n, C] into out.
  void pass(const int32_t* tokens, int n, const int* pos, int prefix, const ops::SlotSpan* spans,
            Real* out, Output what);
  void check_tokens(const int32_t* tokens, int n) const;

  // Where a pass writes output meant for host memory: there, where the host can address the
  // backend's memory, else the device buffer out_, copied to the host by finish_out.
  Real* device_out(Real* host_out) const;
  void finish_out(Real* host_out, size_t n) const;
  // The model's logit soft-cap (--logit-softcap) on `rows` rows of logits in the backend's memory,
  // before anything reads them: sampling, scoring, the greedy check.
  void cap_logits(Real* logits, int rows) const;

  ModelConfig cfg_;
  const Weights<Real>& w_;
  Backend<Real>& backend_;
  int capacity_, max_rows_;
  int length_ = 0;
  DeviceBuffer<Real> memory_;
  std::vector<LayerCache<Real>> cache_;  // per layer: k, v [capacity, Hkv·D]
  BlockBuffers<Real> buf_;               // one set for every layer, in place on x_
  BlockScratch<Real> scratch_;
  Real *x_, *cos_, *sin_;          // [max_rows, C], the rows' rotary tables [max_rows, D/2]
  Real *rope_cos_, *rope_sin_;     // [seq_len, D/2] the tables, gathered per row into cos_, sin_
  Real* last_logits_;              // [V_pad]
  Real* out_ = nullptr;            // [max_rows, max(C, V_pad)], only where the host cannot address
  std::vector<Real> host_logits_;  // [V_pad] append's result there
  std::vector<int> pos_;
};

}  // namespace xsa
