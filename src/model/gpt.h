// xsa-gpt (docs/SPEC.md §1): nanoGPT with RoPE, LayerNorm, tied head, and per layer either
// standard (SA) or exclusive (XSA) self attention. Templated on the scalar type: float for
// training, double for the finite-difference gradient checks of the very same code.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "xsa/backend/backend.h"
#include "xsa/model/block.h"
#include "xsa/model/model_config.h"
#include "xsa/model/params.h"
#include "xsa/util/arena.h"

namespace xsa {

// Views into the activation arena, sized once from (B, T). N = B*T.
template <typename Real>
struct Activations {
  std::vector<BlockBuffers<Real>> layers;
  std::vector<Real*> resid;  // L+1 views [N, C]: resid[0] = embeddings, resid[l+1] = layer l output
  Real* lnf;                 // [N, C]
  Real* lnf_mean;            // [N]
  Real* lnf_rstd;            // [N]
  Real* losses;              // [N] per-position loss
  Real* rope_cos;            // [T, D/2]
  Real* rope_sin;            // [T, D/2]
  BlockScratch<Real> scratch;  // reused across layers
  Real* logits;                // [head_rows, V_pad] one chunk of the tied head
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
  // AdamW moments and the backward's buffers) in the memory of `backend`, which runs every op.
  Gpt(const ModelConfig& cfg, int B, int T, GptMode mode = GptMode::training,
      Backend<Real>& backend = cpu_backend<Real>());

  const ModelConfig& config() const { return cfg_; }
  int batch_size() const { return B_; }
  int seq_len() const { return T_; }
  ParamArena<Real>& params() { return params_; }
  const ParamArena<Real>& params() const { return params_; }
  const Activations<Real>& activations() const { return acts_; }
  Backend<Real>& backend() const { return backend_; }

  // Mean cross-entropy over positions whose target is not −1; inputs and targets are [B, T] (host
  // memory). Returns whatever the arithmetic gave (the training step checks finiteness).
  double forward(const int32_t* inputs, const int32_t* targets);
  // Forward, then backward (training only): the gradients of Σ losses / loss_tokens, added to the
  // gradients already there when `accumulate`, else replacing them. loss_tokens is the number of
  // target tokens of the whole optimizer step (every micro-batch, every process), so that gradients
  // summed over micro-batches and processes are exactly those of the step's mean loss; 0 means this
  // batch's own count. Returns this batch's share of the step's loss, Σ losses / loss_tokens (with
  // 0: the batch's mean loss).
  double forward_backward(const int32_t* inputs, const int32_t* targets, int64_t loss_tokens = 0,
                          bool accumulate = false);
  // Called during the backward as soon as layer l's parameter gradients are final (layers last
  // to first), so that their sum over processes can start while the layers below still run
  // (null: nothing is called). The data-parallel step sets it for a step's last micro-batch.
  void set_layer_grads_hook(std::function<void(int layer)> hook) {
    layer_grads_hook_ = std::move(hook);
  }
  // Logits [V_pad] of row n (= b*T + t) from the last forward, into host memory.
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
  // Sets target_count_; with dloss > 0 the head's backward runs too. Returns Σ losses.
  // `accumulate` as block_backward's: false overwrites dwte with the head's first chunk.
  double run_forward(const int32_t* inputs, const int32_t* targets, Real dloss, bool accumulate);
  void backward(const int32_t* inputs, bool accumulate);

  ModelConfig cfg_;
  Backend<Real>& backend_;
  int B_, T_;
  GptMode mode_;
  int head_rows_;  // rows of the tied head computed at once (bounds the logits buffer)
  std::vector<int32_t> positions_;  // [B·T] each row's position t (host), for learned positions
  ParamArena<Real> params_;
  DeviceBuffer<Real> act_memory_;
  Activations<Real> acts_;
  int64_t target_count_ = 0;
  std::function<void(int layer)> layer_grads_hook_;
  // Runs [begin, end) of the gradient buffer that a step's first micro-batch zeroes: every tensor
  // but those its products overwrite (the layers' four matrices, the tied embedding), merged.
  std::vector<std::pair<size_t, size_t>> accumulated_grads_;
};

}  // namespace xsa
