#include "xsa/util/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "xsa/util/rng.h"

namespace xsa {

double mean(const std::vector<double>& x) {
  if (x.empty()) return NAN;
  double s = 0;
  for (double v : x) s += v;
  return s / x.size();
}

double sample_sd(const std::vector<double>& x) {
  if (x.size() < 2) return 0;
  const double m = mean(x);
  double s = 0;
  for (double v : x) s += (v - m) * (v - m);
  return std::sqrt(s / (x.size() - 1));
}

namespace {
// Continued fraction of the regularized incomplete beta function (Numerical Recipes' betacf).
double beta_continued_fraction(double a, double b, double x) {
  const double tiny = 1e-300;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  d = 1 / (std::fabs(d) < tiny ? tiny : d);
  double h = d;
  for (int m = 1; m <= 300; m++) {
    const int m2 = 2 * m;
    double aa = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d, c = 1 + aa / c;
    d = 1 / (std::fabs(d) < tiny ? tiny : d), c = std::fabs(c) < tiny ? tiny : c;
    h *= d * c;
    aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d, c = 1 + aa / c;
    d = 1 / (std::fabs(d) < tiny ? tiny : d), c = std::fabs(c) < tiny ? tiny : c;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < 1e-15) break;
  }
  return h;
}

double regularized_incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
                                a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * beta_continued_fraction(a, b, x) / a;
  return 1 - front * beta_continued_fraction(b, a, 1 - x) / b;
}
}  // namespace

double student_t_two_sided_p(double t, double dof) {
  if (std::isnan(t) || dof <= 0) return NAN;
  if (std::isinf(t)) return 0;
  return regularized_incomplete_beta(dof / 2, 0.5, dof / (dof + t * t));
}

double paired_t_test_p(const std::vector<double>& d) {
  if (d.size() < 2) return NAN;
  const double m = mean(d), sd = sample_sd(d);
  if (sd == 0) return m == 0 ? 1.0 : 0.0;
  return student_t_two_sided_p(m / (sd / std::sqrt((double)d.size())), (double)d.size() - 1);
}

double student_t_two_sided_critical(double alpha, double dof) {
  // p(t) falls from 1 at t = 0: bisection on t.
  double lo = 0, hi = 1;
  while (student_t_two_sided_p(hi, dof) > alpha) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-13 * hi; i++) {
    const double mid = 0.5 * (lo + hi);
    (student_t_two_sided_p(mid, dof) > alpha ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

double paired_t_power(double effect, double sd, int n, double alpha) {
  if (n < 2 || !(sd > 0) || !std::isfinite(effect)) return NAN;
  const double nu = n - 1.0, t = student_t_two_sided_critical(alpha, nu);
  const double lambda = std::fabs(effect) * std::sqrt((double)n) / sd;
  // T = (Z + λ) / U with U = √(V/ν), V ~ χ²(ν): P(|T| > t) = ∫ g(u) [Φc(t·u − λ) + Φ(−t·u − λ)] du,
  // g the density of U, by Simpson's rule over its mass (mean 1, sd about 1/√(2ν)).
  const double log_norm =
      (nu / 2) * std::log(nu) - (nu / 2 - 1) * std::log(2.0) - std::lgamma(nu / 2);
  const auto g = [&](double u) {
    return u <= 0 ? (nu == 1 ? std::exp(log_norm) : 0.0)
                  : std::exp(log_norm + (nu - 1) * std::log(u) - nu * u * u / 2);
  };
  const auto upper = [](double x) { return 0.5 * std::erfc(x / std::sqrt(2.0)); };  // Φc
  const double u_max = 1 + 12 / std::sqrt(2 * nu) + 2;
  const int steps = 4000;  // even
  const double h = u_max / steps;
  double sum = 0;
  for (int i = 0; i <= steps; i++) {
    const double u = i * h;
    const double f = g(u) * (upper(t * u - lambda) + upper(t * u + lambda));
    sum += f * (i == 0 || i == steps ? 1 : i % 2 ? 4 : 2);
  }
  return std::min(1.0, sum * h / 3);
}

int seeds_for_power(double effect, double sd, double power, double alpha, int max_n) {
  if (!std::isfinite(effect) || !(sd > 0) || effect == 0) return max_n + 1;
  for (int n = 2; n <= max_n; n++)
    if (paired_t_power(effect, sd, n, alpha) >= power) return n;
  return max_n + 1;
}

double mcnemar_exact_p(int b, int c) {
  const int n = b + c, k = std::min(b, c);
  if (n == 0) return 1.0;
  // Σ_{i ≤ k} C(n, i) / 2^n in log space, so that thousands of examples neither overflow nor
  // underflow.
  const double log_half_n = n * std::log(0.5);
  double tail = 0;
  for (int i = 0; i <= k; i++)
    tail += std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) +
                     log_half_n);
  return std::min(1.0, 2 * tail);
}

BootstrapResult paired_bootstrap_group_mean(const std::vector<std::vector<double>>& groups,
                                            int resamples, uint64_t seed) {
  BootstrapResult r;
  std::vector<const std::vector<double>*> used;
  for (const auto& g : groups)
    if (!g.empty()) used.push_back(&g);
  if (used.empty()) return {NAN, NAN, NAN, NAN};
  for (const auto* g : used) r.mean += mean(*g) / used.size();
  Rng rng(seed);
  std::vector<double> averages(resamples);
  for (int k = 0; k < resamples; k++) {
    double avg = 0;
    for (const auto* g : used) {
      double sum = 0;
      for (size_t i = 0; i < g->size(); i++) sum += (*g)[rng.next_u64() % g->size()];
      avg += sum / g->size() / used.size();
    }
    averages[k] = avg;
  }
  std::sort(averages.begin(), averages.end());
  auto percentile = [&](double q) {
    const double at = q * (resamples - 1);
    const size_t i = (size_t)at;
    return i + 1 < averages.size() ? averages[i] + (at - i) * (averages[i + 1] - averages[i])
                                   : averages[i];
  };
  r.low = percentile(0.025), r.high = percentile(0.975);
  const double below =
      std::count_if(averages.begin(), averages.end(), [](double a) { return a <= 0; });
  const double above =
      std::count_if(averages.begin(), averages.end(), [](double a) { return a >= 0; });
  r.p = std::min(1.0, 2.0 * std::min(below, above) / resamples);
  return r;
}

}  // namespace xsa
