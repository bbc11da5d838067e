// Learning-rate schedule: linear warm-up to the peak, then cosine decay to a floor (10 % of the
// peak by default) at the last step.
#pragma once

#include <cstdint>

namespace xsa {

struct LrSchedule {
  double peak = 1e-3;
  double min_fraction = 0.1;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;

  // Learning rate for optimizer step `step` (0-based).
  double at(int64_t step) const;
};

}  // namespace xsa
