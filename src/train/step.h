// The training step: the one place weights change. Forward and backward on a batch, the gradient
// reduction hook (summing across the processes of a data-parallel run; nothing in one process),
// global-norm gradient clipping and the AdamW update. xsa train, xsa compare and xsa bench all
// step through it.
#pragma once

#include <cstdint>

#include "xsa/model/gpt.h"

namespace xsa {

// AdamW and clipping; the learning rate comes per step (the schedule).
struct OptimizerSettings {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // on 2-D matrices only
  double grad_clip = 1.0;     // global norm; 0 disables
};

// Sums values over the processes of one training run. The default sums over one process: it
// changes nothing.
class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  virtual void sum(float* values, size_t n) {}        // in place: every process gets the sum
  virtual double sum(double value) { return value; }  // a scalar (the loss)
};

struct StepResult {
  double loss = 0;       // the step's mean loss over its target tokens
  double grad_norm = 0;  // before clipping
  bool finite = true;    // false: loss or norm is NaN or infinite, and nothing was updated
};

class TrainStep {
 public:
  explicit TrainStep(Gpt<float>& model, const OptimizerSettings& settings = {},
                     GradientReducer* reducer = nullptr);

  // One optimizer step at learning rate lr; `step` is the 1-based count of updates (AdamW's bias
  // correction). step_tokens: the target tokens of the whole step over every process (≤ 0: this
  // batch's own count), by which the loss is scaled, so that summed gradients are exactly those of
  // the step's mean loss.
  StepResult run(const int32_t* inputs, const int32_t* targets, double lr, int64_t step,
                 int64_t step_tokens = 0);

  Gpt<float>& model() { return model_; }

 private:
  Gpt<float>& model_;
  OptimizerSettings settings_;
  GradientReducer local_;
  GradientReducer* reducer_;
};

}  // namespace xsa
