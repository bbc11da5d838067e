// The equal-loss view of a comparison: not "how much lower is the loss after the same steps" but
// "how soon does a variant reach the loss SA ends at, counting its own cost per step", the
// question modded-nanogpt, nanochat and marin decided XSA on. Each arm's validation curve carries
// its own training time at every validation point (its steps' wall-clock, measured interleaved
// with its twins, so the machine's drift falls on all alike); between validation points the curve
// is linear in steps and in seconds.
#pragma once

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

// One variant against SA, seed by seed (curves paired by seed, SA's first).
struct EqualLoss {
  int seeds = 0, reached = 0;  // seeds in all, and those whose curve reached SA's final loss
  // To reach SA's final validation loss (over the seeds that reached it; NaN where none did):
  // steps, tokens and seconds, mean and sd; SA's steps (seconds) over the variant's.
  double steps_mean = 0, steps_sd = 0, tokens_mean = 0, tokens_sd = 0;
  double seconds_mean = 0, seconds_sd = 0;
  double step_speedup_mean = 0, time_speedup_mean = 0, time_speedup_sd = 0;
  // The variant's validation loss at SA's total training time, and minus SA's final loss; some
  // seed's arm finished before that time (its final loss stands in): beyond_own_run.
  double loss_at_sa_time_mean = 0, loss_at_sa_time_sd = 0, delta_at_sa_time_mean = 0;
  double delta_at_sa_time_sd = 0;
  bool beyond_own_run = false;
};
EqualLoss equal_loss(const std::vector<std::vector<CurvePoint>>& sa,
                     const std::vector<std::vector<CurvePoint>>& variant, int64_t tokens_per_step);

}  // namespace xsa
