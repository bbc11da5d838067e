// Inference with a key/value cache: the forward pass of Gpt, one sequence at a time, computing only
// the tokens it has not seen. Each layer keeps every position's key (after RoPE) and value; a new
// token costs one row through the matrices plus attention over the cache. XSA removes from each
// token's attention output its own value, which the cache already holds, so SA and XSA decode
// alike. The weights are borrowed (from a Gpt or a loaded ParamArena), never copied.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/params.h"
#include "util/arena.h"

namespace xsa {

template <typename Real>
class Decoder {
 public:
  // capacity: key/value slots per layer, at least the positions of the longest sequence (≤ the
  // model's seq_len) plus room for branch(); max_rows: rows per forward pass (longer inputs run in
  // several passes).
  Decoder(const ModelConfig& cfg, const Weights<Real>& weights, int capacity, int max_rows = 256);

  const ModelConfig& config() const { return cfg_; }
  int length() const { return length_; }  // positions in the cache
  int capacity() const { return capacity_; }
  // Forgets every position from n on (n ≤ length()).
  void truncate(int n);

  // Appends tokens to the sequence (positions length() …) and returns the logits [V_pad] that
  // follow the last one; valid until the next call. Throws Error when the sequence would pass the
  // model's context (seq_len) or the cache.
  const Real* append(const int32_t* tokens, int n);
  // Like append, but writes the logits after every token: logits [n, V_pad].
  void append_all(const int32_t* tokens, int n, Real* logits);

  // Several continuations of the cached sequence in one pass, side by side: each continuation's
  // tokens see the cache and their own earlier tokens, never another continuation's. logits
  // [Σ n_c, V_pad] receives, continuation after continuation, the logits after each token. The
  // cache is left holding the sequence as before. Throws Error when the continuations together pass
  // the cache's capacity or one passes the model's context.
  void branch(const std::vector<std::vector<int32_t>>& continuations, Real* logits);

  // Bytes of the cache and the per-pass buffers (the weights not included).
  static double memory_bytes(const ModelConfig& cfg, int capacity, int max_rows);

 private:
  // One pass over n ≤ max_rows rows written at slots length_ + r, at positions pos[r]; prefix and
  // first as in ops::attention_forward_cached. Logits of every row (all_rows) or the last.
  void pass(const int32_t* tokens, int n, const int* pos, int prefix, const int* first,
            Real* logits, bool all_rows);
  void check_tokens(const int32_t* tokens, int n) const;

  ModelConfig cfg_;
  const Weights<Real>& w_;
  int capacity_, max_rows_;
  int length_ = 0;
  AlignedBuffer<Real> memory_;
  std::vector<Real*> k_cache_, v_cache_;  // per layer [capacity, Hkv·D]
  Real *x_, *ln_, *mean_, *rstd_, *qkv_, *y_, *z_, *lse_, *fc_, *fc_gelu_, *cos_, *sin_, *alpha_;
  Real *rope_cos_, *rope_sin_;  // [seq_len, D/2] the tables, gathered per row into cos_, sin_
  Real* last_logits_;           // [V_pad]
  std::vector<int> pos_, first_;
};

}  // namespace xsa
