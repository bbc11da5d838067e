// One training step taken two ways from the same state (another split of the step's rows over
// processes or micro-batches, so other summation orders): the two resulting checkpoints agree
// within the derived rounding bounds of tests/bounds.h. Over many steps the two ways' trajectories
// part as their roundings feed later steps through the weights, which no derivation bounds; step by
// step from a shared state each step is held to its own bound.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "bounds.h"
#include "xsa/io/checkpoint.h"
#include "xsa/model/params.h"

namespace xsa::test {

struct CheckpointState {
  std::vector<TensorInfo> layout;
  std::vector<float> params, m, v;
};
inline CheckpointState load_state(const std::filesystem::path& ckpt) {
  const ModelConfig cfg = load_checkpoint_config(ckpt);
  ParamArena<float> arena(cfg, /*training_state=*/false);
  CheckpointState s{arena.layout, {}, {}, {}};
  size_t n = 0;
  for (const TensorInfo& t : s.layout) n = std::max(n, t.offset + t.numel);
  s.params.resize(n), s.m.resize(n), s.v.resize(n);
  load_checkpoint_tensors(ckpt, {s.layout, s.params.data(), s.m.data(), s.v.data()});
  return s;
}

// The states `a` and `b` (step `step`, the same step taken two ways at learning rate lr from the
// state `before`, or from the initial weights when before is null) hold weights within:
//  - AdamW's own roundings of that step (adamw_bound_step), in each of the two, and
//  - AdamW's response (adam_update_sensitivity) to the two gradients' difference, each gradient
//    within the model chain's bound of its tensor's norm (chain_error over the forward and the
//    backward of `chain`).
// The step's gradient, as clipped, is recovered from the moments: (m_after − β1·m_before)/(1 − β1)
// (in double from floats: off by u of the moments, far below its own bound). Weight decay 0.1 on
// matrices, β 0.9 and 0.95, ε 1e-8: the defaults of xsa train.
inline ::testing::AssertionResult same_step(const CheckpointState* before,
                                            const CheckpointState& sa, const CheckpointState& sb,
                                            double lr, int step, const ModelChain& chain) {
  const double u = kFloatRoundoff, b1 = 0.9, b2 = 0.95;
  const double e_rel = 2 * chain_error(chain.forward + chain.backward, u);
  std::vector<double> got(sa.params.begin(), sa.params.end()),
      want(sb.params.begin(), sb.params.end()), bound(sa.params.size(), 0.0);
  for (const TensorInfo& t : sa.layout) {
    const size_t n = t.numel, at = t.offset;
    Vec p(n), m(n, 0.0), v(n, 0.0), g(n);
    double norm = 0;
    for (size_t j = 0; j < n; j++) {
      if (before) m[j] = before->m[at + j], v[j] = before->v[at + j];
      g[j] = (sa.m[at + j] - b1 * m[j]) / (1 - b1);
      norm += g[j] * g[j];
      // the weights before (from the initial state: a's after, a step of lr away, as magnitudes)
      p[j] = before ? before->params[at + j] : sa.params[at + j];
    }
    AdamBounds rounding{Vec(n, 0.0), Vec(n, 0.0), Vec(n, 0.0)};
    const double decay = t.shape.size() == 2 ? 0.1 : 0.0;
    adamw_bound_step(rounding, p, m, v, g, lr, b1, b2, 1e-8, decay, 1.0, step, u);
    const double e = e_rel * std::sqrt(norm);
    for (size_t j = 0; j < n; j++)
      bound[at + j] =
          2 * rounding.p[j] + lr * adam_update_sensitivity(g[j], m[j], v[j], e, b1, b2, 1e-8, step);
  }
  return within(got, want, bound, ("weights after step " + std::to_string(step)).c_str());
}

// The same for checkpoint folders (`before` empty: the initial weights).
inline ::testing::AssertionResult same_step(const std::filesystem::path& before,
                                            const std::filesystem::path& a,
                                            const std::filesystem::path& b, double lr, int step,
                                            const ModelChain& chain) {
  const CheckpointState sa = load_state(a), sb = load_state(b);
  if (before.empty()) return same_step(nullptr, sa, sb, lr, step, chain);
  const CheckpointState s0 = load_state(before);
  return same_step(&s0, sa, sb, lr, step, chain);
}

}  // namespace xsa::test
