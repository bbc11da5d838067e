// The training step: the one place weights change. Forward and backward over the step's
// micro-batches (gradient accumulation), the gradient sum over the processes of a data-parallel
// run (dist/comm.h; nothing in one process), global-norm gradient clipping and the update: AdamW,
// with the moments sharded across processes under ZeRO-1, and with --optimizer muon, Muon on the
// blocks' hidden matrices (docs/SPEC.md §11). xsa train, xsa compare and xsa bench all step
// through it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "xsa/dist/comm.h"
#include "xsa/model/gpt.h"
#include "xsa/train/device_comm.h"

namespace xsa {

// AdamW, Muon and clipping; the learning rate comes per step (the schedule).
struct OptimizerSettings {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // on 2-D matrices only
  double grad_clip = 1.0;     // global norm; 0 disables
  // Muon on the hidden matrices (is_hidden_matrix), at muon_lr · lr / peak_lr: the AdamW rate's
  // schedule (and a comparison arm's scale) applied to Muon's peak.
  bool muon = false;
  double muon_lr = 0.02, muon_momentum = 0.95, peak_lr = 0;
};

struct StepResult {
  double loss = 0;       // the step's mean loss over its target tokens (every process)
  double grad_norm = 0;  // before clipping
  bool finite = true;    // false: loss or norm is NaN or infinite, and nothing was updated
  std::string skipped;   // non-empty: why the BadStepFilter left this update out
};

// --skip-bad-steps (after llm.c's outlier detector): an update is left out when its loss or
// gradient norm is not finite or, once kMinHistory updates have been applied, lies more than
// kZLimit standard deviations above the mean of the last kWindow applied ones. Its state is saved
// with the checkpoint, so a resumed run skips exactly what the uninterrupted one would.
class BadStepFilter {
 public:
  static constexpr size_t kWindow = 128, kMinHistory = 32;
  static constexpr double kZLimit = 5.0;

  // Empty when the update should go ahead, else the reason ("loss 7.31 is 9.2 sd above ...").
  std::string judge(double loss, double grad_norm) const;
  void applied(double loss, double grad_norm);  // an update that went ahead joins the window

  nlohmann::json to_json() const;
  void from_json(const nlohmann::json& j);  // throws Error when j is malformed

 private:
  std::deque<double> losses_, norms_;
};

// How the processes of a run share a step.
struct Parallelism {
  Comm* comm = nullptr;  // the processes; nullptr: this one alone
  // ZeRO-1: each rank keeps the AdamW moments of its shard of the parameters only (Comm::shard),
  // updates that shard and all-gathers the parameters, instead of every rank updating them all.
  bool zero1 = false;
  // Without ZeRO-1: start each layer's gradient sum as soon as the backward has finished that
  // layer (a background thread of the communicator), so that it overlaps the layers below. The
  // same bits as summing after the backward.
  bool overlap = false;
  // On a device host code cannot address: "auto" (the device's own collectives, NCCL, where it
  // has them), "nccl" or "mpi" (staged through host memory). DeviceComm says more.
  std::string comm_choice = "auto";
};

class TrainStep {
 public:
  // Under ZeRO-1 with several processes, the model's moments shrink to this rank's shard.
  explicit TrainStep(Gpt<float>& model, const OptimizerSettings& settings = {},
                     Parallelism parallel = {});

  // One optimizer step at learning rate lr; `step` is the 1-based count of updates (AdamW's bias
  // correction). inputs and targets hold `micro_batches` batches of [B, T] one after the other;
  // the gradients of all of them, on every process, are summed before the update, so the step is
  // that of one batch of micro_batches·B·world rows. step_tokens: the target tokens of the whole
  // step over every micro-batch and process (≤ 0: counted, with one sum over the processes), by
  // which each loss is scaled, so that the summed gradients are exactly those of the step's mean
  // loss. Every process must call it with the same lr, step and micro_batches.
  StepResult run(const int32_t* inputs, const int32_t* targets, double lr, int64_t step,
                 int micro_batches = 1, int64_t step_tokens = 0);

  // With a filter, a bad step (BadStepFilter::judge) updates nothing and returns with `skipped`
  // set; without one, a non-finite step updates nothing and returns with finite == false.
  void set_bad_step_filter(BadStepFilter* filter) { filter_ = filter; }

  Gpt<float>& model() { return model_; }
  Comm& comm() { return *comm_; }
  bool zero1() const { return zero1_; }
  // The parameter elements whose moments this rank keeps and updates (all of them without ZeRO).
  ShardRange owned() const { return owned_; }

 private:
  Gpt<float>& model_;
  OptimizerSettings settings_;
  Comm alone_;
  std::unique_ptr<DeviceComm>
      device_comm_;  // several processes on a device host code cannot address
  Comm* comm_;
  bool zero1_, overlap_;
  ShardRange owned_;
  std::vector<ShardRange> layer_grads_;  // each layer's parameters in the arena
  BadStepFilter* filter_ = nullptr;

  // Muon: one matrix it updates (a row block of c_attn, or a whole hidden matrix) at `offset` in
  // the arena, the rank that orthogonalises it, and the scratch of the iteration.
  struct MuonMatrix {
    size_t offset;
    int rows, cols;
    int owner;
  };
  std::vector<MuonMatrix> muon_matrices_;
  // This rank's matrices in batches of one shape, indices into muon_matrices_.
  static constexpr size_t kMuonBatch = 4;
  std::vector<std::vector<size_t>> muon_batches_;
  size_t muon_part_ = 0, muon_square_ = 0;  // the scratch's per-matrix strides
  DeviceBuffer<float> muon_scratch_;
  void muon_update(double lr, double grad_scale);
};

}  // namespace xsa
