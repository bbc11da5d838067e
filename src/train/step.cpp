#include "xsa/train/step.h"

#include <cmath>

namespace xsa {

TrainStep::TrainStep(Gpt<float>& model, const OptimizerSettings& settings, GradientReducer* reducer)
    : model_(model), settings_(settings), reducer_(reducer ? reducer : &local_) {}

StepResult TrainStep::run(const int32_t* inputs, const int32_t* targets, double lr, int64_t step,
                          int64_t step_tokens) {
  ParamArena<float>& arena = model_.params();
  Backend<float>& be = model_.backend();
  StepResult r;
  r.loss = reducer_->sum(model_.forward_backward(inputs, targets, step_tokens));
  reducer_->sum(arena.grads.data(), arena.grads.size());
  r.grad_norm = std::sqrt(be.sum_of_squares(arena.grads.data(), arena.grads.size()));
  r.finite = std::isfinite(r.loss) && std::isfinite(r.grad_norm);
  if (!r.finite) return r;
  ops::AdamWSettings adam{lr, settings_.beta1, settings_.beta2, settings_.eps, 0.0, 1.0, step};
  if (settings_.grad_clip > 0 && r.grad_norm > settings_.grad_clip)
    adam.grad_scale = settings_.grad_clip / r.grad_norm;
  for (const TensorInfo& t : arena.layout) {
    adam.weight_decay = t.decay ? settings_.weight_decay : 0.0;  // 2-D matrices only
    be.adamw_update(arena.params.data() + t.offset, arena.grads.data() + t.offset,
                    arena.adam_m.data() + t.offset, arena.adam_v.data() + t.offset, t.numel, adam);
  }
  return r;
}

}  // namespace xsa
