#include "xsa/train/schedule.h"

#include <cmath>

namespace xsa {

double LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) return peak * (double)(step + 1) / (double)warmup_steps;
  const double floor = peak * min_fraction;
  const int64_t decay_steps = total_steps - warmup_steps;
  if (decay_steps <= 1) return peak;
  double progress = (double)(step - warmup_steps) / (double)(decay_steps - 1);
  if (progress > 1) progress = 1;
  return floor + 0.5 * (peak - floor) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace xsa
