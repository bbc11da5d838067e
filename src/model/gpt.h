// xsa-gpt (shared/SPEC.md §1): nanoGPT with RoPE, LayerNorm, tied head, and per layer either
// standard (SA) or exclusive (XSA) self attention. Templated on the scalar type: float for
// training, double for the finite-difference gradient checks of the very same code.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/params.h"
#include "util/arena.h"

namespace xsa {

// Views into the activation arena, sized once from (B, T). N = B*T.
template <typename Real>
struct LayerActivations {
  Real* ln1;        // [N, C]
  Real* ln1_mean;   // [N]
  Real* ln1_rstd;   // [N]
  Real* qkv;        // [N, C + 2·Hkv·D] (q | k | v) after RoPE on q and k
  Real* att_y;      // [N, C] attention output y, before the exclusive step (z is recomputed)
  Real* att_lse;    // [B, H, T] row log-sum-exp of the scores
  Real* resid_mid;  // [N, C] residual stream after the attention block
  Real* ln2;        // [N, C]
  Real* ln2_mean;   // [N]
  Real* ln2_rstd;   // [N]
  Real* fc;         // [N, 4C] before GELU
  Real* fc_gelu;    // [N, 4C]
};

template <typename Real>
struct Activations {
  std::vector<LayerActivations<Real>> layers;
  std::vector<Real*> resid;  // L+1 views [N, C]: resid[0] = embeddings, resid[l+1] = layer l output
  Real* lnf;                 // [N, C]
  Real* lnf_mean;            // [N]
  Real* lnf_rstd;            // [N]
  Real* losses;              // [N] per-position loss
  Real* rope_cos;            // [T, D/2]
  Real* rope_sin;            // [T, D/2]
  // Scratch, reused across layers.
  Real* att_z;        // [N, C] exclusive output z (SA: unused)
  Real* gate_alpha;   // [H] α_h = tanh(w_h) of the gated layer at hand
  Real* gate_dalpha;  // [N, H] per-token ∂L/∂α_h, summed in order into the gate gradient
  Real* sink_dlogit;  // [B, H] ∂L/∂b_h per batch row, summed in order into the sink gradient
  Real* logits;       // [head_rows, V_pad] one chunk of the tied head
  // Backward only (null in inference mode).
  Real* d_resid;  // [N, C] gradient of the residual stream
  Real* d_buf;    // [N, C]
  Real* d_qkv;    // [N, C + 2·Hkv·D]
  Real* d_fc;     // [N, 4C]
};

// Training allocates gradients, AdamW moments and the backward's buffers; inference (evaluation,
// analysis) only the weights and the forward's activations.
enum class GptMode { training, inference };

template <typename Real>
class Gpt {
 public:
  // Allocates parameters and activations for batches of B × T (and with training, gradients,
  // AdamW moments and the backward's buffers).
  Gpt(const ModelConfig& cfg, int B, int T, GptMode mode = GptMode::training);

  const ModelConfig& config() const { return cfg_; }
  int batch_size() const { return B_; }
  int seq_len() const { return T_; }
  ParamArena<Real>& params() { return params_; }
  const ParamArena<Real>& params() const { return params_; }
  const Activations<Real>& activations() const { return acts_; }

  // Mean cross-entropy over positions whose target is not −1; inputs and targets are [B, T].
  // Returns NaN-free loss or whatever the arithmetic gave (the trainer checks finiteness).
  double forward(const int32_t* inputs, const int32_t* targets);
  // Zeroes the gradients, runs forward, then backward: gradients of the mean loss (training only).
  double forward_backward(const int32_t* inputs, const int32_t* targets);
  // Logits [V_pad] of row n (= b*T + t) from the last forward.
  void logits_row(int n, Real* out) const;
  // Bytes one model takes: parameters, gradients, both AdamW moments, activations for B × T
  // (inference: parameters and the forward's activations).
  static double memory_bytes(const ModelConfig& cfg, int B, int T,
                             GptMode mode = GptMode::training);
  // Rows of the tied head computed at once for N = B·T rows (bounds the logits buffer).
  static int head_chunk_rows(const ModelConfig& cfg, int N);
  // Number of positions that counted in the last loss.
  int64_t target_count() const { return target_count_; }

 private:
  double run_forward(const int32_t* inputs, const int32_t* targets, bool need_grad);
  void backward(const int32_t* inputs);
  // α_h = tanh(w_h) of a gated layer into the activation scratch; null for SA and plain XSA.
  const Real* gate_alpha(int layer);

  ModelConfig cfg_;
  int B_, T_;
  GptMode mode_;
  int head_rows_;  // rows of the tied head computed at once (bounds the logits buffer)
  ParamArena<Real> params_;
  AlignedBuffer<Real> act_memory_;
  Activations<Real> acts_;
  int64_t target_count_ = 0;
};

}  // namespace xsa
