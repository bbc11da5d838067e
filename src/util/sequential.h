// A group-sequential paired t-test: the design behind `xsa compare --seeds auto`, which looks at
// the seeds' differences after each seed and may stop early without raising its false-positive rate
// above the α it states (testing at p < α after every seed would: optional stopping).
//
// The looks are fixed in advance: after seeds 3, 4, ..., cap. The α of the test is spent over them
// with Lan and DeMets's O'Brien–Fleming-type spending function
//     α(t) = 2 − 2 Φ(z_{1−α/2} / √t),   t = seeds so far / cap,
// so that early looks spend almost nothing and the last one nearly the whole α. The boundaries
// z_1..z_K follow from the joint normal law of the standardized sums at the looks (a random walk
// observed at n_1 < ... < n_K): z_k is the |Z| whose first crossing at look k has probability
// α(t_k) − α(t_{k−1}), found by numerical integration over the paths that crossed no earlier
// boundary (Armitage, McPherson and Rowe's recursion). The seeds' sd is estimated, so a look uses
// the paired t-test at the nominal level of its boundary, p ≤ 2 (1 − Φ(z_k)), with n_k − 1 degrees
// of freedom (the "significance level" approach of Jennison and Turnbull, ch. 11).
//
// Futility (non-binding: it only ever stops without a finding, so it cannot raise the
// false-positive rate): a look may stop when the conditional power under the current trend, the
// chance that the last look crosses its boundary if the mean difference per seed stayed what it
// is now, is below `futility_power`.
//
// Simulated with 10 000 comparisons per case (tests/sequential_test.cpp), the whole rule keeps its
// α for normal and heavy-tailed differences; docs/comparing.md gives its power.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xsa {

struct SequentialDesign {
  std::vector<int> looks;       // seeds at each look, rising
  double alpha = 0.05;          // two-sided, of this one test
  double futility_power = 0.1;  // 0: no futility stop
  // The α the boundaries spend (below alpha: calibrated, see group_sequential_design), and the
  // false-positive rate of the design without futility stops in the calibration's simulation.
  double spent_alpha = 0, simulated_alpha = 0;
  std::vector<double> spent;      // spent_alpha's share spent up to each look (cumulative)
  std::vector<double> z_bound;    // the boundary of each look on the z scale
  std::vector<double> nominal_p;  // a look finds a difference when the t-test's p ≤ this
};

// The calibration's simulation: comparisons without a difference, normal differences.
inline constexpr int kCalibrationPaths = 100000;
inline constexpr uint64_t kCalibrationSeed = 20260101;

// α spent by information fraction t ∈ (0, 1] (O'Brien–Fleming-type, Lan–DeMets).
double obrien_fleming_spent(double t, double alpha);
// The design with looks after each number of seeds in `looks` (rising, the first at least 2). The
// nominal levels of t-tests at the z boundaries let through slightly more than α when the first
// looks have few seeds (about 0.056 for looks after 3..10 seeds at α = 0.05, since each look's sd
// is estimated anew), so the α the boundaries spend is calibrated down until the false-positive
// rate of the whole design, over kCalibrationPaths simulated comparisons without a difference
// (normal differences, a fixed seed), is α.
// calibrate = false leaves the spent α at alpha (what the design would be without the calibration:
// the tests hold the calibrated one to a simulation that this one fails).
SequentialDesign group_sequential_design(const std::vector<int>& looks, double alpha,
                                         double futility_power = 0.1, bool calibrate = true);
// Looks after seeds first, first + 1, ..., cap.
std::vector<int> looks_from(int first, int cap);

enum class SequentialAnswer { continuing, differs, futile, no_difference };
const char* to_string(SequentialAnswer answer);

// What one variant's differences d (one per seed, as many as a look of the design: d.size() must
// be in design.looks) say at that look: differs when the paired t-test's p reaches the look's
// nominal level; futile when the conditional power under the current trend is below the design's
// threshold (not at the last look); no_difference at the last look without a finding; else
// continuing.
struct SequentialLook {
  SequentialAnswer answer = SequentialAnswer::continuing;
  int look = 0;                  // index into design.looks
  double p = 0, nominal_p = 0;   // the t-test's p and the level it is held to here
  double conditional_power = 0;  // under the current trend (NaN at the last look)
};
SequentialLook sequential_look(const SequentialDesign& design, const std::vector<double>& d);

// A sentence for reports: the looks, the spending, each look's nominal level.
std::string describe_design(const SequentialDesign& design);

}  // namespace xsa
