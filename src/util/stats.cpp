#include "xsa/util/stats.h"

#include <algorithm>
#include <boost/math/distributions/binomial.hpp>
#include <boost/math/distributions/non_central_t.hpp>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>

#include "xsa/util/rng.h"

namespace xsa {

namespace bm = boost::math;

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

double median(std::vector<double> x) {
  if (x.empty()) return NAN;
  std::sort(x.begin(), x.end());
  const size_t h = x.size() / 2;
  return x.size() % 2 ? x[h] : 0.5 * (x[h - 1] + x[h]);
}

double student_t_two_sided_p(double t, double dof) {
  if (std::isnan(t) || !(dof > 0)) return NAN;
  if (std::isinf(t)) return 0;
  return 2 * bm::cdf(bm::complement(bm::students_t(dof), std::fabs(t)));
}

double paired_t_test_p(const std::vector<double>& d) {
  if (d.size() < 2) return NAN;
  const double m = mean(d), sd = sample_sd(d);
  if (sd == 0) return m == 0 ? 1.0 : 0.0;
  return student_t_two_sided_p(m / (sd / std::sqrt((double)d.size())), (double)d.size() - 1);
}

double student_t_two_sided_critical(double alpha, double dof) {
  return bm::quantile(bm::complement(bm::students_t(dof), alpha / 2));
}

PairedDifferences describe_paired(const std::vector<double>& d, double level) {
  PairedDifferences r;
  r.n = (int)d.size();
  if (d.empty()) return r;
  r.mean = mean(d);
  if (d.size() < 2) return r;
  r.sd = sample_sd(d);
  const double half = student_t_two_sided_critical(1 - level, r.n - 1) * r.sd / std::sqrt(r.n);
  r.ci_low = r.mean - half, r.ci_high = r.mean + half;
  r.d_z = r.sd > 0 ? r.mean / r.sd : NAN;
  r.p_t = paired_t_test_p(d);
  r.p_wilcoxon = wilcoxon_signed_rank_p(d);
  r.p_sign = sign_test_p(d);
  return r;
}

double wilcoxon_signed_rank_p(const std::vector<double>& d) {
  std::vector<double> nonzero;
  for (double x : d) {
    if (std::isnan(x)) return NAN;  // a seed without a figure (an arm diverged): no test
    if (x != 0) nonzero.push_back(x);
  }
  const size_t m = nonzero.size();
  if (m == 0) return 1.0;
  // Mean ranks of |d|, doubled so that ties' halves stay whole numbers.
  std::vector<size_t> order(m);
  for (size_t i = 0; i < m; i++) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return std::fabs(nonzero[a]) < std::fabs(nonzero[b]); });
  std::vector<int64_t> rank2(m);
  for (size_t i = 0; i < m;) {
    size_t j = i;
    while (j + 1 < m && std::fabs(nonzero[order[j + 1]]) == std::fabs(nonzero[order[i]])) j++;
    for (size_t k = i; k <= j; k++) rank2[order[k]] = (int64_t)(i + j + 2);  // 2 · mean rank
    i = j + 1;
  }
  int64_t total = 0, observed = 0;
  for (size_t i = 0; i < m; i++) {
    total += rank2[i];
    if (nonzero[i] > 0) observed += rank2[i];
  }
  // The distribution of the positive ranks' sum over the 2^m sign patterns, as probabilities.
  std::vector<double> dist(total + 1, 0.0);
  dist[0] = 1;
  int64_t reach = 0;
  for (size_t i = 0; i < m; i++) {
    for (int64_t s = reach; s >= 0; s--)
      if (dist[s] != 0) dist[s + rank2[i]] += 0.5 * dist[s], dist[s] *= 0.5;
    reach += rank2[i];
  }
  // Two-sided: sums at least as far from the centre total / 2 (in doubled units: |2s − total|).
  const int64_t far = std::llabs(2 * observed - total);
  double p = 0;
  for (int64_t s = 0; s <= total; s++)
    if (std::llabs(2 * s - total) >= far) p += dist[s];
  return std::min(1.0, p);
}

double sign_test_p(const std::vector<double>& d) {
  int positive = 0, negative = 0;
  for (double x : d) {
    if (std::isnan(x)) return NAN;
    positive += x > 0, negative += x < 0;
  }
  const int m = positive + negative;
  if (m == 0) return 1.0;
  return std::min(1.0, 2 * bm::cdf(bm::binomial(m, 0.5), std::min(positive, negative)));
}

std::vector<double> holm_adjusted(const std::vector<double>& p) {
  // A test without a p (an arm diverged) still counts in m, as p = 1: leaving it out would make
  // the others' correction milder than the number of tests run.
  const auto key = [&](size_t i) { return std::isnan(p[i]) ? 1.0 : p[i]; };
  std::vector<size_t> order(p.size());
  for (size_t i = 0; i < p.size(); i++) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  std::vector<double> out(p.size(), NAN);
  const size_t m = order.size();
  double running = 0;
  for (size_t j = 0; j < m; j++) {
    running = std::max(running, std::min(1.0, (double)(m - j) * key(order[j])));
    if (!std::isnan(p[order[j]])) out[order[j]] = running;
  }
  return out;
}

double paired_t_power(double effect, double sd, int n, double alpha) {
  if (n < 2 || !(sd > 0) || !std::isfinite(effect)) return NAN;
  const double dof = n - 1.0, t = student_t_two_sided_critical(alpha, dof);
  const double lambda = std::fabs(effect) * std::sqrt((double)n) / sd;
  if (lambda == 0) return alpha;
  const bm::non_central_t nct(dof, lambda);
  return bm::cdf(bm::complement(nct, t)) + bm::cdf(nct, -t);
}

int seeds_for_power(double effect, double sd, double power, double alpha, int max_n) {
  if (!std::isfinite(effect) || !(sd > 0) || effect == 0) return max_n + 1;
  for (int n = 2; n <= max_n; n++)
    if (paired_t_power(effect, sd, n, alpha) >= power) return n;
  return max_n + 1;
}

double kaplan_meier_median(std::vector<CensoredTime> times) {
  // At equal times the events come before the censorings (the usual convention).
  std::sort(times.begin(), times.end(), [](const CensoredTime& a, const CensoredTime& b) {
    return a.time < b.time || (a.time == b.time && a.reached && !b.reached);
  });
  double waiting = 1, at_half = NAN;  // at_half: where the share waiting reached exactly 1/2
  size_t at_risk = times.size();
  for (size_t i = 0; i < times.size();) {
    size_t events = 0, j = i;
    for (; j < times.size() && times[j].time == times[i].time; j++) events += times[j].reached;
    if (events > 0) {
      waiting *= 1 - (double)events / at_risk;
      // Below 1/2: here, or midway from where it sat at exactly 1/2 (the ordinary median of an
      // even count when nothing is censored).
      if (waiting < 0.5 - 1e-12)
        return std::isnan(at_half) ? times[i].time : 0.5 * (at_half + times[i].time);
      if (std::fabs(waiting - 0.5) <= 1e-12) at_half = times[i].time;
    }
    at_risk -= j - i;
    i = j;
  }
  return NAN;  // never below 1/2: half or more never got there, or the rest were censored
}

double mcnemar_exact_p(int b, int c) {
  if (b + c == 0) return 1.0;
  return std::min(1.0, 2 * bm::cdf(bm::binomial(b + c, 0.5), std::min(b, c)));
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
