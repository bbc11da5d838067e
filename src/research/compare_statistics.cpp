// The statistics of a comparison: each variant against SA paired by seed, and --seeds auto's
// group-sequential looks.
#include <algorithm>
#include <cmath>
#include <optional>

#include "xsa/research/compare_parts.h"
#include "xsa/util/error.h"
#include "xsa/util/fmt.h"
#include "xsa/util/stats.h"

namespace xsa {
namespace comparison {

namespace {

// Arm `name` against arm `reference`, paired by seed; an empty result when either is missing.
PairedDelta paired_delta(const CompareResult& result, const std::string& name,
                         const std::string& reference) {
  PairedDelta d;
  const auto mine = arms_of(result, name), theirs = arms_of(result, reference);
  if (mine.empty() || mine.size() != theirs.size()) return d;
  std::vector<double> delta, ref_val, ms, ref_ms;
  for (size_t i = 0; i < mine.size(); i++) {
    delta.push_back(mine[i]->val_loss - theirs[i]->val_loss);
    ref_val.push_back(theirs[i]->val_loss);
    ms.push_back(mine[i]->ms_per_step), ref_ms.push_back(theirs[i]->ms_per_step);
  }
  d.reference = reference;
  const PairedDifferences described = describe_paired(delta);
  d.mean = described.mean, d.sd = sample_sd(delta), d.p_value = paired_t_test_p(delta);
  d.ci_low = described.ci_low, d.ci_high = described.ci_high;
  d.reference_sd = sample_sd(ref_val);
  d.time_ratio = mean(ms) / mean(ref_ms);
  return d;
}

}  // namespace

std::vector<size_t> rates_by_loss(const LrTuning& t, size_t k) {
  std::vector<size_t> ranked;
  for (size_t i = 0; i < t.lrs.size(); i++)
    if (std::isfinite(t.val_loss[k][i])) ranked.push_back(i);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [&](size_t a, size_t b) { return t.val_loss[k][a] < t.val_loss[k][b]; });
  return ranked;
}

void measure_tuning_margins(LrTuning& t) {
  const size_t V = t.chosen.size();
  t.runner_up.assign(V, NAN), t.margin.assign(V, PairedDifferences{});
  for (size_t k = 0; k < V; k++) {
    const std::vector<size_t> ranked = rates_by_loss(t, k);
    if (ranked.size() < 2) continue;
    const size_t chosen = ranked[0], second = ranked[1];
    t.runner_up[k] = t.lrs[second];
    std::vector<double> d;  // the runner-up's loss minus the chosen one's, seed by seed
    for (size_t j = 0; j < t.seeds.size(); j++)
      d.push_back(t.seed_val_loss[k][second][j] - t.seed_val_loss[k][chosen][j]);
    t.margin[k] = describe_paired(d);
  }
}

namespace {

// Each seed's validation loss of `variant` minus the baseline's.
std::vector<double> deltas_vs_baseline(const CompareResult& result, const std::string& variant,
                                       const std::string& baseline) {
  const auto mine = arms_of(result, variant), sa = arms_of(result, baseline);
  std::vector<double> d;
  for (size_t i = 0; i < mine.size() && i < sa.size(); i++)
    d.push_back(mine[i]->val_loss - sa[i]->val_loss);
  return d;
}

// Loss by position's buckets (1–16, 17–64, 65–256, ...): the last bucket's loss minus that of
// positions 1–64 (each position weighs alike: a scored window has one token at each).
double late_minus_early(const std::vector<double>& buckets) {
  return buckets.back() - (16 * buckets[0] + 48 * buckets[1]) / 64;
}

// The least-squares slope of y over x; NaN with fewer than two distinct x or a NaN y.
double slope(const std::vector<double>& x, const std::vector<double>& y) {
  const double mx = mean(x), my = mean(y);
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < x.size(); i++)
    sxy += (x[i] - mx) * (y[i] - my), sxx += (x[i] - mx) * (x[i] - mx);
  return sxx > 0 ? sxy / sxx : NAN;
}

// The variant's curves over the seeds, point by point (CurveStat): the mean and sd of its
// validation loss, of its difference to the baseline's arm of the same seed, and its training
// time, at each point every seed's arm has.
std::vector<CurveStat> curve_stats(const std::vector<const ArmResult*>& mine,
                                   const std::vector<const ArmResult*>& sa) {
  std::vector<CurveStat> out;
  if (mine.empty()) return out;
  for (size_t p = 0; p < mine[0]->val_curve.size(); p++) {
    std::vector<double> loss, delta, seconds;
    for (size_t i = 0; i < mine.size(); i++) {
      if (p >= mine[i]->val_curve.size()) continue;
      loss.push_back(mine[i]->val_curve[p].second);
      if (i < sa.size() && p < sa[i]->val_curve.size())
        delta.push_back(mine[i]->val_curve[p].second - sa[i]->val_curve[p].second);
      if (p < mine[i]->val_seconds.size()) seconds.push_back(mine[i]->val_seconds[p]);
    }
    CurveStat c;
    c.step = mine[0]->val_curve[p].first;
    c.mean = mean(loss), c.sd = loss.size() > 1 ? sample_sd(loss) : NAN;
    c.delta_mean = mean(delta), c.delta_sd = delta.size() > 1 ? sample_sd(delta) : NAN;
    c.seconds_mean = mean(seconds);
    out.push_back(c);
  }
  return out;
}

// Settledness (VariantSummary::drift): per seed, Δ's slope over the last quarter's validation
// points times a quarter of the run; their mean and interval over the seeds.
void judge_settledness(const std::vector<const ArmResult*>& mine,
                       const std::vector<const ArmResult*>& sa, int64_t steps, VariantSummary& sm) {
  const double from = (double)steps - (double)steps / 4;
  std::vector<double> drifts;
  for (size_t i = 0; i < mine.size() && i < sa.size(); i++) {
    std::vector<double> x, y;
    const auto &a = mine[i]->val_curve, &b = sa[i]->val_curve;
    for (size_t p = 0; p < a.size() && p < b.size(); p++)
      if (a[p].first >= from)
        x.push_back((double)a[p].first), y.push_back(a[p].second - b[p].second);
    sm.drift_points = (int)x.size();
    drifts.push_back(slope(x, y) * (double)steps / 4);
  }
  sm.drift = describe_paired(drifts);
  for (const CurveStat& c : sm.curve)
    if ((double)c.step >= from) sm.last_quarter.push_back(c);
  if (sm.drift_points < kSettledPoints || drifts.size() < 2 || !std::isfinite(sm.drift.ci_low))
    sm.settled = Settled::not_judged;
  else
    sm.settled = sm.drift.ci_low > 0 || sm.drift.ci_high < 0 ? Settled::moving : Settled::settled;
}

// The variant among `variants` with this model, precision and rate; nullptr when there is none.
const Variant* find_variant(const std::vector<Variant>& variants, const std::string& model_name,
                            std::optional<Precision> precision, std::optional<double> lr) {
  for (const Variant& v : variants)
    if (v.model_name == model_name && v.precision == precision && v.lr == lr) return &v;
  return nullptr;
}

}  // namespace

// --seeds auto after `done` seeds: the note for the report once it stops (seeds_stop_here), else
// empty.
std::string auto_seeds_verdict(const CompareConfig& cfg, const SequentialDesign& design,
                               const CompareResult& result, int done,
                               std::vector<SequentialLook>& looks) {
  std::vector<std::vector<double>> deltas(cfg.variants.size());
  for (size_t k = 1; k < cfg.variants.size(); k++)
    deltas[k] = deltas_vs_baseline(result, cfg.variants[k], cfg.variants[0]);
  if (!seeds_stop_here(design, deltas, done, looks)) return "";
  std::string answers;
  for (size_t k = 1; k < cfg.variants.size(); k++)
    answers +=
        fmt::format("{}{}: {}", k > 1 ? ", " : "", cfg.variants[k], to_string(looks[k].answer));
  return fmt::format("--seeds auto (at most {}): stopped after {} seeds ({})", cfg.seeds, done,
                     answers);
}

namespace {

// Loss by position: per set and bucket, over the seeds whose arms have it, and (for a variant
// other than the baseline) the context contrast.
void position_stats(const std::vector<const ArmResult*>& mine,
                    const std::vector<const ArmResult*>& sa_arms, size_t k, VariantSummary& sm) {
  const size_t sets = mine.empty() ? 0 : mine[0]->position_loss.size();
  for (size_t set = 0; set < sets; set++) {
    const size_t buckets = mine[0]->position_loss[set].size();
    std::vector<double> means;
    std::vector<PairedDifferences> deltas;
    for (size_t b = 0; b < buckets; b++) {
      std::vector<double> loss, d;
      for (size_t i = 0; i < mine.size(); i++) {
        const auto &mp = mine[i]->position_loss, &sp = sa_arms[i]->position_loss;
        if (set >= mp.size() || set >= sp.size() || b >= mp[set].size() || b >= sp[set].size())
          continue;
        loss.push_back(mp[set][b]), d.push_back(mp[set][b] - sp[set][b]);
      }
      means.push_back(mean(loss)), deltas.push_back(describe_paired(d));
    }
    sm.position_loss_mean.push_back(means), sm.position_delta.push_back(deltas);
    // The context contrast: per seed, (last bucket − positions 1–64) of the variant minus the
    // same of the baseline; below 0 where the variant gains more late in the window.
    if (buckets >= 3 && k > 0) {
      std::vector<double> c;
      for (size_t i = 0; i < mine.size(); i++) {
        const auto &mp = mine[i]->position_loss, &sp = sa_arms[i]->position_loss;
        if (set >= sp.size() || mp[set].size() != buckets || sp[set].size() != buckets) continue;
        c.push_back(late_minus_early(mp[set]) - late_minus_early(sp[set]));
      }
      sm.context_contrast.push_back(describe_paired(c));
    }
  }
}

// Holm across the variants tested against SA; the verdict is the corrected test's, or with
// --seeds auto the sequential test's; either calls no difference while Δ is still moving.
void give_verdicts(std::vector<VariantSummary>& out, const CompareConfig& cfg) {
  std::vector<double> raw;
  for (size_t k = 1; k < out.size(); k++) raw.push_back(out[k].p_value);
  const std::vector<double> holm = holm_adjusted(raw);
  for (size_t k = 1; k < out.size(); k++) {
    VariantSummary& sm = out[k];
    sm.p_holm = holm[k - 1];
    const char* direction = sm.delta_vs_sa_mean < 0 ? "lower" : "higher";
    if (sm.n_seeds < 2)
      sm.verdict = "one seed: no spread to judge a difference";
    else if (!std::isfinite(sm.delta_vs_sa_mean))
      sm.verdict = "no figure: an arm diverged";
    else if (sm.settled == Settled::moving)
      sm.verdict = fmt::format(
          "still moving (Δ {:+.4f} [{:+.4f}, {:+.4f}] over the last quarter): train longer",
          sm.drift.mean, sm.drift.ci_low, sm.drift.ci_high);
    else if (cfg.seeds_auto)
      sm.verdict = sm.sequential.answer == SequentialAnswer::differs
                       ? fmt::format("{} val loss than SA (sequential test)", direction)
                       : "no difference found by the sequential test";
    else if (sm.p_holm < 0.05)
      sm.verdict =
          fmt::format("{} val loss than SA ({}p < 0.05)", direction, out.size() > 2 ? "Holm " : "");
    else
      sm.verdict = "no difference beyond the seed-to-seed spread";
  }
}

}  // namespace

// Differences to SA paired by seed: intervals, effect sizes and tests, Holm across the variants;
// a verdict that never calls a single seed a win.
void summarize(CompareResult& result, const Setup& s, const CompareConfig& cfg,
               const std::vector<std::vector<double>>& overhead,
               const std::vector<SequentialLook>& looks) {
  std::vector<VariantSummary> out;
  const std::string& baseline = s.variants[0].name;
  const auto sa_arms = arms_of(result, baseline);
  for (size_t k = 0; k < s.variants.size(); k++) {
    VariantSummary sm;
    sm.variant = s.variants[k].name;
    sm.lr = cfg.variant_lrs.empty() ? cfg.run.tuned_rate() : cfg.variant_lrs[k];
    const auto mine = arms_of(result, sm.variant);
    std::vector<double> val, train, delta, ms, tokens;
    for (size_t i = 0; i < mine.size(); i++) {
      val.push_back(mine[i]->val_loss), train.push_back(mine[i]->train_loss);
      delta.push_back(mine[i]->val_loss - sa_arms[i]->val_loss);
      ms.push_back(mine[i]->ms_per_step), tokens.push_back(mine[i]->tokens_per_s);
      sm.per_seed.push_back({mine[i]->seed, mine[i]->val_loss, delta.back()});
      sm.slow_steps += mine[i]->slow_steps;
    }
    sm.ms_per_step_mean = mean(ms), sm.tokens_per_s_mean = mean(tokens);
    sm.curve = curve_stats(mine, sa_arms);
    sm.n_seeds = (int)mine.size();
    sm.train_loss_mean = mean(train), sm.val_loss_mean = mean(val), sm.val_loss_sd = sample_sd(val);
    for (size_t e = 0; e < s.evals.size(); e++) {
      std::vector<double> el, ed;
      for (size_t i = 0; i < mine.size(); i++)
        el.push_back(mine[i]->eval_losses[e]),
            ed.push_back(mine[i]->eval_losses[e] - sa_arms[i]->eval_losses[e]);
      sm.eval_loss_mean.push_back(mean(el)), sm.eval_delta_vs_sa_mean.push_back(mean(ed));
      sm.eval_delta.push_back(describe_paired(ed));
    }
    position_stats(mine, sa_arms, k, sm);
    const Variant& v = s.variants[k];
    if (v.precision)  // its twin: the same model at the same rate in the run's precision
      if (const Variant* twin = find_variant(s.variants, v.model_name, std::nullopt, v.lr))
        sm.vs_twin = paired_delta(result, v.name, twin->name);
    if ((v.precision || v.lr) && k > 0)  // the baseline's model in the same setting
      if (const Variant* same =
              find_variant(s.variants, s.variants[0].model_name, v.precision, v.lr);
          same && same != &v && same != &s.variants[0])
        sm.vs_precision_sa = paired_delta(result, v.name, same->name);
    if (k == 0) {
      sm.p_value = NAN, sm.verdict = "baseline";
    } else {
      sm.delta = describe_paired(delta);
      sm.rules_out = rules_out(sm.delta);
      sm.delta_vs_sa_mean = sm.delta.mean, sm.delta_vs_sa_sd = sample_sd(delta),
      sm.p_value = paired_t_test_p(delta);
      sm.overhead_vs_sa = median(overhead[k]) - 1;
      std::vector<std::vector<CurvePoint>> sa_curves, curves;
      for (size_t i = 0; i < mine.size(); i++)
        sa_curves.push_back(curve_of(*sa_arms[i])), curves.push_back(curve_of(*mine[i]));
      sm.equal_loss = equal_loss(sa_curves, curves);
      judge_settledness(mine, sa_arms, cfg.run.steps, sm);
      const int needed = seeds_for_power(mean(delta), sample_sd(delta));
      sm.seeds_for_power = delta.size() >= 2 && sample_sd(delta) > 0 ? needed : 0;
      if (cfg.seeds_auto && k < looks.size()) {
        sm.sequential = looks[k];
        sm.seeds_answer = to_string(looks[k].answer);
      }
    }
    out.push_back(sm);
  }
  // Where the baseline's arms end (the equal-loss race's finish).
  std::vector<double> end_steps, end_seconds;
  for (const ArmResult* a : sa_arms) {
    const std::vector<CurvePoint> c = curve_of(*a);
    if (!c.empty()) end_steps.push_back(c.back().step), end_seconds.push_back(c.back().seconds);
  }
  result.baseline_end_step = mean(end_steps), result.baseline_end_seconds = mean(end_seconds);
  give_verdicts(out, cfg);
  result.summary = std::move(out);
}

}  // namespace comparison

SequentialDesign auto_seeds_design(int variants, int cap) {
  return group_sequential_design(looks_from(kFirstLook, cap), 0.05 / std::max(1, variants - 1));
}

bool seeds_stop_here(const SequentialDesign& design, const std::vector<std::vector<double>>& deltas,
                     int done, std::vector<SequentialLook>& looks) {
  looks.resize(deltas.size());
  if (std::find(design.looks.begin(), design.looks.end(), done) == design.looks.end()) return false;
  bool all_decided = true;  // every variant found to differ, or stopped for futility
  for (size_t k = 1; k < deltas.size(); k++) {
    if (looks[k].answer != SequentialAnswer::differs) looks[k] = sequential_look(design, deltas[k]);
    all_decided = all_decided && (looks[k].answer == SequentialAnswer::differs ||
                                  looks[k].answer == SequentialAnswer::futile);
  }
  return all_decided || done == design.looks.back();
}

}  // namespace xsa
