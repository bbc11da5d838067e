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

namespace {

// The curves' mean at each validation point they all have: steps, seconds and loss averaged.
std::vector<CurvePoint> mean_curve(const std::vector<std::vector<CurvePoint>>& curves) {
  std::vector<CurvePoint> m;
  if (curves.empty()) return m;
  size_t points = curves[0].size();
  for (const auto& c : curves) points = std::min(points, c.size());
  for (size_t p = 0; p < points; p++) {
    CurvePoint sum{0, 0, 0};
    for (const auto& c : curves)
      sum.step += c[p].step, sum.seconds += c[p].seconds, sum.loss += c[p].loss;
    const double n = (double)curves.size();
    m.push_back({sum.step / n, sum.seconds / n, sum.loss / n});
  }
  return m;
}

}  // namespace

EqualLoss equal_loss(const std::vector<std::vector<CurvePoint>>& sa,
                     const std::vector<std::vector<CurvePoint>>& variant) {
  EqualLoss e;
  std::vector<CensoredTime> steps, seconds;
  std::vector<double> sa_steps, sa_seconds, sa_losses, at_time, delta_at_time;
  std::vector<std::vector<CurvePoint>> sa_used, variant_used;
  for (size_t i = 0; i < sa.size() && i < variant.size(); i++) {
    if (sa[i].empty() || variant[i].empty()) continue;
    e.seeds++;
    sa_used.push_back(sa[i]), variant_used.push_back(variant[i]);
    const CurvePoint& sa_end = sa[i].back();
    SeedCrossing s;
    s.target = sa_end.loss;
    s.end_step = variant[i].back().step, s.end_seconds = variant[i].back().seconds;
    s.sa_step = sa_end.step, s.sa_seconds = sa_end.seconds;
    if (const auto hit = first_reaching(variant[i], sa_end.loss)) {
      s.reached = true, s.step = hit->step, s.seconds = hit->seconds;
      e.reached++;
    }
    steps.push_back({s.reached ? s.step : s.end_step, s.reached});
    seconds.push_back({s.reached ? s.seconds : s.end_seconds, s.reached});
    sa_steps.push_back(sa_end.step), sa_seconds.push_back(sa_end.seconds);
    sa_losses.push_back(sa_end.loss);
    e.per_seed.push_back(s);
    bool beyond = false;
    at_time.push_back(loss_at_seconds(variant[i], sa_end.seconds, &beyond));
    delta_at_time.push_back(at_time.back() - sa_end.loss);
    e.beyond_own_run = e.beyond_own_run || beyond;
  }
  if (e.seeds == 0) return e;
  e.median_steps = kaplan_meier_median(steps);
  e.median_seconds = kaplan_meier_median(seconds);
  e.step_speedup = e.median_steps > 0 ? mean(sa_steps) / e.median_steps : NAN;
  e.time_speedup = e.median_seconds > 0 ? mean(sa_seconds) / e.median_seconds : NAN;
  const std::vector<CurvePoint> sa_mean = mean_curve(sa_used), mine = mean_curve(variant_used);
  if (const auto hit = first_reaching(mine, mean(sa_losses))) {
    e.mean_curve_steps = hit->step, e.mean_curve_seconds = hit->seconds;
    e.mean_curve_step_speedup = hit->step > 0 ? sa_mean.back().step / hit->step : NAN;
    e.mean_curve_time_speedup = hit->seconds > 0 ? sa_mean.back().seconds / hit->seconds : NAN;
  }
  e.loss_at_sa_time_mean = mean(at_time), e.loss_at_sa_time_sd = sample_sd(at_time);
  const PairedDifferences d = describe_paired(delta_at_time);
  e.delta_at_sa_time_mean = d.mean, e.delta_at_sa_time_sd = e.seeds > 1 ? d.sd : NAN;
  e.delta_at_sa_time_ci_low = d.ci_low, e.delta_at_sa_time_ci_high = d.ci_high;
  return e;
}

}  // namespace xsa
