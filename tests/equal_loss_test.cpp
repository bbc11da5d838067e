// The equal-loss view (report/equal_loss.h) on constructed curves, against values worked out by
// hand or in closed form here: a straight crossing, a curve that never reaches the target, one
// that crosses twice, noisy curves (the point found lies on the curve's own segment, at the
// target), the loss at a given time, and the summary over seeds, censored seeds included.
#include "xsa/report/equal_loss.h"

#include <gtest/gtest.h>

#include <cmath>

#include "xsa/util/rng.h"
#include "xsa/util/stats.h"

namespace xsa {
namespace {

// A straight curve: loss = a − b·step, seconds = s·step, validated every `every` steps to `last`.
std::vector<CurvePoint> line(double a, double b, double s, int every, int last) {
  std::vector<CurvePoint> c;
  for (int step = 0; step <= last; step += every)
    c.push_back({(double)step, s * step, a - b * step});
  return c;
}

TEST(EqualLoss, StraightCrossingIsInterpolated) {
  const std::vector<CurvePoint> c = {{0, 0, 4.0}, {10, 1.0, 3.0}, {20, 2.5, 2.0}};
  const auto hit = first_reaching(c, 2.5);
  ASSERT_TRUE(hit);
  EXPECT_DOUBLE_EQ(hit->step, 15);
  EXPECT_DOUBLE_EQ(hit->seconds, 1.75);
  EXPECT_DOUBLE_EQ(hit->loss, 2.5);
  // Exactly on a point, and at the start.
  EXPECT_DOUBLE_EQ(first_reaching(c, 3.0)->step, 10);
  EXPECT_DOUBLE_EQ(first_reaching(c, 9.0)->step, 0);
}

TEST(EqualLoss, NotReached) {
  const std::vector<CurvePoint> c = {{0, 0, 4.0}, {10, 1.0, 3.0}, {20, 2.0, 2.6}};
  EXPECT_FALSE(first_reaching(c, 2.5));
  EXPECT_FALSE(first_reaching({}, 2.5));
  const std::vector<CurvePoint> nan_curve = {{0, 0, NAN}, {10, 1, NAN}};
  EXPECT_FALSE(first_reaching(nan_curve, 2.5));
  // In the summary: reached by no seed, so there is no median and no speed-up ("not reached"),
  // and the seed is censored at the end of its run.
  const EqualLoss e = equal_loss({line(4, 0.02, 0.1, 10, 100)}, {c});
  EXPECT_EQ(e.seeds, 1);
  EXPECT_EQ(e.reached, 0);
  EXPECT_TRUE(std::isnan(e.median_steps));
  EXPECT_TRUE(std::isnan(e.median_seconds));
  EXPECT_TRUE(std::isnan(e.time_speedup));
  ASSERT_EQ(e.per_seed.size(), 1u);
  EXPECT_FALSE(e.per_seed[0].reached);
  EXPECT_EQ(e.per_seed[0].end_step, 20);
}

TEST(EqualLoss, CrossingTwiceTakesTheFirst) {
  const std::vector<CurvePoint> c = {{0, 0, 5.0}, {10, 1, 3.0}, {20, 2, 4.0}, {30, 3, 2.0}};
  const auto hit = first_reaching(c, 3.5);
  ASSERT_TRUE(hit);
  EXPECT_DOUBLE_EQ(hit->step, 7.5);
  EXPECT_DOUBLE_EQ(hit->seconds, 0.75);
}

// Noisy curves: the point found is on the segment into the first validation point at or below the
// target, and the segment's line there is the target.
TEST(EqualLoss, NoisyCurvesAreCutAtTheirFirstDip) {
  Rng rng(7);
  for (int trial = 0; trial < 200; trial++) {
    std::vector<CurvePoint> c;
    for (int step = 0; step <= 300; step += 25)
      c.push_back({(double)step, 0.013 * step * (1 + 0.1 * rng.uniform()),
                   2.0 + 2.0 * std::exp(-step / 80.0) + 0.05 * rng.normal()});
    for (size_t i = 1; i < c.size(); i++) c[i].seconds = std::max(c[i].seconds, c[i - 1].seconds);
    const double target = 2.1 + 0.3 * rng.uniform();
    size_t first = c.size();
    for (size_t i = 0; i < c.size() && first == c.size(); i++)
      if (c[i].loss <= target) first = i;
    const auto hit = first_reaching(c, target);
    if (first == c.size()) {
      EXPECT_FALSE(hit) << trial;
      continue;
    }
    ASSERT_TRUE(hit) << trial;
    if (first == 0) {
      EXPECT_EQ(hit->step, 0) << trial;
      continue;
    }
    const CurvePoint& a = c[first - 1];
    const CurvePoint& b = c[first];
    EXPECT_GE(hit->step, a.step) << trial;
    EXPECT_LE(hit->step, b.step) << trial;
    const double f = (hit->step - a.step) / (b.step - a.step);
    EXPECT_NEAR(a.loss + f * (b.loss - a.loss), target, 1e-12) << trial;
    EXPECT_NEAR(hit->seconds, a.seconds + f * (b.seconds - a.seconds), 1e-12) << trial;
  }
}

TEST(EqualLoss, LossAtSeconds) {
  const std::vector<CurvePoint> c = {{0, 0, 4.0}, {10, 2.0, 3.0}, {20, 4.0, 2.0}};
  bool beyond = true;
  EXPECT_DOUBLE_EQ(loss_at_seconds(c, 3.0, &beyond), 2.5);
  EXPECT_FALSE(beyond);
  EXPECT_DOUBLE_EQ(loss_at_seconds(c, -1.0, &beyond), 4.0);
  EXPECT_DOUBLE_EQ(loss_at_seconds(c, 9.0, &beyond), 2.0);
  EXPECT_TRUE(beyond);
}

// Two seeds in closed form. SA ends at step 100 after 10 s at loss 2.0 (seed 1) and 2.2 (seed 2);
// the variant's loss is 4 − 0.025·step at 0.11 s per step, so it reaches 2.0 at step 80 (8.8 s)
// and 2.2 at step 72 (7.92 s), and at SA's 10 s (step 100/1.1) its loss is 4 − 2.5/1.1.
TEST(EqualLoss, SummaryOverSeedsInClosedForm) {
  const std::vector<std::vector<CurvePoint>> sa = {line(4, 0.02, 0.1, 10, 100),
                                                   line(4.2, 0.02, 0.1, 10, 100)};
  const std::vector<CurvePoint> variant = line(4, 0.025, 0.11, 4, 100);
  const EqualLoss e = equal_loss(sa, {variant, variant});
  EXPECT_EQ(e.seeds, 2);
  EXPECT_EQ(e.reached, 2);
  ASSERT_EQ(e.per_seed.size(), 2u);
  EXPECT_NEAR(e.per_seed[0].step, 80, 1e-9);
  EXPECT_NEAR(e.per_seed[1].step, 72, 1e-9);
  EXPECT_NEAR(e.per_seed[0].seconds, 8.8, 1e-9);
  // Kaplan–Meier's median of two seeds that both got there: their midpoint (the share still short
  // is 1/2 from step 72 to step 80), the ordinary median.
  EXPECT_NEAR(e.median_steps, 76, 1e-9);
  EXPECT_NEAR(e.median_seconds, (7.92 + 8.8) / 2, 1e-9);
  EXPECT_NEAR(e.step_speedup, 100 / 76.0, 1e-9);
  EXPECT_NEAR(e.time_speedup, 10 / 8.36, 1e-9);
  // The mean curves: SA's final losses average 2.1, which the variant reaches at step 76.
  EXPECT_NEAR(e.mean_curve_steps, 76, 1e-9);
  EXPECT_NEAR(e.mean_curve_step_speedup, 100 / 76.0, 1e-9);
  EXPECT_NEAR(e.mean_curve_time_speedup, 10 / (76 * 0.11), 1e-9);
  const double at_10s = 4 - 0.025 * (10 / 0.11);
  EXPECT_NEAR(e.loss_at_sa_time_mean, at_10s, 1e-9);
  EXPECT_NEAR(e.loss_at_sa_time_sd, 0, 1e-12);
  EXPECT_NEAR(e.delta_at_sa_time_mean, at_10s - 2.1, 1e-9);
  // Its interval: the two differences are 0.2 apart, sd 0.1414, t(0.975, 1) = 12.7062.
  EXPECT_NEAR(e.delta_at_sa_time_ci_high - e.delta_at_sa_time_mean,
              12.7062047 * std::sqrt(0.02) / std::sqrt(2.0), 1e-6);
  EXPECT_FALSE(e.beyond_own_run);
  // A variant that stops sooner (step 60, 6.6 s) is taken at its final loss, and says so.
  const EqualLoss shorter = equal_loss(sa, {line(4, 0.025, 0.11, 4, 60)});
  EXPECT_TRUE(shorter.beyond_own_run);
  EXPECT_NEAR(shorter.loss_at_sa_time_mean, 4 - 0.025 * 60, 1e-9);
}

// Five seeds, two of which never reach SA's loss: they are counted as "not by the end of the run",
// not dropped. SA ends every seed at step 100 after 10 s at loss 2.0; the variant's losses fall
// by 0.04, 0.025, 2/90, 0.015 and 0.015 per step at 0.1 s per step, so seeds 1, 2 and 3 get there
// at steps 50, 80 and 90 and seeds 4 and 5 stop at 2.5. Averaging the three that got there would
// say step 73.3 (a speed-up of 1.36); Kaplan–Meier's share still short is 4/5 after 50, 3/5 after
// 80 and 2/5 after 90, so the median is 90 (1.11). The mean curve falls by 0.117/5 per step.
TEST(EqualLoss, CensoredSeedsCountAgainstTheSpeedUp) {
  const std::vector<CurvePoint> sa = line(4, 0.02, 0.1, 10, 100);
  const double slopes[5] = {0.04, 0.025, 2.0 / 90, 0.015, 0.015};
  std::vector<std::vector<CurvePoint>> variant;
  for (double b : slopes) variant.push_back(line(4, b, 0.1, 10, 100));
  const EqualLoss e = equal_loss({sa, sa, sa, sa, sa}, variant);
  EXPECT_EQ(e.seeds, 5);
  EXPECT_EQ(e.reached, 3);
  EXPECT_TRUE(e.per_seed[0].reached && e.per_seed[1].reached && e.per_seed[2].reached);
  EXPECT_FALSE(e.per_seed[3].reached || e.per_seed[4].reached);
  EXPECT_NEAR(e.per_seed[0].step, 50, 1e-9);
  EXPECT_NEAR(e.per_seed[1].step, 80, 1e-9);
  EXPECT_NEAR(e.per_seed[2].step, 90, 1e-9);
  EXPECT_EQ(e.per_seed[3].end_step, 100);
  EXPECT_NEAR(e.median_steps, 90, 1e-9);
  EXPECT_NEAR(e.step_speedup, 100 / 90.0, 1e-9);
  EXPECT_NEAR(e.median_seconds, 9, 1e-9);
  EXPECT_NEAR(e.time_speedup, 10 / 9.0, 1e-9);
  double mean_slope = 0;
  for (double b : slopes) mean_slope += b / 5;
  EXPECT_NEAR(e.mean_curve_steps, 2.0 / mean_slope, 1e-9);
  EXPECT_NEAR(e.mean_curve_step_speedup, 100 * mean_slope / 2.0, 1e-9);
  // At SA's 10 s every seed is at step 100: losses 0, 1.5, 1.778, 2.5, 2.5 against 2.0.
  double at_end = 0;
  for (double b : slopes) at_end += (4 - 100 * b) / 5;
  EXPECT_NEAR(e.delta_at_sa_time_mean, at_end - 2.0, 1e-9);
  // Two of four getting there: the share still short sits at 1/2 to the end of the runs, so the
  // median lies beyond them: no median, no speed-up. (The mean curve, falling by 0.02375 per step,
  // still reaches 2.0 at step 84.2: the median says what most seeds did.)
  const EqualLoss half =
      equal_loss({sa, sa, sa, sa}, {variant[0], variant[1], variant[3], variant[4]});
  EXPECT_EQ(half.reached, 2);
  EXPECT_TRUE(std::isnan(half.median_steps));
  EXPECT_TRUE(std::isnan(half.step_speedup));
  EXPECT_NEAR(half.mean_curve_steps, 2.0 / 0.02375, 1e-9);
}

}  // namespace
}  // namespace xsa
