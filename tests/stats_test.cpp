// The statistics of util/stats.h against independent references: Student's t from published tables
// and from a Simpson integration of its density, the interval and effect size worked out in plain
// float64 here, Wilcoxon's exact p by enumerating every sign pattern, the sign test and McNemar by
// binomial sums, Holm and Kaplan–Meier's median by hand, the power against published tables.
#include "xsa/util/stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "xsa/util/rng.h"

namespace xsa {
namespace {

TEST(Stats, PairedTTestMatchesKnownValues) {
  // d = 1..5: mean 3, sd 1.5811, t = 4.2426 with 4 degrees of freedom: p = 0.0132356 (two-sided;
  // by Simpson integration of the t density, independently of Boost's incomplete beta). Each
  // bound is the precision of the value it is held to: its last printed digit.
  EXPECT_NEAR(paired_t_test_p({1, 2, 3, 4, 5}), 0.0132356, 1e-6);
  // The 5 % critical values of Student's t: 12.706 (1 dof), 2.776 (4), 2.228 (10).
  EXPECT_NEAR(student_t_two_sided_p(12.7062, 1), 0.05, 1e-5);
  EXPECT_NEAR(student_t_two_sided_p(2.77645, 4), 0.05, 1e-5);
  EXPECT_NEAR(student_t_two_sided_p(2.22814, 10), 0.05, 1e-5);
  EXPECT_NEAR(student_t_two_sided_p(0, 7), 1.0, 1e-12);
  EXPECT_TRUE(std::isnan(paired_t_test_p({0.3})));  // one seed: no test
  EXPECT_NEAR(sample_sd({2, 4, 4, 4, 5, 5, 7, 9}), 2.13809, 1e-5);
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_TRUE(std::isnan(median({})));
}

// t_{0.975} for 2, 4 and 9 degrees of freedom, to 10 digits (any table of Student's t; the same
// values from R's qt()). The interval, d_z and the t-test's p are then plain arithmetic, done here
// in float64 without the library.
TEST(Stats, IntervalAndEffectSizeAgainstTablesOfT) {
  struct Case {
    std::vector<double> d;
    double t975;
  };
  const Case cases[] = {{{-0.021, -0.008, -0.040}, 4.302652730},
                        {{0.1, -0.02, 0.05, 0.07, 0.03}, 2.776445105},
                        {{0.3, 0.1, -0.2, 0.5, 0.05, 0.2, 0.15, -0.1, 0.4, 0.25}, 2.262157163}};
  for (const Case& c : cases) {
    const double n = (double)c.d.size();
    double sum = 0, sq = 0;
    for (double x : c.d) sum += x;
    const double m = sum / n;
    for (double x : c.d) sq += (x - m) * (x - m);
    const double sd = std::sqrt(sq / (n - 1));
    const PairedDifferences r = describe_paired(c.d);
    EXPECT_EQ(r.n, (int)c.d.size());
    EXPECT_NEAR(r.mean, m, 1e-15);
    EXPECT_NEAR(r.sd, sd, 1e-15);
    // The table's 10 digits bound the interval's half width to 1e-9 of it.
    const double half = c.t975 * sd / std::sqrt(n);
    EXPECT_NEAR(r.ci_low, m - half, 1e-9 * half) << n;
    EXPECT_NEAR(r.ci_high, m + half, 1e-9 * half) << n;
    EXPECT_NEAR(r.d_z, m / sd, 1e-14);
    // The interval excludes 0 exactly when the t-test's p is below 0.05.
    EXPECT_EQ(r.ci_low > 0 || r.ci_high < 0, r.p_t < 0.05) << n;
    EXPECT_NEAR(student_t_two_sided_critical(0.05, n - 1), c.t975, 1e-9);
  }
  const PairedDifferences one = describe_paired({0.2});
  EXPECT_EQ(one.mean, 0.2);
  EXPECT_TRUE(std::isnan(one.sd) && std::isnan(one.ci_low) && std::isnan(one.p_t));
}

// Wilcoxon's exact two-sided p by brute force, written independently of the library's: mean ranks
// counted pair by pair, every one of the 2^m sign patterns visited.
double wilcoxon_by_enumeration(const std::vector<double>& d) {
  std::vector<double> x;
  for (double v : d)
    if (v != 0) x.push_back(v);
  const size_t m = x.size();
  if (m == 0) return 1;
  std::vector<double> rank(m);
  for (size_t i = 0; i < m; i++) {
    double below = 0, equal = 0;
    for (size_t j = 0; j < m; j++) {
      below += std::fabs(x[j]) < std::fabs(x[i]);
      equal += std::fabs(x[j]) == std::fabs(x[i]);
    }
    rank[i] = below + (equal + 1) / 2;
  }
  double total = 0, observed = 0;
  for (size_t i = 0; i < m; i++) total += rank[i], observed += x[i] > 0 ? rank[i] : 0;
  const double far = std::fabs(observed - total / 2);
  double hits = 0;
  for (uint64_t mask = 0; mask < (1ull << m); mask++) {
    double w = 0;
    for (size_t i = 0; i < m; i++)
      if (mask >> i & 1) w += rank[i];
    hits += std::fabs(w - total / 2) >= far - 1e-9;
  }
  return hits / std::pow(2.0, (double)m);
}

TEST(Stats, WilcoxonSignedRankIsExact) {
  // Every difference on one side: the two most extreme of 2^n patterns.
  EXPECT_NEAR(wilcoxon_signed_rank_p({1, 2, 3, 4, 5}), 2 / 32.0, 1e-15);
  EXPECT_NEAR(wilcoxon_signed_rank_p({-0.1, -0.2, -0.3, -0.4, -0.5, -0.6, -0.7, -0.8}), 2 / 256.0,
              1e-15);
  EXPECT_EQ(wilcoxon_signed_rank_p({0, 0, 0}), 1.0);
  EXPECT_TRUE(std::isnan(wilcoxon_signed_rank_p({1, NAN, 2})));  // a seed without a figure
  EXPECT_TRUE(std::isnan(sign_test_p({1, NAN, 2})));
  // Random samples with ties and zeros (values rounded to a coarse grid), up to 14 differences.
  Rng rng(11);
  for (int trial = 0; trial < 300; trial++) {
    const int n = 1 + trial % 14;
    std::vector<double> d;
    for (int i = 0; i < n; i++) d.push_back(std::round(3 * rng.normal() + 0.5) / 4);
    EXPECT_NEAR(wilcoxon_signed_rank_p(d), wilcoxon_by_enumeration(d), 1e-12) << trial;
  }
}

TEST(Stats, SignTestAndMcNemarAgainstBinomialSums) {
  // 5 of 6 positive: 2 (C(6,0) + C(6,1)) / 64 = 14 / 64.
  EXPECT_NEAR(sign_test_p({1, 2, 3, 4, 5, -1}), 14 / 64.0, 1e-15);
  EXPECT_NEAR(sign_test_p({1, 2, 3, 0}), 2 / 8.0, 1e-15);  // the zero is dropped
  EXPECT_EQ(sign_test_p({1, -1}), 1.0);
  EXPECT_EQ(sign_test_p({}), 1.0);
  // Exact values from Python's integer binomials: min(1, 2 Σ_{i ≤ min(b,c)} C(b+c, i) / 2^(b+c)).
  EXPECT_NEAR(mcnemar_exact_p(10, 2), 0.03857421875, 1e-12);  // 2 · 79 / 4096
  EXPECT_NEAR(mcnemar_exact_p(2, 10), 0.03857421875, 1e-12);
  EXPECT_NEAR(mcnemar_exact_p(0, 6), 0.03125, 1e-12);
  EXPECT_NEAR(mcnemar_exact_p(60, 40), 0.05688793364098079, 1e-10);
  EXPECT_NEAR(mcnemar_exact_p(400, 350), 0.07350777405843545, 1e-9);
  EXPECT_EQ(mcnemar_exact_p(5, 5), 1.0);
  EXPECT_EQ(mcnemar_exact_p(0, 0), 1.0);
  EXPECT_EQ(mcnemar_exact_p(1, 0), 1.0);
}

TEST(Stats, HolmByHand) {
  // m = 5: the NaN (a diverged arm's test) counts as p = 1. Sorted: 0.005 × 5 = 0.025; 0.01 × 4 =
  // 0.04; 0.03 × 3 = 0.09; 0.04 × 2 = 0.08, raised to the running maximum 0.09; the NaN stays NaN.
  const std::vector<double> p = holm_adjusted({0.01, 0.04, 0.03, NAN, 0.005});
  ASSERT_EQ(p.size(), 5u);
  EXPECT_NEAR(p[0], 0.04, 1e-15);
  EXPECT_NEAR(p[1], 0.09, 1e-15);
  EXPECT_NEAR(p[2], 0.09, 1e-15);
  EXPECT_TRUE(std::isnan(p[3]));
  EXPECT_NEAR(p[4], 0.025, 1e-15);
  EXPECT_EQ(holm_adjusted({0.3})[0], 0.3);       // one test: unchanged
  EXPECT_EQ(holm_adjusted({0.6, 0.7})[1], 1.0);  // capped at 1
  // Two tests, one without a p: the other is corrected for both.
  EXPECT_NEAR(holm_adjusted({0.02, NAN})[0], 0.04, 1e-15);
}

TEST(Stats, KaplanMeierMedianByHand) {
  // Reached at 3, censored at 5, reached at 6 and 8, censored at 10: the share still waiting is
  // 4/5 after 3, 4/5 · 2/3 = 0.533 after 6 (3 at risk), 0.267 after 8: the median is 8.
  EXPECT_EQ(kaplan_meier_median({{3, true}, {5, false}, {6, true}, {8, true}, {10, false}}), 8);
  // Nothing censored: the ordinary median (the share sits at exactly 1/2 from 2 to 3).
  EXPECT_EQ(kaplan_meier_median({{4, true}, {1, true}, {3, true}, {2, true}}), 2.5);
  EXPECT_EQ(kaplan_meier_median({{4, true}, {1, true}, {3, true}}), 3);
  // Half or more never reached: no median, however early the others were. 3/4 after 1 and 1/2
  // after 2, then only censored times: the median lies somewhere beyond the runs.
  EXPECT_TRUE(std::isnan(kaplan_meier_median({{1, true}, {9, false}, {9, false}})));
  EXPECT_TRUE(std::isnan(kaplan_meier_median({{1, true}, {2, true}, {9, false}, {9, false}})));
  EXPECT_TRUE(std::isnan(kaplan_meier_median({{1, true}, {9, false}})));
  // 1/2 after 2; the censoring at 5 leaves one at risk, whose event at 7 takes the share to 0:
  // midway between 2 and 7.
  EXPECT_EQ(kaplan_meier_median({{1, true}, {2, true}, {5, false}, {7, true}}), 4.5);
  EXPECT_TRUE(std::isnan(kaplan_meier_median({})));
}

// The power of the paired t-test: at no effect it is the test's level; for many seeds it is the
// normal closed form Φ(λ − t_c) + Φ(−λ − t_c); and the seeds it asks for at 80 % power are those
// of the published tables (Cohen; G*Power, one-sample/paired t, two-sided α = 0.05: d = 0.5 → 34,
// 0.8 → 15, 1.0 → 10), which a Monte Carlo of 400 000 paired t-tests confirmed when this was
// written (power 0.803 at d = 1, n = 10).
TEST(Stats, PairedTPowerAgainstClosedFormsAndTables) {
  for (int n : {2, 3, 5, 30}) EXPECT_NEAR(paired_t_power(0.0, 1.0, n), 0.05, 1e-6) << n;
  const auto phi = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  for (double lambda : {1.0, 2.8, 4.0}) {
    const int n = 5000;
    const double t = student_t_two_sided_critical(0.05, n - 1);
    EXPECT_NEAR(paired_t_power(lambda / std::sqrt(n), 1.0, n), phi(lambda - t) + phi(-lambda - t),
                1e-3)
        << lambda;
  }
  EXPECT_NEAR(student_t_two_sided_critical(0.05, 9), 2.262157, 1e-5);
  EXPECT_EQ(seeds_for_power(0.5, 1.0), 34);
  EXPECT_EQ(seeds_for_power(-0.8, 1.0), 15);
  EXPECT_EQ(seeds_for_power(0.01, 0.01), 10);
  EXPECT_EQ(seeds_for_power(0.0, 1.0), 1001);
  EXPECT_EQ(seeds_for_power(0.01, 1.0, 0.8, 0.05, 50), 51);
}

}  // namespace
}  // namespace xsa
