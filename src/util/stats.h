// Small statistics for honest comparisons: mean, sample standard deviation, and the two-sided
// p-value of a paired t-test (Student's t distribution through the regularized incomplete beta).
#pragma once

#include <cmath>
#include <vector>

namespace xsa {

double mean(const std::vector<double>& x);
double sample_sd(const std::vector<double>& x);  // n − 1 in the denominator; 0 for n < 2
// Two-sided p-value that the mean of the paired differences d is 0; NaN for n < 2, 0 or 1 when
// every difference is equal (sd 0).
double paired_t_test_p(const std::vector<double>& d);
// P(|T| ≥ t) for Student's t with `dof` degrees of freedom.
double student_t_two_sided_p(double t, double dof);

}  // namespace xsa
