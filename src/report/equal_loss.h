// The equal-loss view of a comparison: not "how much lower is the loss after the same steps" but
// "how soon does a variant reach the loss SA ends at, counting its own cost per step", the
// question modded-nanogpt, nanochat and marin decided XSA on. Each arm's validation curve carries
// its own training time at every validation point (its steps' wall-clock, measured interleaved
// with its twins, so the machine's drift falls on all alike); between validation points the curve
// is linear in steps and in seconds.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace xsa {

// A validation point: after `step` optimizer steps and `seconds` of the arm's own training time.
struct CurvePoint {
  double step = 0, seconds = 0, loss = 0;
};

// Where the curve first reaches `target` (loss ≤ target): linearly interpolated between the last
// validation point above the target and the first at or below it; nullopt when no point is at or
// below it. A noisy curve that dips below, rises and dips again is taken at its first dip.
std::optional<CurvePoint> first_reaching(const std::vector<CurvePoint>& curve, double target);

// The loss at `seconds` of training, interpolated; before the first point, the first point's; past
// the last point, the last point's, with *beyond set (the arm finished sooner than `seconds`).
double loss_at_seconds(const std::vector<CurvePoint>& curve, double seconds, bool* beyond);

// One seed's race to its SA twin's final loss: where the arm first reached it (linear between
// validation points), or not reached ("censored" at the end of its run).
struct SeedCrossing {
  double target = 0;  // the SA twin's final validation loss
  bool reached = false;
  double step = NAN, seconds = NAN;      // where it got there (NaN: not reached)
  double end_step = 0, end_seconds = 0;  // its run's end: the censoring point
  double sa_step = 0, sa_seconds = 0;    // the SA twin's end
};

// One variant against SA, seed by seed (curves paired by seed, SA's first). A seed that never
// reaches its SA twin's loss is not dropped (averaging only those that got there would report
// the lucky ones): it counts as "not yet at the end of the run", a censored time.
struct EqualLoss {
  int seeds = 0, reached = 0;  // seeds in all, and those whose curve reached SA's final loss
  std::vector<SeedCrossing> per_seed;
  // Kaplan–Meier's median over every seed of the steps and seconds to reach the SA twin's final
  // loss (censored seeds count as "later than the end of their run"); NaN when half or more of the
  // seeds did not reach it. The speed-ups are SA's mean steps (seconds) over those medians.
  double median_steps = NAN, median_seconds = NAN;
  double step_speedup = NAN, time_speedup = NAN;
  // The curves averaged over seeds (the loss and the seconds at each validation point): where the
  // variant's mean curve first reaches the mean of SA's final losses, and SA's mean end over that.
  double mean_curve_steps = NAN, mean_curve_seconds = NAN;
  double mean_curve_step_speedup = NAN, mean_curve_time_speedup = NAN;
  // The variant's validation loss at SA's total training time, and minus SA's final loss, every
  // seed (paired, with its t-interval); some seed's arm finished before that time (its final loss
  // stands in): beyond_own_run.
  double loss_at_sa_time_mean = NAN, loss_at_sa_time_sd = NAN;
  double delta_at_sa_time_mean = NAN, delta_at_sa_time_sd = NAN;
  double delta_at_sa_time_ci_low = NAN, delta_at_sa_time_ci_high = NAN;
  bool beyond_own_run = false;
};
EqualLoss equal_loss(const std::vector<std::vector<CurvePoint>>& sa,
                     const std::vector<std::vector<CurvePoint>>& variant);

}  // namespace xsa
