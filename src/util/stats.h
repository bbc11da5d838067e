// Small statistics for honest comparisons, on Boost.Math's distributions: mean, sample standard
// deviation, the paired t-test with its interval and effect size, exact rank tests (Wilcoxon's
// signed ranks, the sign test), Holm's correction across several tests, the power of the paired
// t-test (noncentral t), Kaplan–Meier's median of censored times, the exact McNemar test and a
// paired bootstrap. docs/comparing.md says which of these a report uses and how it reads them.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace xsa {

double mean(const std::vector<double>& x);       // NaN for no values
double sample_sd(const std::vector<double>& x);  // n − 1 in the denominator; 0 for n < 2
double median(std::vector<double> x);            // NaN for no values

// Two-sided p-value that the mean of the paired differences d is 0; NaN for n < 2, 0 or 1 when
// every difference is equal (sd 0).
double paired_t_test_p(const std::vector<double>& d);
// P(|T| ≥ t) for Student's t with `dof` degrees of freedom.
double student_t_two_sided_p(double t, double dof);
// The t with P(|T| ≥ t) = alpha for Student's t with `dof` degrees of freedom.
double student_t_two_sided_critical(double alpha, double dof);

// Everything a report says of paired differences d (a variant's loss minus SA's, one per seed):
// their mean and sd; the two-sided t-interval mean ± t(1 − (1 − level)/2, n − 1) · sd / √n;
// Cohen's d_z = mean / sd (the effect in units of the differences' own spread); and three
// two-sided p-values: the paired t-test, Wilcoxon's signed-rank test and the sign test, the last
// two exact (wilcoxon_signed_rank_p, sign_test_p). NaN where a figure is undefined (n < 2, sd 0).
struct PairedDifferences {
  int n = 0;
  double mean = NAN, sd = NAN, ci_low = NAN, ci_high = NAN, d_z = NAN;
  double p_t = NAN, p_wilcoxon = NAN, p_sign = NAN;
};
PairedDifferences describe_paired(const std::vector<double>& d, double level = 0.95);

// Wilcoxon's signed-rank test, exact and two-sided: zero differences are dropped, tied |d| get
// their mean rank, and p is the share of the 2^m equally likely sign patterns of the m remaining
// ranks whose sum of positive ranks lies at least as far from its mean m(m + 1)/4 as the one
// observed (the permutation distribution, exact with ties). 1 when no difference is non-zero. With
// m differences p cannot fall below 2 / 2^m (0.0625 for 5 seeds).
double wilcoxon_signed_rank_p(const std::vector<double>& d);
// The sign test, exact and two-sided: with k of the m non-zero differences positive, p = min(1,
// 2 · P(X ≤ min(k, m − k))) for X ~ Binomial(m, 1/2); 1 when every difference is zero.
double sign_test_p(const std::vector<double>& d);

// Holm's step-down correction of p-values tested together: sorted ascending, p_(i) becomes
// max over j ≤ i of min(1, (m − j + 1) p_(j)), returned in the input's order. A NaN entry (a test
// that has no p, as an arm that diverged) counts in m as p = 1 and stays NaN. Rejecting where the
// corrected p < α keeps the chance of any false finding among the m at most α.
std::vector<double> holm_adjusted(const std::vector<double>& p);

// The power of the two-sided paired t-test at level alpha with n pairs, when the differences'
// true mean is `effect` and their sd `sd`: P(|T| > t_crit) for T noncentral t with n − 1 degrees of
// freedom and noncentrality |effect|·√n / sd. NaN for n < 2 or sd ≤ 0.
double paired_t_power(double effect, double sd, int n, double alpha = 0.05);
// The fewest pairs (seeds) whose power reaches `power`: from 2 up; max_n + 1 when even max_n do
// not (or effect is 0, or sd ≤ 0).
int seeds_for_power(double effect, double sd, double power = 0.8, double alpha = 0.05,
                    int max_n = 1000);

// A time to an event, or the time it was last seen without it (censored: the run ended first).
struct CensoredTime {
  double time = 0;
  bool reached = false;
};
// Kaplan–Meier's median: the first time at which the estimated share still waiting falls to 1/2
// or below, every censored time counted as "longer than this". NaN when it never does (half or
// more of the times are censored before the share reaches 1/2).
double kaplan_meier_median(std::vector<CensoredTime> times);

// Exact two-sided McNemar test for two classifiers scored on the same examples: b examples only the
// first got right, c only the second. p = min(1, 2 · P(X ≤ min(b, c))) with X ~ Binomial(b + c,
// 1/2); 1 when b + c = 0.
double mcnemar_exact_p(int b, int c);

// A paired bootstrap of an average over groups (tasks) of per-item differences (questions): each
// resample draws every group's items with replacement, takes each group's mean and averages the
// groups with equal weight. The observed average, the 2.5 and 97.5 percentiles of the resamples,
// and a two-sided p: twice the smaller share of resamples on either side of zero (at most 1).
struct BootstrapResult {
  double mean = 0, low = 0, high = 0, p = 1;
};
BootstrapResult paired_bootstrap_group_mean(const std::vector<std::vector<double>>& groups,
                                            int resamples = 10000, uint64_t seed = 1);

}  // namespace xsa
