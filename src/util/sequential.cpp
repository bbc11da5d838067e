#include "xsa/util/sequential.h"

#include <algorithm>
#include <boost/math/distributions/normal.hpp>
#include <cmath>
#include <stdexcept>

#include "xsa/util/error.h"
#include "xsa/util/fmt.h"
#include "xsa/util/rng.h"
#include "xsa/util/stats.h"

namespace xsa {

namespace {

const boost::math::normal kStandardNormal;

double upper_tail(double z) {  // 1 − Φ(z)
  return 0.5 * std::erfc(z * 0.7071067811865476);
}

double normal_density(double z) {  // φ(z)
  return 0.3989422804014327 * std::exp(-0.5 * z * z);
}

// The sub-density of the standardized sum S_k = Σ d_i / σ (a random walk of unit steps) at look k
// over the paths that stayed inside every boundary so far: values on an even grid of S.
struct Continuation {
  double lo = 0, step = 0;
  std::vector<double> density;
};

constexpr int kGridPoints = 401;  // odd, for Simpson's rule

// Simpson's weights on an odd grid.
double simpson_weight(size_t i, size_t n) {
  return i == 0 || i + 1 == n ? 1.0 : i % 2 ? 4.0 : 2.0;
}

// P(|S_k| ≥ b) for S_k = S_{k−1} + N(0, dn), S_{k−1} ~ `prev` (sub-density); b on the S scale.
double crossing_probability(const Continuation& prev, double dn, double b) {
  const double sd = std::sqrt(dn);
  double sum = 0;
  for (size_t i = 0; i < prev.density.size(); i++) {
    const double s = prev.lo + i * prev.step;
    sum += simpson_weight(i, prev.density.size()) * prev.density[i] *
           (upper_tail((b - s) / sd) + upper_tail((b + s) / sd));
  }
  return sum * prev.step / 3;
}

// The sub-density of S_k inside |S_k| < b, from the previous one (the convolution with N(0, dn)).
Continuation advance(const Continuation& prev, double dn, double b) {
  Continuation next;
  next.lo = -b, next.step = 2 * b / (kGridPoints - 1);
  next.density.resize(kGridPoints);
  const double sd = std::sqrt(dn);
  for (int j = 0; j < kGridPoints; j++) {
    const double s = next.lo + j * next.step;
    double sum = 0;
    for (size_t i = 0; i < prev.density.size(); i++) {
      const double u = prev.lo + i * prev.step;
      sum += simpson_weight(i, prev.density.size()) * prev.density[i] *
             normal_density((s - u) / sd) / sd;
    }
    next.density[j] = sum * prev.step / 3;
  }
  return next;
}

// The first look's sub-density: S_1 ~ N(0, n_1) inside |S| < b.
Continuation first_continuation(double n1, double b) {
  Continuation c;
  c.lo = -b, c.step = 2 * b / (kGridPoints - 1);
  c.density.resize(kGridPoints);
  const double sd = std::sqrt(n1);
  for (int j = 0; j < kGridPoints; j++)
    c.density[j] = normal_density((c.lo + j * c.step) / sd) / sd;
  return c;
}

}  // namespace

double obrien_fleming_spent(double t, double alpha) {
  if (t <= 0) return 0;
  const double z = boost::math::quantile(boost::math::complement(kStandardNormal, alpha / 2));
  return 2 * upper_tail(z / std::sqrt(std::min(t, 1.0)));
}

std::vector<int> looks_from(int first, int cap) {
  std::vector<int> looks;
  for (int n = first; n <= cap; n++) looks.push_back(n);
  return looks;
}

namespace {

// The boundaries of the design on the z scale (the seeds' sd known): α(t) spent over the looks.
void z_boundaries(const std::vector<int>& looks, double alpha, std::vector<double>& spent_out,
                  std::vector<double>& z_out) {
  spent_out.clear(), z_out.clear();
  const double n_max = looks.back();
  Continuation inside;
  double spent_before = 0;
  for (size_t k = 0; k < looks.size(); k++) {
    const double spent = obrien_fleming_spent(looks[k] / n_max, alpha);
    const double target = spent - spent_before;
    const double n = looks[k];
    // The boundary whose first crossing here has probability `target`: bisection (the crossing
    // probability falls as the boundary rises).
    const auto crossing = [&](double z) {
      if (k == 0) return 2 * upper_tail(z);
      return crossing_probability(inside, n - looks[k - 1], z * std::sqrt(n));
    };
    double lo = 0, hi = 12;
    for (int it = 0; it < 60 && hi - lo > 1e-9; it++) {
      const double mid = 0.5 * (lo + hi);
      (crossing(mid) > target ? lo : hi) = mid;
    }
    const double z = 0.5 * (lo + hi);
    spent_out.push_back(spent), z_out.push_back(z);
    inside = k == 0 ? first_continuation(n, z * std::sqrt(n))
                    : advance(inside, n - looks[k - 1], z * std::sqrt(n));
    spent_before = spent;
  }
}

// |t| of the paired t-test at every look of `paths` simulated comparisons without a difference
// (normal differences; the t-test's law does not depend on their sd), path-major.
std::vector<double> null_path_t(const std::vector<int>& looks, int paths, uint64_t seed) {
  std::vector<double> t((size_t)paths * looks.size());
  Rng rng(seed);
  for (int i = 0; i < paths; i++) {
    double sum = 0, sum_sq = 0;
    size_t k = 0;
    for (int n = 1; k < looks.size(); n++) {
      const double x = rng.normal();
      sum += x, sum_sq += x * x;
      if (n != looks[k]) continue;
      const double m = sum / n, var = std::max(0.0, (sum_sq - n * m * m) / (n - 1));
      t[(size_t)i * looks.size() + k++] = var > 0 ? std::fabs(m) / std::sqrt(var / n) : INFINITY;
    }
  }
  return t;
}

}  // namespace

SequentialDesign group_sequential_design(const std::vector<int>& looks, double alpha,
                                         double futility_power, bool calibrate) {
  XSA_CHECK(!looks.empty() && looks.front() >= 2, "a design needs looks of at least 2 seeds");
  for (size_t k = 1; k < looks.size(); k++) XSA_CHECK(looks[k] > looks[k - 1], "looks must rise");
  XSA_CHECK(alpha > 0 && alpha < 1, "alpha {} must be in (0, 1)", alpha);
  SequentialDesign d;
  d.looks = looks, d.alpha = alpha, d.futility_power = futility_power;
  // The t-tests at the z boundaries' nominal levels reject a little more often than α when the
  // first looks have few seeds (0.056 for looks 3..10 at α 0.05): the α the boundaries spend is
  // lowered until the simulated rate of the whole design is α.
  const std::vector<double> t = null_path_t(looks, kCalibrationPaths, kCalibrationSeed);
  std::vector<double> spent, z;
  const auto rate = [&](double spend) {
    z_boundaries(looks, spend, spent, z);
    std::vector<double> t_crit;  // |t| at each look's nominal level
    for (size_t k = 0; k < looks.size(); k++)
      t_crit.push_back(student_t_two_sided_critical(2 * upper_tail(z[k]), looks[k] - 1));
    size_t found = 0;
    for (size_t i = 0; i < t.size(); i += looks.size())
      for (size_t k = 0; k < looks.size(); k++)
        if (t[i + k] >= t_crit[k]) {
          found++;
          break;
        }
    return (double)found / kCalibrationPaths;
  };
  double lo = alpha / 4, hi = alpha;
  if (!calibrate || rate(hi) <= alpha) lo = hi;
  for (int it = 0; it < 16 && lo < hi; it++) {
    const double mid = 0.5 * (lo + hi);
    (rate(mid) <= alpha ? lo : hi) = mid;
  }
  d.simulated_alpha = rate(lo);
  d.spent_alpha = lo;
  d.spent = spent, d.z_bound = z;
  for (double b : z) d.nominal_p.push_back(2 * upper_tail(b));
  return d;
}

const char* to_string(SequentialAnswer answer) {
  switch (answer) {
    case SequentialAnswer::differs:
      return "differs";
    case SequentialAnswer::futile:
      return "stopped for futility";
    case SequentialAnswer::no_difference:
      return "no difference found";
    case SequentialAnswer::continuing:
      break;
  }
  return "continuing";
}

SequentialLook sequential_look(const SequentialDesign& design, const std::vector<double>& d) {
  const auto at = std::find(design.looks.begin(), design.looks.end(), (int)d.size());
  XSA_CHECK(at != design.looks.end(), "{} seeds is not a look of the design", d.size());
  SequentialLook r;
  r.look = (int)(at - design.looks.begin());
  r.nominal_p = design.nominal_p[r.look];
  r.p = paired_t_test_p(d);
  const bool last = r.look + 1 == (int)design.looks.size();
  r.conditional_power = NAN;
  if (r.p <= r.nominal_p) {
    r.answer = SequentialAnswer::differs;
    return r;
  }
  if (last) {
    r.answer = SequentialAnswer::no_difference;
    return r;
  }
  // Conditional power under the current trend: the standardized sum goes on with drift θ̂ per seed
  // (θ̂ = mean / sd, the sd taken as known) to the last look, held to its z boundary.
  const double sd = sample_sd(d);
  if (sd > 0 && design.futility_power > 0) {
    const double n = (double)d.size(), n_last = design.looks.back();
    const double theta = mean(d) / sd, s = n * theta, dn = n_last - n;
    const double b = design.z_bound.back() * std::sqrt(n_last);
    const double drift = s + theta * dn, spread = std::sqrt(dn);
    r.conditional_power = upper_tail((b - drift) / spread) + upper_tail((b + drift) / spread);
    if (r.conditional_power < design.futility_power) r.answer = SequentialAnswer::futile;
  }
  return r;
}

std::string describe_design(const SequentialDesign& d) {
  std::string levels;
  for (size_t k = 0; k < d.looks.size(); k++)
    levels += fmt::format("{}{}: {:.3g}", k ? ", " : "", d.looks[k], d.nominal_p[k]);
  return fmt::format(
      "a group-sequential paired t-test at two-sided α = {:.3g}, looks after {} to {} seeds, α "
      "spent "
      "by O'Brien–Fleming-type spending (Lan–DeMets); a look finds a difference when the t-test's "
      "p is at most its nominal level (seeds: level) {}{}",
      d.alpha, d.looks.front(), d.looks.back(), levels,
      d.futility_power > 0
          ? fmt::format("; it stops for futility when the conditional power under the current "
                        "trend falls below {:.0f} %",
                        100 * d.futility_power)
          : "");
}

}  // namespace xsa
