#include "xsa/report/equal_loss.h"

#include <cmath>

#include "xsa/util/stats.h"

namespace xsa {

std::optional<CurvePoint> first_reaching(const std::vector<CurvePoint>& curve, double target) {
  for (size_t i = 0; i < curve.size(); i++) {
    if (!(curve[i].loss <= target)) continue;
    if (i == 0) return curve[0];
    const CurvePoint& a = curve[i - 1];
    const CurvePoint& b = curve[i];
    // a is above the target (or NaN: then b itself), b at or below it.
    if (!std::isfinite(a.loss) || a.loss == b.loss) return b;
    const double f = (a.loss - target) / (a.loss - b.loss);
    return CurvePoint{a.step + f * (b.step - a.step), a.seconds + f * (b.seconds - a.seconds),
                      target};
  }
  return std::nullopt;
}

double loss_at_seconds(const std::vector<CurvePoint>& curve, double seconds, bool* beyond) {
  if (beyond) *beyond = false;
  if (curve.empty()) return NAN;
  if (seconds <= curve.front().seconds) return curve.front().loss;
  for (size_t i = 1; i < curve.size(); i++) {
    const CurvePoint& a = curve[i - 1];
    const CurvePoint& b = curve[i];
    if (seconds <= b.seconds) {
      const double f = b.seconds > a.seconds ? (seconds - a.seconds) / (b.seconds - a.seconds) : 1;
      return a.loss + f * (b.loss - a.loss);
    }
  }
  if (beyond) *beyond = true;
  return curve.back().loss;
}

EqualLoss equal_loss(const std::vector<std::vector<CurvePoint>>& sa,
                     const std::vector<std::vector<CurvePoint>>& variant, int64_t tokens_per_step) {
  EqualLoss e;
  std::vector<double> steps, tokens, seconds, step_speedup, time_speedup, at_time, delta_at_time;
  for (size_t i = 0; i < sa.size() && i < variant.size(); i++) {
    if (sa[i].empty() || variant[i].empty()) continue;
    e.seeds++;
    const CurvePoint& sa_end = sa[i].back();
    if (const auto hit = first_reaching(variant[i], sa_end.loss)) {
      e.reached++;
      steps.push_back(hit->step), tokens.push_back(hit->step * (double)tokens_per_step);
      seconds.push_back(hit->seconds);
      step_speedup.push_back(hit->step > 0 ? sa_end.step / hit->step : NAN);
      time_speedup.push_back(hit->seconds > 0 ? sa_end.seconds / hit->seconds : NAN);
    }
    bool beyond = false;
    at_time.push_back(loss_at_seconds(variant[i], sa_end.seconds, &beyond));
    delta_at_time.push_back(at_time.back() - sa_end.loss);
    e.beyond_own_run = e.beyond_own_run || beyond;
  }
  const auto mean_or_nan = [](const std::vector<double>& v) { return v.empty() ? NAN : mean(v); };
  e.steps_mean = mean_or_nan(steps), e.steps_sd = sample_sd(steps);
  e.tokens_mean = mean_or_nan(tokens), e.tokens_sd = sample_sd(tokens);
  e.seconds_mean = mean_or_nan(seconds), e.seconds_sd = sample_sd(seconds);
  e.step_speedup_mean = mean_or_nan(step_speedup);
  e.time_speedup_mean = mean_or_nan(time_speedup), e.time_speedup_sd = sample_sd(time_speedup);
  e.loss_at_sa_time_mean = mean_or_nan(at_time), e.loss_at_sa_time_sd = sample_sd(at_time);
  e.delta_at_sa_time_mean = mean_or_nan(delta_at_time);
  e.delta_at_sa_time_sd = sample_sd(delta_at_time);
  return e;
}

}  // namespace xsa
