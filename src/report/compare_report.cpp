#include "xsa/report/compare_report.h"

#include <cmath>

#include "xsa/data/dataset.h"
#include "xsa/report/svg.h"
#include "xsa/tokenizer/tokenizer.h"
#include "xsa/util/files.h"
#include "xsa/util/fmt.h"
#include "xsa/util/stats.h"

namespace xsa {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json nan_to_null(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

json nan_to_null(const std::vector<double>& v) {
  json out = json::array();
  for (double x : v) out.push_back(nan_to_null(x));
  return out;
}

json nan_to_null(const std::vector<std::vector<double>>& v) {
  json out = json::array();
  for (const auto& x : v) out.push_back(nan_to_null(x));
  return out;
}

}  // namespace

json arm_to_json(const ArmResult& a) {
  json curve = json::array(), evals = json::array();
  for (auto& [st, v] : a.val_curve)
    curve.push_back({st, std::isfinite(v) ? json(v) : json(nullptr)});
  for (double v : a.eval_losses) evals.push_back(std::isfinite(v) ? json(v) : json(nullptr));
  return {{"variant", a.variant},
          {"seed", a.seed},
          {"train_loss", nan_to_null(a.train_loss)},
          {"val_loss", std::isfinite(a.val_loss) ? json(a.val_loss) : json(nullptr)},
          {"eval_losses", evals},
          {"scored_tokens", a.scored_tokens},
          {"ms_per_step", nan_to_null(a.ms_per_step)},
          {"tokens_per_s", nan_to_null(a.tokens_per_s)},
          {"slow_steps", a.slow_steps},
          {"step_ms", a.step_ms},
          {"peak_mb", nan_to_null(a.peak_mb)},
          {"val_curve", curve},
          {"val_seconds", a.val_seconds},
          {"init_hash", fmt::format("{:016x}", a.init_hash)},
          {"batches_hash", fmt::format("{:016x}", a.batches_hash)},
          {"lr", a.lr},
          {"diverged_at", a.diverged_at},
          {"position_loss", nan_to_null(a.position_loss)}};
}

ArmResult arm_from_json(const json& j) {
  auto num = [](const json& v) { return v.is_null() ? NAN : v.get<double>(); };
  ArmResult a;
  a.variant = j.at("variant"), a.seed = j.at("seed");
  a.train_loss = num(j.at("train_loss")), a.val_loss = num(j.at("val_loss"));
  for (const auto& v : j.at("eval_losses")) a.eval_losses.push_back(num(v));
  a.ms_per_step = num(j.at("ms_per_step")), a.tokens_per_s = num(j.at("tokens_per_s")),
  a.peak_mb = num(j.at("peak_mb"));
  a.slow_steps = j.value("slow_steps", 0);
  if (j.contains("step_ms")) a.step_ms = j.at("step_ms").get<std::vector<double>>();
  if (j.contains("scored_tokens"))
    a.scored_tokens = j.at("scored_tokens").get<std::vector<int64_t>>();
  for (const auto& p : j.at("val_curve")) a.val_curve.push_back({p[0].get<int64_t>(), num(p[1])});
  if (j.contains("val_seconds")) a.val_seconds = j.at("val_seconds").get<std::vector<double>>();
  a.init_hash = std::stoull(j.at("init_hash").get<std::string>(), nullptr, 16);
  a.batches_hash = std::stoull(j.at("batches_hash").get<std::string>(), nullptr, 16);
  a.lr = j.value("lr", 0.0);
  a.diverged_at = j.value("diverged_at", (int64_t)0);
  if (j.contains("position_loss"))
    for (const auto& set : j.at("position_loss")) {
      a.position_loss.emplace_back();
      for (const auto& v : set) a.position_loss.back().push_back(num(v));
    }
  return a;
}

void set_robust_timing(ArmResult& a, int64_t step_tokens) {
  a.ms_per_step = median(a.step_ms);
  a.tokens_per_s = step_tokens / (a.ms_per_step / 1000);
  a.slow_steps = 0;
  for (double ms : a.step_ms) a.slow_steps += ms > kSlowStep * a.ms_per_step;
  a.val_seconds.clear();
  for (const auto& point : a.val_curve) a.val_seconds.push_back(point.first * a.ms_per_step / 1000);
}

std::vector<CurvePoint> curve_of(const ArmResult& arm) {
  std::vector<CurvePoint> curve;
  const bool timed = arm.val_seconds.size() == arm.val_curve.size();
  for (size_t i = 0; i < arm.val_curve.size(); i++) {
    const auto& [step, loss] = arm.val_curve[i];
    curve.push_back(
        {(double)step, timed ? arm.val_seconds[i] : step * arm.ms_per_step / 1000, loss});
  }
  return curve;
}

std::vector<const ArmResult*> arms_of(const CompareResult& result, const std::string& variant) {
  std::vector<const ArmResult*> r;
  for (const ArmResult& a : result.arms)
    if (a.variant == variant) r.push_back(&a);
  return r;
}

const char* to_string(Settled s) {
  switch (s) {
    case Settled::settled:
      return "settled";
    case Settled::moving:
      return "still moving";
    default:
      return "not judged";
  }
}

RulesOut rules_out(const PairedDifferences& d) {
  RulesOut r;
  if (!std::isfinite(d.ci_low) || !std::isfinite(d.ci_high)) return r;
  r.gain_above = std::max(0.0, -d.ci_low), r.loss_above = std::max(0.0, d.ci_high);
  return r;
}

namespace {

// The baseline every variant is compared with: the first variant, however it is spelled.
const std::string& baseline_of(const CompareResult& result) {
  return result.summary.at(0).variant;
}

// A mean validation loss (nats per token) in bits per byte; NaN when the bytes are not known.
double val_bpb(const CompareReport& r, double val_loss) {
  return bits_per_byte(val_loss, r.val_bytes_per_token);
}

std::string fmt_or_dash(const char* f, double v) {
  return std::isfinite(v) ? fmt::vformat(f, fmt::make_format_args(v)) : "–";
}

// "every window (435 200 tokens)" or "an even sample of whole windows (524 288 tokens)".
std::string score_extent(const CompareReport& r, size_t set, int64_t scored) {
  const bool sampled = set < r.score_sampled.size() && r.score_sampled[set];
  return fmt::format("{} ({} tokens{})",
                     sampled ? "an even sample of whole windows" : "every window", scored,
                     sampled ? fmt::format(", --score-tokens {}", r.score_tokens) : "");
}

// "gain > 0.0230, loss > 0.0120": what a difference's 95 % interval rules out.
std::string rules_out_text(const RulesOut& r) {
  if (!std::isfinite(r.gain_above)) return "–";
  const auto part = [](const char* what, double above) {
    return above > 0 ? fmt::format("{} > {:.4f}", what, above) : fmt::format("any {}", what);
  };
  return part("gain", r.gain_above) + ", " + part("loss", r.loss_above);
}

// "+0.0123 [−0.0040, +0.0286]": a mean difference and its 95 % interval.
std::string with_interval(const PairedDifferences& d, const char* f = "{:+.4f}") {
  if (!std::isfinite(d.mean)) return "–";
  std::string s = fmt::vformat(f, fmt::make_format_args(d.mean));
  if (std::isfinite(d.ci_low))
    s += " [" + fmt::vformat(f, fmt::make_format_args(d.ci_low)) + ", " +
         fmt::vformat(f, fmt::make_format_args(d.ci_high)) + "]";
  return s;
}

// The same in bits per byte (a difference of losses scales like the losses).
PairedDifferences in_bits_per_byte(const CompareReport& r, PairedDifferences d) {
  for (double* x : {&d.mean, &d.sd, &d.ci_low, &d.ci_high}) *x = val_bpb(r, *x);
  return d;
}

json paired_to_json(const PairedDelta& d) {
  if (d.reference.empty()) return nullptr;
  return {{"against", d.reference},
          {"delta_mean", nan_to_null(d.mean)},
          {"delta_sd", nan_to_null(d.sd)},
          {"p_value", nan_to_null(d.p_value)},
          {"ci95", {nan_to_null(d.ci_low), nan_to_null(d.ci_high)}},
          {"against_val_loss_sd", nan_to_null(d.reference_sd)},
          {"time_ratio", nan_to_null(d.time_ratio)}};
}

json differences_to_json(const PairedDifferences& d) {
  return {{"n", d.n},
          {"mean", nan_to_null(d.mean)},
          {"sd", nan_to_null(d.sd)},
          {"ci95", {nan_to_null(d.ci_low), nan_to_null(d.ci_high)}},
          {"d_z", nan_to_null(d.d_z)},
          {"p_t", nan_to_null(d.p_t)},
          {"p_wilcoxon", nan_to_null(d.p_wilcoxon)},
          {"p_sign", nan_to_null(d.p_sign)}};
}

json equal_loss_to_json(const EqualLoss& e) {
  json seeds = json::array();
  for (const SeedCrossing& s : e.per_seed)
    seeds.push_back({{"target", nan_to_null(s.target)},
                     {"reached", s.reached},
                     {"step", nan_to_null(s.step)},
                     {"seconds", nan_to_null(s.seconds)},
                     {"end_step", s.end_step},
                     {"end_seconds", s.end_seconds},
                     {"sa_step", s.sa_step},
                     {"sa_seconds", s.sa_seconds}});
  return {{"seeds", e.seeds},
          {"seeds_reached", e.reached},
          {"target", "each seed's SA final validation loss"},
          {"per_seed", seeds},
          {"median_steps", nan_to_null(e.median_steps)},
          {"median_seconds", nan_to_null(e.median_seconds)},
          {"step_speedup", nan_to_null(e.step_speedup)},
          {"time_speedup", nan_to_null(e.time_speedup)},
          {"median",
           "Kaplan-Meier over every seed, a seed that did not reach it censored at the "
           "end of its run"},
          {"mean_curve_steps", nan_to_null(e.mean_curve_steps)},
          {"mean_curve_seconds", nan_to_null(e.mean_curve_seconds)},
          {"mean_curve_step_speedup", nan_to_null(e.mean_curve_step_speedup)},
          {"mean_curve_time_speedup", nan_to_null(e.mean_curve_time_speedup)},
          {"val_loss_at_sa_time_mean", nan_to_null(e.loss_at_sa_time_mean)},
          {"val_loss_at_sa_time_sd", nan_to_null(e.loss_at_sa_time_sd)},
          {"delta_at_sa_time_mean", nan_to_null(e.delta_at_sa_time_mean)},
          {"delta_at_sa_time_sd", nan_to_null(e.delta_at_sa_time_sd)},
          {"delta_at_sa_time_ci95",
           {nan_to_null(e.delta_at_sa_time_ci_low), nan_to_null(e.delta_at_sa_time_ci_high)}},
          {"finished_before_sa_time", e.beyond_own_run}};
}

// The equal-loss view (equal_loss.h): how soon each variant reaches SA's final loss, counting its
// own cost per step, every seed counted; and where it stands when it has trained as long as SA.
std::string equal_loss_section(const CompareResult& result, const CompareReport& r) {
  std::vector<double> sa_steps, sa_seconds;
  for (const ArmResult* a : arms_of(result, baseline_of(result))) {
    const std::vector<CurvePoint> c = curve_of(*a);
    if (!c.empty()) sa_steps.push_back(c.back().step), sa_seconds.push_back(c.back().seconds);
  }
  if (result.summary.size() < 2 || sa_steps.empty()) return "";
  std::string md = fmt::format(
      "\n## Equal loss\n\nHow soon each variant reaches SA's final validation loss (each seed's "
      "own SA arm's; SA ends at step {:.0f} after {:.1f} s of its own training time, mean over "
      "seeds), counting each arm's own time per step, linear between validation points (every "
      "{} steps). Every seed counts: one that never gets there is censored at the end of its run, "
      "not dropped. *median*: Kaplan–Meier's median over the seeds of the steps and seconds to get "
      "there (– when half or more never do); *speed-up*: SA's steps or seconds over that median "
      "(above 1: sooner than SA); *mean curves*: where the variant's validation curve averaged "
      "over seeds reaches SA's final loss averaged over seeds, as a speed-up. *Δ at SA's time*: "
      "the variant's validation loss once it has trained as long as SA did, minus SA's final "
      "loss, with its 95 % interval over seeds. Validating took {:.1f} % of the comparison's "
      "wall-clock.\n\n| variant | reached | median steps | median seconds | speed-up, steps | "
      "speed-up, wall-clock | mean curves: speed-up, steps / wall-clock | Δ at SA's time [95 % "
      "CI] |\n|---|---|---|---|---|---|---|---|\n",
      mean(sa_steps), mean(sa_seconds), r.run.val_every, 100 * r.validation_share);
  for (const VariantSummary& s : result.summary) {
    if (s.variant == baseline_of(result)) continue;
    const EqualLoss& e = s.equal_loss;
    PairedDifferences at_time;
    at_time.mean = e.delta_at_sa_time_mean;
    at_time.ci_low = e.delta_at_sa_time_ci_low, at_time.ci_high = e.delta_at_sa_time_ci_high;
    md += fmt::format("| {} | {} of {} | {} | {} | {} | {} | {} / {} | {}{} |\n", s.variant,
                      e.reached, e.seeds, fmt_or_dash("{:.0f}", e.median_steps),
                      fmt_or_dash("{:.1f}", e.median_seconds),
                      fmt_or_dash("{:.3f}", e.step_speedup), fmt_or_dash("{:.3f}", e.time_speedup),
                      fmt_or_dash("{:.3f}", e.mean_curve_step_speedup),
                      fmt_or_dash("{:.3f}", e.mean_curve_time_speedup), with_interval(at_time),
                      e.beyond_own_run ? " (finished sooner: its final loss)" : "");
  }
  md += "\nPer seed (steps to SA's final loss, or where the run ended without it):\n\n| variant |";
  const size_t n = result.summary.size() > 1 ? result.summary[1].equal_loss.per_seed.size() : 0;
  const auto sa_arms = arms_of(result, baseline_of(result));
  for (size_t i = 0; i < n && i < sa_arms.size(); i++)
    md += fmt::format(" seed {} |", sa_arms[i]->seed);
  md += "\n|---|";
  for (size_t i = 0; i < n && i < sa_arms.size(); i++) md += "---|";
  md += "\n";
  for (const VariantSummary& s : result.summary) {
    if (s.variant == baseline_of(result)) continue;
    md += "| " + s.variant + " |";
    for (const SeedCrossing& x : s.equal_loss.per_seed)
      md += x.reached ? fmt::format(" {:.0f} ({:.1f} s) |", x.step, x.seconds)
                      : fmt::format(" not by {:.0f} |", x.end_step);
    md += "\n";
  }
  return md;
}

// How many seeds each difference takes, and --seeds auto's sequential test.
std::string seeds_section(const CompareResult& result, const CompareReport& r) {
  if (result.summary.size() < 2) return "";
  std::string md =
      "\n## Seeds\n\nHow many seeds it takes to see each difference: the difference to SA observed "
      "here (paired by seed) and the seeds a paired t-test needs to find a difference of that size "
      "and spread at p < 0.05 with 80 % power, were it the true one (noncentral t). Fewer seeds "
      "than that can miss a real difference; the observed spread of a few seeds is itself "
      "uncertain.";
  if (r.design)
    md += fmt::format(
        "\n\n--seeds auto: {}. Its α is {:.3g} per variant (Bonferroni over {} variant(s) against "
        "SA), so the chance of any false finding among them is at most 0.05.{}",
        describe_design(*r.design), r.design->alpha, result.summary.size() - 1,
        r.seeds_note.empty() ? "" : " " + r.seeds_note + ".");
  md += fmt::format(
      "\n\n| variant | Δ vs SA (mean) | sd of Δ over seeds | seeds run | seeds for 80 % power |{}\n"
      "|---|---|---|---|---|{}\n",
      r.design ? " sequential test: answer (look, p, level) |" : "", r.design ? "---|" : "");
  for (const VariantSummary& s : result.summary) {
    if (s.variant == baseline_of(result)) continue;
    const std::string needed = s.seeds_for_power == 0     ? "–"
                               : s.seeds_for_power > 1000 ? "more than 1000"
                                                          : std::to_string(s.seeds_for_power);
    std::string answer;
    if (r.design)
      answer = fmt::format(" {} (after {} seeds, p {}, level {:.3g}) |", s.seeds_answer,
                           r.design->looks[s.sequential.look],
                           fmt_or_dash("{:.3g}", s.sequential.p), s.sequential.nominal_p);
    md += fmt::format("| {} | {:+.4f} | {} | {} | {} |{}\n", s.variant, s.delta_vs_sa_mean,
                      s.n_seeds > 1 ? fmt::format("{:.4f}", s.delta_vs_sa_sd) : "–", s.n_seeds,
                      needed, answer);
  }
  return md;
}

// Every difference to SA with its interval, effect size and tests; then each seed's values.
std::string differences_section(const CompareResult& result, const CompareReport& r) {
  if (result.summary.size() < 2) return "";
  const bool bpb = std::isfinite(r.val_bytes_per_token);
  const int n = result.summary[0].n_seeds;
  std::string md = fmt::format(
      "\n## Differences to SA\n\nEach variant's validation loss minus its own seed's SA arm's "
      "(below 0: better than SA), over {} seed(s): mean ± sd, the 95 % t-interval of the mean{}, "
      "Cohen's d_z (the mean over the differences' own sd), and two-sided p-values of the paired "
      "t-test, of the same Holm-corrected across the {} variant(s) tested against SA ({}), and "
      "of two exact rank tests that assume no normality: Wilcoxon's signed ranks and the sign "
      "test{}.\n\n| variant | Δ (mean ± sd) | 95 % CI |{} d_z | p (t) | p (Holm) | p "
      "(Wilcoxon) | p (sign) |\n|---|---|---|{}---|---|---|---|---|\n",
      n, bpb ? ", the same in bits per byte" : "", result.summary.size() - 1,
      r.design ? "with --seeds auto the verdict is the sequential test's (Seeds, below): these "
                 "fixed-n intervals and p-values ignore its looks and do not hold their level "
                 "once it stopped early"
               : "the verdict's",
      n >= 1
          ? fmt::format(" (with {} seeds neither can fall below {:.3g})", n, std::pow(0.5, n - 1))
          : "",
      bpb ? " Δ bits per byte [95 % CI] |" : "", bpb ? "---|" : "");
  for (const VariantSummary& s : result.summary) {
    if (s.variant == baseline_of(result)) continue;
    const PairedDifferences& d = s.delta;
    md += fmt::format(
        "| {} | {} | {} |{} {} | {} | {} | {} | {} |\n", s.variant,
        std::isfinite(d.sd) ? fmt::format("{:+.4f} ± {:.4f}", d.mean, d.sd)
                            : fmt_or_dash("{:+.4f}", d.mean),
        std::isfinite(d.ci_low) ? fmt::format("[{:+.4f}, {:+.4f}]", d.ci_low, d.ci_high) : "–",
        bpb ? fmt::format(" {} |", with_interval(in_bits_per_byte(r, d))) : "",
        fmt_or_dash("{:+.2f}", d.d_z), fmt_or_dash("{:.3g}", d.p_t),
        fmt_or_dash("{:.3g}", s.p_holm), fmt_or_dash("{:.3g}", d.p_wilcoxon),
        fmt_or_dash("{:.3g}", d.p_sign));
  }
  // Per seed: every arm's validation loss, the difference to SA beside it.
  md += "\nPer seed: each arm's final validation loss (Δ vs SA).\n\n| seed |";
  for (const VariantSummary& s : result.summary) md += " " + s.variant + " |";
  md += "\n|---|";
  for (size_t k = 0; k < result.summary.size(); k++) md += "---|";
  md += "\n";
  const auto sa_arms = arms_of(result, baseline_of(result));
  for (size_t i = 0; i < sa_arms.size(); i++) {
    md += fmt::format("| {} |", sa_arms[i]->seed);
    for (const VariantSummary& s : result.summary) {
      const auto mine = arms_of(result, s.variant);
      if (i >= mine.size()) {
        md += " – |";
        continue;
      }
      const double v = mine[i]->val_loss;
      md += s.variant == baseline_of(result)
                ? fmt::format(" {} |", fmt_or_dash("{:.4f}", v))
                : fmt::format(" {} ({}) |", fmt_or_dash("{:.4f}", v),
                              fmt_or_dash("{:+.4f}", v - sa_arms[i]->val_loss));
    }
    md += "\n";
  }
  return md;
}

// Whether each difference has stopped moving (VariantSummary::drift): the rule, each variant's
// mean Δ at the last quarter's validation points and the change over the quarter.
std::string settled_section(const CompareResult& result, const CompareReport& r) {
  if (result.summary.size() < 2) return "";
  const double from = (double)r.run.steps - (double)r.run.steps / 4;
  std::string md = fmt::format(
      "\n## Settled?\n\nWhether each difference to SA has stopped moving by the end of the run, by "
      "the rule fixed in docs/comparing.md: per seed, the least-squares slope of Δ (on the evenly "
      "drawn validation windows) over the validation points of the last quarter (steps ≥ {:g}), "
      "times a quarter of the run ({:g} steps): the change of Δ it implies there; its mean over "
      "the seeds with the 95 % t-interval. An interval that excludes 0 is *still moving*: the "
      "verdict then calls no difference. Fewer than {} points in the last quarter, or fewer than "
      "2 seeds: not judged (validate more often with --val-every).\n\n| variant | mean Δ at "
      "steps ≥ {:g} | change over the last quarter [95 % CI] | settled? |\n|---|---|---|---|\n",
      from, (double)r.run.steps / 4, kSettledPoints, from);
  const auto sa_arms = arms_of(result, baseline_of(result));
  for (const VariantSummary& s : result.summary) {
    if (s.variant == baseline_of(result)) continue;
    const auto mine = arms_of(result, s.variant);
    std::vector<std::string> points;
    for (size_t p = 0; !mine.empty() && p < mine[0]->val_curve.size(); p++) {
      if (mine[0]->val_curve[p].first < from) continue;
      std::vector<double> d;
      for (size_t i = 0; i < mine.size() && i < sa_arms.size(); i++)
        if (p < sa_arms[i]->val_curve.size() && p < mine[i]->val_curve.size())
          d.push_back(mine[i]->val_curve[p].second - sa_arms[i]->val_curve[p].second);
      points.push_back(fmt_or_dash("{:+.4f}", mean(d)));
    }
    md += fmt::format("| {} | {} | {} | {} |\n", s.variant, fmt::join(points, " → "),
                      with_interval(s.drift), to_string(s.settled));
  }
  return md;
}

// The names of the evaluation sets of loss by position: the validation split, then --eval-data's.
std::vector<std::string> position_set_names(const CompareReport& r) {
  std::vector<std::string> names = {"validation"};
  for (const std::string& e : r.eval_data) names.push_back(e);
  return names;
}

std::string bucket_name(const PositionBucket& b) {
  return fmt::format("{}–{}", b.first, b.last);
}

// Loss by position: per set, each bucket of positions in the window, SA's mean loss there and each
// variant's difference to it with its interval. The direct test of "uses its context better".
std::string position_section(const CompareResult& result, const CompareReport& r) {
  if (result.summary.empty() || result.summary[0].position_loss_mean.empty()) return "";
  const std::vector<PositionBucket> buckets = position_buckets(r.model.seq_len);
  const std::vector<std::string> sets = position_set_names(r);
  std::string md = fmt::format(
      "\n## Loss by position\n\nThe final weights' mean loss at each position in the window "
      "(the tokens a prediction sees, 1 to {}), in buckets, on each evaluation set: SA's, and "
      "each variant's difference to it paired by seed, mean [95 % t-interval]. Where a variant "
      "uses long context better, its difference grows with the position.\n",
      r.model.seq_len);
  for (size_t set = 0; set < sets.size(); set++) {
    if (result.summary[0].position_loss_mean.size() <= set) break;
    md += fmt::format("\n{}:\n\n| positions | {} |",
                      set == 0 ? "Validation set" : "`" + sets[set] + "`", baseline_of(result));
    for (size_t k = 1; k < result.summary.size(); k++)
      md += " " + result.summary[k].variant + " Δ [95 % CI] |";
    md += "\n|---|---|";
    for (size_t k = 1; k < result.summary.size(); k++) md += "---|";
    md += "\n";
    for (size_t b = 0; b < buckets.size(); b++) {
      const std::vector<double>& sa_loss = result.summary[0].position_loss_mean[set];
      md += fmt::format("| {} | {} |", bucket_name(buckets[b]),
                        fmt_or_dash("{:.4f}", b < sa_loss.size() ? sa_loss[b] : NAN));
      for (size_t k = 1; k < result.summary.size(); k++) {
        const VariantSummary& s = result.summary[k];
        const bool has = set < s.position_delta.size() && b < s.position_delta[set].size();
        md +=
            fmt::format(" {} |", has ? with_interval(s.position_delta[set][b]) : std::string("–"));
      }
      md += "\n";
    }
    if (buckets.size() >= 3) {  // the context contrast (VariantSummary::context_contrast)
      md += fmt::format("| last − (1–64) | – |");
      for (size_t k = 1; k < result.summary.size(); k++) {
        const VariantSummary& s = result.summary[k];
        md += fmt::format(" {} |", set < s.context_contrast.size()
                                       ? with_interval(s.context_contrast[set])
                                       : "–");
      }
      md += "\n";
    }
  }
  if (buckets.size() >= 3)
    md += fmt::format(
        "\n*last − (1–64)*: per seed, the loss at positions {}–{} minus that at positions 1–64, "
        "the variant's minus SA's, paired by seed: below 0 where the variant gains more late in "
        "the window than early, as better use of context would.\n",
        buckets.back().first, buckets.back().last);
  return md;
}

// --tune-lr: each variant's validation loss at each candidate rate, and the one chosen.
std::string tuning_section(const CompareReport& r) {
  const LrTuning& t = r.tuning;
  if (t.empty()) return "";
  std::string md = fmt::format(
      "\n## Learning rates\n\nEach variant was first trained at each peak learning rate below "
      "on the tuning seed(s) {} (the same model, schedule, steps and batch size as the "
      "confirmation, other initial weights and batches; `{}/lr-<rate>/`), and the rate with the "
      "lowest mean final validation loss was chosen for it "
      "(bold; a rate that diverged in any tuning seed is never chosen). A choice at an edge of "
      "the grid asked for ({}) extends it by one step in that direction, until every choice is "
      "inside (at most {} steps each way){}; only the variants chosen at that edge run the rate "
      "beyond it (– : not run). The comparison above then trained every variant at "
      "its own rate on fresh seeds, so each difference to SA is best against best, tested once "
      "per variant.\n\n| variant |",
      fmt::join(t.seeds, ", "), t.folder, fmt::join(t.grid, ", "), kMaxGridExtensions,
      t.extended_down + t.extended_up == 0
          ? ": none was"
          : fmt::format(": {} rate(s) added below, {} above", t.extended_down, t.extended_up));
  for (double lr : t.lrs) md += fmt::format(" {:g} |", lr);
  md += " chosen |\n|---|";
  for (size_t i = 0; i <= t.lrs.size(); i++) md += "---|";
  md += "\n";
  std::vector<std::string> edge;
  for (size_t k = 0; k < r.variants.size() && k < t.val_loss.size(); k++) {
    md += "| " + r.variants[k] + " |";
    for (size_t i = 0; i < t.lrs.size(); i++) {
      const double v = t.val_loss[k][i];
      const bool chosen = t.lrs[i] == t.chosen[k];
      std::string cell = !t.diverged[k][i] ? fmt_or_dash("{:.4f}", v)
                                           : fmt::format("diverged ({} of {} seeds)",
                                                         t.diverged[k][i], t.seeds.size());
      md += fmt::format(fmt::runtime(chosen ? " **{}** |" : " {} |"), cell);
    }
    md += fmt::format(" {:g} |\n", t.chosen[k]);
    if (t.lrs.size() > 1 && (t.chosen[k] == t.lrs.front() || t.chosen[k] == t.lrs.back()))
      edge.push_back(r.variants[k]);
  }
  if (!edge.empty())
    md += fmt::format(
        "\n{}: the chosen rate is still at the edge of the grid after its extensions; a rate "
        "beyond it might be better.\n",
        fmt::join(edge, ", "));
  return md;
}

// Arms in another precision than the run's (xsa@bf16): against their twins, and the XSA-vs-SA
// difference inside each precision.
std::string precision_section(const CompareResult& result, const CompareReport& r) {
  std::string twins, inside;
  for (const VariantSummary& s : result.summary) {
    const PairedDelta& t = s.vs_twin;
    if (!t.reference.empty())
      twins += fmt::format("| {} | {} | {:+.4f} ± {:.4f} | {} | {} | {:.2f} |\n", s.variant,
                           t.reference, t.mean, t.sd, fmt_or_dash("{:.3f}", t.p_value),
                           fmt_or_dash("{:.4f}", t.reference_sd), t.time_ratio);
    const PairedDelta& a = s.vs_precision_sa;
    if (!a.reference.empty()) {
      PairedDifferences d;
      d.mean = a.mean, d.ci_low = a.ci_low, d.ci_high = a.ci_high;
      inside +=
          fmt::format("| {} | {} | {} | {} | {} |\n", s.variant, a.reference, with_interval(d),
                      fmt_or_dash("{:.3g}", a.p_value), rules_out_text(rules_out(d)));
    }
  }
  std::string md;
  if (!twins.empty())
    md += fmt::format(
              "\n## Precision\n\nThe arms marked with a precision ran in it, the others in {}; "
              "twins start from the same weights and see the same batches. A difference matters "
              "when it is large against the seed-to-seed spread (sd of the twin's validation loss "
              "over seeds) and p is small.\n\n| arm | twin | Δ val loss vs twin (mean ± sd) | p "
              "(paired t) | twin's seed sd | time per step / twin's |\n|---|---|---|---|---|---|\n",
              to_string(r.run.precision)) +
          twins;
  if (!inside.empty())
    md +=
        "\n## In the same setting\n\nEach arm in its own precision or at its own rate against the "
        "baseline's model in the same one (xsa@4e-3 against sa@4e-3), paired by seed: this tells "
        "a better model from one that gains by its rate or precision alone. Secondary: not in "
        "the Holm correction of the main table.\n\n| arm | against | Δ val loss [95 % CI] | p "
        "(paired t) | rules out |\n|---|---|---|---|---|\n" +
        inside;
  return md;
}

// The files of one chart, appended to `plots`.
void add_plot(std::vector<std::string>& plots, const std::vector<std::string>& files) {
  plots.insert(plots.end(), files.begin(), files.end());
}

// Validation curves by step (mean over seeds, ± sd band, from the first evaluation on: step 0 is
// the initialisation); returns each variant's difference to SA for its own chart.
std::vector<Series> write_curve_plot(const fs::path& out, const CompareReport& r,
                                     const CompareResult& result, std::vector<std::string>& plots) {
  const auto sa_arms = arms_of(result, baseline_of(result));
  std::vector<Series> curves, deltas;
  for (size_t k = 0; k < r.variants.size(); k++) {
    const auto mine = arms_of(result, r.variants[k]);
    Series c{r.variants[k], {}, {}, {}, {}}, d = c;
    for (size_t p = 0; p < mine[0]->val_curve.size(); p++) {
      std::vector<double> v, dv;
      for (size_t i = 0; i < mine.size(); i++)
        v.push_back(mine[i]->val_curve[p].second),
            dv.push_back(mine[i]->val_curve[p].second - sa_arms[i]->val_curve[p].second);
      const double x = (double)mine[0]->val_curve[p].first;
      c.x.push_back(x), c.y.push_back(mean(v));
      d.x.push_back(x), d.y.push_back(mean(dv));
      if (mine.size() > 1) {
        c.y_low.push_back(mean(v) - sample_sd(v)), c.y_high.push_back(mean(v) + sample_sd(v));
        d.y_low.push_back(mean(dv) - sample_sd(dv)), d.y_high.push_back(mean(dv) + sample_sd(dv));
      }
    }
    curves.push_back(c);
    if (k > 0) deltas.push_back(d);
  }
  for (Series& c : curves)
    if (c.x.size() > 2) {
      c.x.erase(c.x.begin()), c.y.erase(c.y.begin());
      if (!c.y_low.empty()) c.y_low.erase(c.y_low.begin()), c.y_high.erase(c.y_high.begin());
    }
  add_plot(plots, write_plot((out / "val_loss").string(),
                             svg_line_chart(fmt::format("Validation loss ({} seed{}, band: ± sd)",
                                                        r.seeds, r.seeds > 1 ? "s" : ""),
                                            "step", "validation loss", curves)));
  return deltas;
}

// The same curves against each arm's own training time (the equal-loss view).
void write_time_plot(const fs::path& out, const CompareReport& r, const CompareResult& result,
                     std::vector<std::string>& plots) {
  std::vector<Series> by_time;
  for (const std::string& v : r.variants) {
    const auto mine = arms_of(result, v);
    Series c{v, {}, {}, {}, {}};
    for (size_t p = 1; p < mine[0]->val_curve.size(); p++) {
      std::vector<double> t, l;
      for (const ArmResult* a : mine) {
        const std::vector<CurvePoint> curve = curve_of(*a);
        t.push_back(curve[p].seconds), l.push_back(curve[p].loss);
      }
      c.x.push_back(mean(t)), c.y.push_back(mean(l));
    }
    by_time.push_back(c);
  }
  add_plot(plots,
           write_plot((out / "val_loss_by_time").string(),
                      svg_line_chart("Validation loss against each arm's own training time (mean "
                                     "over seeds)",
                                     "seconds of training", "validation loss", by_time)));
}

// Loss by position: each variant's difference to SA per bucket, one chart per set.
void write_position_plots(const fs::path& out, const CompareReport& r, const CompareResult& result,
                          std::vector<std::string>& plots) {
  const std::vector<PositionBucket> buckets = position_buckets(r.model.seq_len);
  std::vector<std::string> bucket_names;
  for (const PositionBucket& b : buckets) bucket_names.push_back(bucket_name(b));
  const std::vector<std::string> sets = position_set_names(r);
  for (size_t set = 0; set < sets.size(); set++) {
    std::vector<Series> by_position;
    for (size_t k = 1; k < result.summary.size(); k++) {
      const VariantSummary& s = result.summary[k];
      if (set >= s.position_delta.size()) continue;
      Series se{s.variant, {}, {}, {}, {}};
      for (size_t b = 0; b < buckets.size() && b < s.position_delta[set].size(); b++) {
        const PairedDifferences& d = s.position_delta[set][b];
        se.x.push_back((double)b), se.y.push_back(d.mean);
        if (std::isfinite(d.ci_low)) se.y_low.push_back(d.ci_low), se.y_high.push_back(d.ci_high);
      }
      if (se.y_low.size() != se.y.size()) se.y_low.clear(), se.y_high.clear();
      by_position.push_back(se);
    }
    if (by_position.empty()) continue;
    add_plot(plots,
             write_plot((out / (set == 0 ? "loss_by_position"
                                         : fmt::format("loss_by_position-eval{}", set)))
                            .string(),
                        svg_line_chart(fmt::format("Loss by position minus SA's, {} (band: 95 % "
                                                   "interval)",
                                                   set == 0 ? "validation set" : sets[set]),
                                       "positions in the window", "Δ loss vs SA", by_position, true,
                                       1, bucket_names)));
  }
}

// --tune-lr: validation loss against the learning rate, per variant.
void write_tuning_plot(const fs::path& out, const CompareReport& r,
                       std::vector<std::string>& plots) {
  if (r.tuning.empty()) return;
  std::vector<Series> lr_curves;
  std::vector<std::string> lr_names;
  for (double lr : r.tuning.lrs) lr_names.push_back(fmt::format("{:g}", lr));
  for (size_t k = 0; k < r.variants.size() && k < r.tuning.val_loss.size(); k++) {
    Series se{r.variants[k], {}, {}, {}, {}};
    for (size_t i = 0; i < r.tuning.lrs.size(); i++)
      se.x.push_back((double)i), se.y.push_back(r.tuning.val_loss[k][i]);
    lr_curves.push_back(se);
  }
  add_plot(plots, write_plot((out / "lr_tuning").string(),
                             svg_line_chart("Validation loss against the peak learning rate "
                                            "(tuning seeds; gaps: diverged)",
                                            "peak learning rate", "validation loss", lr_curves,
                                            false, 0, lr_names)));
}

// The similarity bias: mean cos(y_i, v_i) per layer, per variant (seed 1).
void write_bias_plot(const fs::path& out, const CompareReport& r, std::vector<std::string>& plots) {
  if (r.bias.empty() || r.bias[0].empty()) return;
  std::vector<Series> per_layer;
  for (size_t k = 0; k < r.variants.size(); k++) {
    if (r.bias[k].empty()) continue;  // diverged: no final weights
    Series s{r.variants[k] + " cos(y,v)", {}, {}, {}, {}};
    Series lean{r.variants[k] + " own lean", {}, {}, {}, {}};
    for (int l = 0; l < r.model.n_layer; l++) {
      double sum = 0, lean_sum = 0;
      for (int h = 0; h < r.model.n_head; h++) {
        const HeadBias& head = r.bias[k][l * r.model.n_head + h];
        sum += head.cos_yv, lean_sum += head.own_lean();
      }
      s.x.push_back(l), s.y.push_back(sum / r.model.n_head);
      lean.x.push_back(l), lean.y.push_back(lean_sum / r.model.n_head);
    }
    per_layer.push_back(s);
    per_layer.push_back(lean);
  }
  add_plot(plots, write_plot((out / "similarity_bias").string(),
                             svg_line_chart("Attention similarity bias per layer (seed 1): mean "
                                            "cos(y_i, v_i), and its own lean (less cos(y_i, v_j), "
                                            "j < i)",
                                            "layer", "cosine", per_layer, true)));
}

// Every chart of a comparison, in the order report.md shows them.
std::vector<std::string> write_plots(const fs::path& out, const CompareReport& r,
                                     const CompareResult& result) {
  std::vector<std::string> plots;
  const std::vector<Series> deltas = write_curve_plot(out, r, result, plots);
  write_time_plot(out, r, result, plots);
  if (!deltas.empty())
    add_plot(plots,
             write_plot((out / "delta_vs_sa").string(),
                        svg_line_chart("Validation loss minus SA's (below 0: better than SA)",
                                       "step", "Δ validation loss", deltas, true)));
  write_position_plots(out, r, result, plots);
  write_tuning_plot(out, r, plots);
  write_bias_plot(out, r, plots);
  return plots;
}

// Per variant: its parameter count, its rivals of XSA and QK-norm.
nlohmann::json parameters_json(const CompareReport& r) {
  nlohmann::json j = nlohmann::json::object();
  for (size_t k = 0; k < r.variants.size() && k < r.parameters.size(); k++) {
    j[r.variants[k]] = {{"count", r.parameters[k]},
                        {"vs_sa", r.parameters[k] - r.parameters[0]},
                        {"rivals", k < r.rivals.size() ? rivals_string(r.rivals[k]) : ""}};
    if (k < r.rivals.size() && r.rivals[k].qk_norm)  // only then: other reports as before
      j[r.variants[k]]["qk_norm"] = true;
  }
  return j;
}

// One variant's summary in report.json.
json summary_to_json(const CompareReport& r, const VariantSummary& s) {
  const bool sa = s.variant == r.variants.at(0);
  json evals = json::array(), by_position = json::array();
  for (const PairedDifferences& d : s.eval_delta) evals.push_back(differences_to_json(d));
  for (size_t set = 0; set < s.position_loss_mean.size(); set++) {
    json deltas = json::array();
    if (!sa)
      for (const PairedDifferences& d : s.position_delta[set])
        deltas.push_back(differences_to_json(d));
    by_position.push_back({{"loss_mean", nan_to_null(s.position_loss_mean[set])},
                           {"delta_vs_sa", deltas},
                           {"context_contrast", set < s.context_contrast.size()
                                                    ? differences_to_json(s.context_contrast[set])
                                                    : json(nullptr)}});
  }
  json sequential = nullptr;
  if (r.design && !sa)
    sequential = {{"answer", s.seeds_answer},
                  {"seeds", r.design->looks[s.sequential.look]},
                  {"p", nan_to_null(s.sequential.p)},
                  {"level", s.sequential.nominal_p},
                  {"conditional_power", nan_to_null(s.sequential.conditional_power)}};
  return {
      {"variant", s.variant},
      {"n_seeds", s.n_seeds},
      {"lr", s.lr},
      {"train_loss_mean", nan_to_null(s.train_loss_mean)},
      {"val_loss_mean", nan_to_null(s.val_loss_mean)},
      {"val_loss_sd", nan_to_null(s.val_loss_sd)},
      {"val_bpb_mean", nan_to_null(val_bpb(r, s.val_loss_mean))},
      {"delta_vs_sa_mean", nan_to_null(s.delta_vs_sa_mean)},
      {"delta_vs_sa_sd", nan_to_null(s.delta_vs_sa_sd)},
      {"delta_vs_sa", sa ? json(nullptr) : differences_to_json(s.delta)},
      {"delta_bpb_vs_sa", sa ? json(nullptr) : differences_to_json(in_bits_per_byte(r, s.delta))},
      {"p_value", nan_to_null(s.p_value)},
      {"p_holm", nan_to_null(s.p_holm)},
      {"overhead_vs_sa", nan_to_null(s.overhead_vs_sa)},
      {"cos_yv_mean", nan_to_null(s.cos_yv_mean)},
      {"equal_loss", sa ? json(nullptr) : equal_loss_to_json(s.equal_loss)},
      {"seeds_for_80pct_power",
       sa || s.seeds_for_power == 0 ? json(nullptr) : json(s.seeds_for_power)},
      {"seeds_answer", sa || s.seeds_answer.empty() ? json(nullptr) : json(s.seeds_answer)},
      {"sequential", sequential},
      {"eval_loss_mean", nan_to_null(s.eval_loss_mean)},
      {"eval_delta_vs_sa_mean", nan_to_null(s.eval_delta_vs_sa_mean)},
      {"eval_delta_vs_sa", sa ? json(nullptr) : evals},
      {"loss_by_position", by_position},
      {"rules_out", sa ? json(nullptr)
                       : json{{"gain_above", nan_to_null(s.rules_out.gain_above)},
                              {"loss_above", nan_to_null(s.rules_out.loss_above)}}},
      {"settled", sa ? json(nullptr)
                     : json{{"answer", to_string(s.settled)},
                            {"points", s.drift_points},
                            {"change_over_last_quarter", differences_to_json(s.drift)}}},
      {"slow_steps", s.slow_steps},
      {"verdict", s.verdict},
      {"vs_twin", paired_to_json(s.vs_twin)},
      {"vs_precision_sa", paired_to_json(s.vs_precision_sa)}};
}

// The similarity bias of every variant's heads.
json bias_to_json(const CompareReport& r) {
  json j_bias = json::array();
  for (size_t k = 0; k < r.variants.size(); k++)
    for (const HeadBias& h : r.bias[k])
      j_bias.push_back({{"variant", r.variants[k]},
                        {"layer", h.layer},
                        {"head", h.head},
                        {"cos_yv", h.cos_yv},
                        {"cos_zv", nan_to_null(h.cos_zv)},
                        {"self_weight", h.self_weight},
                        {"cos_vv", h.cos_vv},
                        {"cos_y_vj", h.cos_y_vj},
                        {"own_lean", h.own_lean()}});
  return j_bias;
}

// --tune-lr's rates and losses (null without it).
json tuning_to_json(const CompareReport& r) {
  if (r.tuning.empty()) return nullptr;
  return {{"grid", r.tuning.grid},
          {"lrs", r.tuning.lrs},
          {"extended_down", r.tuning.extended_down},
          {"extended_up", r.tuning.extended_up},
          {"seeds", r.tuning.seeds},
          {"val_loss", nan_to_null(r.tuning.val_loss)},
          {"diverged_seeds", r.tuning.diverged},
          {"chosen", r.tuning.chosen},
          {"folder", r.tuning.folder}};
}

// --seeds auto's group-sequential design (null without it).
json design_to_json(const CompareReport& r) {
  if (!r.design) return nullptr;
  return {{"looks", r.design->looks},
          {"alpha", r.design->alpha},
          {"spent_alpha", r.design->spent_alpha},
          {"simulated_alpha", r.design->simulated_alpha},
          {"nominal_p", r.design->nominal_p},
          {"z_bound", r.design->z_bound},
          {"futility_power", r.design->futility_power},
          {"spending", "O'Brien-Fleming-type (Lan-DeMets)"}};
}

void write_report_json(const fs::path& out, const CompareReport& r, const CompareResult& result) {
  json j_arms = json::array(), j_summary = json::array();
  for (const ArmResult& a : result.arms) j_arms.push_back(arm_to_json(a));
  for (const VariantSummary& s : result.summary) j_summary.push_back(summary_to_json(r, s));
  json buckets = json::array();
  for (const PositionBucket& b : position_buckets(r.model.seq_len))
    buckets.push_back({b.first, b.last});
  nlohmann::json model_json = r.model;
  json report = {{"data", r.run.data},
                 {"eval_data", r.eval_data},
                 {"model", model_json},
                 {"run", run_config_to_json(r.run)},
                 {"variants", r.variants},
                 {"seeds", r.seeds},
                 {"arms", j_arms},
                 {"summary", j_summary},
                 {"similarity_bias", bias_to_json(r)},
                 {"seeds_note", r.seeds_note},
                 {"sequential_design", design_to_json(r)},
                 {"lr_tuning", tuning_to_json(r)},
                 {"parameters", parameters_json(r)},
                 {"loss_by_position", {{"buckets", buckets}, {"sets", position_set_names(r)}}},
                 {"multiple_comparisons", "Holm across the variants tested against SA"},
                 {"validation",
                  {{"every_steps", r.run.val_every},
                   {"batches", r.run.val_batches},
                   {"score_tokens", r.score_tokens},
                   {"windows", "drawn evenly across the whole validation split"},
                   {"share_of_wall_clock", r.validation_share}}}};
  write_file_atomic(out / "report.json", report.dump(2) + "\n");
}

}  // namespace

std::string parameters_note(const CompareReport& r) {
  if (r.parameters.size() != r.variants.size() || r.parameters.empty()) return "";
  std::string note;
  bool differ = false;
  for (size_t k = 1; k < r.parameters.size(); k++) differ |= r.parameters[k] != r.parameters[0];
  if (differ) {
    note += "\nParameters differ between the variants:";
    for (size_t k = 0; k < r.variants.size(); k++) {
      note += fmt::format(" {} {}", r.variants[k], r.parameters[k]);
      if (k > 0 && r.parameters[k] != r.parameters[0])
        note += fmt::format(" ({:+} vs SA)", r.parameters[k] - r.parameters[0]);
      note += k + 1 < r.variants.size() ? ";" : ".";
    }
    note +=
        " The rivals' own tensors: gated-attn's W_g (C² per layer), value-residual's λ (one "
        "per layer after the first).\n";
  }
  std::vector<std::string> gated, mixed;
  for (size_t k = 0; k < r.rivals.size() && k < r.variants.size(); k++) {
    if (r.rivals[k].output_gate) gated.push_back(r.variants[k]);
    if (r.rivals[k].value_residual) mixed.push_back(r.variants[k]);
  }
  if (!gated.empty())
    note += fmt::format(
        "\n{} start(s) from SA's shared weights but not as SA's function: the gate σ(x W_g) is "
        "about 0.5 at step 0, halving the attention's output.\n",
        fmt::join(gated, ", "));
  if (!mixed.empty())
    note += fmt::format(
        "\n{} start(s) from SA's shared weights but not as SA's function: λ = 0.5 gives each "
        "later layer half its own values and half the first layer's at step 0.\n",
        fmt::join(mixed, ", "));
  return note;
}

namespace {

// report.md's opening: what was compared, on what, and how; where QK-norm is (--qk-norm keeps it
// out of the variants' names).
std::string report_header(const CompareReport& r, const CompareResult& result, bool own_rates) {
  // The tokens the final score read of the validation split (the first seed's first arm's: the
  // same for every arm).
  int64_t scored = 0;
  if (!result.arms.empty() && !result.arms[0].scored_tokens.empty())
    scored = result.arms[0].scored_tokens[0];
  std::string md = fmt::format(
      "# xsa compare\n\n{} on `{}`: {} layers, {} heads, width {}, context {}, batch {}, {} steps, "
      "peak lr {}, {}, {} seed(s) ({}…).\nEvery arm of a seed starts from the same weights and "
      "sees the same batches; steps run interleaved, so the timing columns compare like with "
      "like, and every timing figure comes from the steps' own times (medians), which a pause or "
      "a neighbour cannot move. The final score (val loss in the tables, and every test) reads "
      "{} of the validation split with the final weights, the same windows for every arm; the "
      "curves and whether a difference has settled read {} batch(es) of windows drawn evenly "
      "across it every {} steps.\n\n",
      fmt::join(r.variants, ", "), r.run.data, r.model.n_layer, r.model.n_head, r.model.n_embd,
      r.model.seq_len, r.run.batch, r.run.steps,
      own_rates ? (r.tuning.empty() ? "each variant's own (the lr column)"
                                    : "each variant's own (--tune-lr, below)")
                : fmt::format("{}", r.run.lr),
      to_string(r.run.precision), r.seeds, r.run.seed, score_extent(r, 0, scored),
      r.run.val_batches, r.run.val_every);
  std::vector<std::string> qk_norm;
  for (size_t k = 0; k < r.rivals.size() && k < r.variants.size(); k++)
    if (r.rivals[k].qk_norm) qk_norm.push_back(r.variants[k]);
  if (!qk_norm.empty())
    md += qk_norm.size() == r.variants.size()
              ? "Every variant has QK-norm (RMSNorm of q and k per head before RoPE).\n\n"
              : fmt::format("QK-norm (RMSNorm of q and k per head before RoPE) in: {}.\n\n",
                            fmt::join(qk_norm, ", "));
  return md;
}

}  // namespace

std::string write_compare_report(const fs::path& out, const CompareReport& r,
                                 const CompareResult& result) {
  const std::vector<std::string> plots =
      r.plots ? write_plots(out, r, result) : std::vector<std::string>();
  auto arms_of = [&](const std::string& v) { return xsa::arms_of(result, v); };
  bool own_rates = !r.tuning.empty();
  for (const VariantSummary& s : result.summary) own_rates |= s.lr != result.summary[0].lr;
  std::string md = report_header(r, result, own_rates);
  // Bits per byte beside the loss when the validation set's bytes are known: runs of different
  // vocabularies compare by it, not by the loss per token.
  const bool bpb = std::isfinite(r.val_bytes_per_token);
  md += fmt::format(
      "| variant | seeds | lr | train loss | val loss |{} Δ val vs SA [95 % CI] | rules out | p "
      "(t; "
      "Holm) | verdict | ms/step | overhead vs SA | tokens/s | peak MB |\n",
      bpb ? " val bits per byte |" : "");
  md += fmt::format("|---|---|---|---|---|{}---|---|---|---|---|---|---|---|\n", bpb ? "---|" : "");
  for (const VariantSummary& s : result.summary) {
    const auto mine = arms_of(s.variant);
    std::vector<double> ms, tok;
    for (auto* a : mine) ms.push_back(a->ms_per_step), tok.push_back(a->tokens_per_s);
    const bool base = s.variant == baseline_of(result);
    md += fmt::format(
        "| {} | {} | {:g} | {} | {} |{} {} | {} | {} | {} | {:.1f} | {:+.1f}% | {:.0f} | {:.0f} "
        "|\n",
        s.variant, s.n_seeds, s.lr, fmt_or_dash("{:.4f}", s.train_loss_mean),
        fmt_or_dash("{:.4f}", s.val_loss_mean) +
            (s.n_seeds > 1 ? " ± " + fmt_or_dash("{:.4f}", s.val_loss_sd) : ""),
        bpb ? fmt::format(" {} |", fmt_or_dash("{:.4f}", val_bpb(r, s.val_loss_mean))) : "",
        base ? "–" : with_interval(s.delta), base ? "–" : rules_out_text(s.rules_out),
        base ? "–"
             : fmt_or_dash("{:.3g}", s.p_value) +
                   (result.summary.size() > 2 ? "; " + fmt_or_dash("{:.3g}", s.p_holm) : ""),
        s.verdict, mean(ms), 100 * s.overhead_vs_sa, mean(tok), r.peak_mb[&s - &result.summary[0]]);
  }
  std::string slow;
  for (const VariantSummary& s : result.summary)
    if (s.slow_steps > 0)
      slow += fmt::format("{}{} {}", slow.empty() ? "" : ", ", s.variant, s.slow_steps);
  if (!slow.empty())
    md += fmt::format(
        "\nSlow steps (over {:g} times their arm's median, as when the process was paused or the "
        "machine busy), over the seeds: {}. The medians leave them out of every figure.\n",
        kSlowStep, slow);
  md += kTimingNote;
  md += parameters_note(r);
  // Arms whose loss or gradient became NaN or infinite: they stopped there (no final figures).
  std::string diverged;
  for (const ArmResult& a : result.arms)
    if (a.diverged_at > 0)
      diverged += fmt::format("{}{} seed {} at step {} (lr {:g})", diverged.empty() ? "" : "; ",
                              a.variant, a.seed, a.diverged_at, a.lr);
  if (!diverged.empty())
    md +=
        "\nDiverged (loss or gradient NaN or infinite; the arm stopped there, so its seed has "
        "no final loss and the variant's differences to SA are undefined): " +
        diverged + ".\n";
  if (!r.eval_data.empty()) {
    std::vector<std::string> extents;
    for (size_t e = 0; e < r.eval_data.size(); e++)
      extents.push_back(fmt::format(
          "`{}`: {}", r.eval_data[e],
          score_extent(r, e + 1,
                       result.arms.empty() || result.arms[0].scored_tokens.size() <= e + 1
                           ? 0
                           : result.arms[0].scored_tokens[e + 1])));
    md += fmt::format(
        "\nFurther evaluation sets, scored with the final weights ({}; mean loss over seeds; Δ to "
        "SA paired by seed with its 95 % interval). The sign of an effect can differ between "
        "in-domain and shifted text, and between short and long documents.\n\n| variant |",
        fmt::join(extents, "; "));
    for (const std::string& e : r.eval_data) md += fmt::format(" {} | Δ [95 % CI] | p (t) |", e);
    md += "\n|---|";
    for (size_t e = 0; e < r.eval_data.size(); e++) md += "---|---|---|";
    md += "\n";
    for (const VariantSummary& s : result.summary) {
      md += "| " + s.variant + " |";
      for (size_t e = 0; e < r.eval_data.size(); e++) {
        const bool has = s.variant != baseline_of(result) && e < s.eval_delta.size();
        md += fmt::format(" {} | {} | {} |", fmt_or_dash("{:.4f}", s.eval_loss_mean[e]),
                          has ? with_interval(s.eval_delta[e]) : "–",
                          has ? fmt_or_dash("{:.3g}", s.eval_delta[e].p_t) : "–");
      }
      md += "\n";
    }
  }
  md += differences_section(result, r);
  md += settled_section(result, r);
  md += position_section(result, r);
  md += equal_loss_section(result, r);
  md += seeds_section(result, r);
  md += tuning_section(r);
  md += precision_section(result, r);
  md += "\n";
  for (const std::string& p : plots)
    if (p.size() > 4 && p.substr(p.size() - 4) == ".svg")
      md += fmt::format("![{0}]({0})\n\n", fs::path(p).filename().string());
  md +=
      "Final weights of every arm: `arms/<variant>-seed<seed>/` (inspect with `xsa analyze "
      "--ckpt`).\n";
  write_file_atomic(out / "report.md", md);
  // Last: report.json marks a finished comparison (compare refuses to overwrite one), so a write
  // that fails before it leaves a folder the same command completes from the seed files.
  write_report_json(out, r, result);
  return md;
}

}  // namespace xsa
