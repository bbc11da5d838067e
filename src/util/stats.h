// Small statistics for honest comparisons: mean, sample standard deviation, the two-sided p-value
// of a paired t-test (Student's t distribution through the regularized incomplete beta), and the
// exact McNemar test for paired right/wrong outcomes.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace xsa {

double mean(const std::vector<double>& x);
double sample_sd(const std::vector<double>& x);  // n − 1 in the denominator; 0 for n < 2
// Two-sided p-value that the mean of the paired differences d is 0; NaN for n < 2, 0 or 1 when
// every difference is equal (sd 0).
double paired_t_test_p(const std::vector<double>& d);
// P(|T| ≥ t) for Student's t with `dof` degrees of freedom.
double student_t_two_sided_p(double t, double dof);
// The t with P(|T| ≥ t) = alpha for Student's t with `dof` degrees of freedom.
double student_t_two_sided_critical(double alpha, double dof);
// The power of the two-sided paired t-test at level alpha with n pairs, when the differences'
// true mean is `effect` and their sd `sd`: P(|T| > t_crit) for T noncentral t with n − 1 degrees of
// freedom and noncentrality |effect|·√n / sd (numerical integration over the chi distribution).
// NaN for n < 2 or sd ≤ 0.
double paired_t_power(double effect, double sd, int n, double alpha = 0.05);
// The fewest pairs (seeds) whose power reaches `power`: from 2 up; max_n + 1 when even max_n do
// not (or effect is 0, or sd ≤ 0).
int seeds_for_power(double effect, double sd, double power = 0.8, double alpha = 0.05,
                    int max_n = 1000);
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
