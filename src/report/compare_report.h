// The report of a comparison (xsa compare): report.md, report.json and the plots (validation
// curves with their seed spread, the difference to SA, the similarity bias per layer), and the
// JSON form of each arm's result that the seed files of an interrupted comparison keep.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "xsa/analysis/similarity_bias.h"
#include "xsa/model/model_config.h"
#include "xsa/options/run_config.h"
#include "xsa/report/equal_loss.h"
#include "xsa/util/sequential.h"
#include "xsa/util/stats.h"

namespace xsa {

struct ArmResult {
  std::string variant;
  uint64_t seed = 0;
  double train_loss = 0;  // mean of the last 10 % of steps
  // The final score, the primary measure: the final weights' mean loss over every window of the
  // validation split (an even sample of whole windows past --score-tokens); NaN: diverged.
  double val_loss = 0;
  std::vector<double> eval_losses;     // the same of each --eval-data set
  std::vector<int64_t> scored_tokens;  // tokens scored: the validation split, then each eval set
  // Timing from the steps' own times, so that a pause or a neighbour cannot move it: every step's
  // ms (its batch read included), their median, the tokens per second at that median, and the
  // steps slower than kSlowStep times the median (counted, reported, not used).
  std::vector<double> step_ms;
  double ms_per_step = 0, tokens_per_s = 0, peak_mb = 0;
  int slow_steps = 0;
  // The evenly drawn validation windows (--val-batches) at every --val-every: the curves, the
  // equal-loss view and the settledness of each difference read these.
  std::vector<std::pair<int64_t, double>> val_curve, train_curve;
  // The arm's own training time at each point of val_curve: step × ms_per_step, seconds.
  std::vector<double> val_seconds;
  // Fingerprints proving the twins are twins: of the initial weights and of every batch seen.
  uint64_t init_hash = 0, batches_hash = 0;
  double lr = 0;  // the arm's peak learning rate
  // A tuning arm whose loss or gradient became NaN or infinite stops there (its validation loss
  // is then NaN): the step it happened at, 0 if it never did.
  int64_t diverged_at = 0;
  // Loss by position: per set (the validation set, then each --eval-data set), the mean loss of
  // each bucket of positions in the window (position_buckets(T)) with the final weights.
  std::vector<std::vector<double>> position_loss;
};

// One arm against another of the same seeds: the difference of their validation losses, paired
// by seed, and the ratio of their step times.
struct PairedDelta {
  std::string reference;                 // empty: no such pair in this comparison
  double mean = 0, sd = 0, p_value = 0;  // NaN where undefined
  double ci_low = NAN, ci_high = NAN;    // the 95 % t-interval of the mean
  double reference_sd = 0;               // the reference's own seed-to-seed sd
  double time_ratio = 0;                 // ms per step / the reference's
};

// Whether a difference to SA has stopped moving by the end of the run (Settledness, below).
enum class Settled { not_judged, settled, moving };
inline constexpr int kSettledPoints = 3;  // validation points the last quarter needs to be judged
const char* to_string(Settled s);

// What a difference's 95 % interval rules out: a gain (lower loss than SA) above `gain_above` and a
// loss above `loss_above`, both ≥ 0 (0: any gain, or any loss, is ruled out); NaN without an
// interval.
struct RulesOut {
  double gain_above = NAN, loss_above = NAN;
};
RulesOut rules_out(const PairedDifferences& d);

// One seed's final score of a variant, and its difference to the baseline's arm of that seed.
struct SeedFigure {
  uint64_t seed = 0;
  double val_loss = NAN, delta = NAN;
};

// One validation point of a variant's curves over the seeds: the step, the mean (and sd) of its
// validation loss, of its difference to the baseline, and of its arms' training time there.
struct CurveStat {
  int64_t step = 0;
  double mean = NAN, sd = NAN, delta_mean = NAN, delta_sd = NAN, seconds_mean = NAN;
};

struct VariantSummary {
  std::string variant;
  int n_seeds = 0;
  double lr = 0;  // its peak learning rate (its own, after --tune-lr)
  double train_loss_mean = 0, val_loss_mean = 0, val_loss_sd = 0;
  double ms_per_step_mean = NAN, tokens_per_s_mean = NAN;  // its arms' medians, averaged
  std::vector<SeedFigure> per_seed;
  std::vector<CurveStat> curve;  // at every validation point of its first seed's curve
  double delta_vs_sa_mean = 0, delta_vs_sa_sd = 0, p_value = 0;  // NaN where undefined
  // The same differences to SA, paired by seed: the 95 % t-interval, d_z, and the t, Wilcoxon and
  // sign tests' p; p_value Holm-corrected across the comparison's variants.
  PairedDifferences delta;
  double p_holm = NAN;
  std::vector<double> eval_loss_mean, eval_delta_vs_sa_mean;
  std::vector<PairedDifferences> eval_delta;  // per --eval-data set, vs SA
  // Loss by position, per set (validation, then each --eval-data set) and bucket: the mean over
  // seeds, and the difference to SA paired by seed.
  std::vector<std::vector<double>> position_loss_mean;
  std::vector<std::vector<PairedDifferences>> position_delta;
  // Per set, with 3 or more buckets: the context contrast, per seed (the last bucket's loss minus
  // that of positions 1–64) minus the same of SA, paired by seed; below 0: the variant gains more
  // late in the window than early, as better use of context would.
  std::vector<PairedDifferences> context_contrast;
  // --seeds auto: the group-sequential test's last look at this variant (answer, p, level).
  SequentialLook sequential;
  double overhead_vs_sa = 0;  // median over interleaved steps of ms / ms(SA) − 1
  EqualLoss equal_loss;       // to SA's final loss, and at SA's wall-clock (not for SA itself)
  // The seeds a paired t-test needs to find the observed difference to SA at p < 0.05 with 80 %
  // power, were it the true one (seeds_for_power); 0 with fewer than 2 seeds or no spread.
  int seeds_for_power = 0;
  std::string seeds_answer;  // --seeds auto: the sequential test's answer (to_string)
  RulesOut rules_out;        // of delta's interval
  // Settledness, the rule fixed in docs/comparing.md: per seed, the least-squares slope of Δ vs SA
  // over the validation points in the run's last quarter (steps ≥ 3/4 of --steps; at least 3
  // points, else not judged), times a quarter of the run: the change of Δ it implies over the last
  // quarter. Over the seeds, its mean with the 95 % t-interval (drift). Moving when that interval
  // excludes 0: the verdict then says "still moving" and calls no difference.
  PairedDifferences drift;
  int drift_points = 0;                 // validation points in the last quarter
  std::vector<CurveStat> last_quarter;  // the curve's points there (their mean Δ)
  Settled settled = Settled::not_judged;
  int slow_steps = 0;  // steps over kSlowStep times their arm's median, over the seeds
  std::string verdict;
  // For an arm in another precision (xsa@bf16): against its twin in the run's precision (xsa).
  // For an arm in another precision or at its own rate (xsa@bf16, xsa@4e-3): against the
  // baseline's model in the same precision and at the same rate (sa@bf16, sa@4e-3), where both
  // are in the comparison.
  PairedDelta vs_twin, vs_precision_sa;
  // The similarity bias: mean cos(y_i, v_i) over every layer and head, from the first seed's arm
  // (NaN where the report has no analysis).
  double cos_yv_mean = NAN;
};

// --tune-lr: each variant trained at each candidate learning rate on the tuning seeds, and the rate
// chosen for it (the lowest mean validation loss over the tuning seeds; a rate that diverged in any
// seed is never chosen).
// A rate chosen at the edge of --tune-lr's grid extends the grid by one step (the ratio of the
// two rates next to that edge) in its direction, until every choice is inside, at most this many
// times per direction.
inline constexpr int kMaxGridExtensions = 3;
struct LrTuning {
  std::vector<double> grid;                // the rates asked for (--tune-lr)
  std::vector<double> lrs;                 // the rates run, rising: the grid and its extensions
  int extended_down = 0, extended_up = 0;  // rates added below and above the grid
  std::vector<uint64_t> seeds;
  std::vector<std::vector<double>>
      val_loss;  // [variant][lr]: mean over the tuning seeds (NaN: diverged)
  std::vector<std::vector<int>> diverged;  // [variant][lr]: tuning seeds that diverged
  std::vector<std::vector<std::vector<double>>>
      seed_val_loss;           // [variant][lr][tuning seed] (NaN: diverged, or the rate not run)
  std::vector<double> chosen;  // per variant
  // How sure each choice is (measure_tuning_margins): per variant, the runner-up (the rate with
  // the next lowest mean loss that never diverged; NaN when there is none) and its loss minus the
  // chosen rate's, paired by tuning seed (one seed: a mean and no interval).
  std::vector<double> runner_up;
  std::vector<PairedDifferences> margin;
  std::string folder;  // the tuning comparisons: <folder>/lr-<lr>/
  bool empty() const { return lrs.empty(); }
};

// Variant k's margin over its runner-up in words, for the console and the report:
// " (ahead of 0.004 by 0.0123 [-0.0041, +0.0287] over 3 tuning seeds: not told apart)"; empty
// without a runner-up.
std::string tuning_margin_text(const LrTuning& t, size_t k);

struct CompareResult {
  std::vector<ArmResult> arms;
  std::vector<VariantSummary> summary;
  nlohmann::json report;  // report.json's contents, once written (null before)
  // Where the baseline's arms end, mean over seeds: their steps and training seconds.
  double baseline_end_step = NAN, baseline_end_seconds = NAN;
  std::string report_dir;
  double val_bytes_per_token = NAN;  // of the validation windows (CompareReport's)
  LrTuning tuning;                   // --tune-lr's, when it ran
};

// What a report shows besides the results.
struct CompareReport {
  std::vector<std::string> variants;  // names, SA first
  std::vector<std::string> eval_data;
  ModelConfig model;  // the shape (attention per variant)
  RunConfig run;
  int seeds = 1;
  std::vector<std::vector<HeadBias>> bias;  // per variant, from the first seed; empty: none
  std::vector<double> peak_mb;              // per variant
  double validation_share = 0;         // of the comparison's wall-clock spent validating (all arms)
  std::string seeds_note;              // --seeds auto: how many seeds ran, and why it stopped there
  std::vector<int64_t> parameters;     // per variant (XSA's rivals add theirs: docs/SPEC.md §8)
  std::vector<LayerAttention> rivals;  // per variant: the options some layer has
  // Of the validation set (RunInputs::val_bytes_per_token): val loss / ln 2 / this is the bits
  // per byte that compare runs of different vocabularies. NaN: not known (no column).
  double val_bytes_per_token = NAN;
  std::optional<SequentialDesign> design;  // --seeds auto's
  LrTuning tuning;                         // --tune-lr's (empty: one rate for every arm)
  bool plots = true;  // the charts (a tuning comparison's report has none: its rate is its result)
  int64_t score_tokens = 0;         // --score-tokens (0: every window)
  std::vector<bool> score_sampled;  // per set (validation, then --eval-data): larger than it
};

// The paragraph on the variants' parameter counts and on twins that do not start as SA's function
// (gated-attn's gate, value-residual's λ); empty when every variant has SA's count and start.
std::string parameters_note(const CompareReport& r);

nlohmann::json arm_to_json(const ArmResult& arm);
ArmResult arm_from_json(const nlohmann::json& j);  // throws nlohmann::json::exception

// A step this many times the arm's median step is counted as slow (a pause, a neighbour).
inline constexpr double kSlowStep = 3;
// ms_per_step, tokens_per_s, slow_steps and val_seconds from step_ms (tokens: a step's).
void set_robust_timing(ArmResult& arm, int64_t step_tokens);

// An arm's validation curve with its training time (equal_loss.h).
std::vector<CurvePoint> curve_of(const ArmResult& arm);

// The results of one variant, seed by seed.
std::vector<const ArmResult*> arms_of(const CompareResult& result, const std::string& variant);

// The paragraph after report.md's table (and after the table `compare` prints): how the timing
// columns are measured, since their ratio need not equal the overhead column.
inline constexpr const char* kTimingNote =
    "\nrules out: the gain (a loss below SA's) and the loss beyond which the 95 % interval "
    "excludes "
    "the difference. ms/step and tokens/s: each arm's median step, averaged over seeds. overhead "
    "vs SA: the median over interleaved steps of the arm's step time over SA's, minus 1; it "
    "cancels the machine's drift, which the ratio of the ms/step column keeps. No timing figure "
    "sums wall-clock: a pause or a neighbour moves none of them.\n";
// ---- The report: a list of fields (report_json.cpp), of sections (report_markdown.cpp) and of
// charts (report_plots.cpp) ----

// Where a summary field goes: report.json's summary records, sweep.json's rows.
enum SummaryWhere : unsigned { kInReport = 1, kInSweep = 2 };
// A field of a variant's summary: its JSON name, its unit, how it is computed, where it goes.
struct SummaryFieldInfo {
  const char* name;
  const char* unit;
  const char* how;
  unsigned where;
};
std::vector<SummaryFieldInfo> summary_fields();
// One variant's record of the fields that go `where` (baseline: the first variant; bytes per
// token: for bits per byte).
nlohmann::json summary_record(const VariantSummary& s, bool baseline, double bytes_per_token,
                              const std::optional<SequentialDesign>& design, unsigned where);
// report.json, whole (its "fields" list the summary records' names, units and how).
nlohmann::json compare_report_json(const CompareReport& r, const CompareResult& result);
// report.md: every section in turn, over the charts' files.
std::string compare_report_markdown(const CompareReport& r, const CompareResult& result,
                                    const std::vector<std::string>& plots);
// The charts (SVG, and PNG where rsvg-convert is), their files in report.md's order.
std::vector<std::string> write_compare_plots(const std::filesystem::path& out,
                                             const CompareReport& r, const CompareResult& result);

// Writes the charts, report.md and report.json into `out`; returns the text and the JSON (what
// report.html shows is built from these, not read back).
struct WrittenReport {
  std::string markdown;
  nlohmann::json json;
};
WrittenReport write_compare_report(const std::filesystem::path& out, const CompareReport& r,
                                   const CompareResult& result);
// A comparison as xsa board's page shows it (board/runs_index.h's comparison_json, from memory:
// each seed's curves and report.json), for report.html.
nlohmann::json comparison_page_json(const std::string& id, const CompareResult& result);

}  // namespace xsa
