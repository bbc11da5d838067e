// A comparison's report.md as a list of sections, each a small renderer of the figures the
// statistics computed (compare_statistics.cpp): it lays them out and computes none.
#include <cmath>

#include "xsa/report/report_parts.h"
#include "xsa/util/fmt.h"
#include "xsa/util/stats.h"

namespace xsa {

namespace fs = std::filesystem;
using namespace report;

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
  std::vector<std::string> output_gated, mixed;
  for (size_t k = 0; k < r.rivals.size() && k < r.variants.size(); k++) {
    if (r.rivals[k].output_gate) output_gated.push_back(r.variants[k]);
    if (r.rivals[k].value_residual) mixed.push_back(r.variants[k]);
  }
  if (!output_gated.empty())
    note += fmt::format(
        "\n{} start(s) from SA's shared weights but not as SA's function: the gate σ(x W_g) is "
        "about 0.5 at step 0, halving the attention's output.\n",
        fmt::join(output_gated, ", "));
  if (!mixed.empty())
    note += fmt::format(
        "\n{} start(s) from SA's shared weights but not as SA's function: λ = 0.5 gives each "
        "later layer half its own values and half the first layer's at step 0.\n",
        fmt::join(mixed, ", "));
  return note;
}

namespace {

// What every section reads: the report's settings, the results and their statistics, the plots.
struct ReportInputs {
  const CompareReport& r;
  const CompareResult& result;
  const std::vector<std::string>& plots;
};

// The recipe every arm trained in, where it is not the default's (docs/SPEC.md §11), or "".
std::string recipe_note(const CompareReport& r) {
  std::vector<std::string> parts;
  if (r.run.muon())
    parts.push_back(fmt::format(
        "Muon (peak lr {:g}, momentum {:g}) on the hidden matrices and AdamW (peak lr {:g}) on the "
        "rest; every rate in this report is Muon's, AdamW's moving with it in the ratio {:g}",
        r.run.muon_lr, r.run.muon_momentum, r.run.lr, r.run.lr / r.run.muon_lr));
  if (r.model.mlp != MlpActivation::gelu)
    parts.push_back(fmt::format("a {} MLP", r.model.mlp == MlpActivation::relu2 ? "ReLU²" : "?"));
  if (r.model.logit_softcap > 0)
    parts.push_back(fmt::format("logits soft-capped at {:g}", r.model.logit_softcap));
  if (parts.empty()) return "";
  return fmt::format("Recipe: {}.\n\n", fmt::join(parts, "; "));
}

// report.md's opening: what was compared, on what, and how; where the whole-model options are
// (--qk-norm, --value-embed keep them out of the variants' names).
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
  md += recipe_note(r);
  for (const AttentionOption& o : kAttentionOptions) {
    if (!o.whole_model) continue;
    std::vector<std::string> with;
    for (size_t k = 0; k < r.rivals.size() && k < r.variants.size(); k++)
      if (r.rivals[k].*o.flag) with.push_back(r.variants[k]);
    if (!with.empty())
      md += with.size() == r.variants.size()
                ? fmt::format("Every variant has {}.\n\n", o.title)
                : fmt::format("{} in: {}.\n\n", o.title, fmt::join(with, ", "));
  }
  return md;
}
// report.md's opening.
std::string header_section(const ReportInputs& in) {
  bool own_rates = !in.r.tuning.empty();
  for (const VariantSummary& s : in.result.summary) own_rates |= s.lr != in.result.summary[0].lr;
  return report_header(in.r, in.result, own_rates);
}

// The main table: every variant's figures, with the notes that belong to it (slow steps, how the
// timing columns are measured, the parameters, diverged arms), then the further sets' table.
std::string table_section(const ReportInputs& in) {
  const CompareReport& r = in.r;
  const CompareResult& result = in.result;
  // Bits per byte beside the loss when the validation set's bytes are known: runs of different
  // vocabularies compare by it, not by the loss per token.
  const bool bpb = std::isfinite(r.val_bytes_per_token);
  std::string md = fmt::format(
      "| variant | seeds | lr | train loss | val loss |{} Δ val vs SA [95 % CI] | rules out | p "
      "(t; Holm) | verdict | ms/step | overhead vs SA | tokens/s | peak MB |\n",
      bpb ? " val bits per byte |" : "");
  md += fmt::format("|---|---|---|---|---|{}---|---|---|---|---|---|---|---|\n", bpb ? "---|" : "");
  for (const VariantSummary& s : result.summary) {
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
        s.verdict, s.ms_per_step_mean, 100 * s.overhead_vs_sa, s.tokens_per_s_mean,
        r.peak_mb[&s - &result.summary[0]]);
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
  return md;
}

// Each --eval-data set's final score, and each variant's difference to SA there.
std::string eval_sets_section(const ReportInputs& in) {
  const CompareReport& r = in.r;
  const CompareResult& result = in.result;
  if (r.eval_data.empty()) return "";
  std::vector<std::string> extents;
  for (size_t e = 0; e < r.eval_data.size(); e++)
    extents.push_back(
        fmt::format("`{}`: {}", r.eval_data[e],
                    score_extent(r, e + 1,
                                 result.arms.empty() || result.arms[0].scored_tokens.size() <= e + 1
                                     ? 0
                                     : result.arms[0].scored_tokens[e + 1])));
  std::string md = fmt::format(
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
  return md;
}

// Every difference to SA with its interval, effect size and tests; then each seed's values.
std::string differences_section(const ReportInputs& in) {
  const CompareResult& result = in.result;
  const CompareReport& r = in.r;
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
  const std::vector<SeedFigure>& base_seeds = result.summary[0].per_seed;
  for (size_t i = 0; i < base_seeds.size(); i++) {
    md += fmt::format("| {} |", base_seeds[i].seed);
    for (const VariantSummary& s : result.summary) {
      if (i >= s.per_seed.size()) {
        md += " – |";
        continue;
      }
      const SeedFigure& x = s.per_seed[i];
      md += s.variant == baseline_of(result)
                ? fmt::format(" {} |", fmt_or_dash("{:.4f}", x.val_loss))
                : fmt::format(" {} ({}) |", fmt_or_dash("{:.4f}", x.val_loss),
                              fmt_or_dash("{:+.4f}", x.delta));
    }
    md += "\n";
  }
  return md;
}

// Whether each difference has stopped moving (VariantSummary::drift): the rule, each variant's
// mean Δ at the last quarter's validation points and the change over the quarter.
std::string settled_section(const ReportInputs& in) {
  const CompareResult& result = in.result;
  const CompareReport& r = in.r;
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
  for (const VariantSummary& s : result.summary) {
    if (s.variant == baseline_of(result)) continue;
    std::vector<std::string> points;
    for (const CurveStat& c : s.last_quarter)
      points.push_back(fmt_or_dash("{:+.4f}", c.delta_mean));
    md += fmt::format("| {} | {} | {} | {} |\n", s.variant, fmt::join(points, " → "),
                      with_interval(s.drift), to_string(s.settled));
  }
  return md;
}

// Loss by position: per set, each bucket of positions in the window, SA's mean loss there and each
// variant's difference to it with its interval. The direct test of "uses its context better".
std::string position_section(const ReportInputs& in) {
  const CompareResult& result = in.result;
  const CompareReport& r = in.r;
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

// The equal-loss view (equal_loss.h): how soon each variant reaches SA's final loss, counting its
// own cost per step, every seed counted; and where it stands when it has trained as long as SA.
std::string equal_loss_section(const ReportInputs& in) {
  const CompareResult& result = in.result;
  const CompareReport& r = in.r;
  if (result.summary.size() < 2 || !std::isfinite(result.baseline_end_step)) return "";
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
      result.baseline_end_step, result.baseline_end_seconds, r.run.val_every,
      100 * r.validation_share);
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
  const std::vector<SeedFigure>& seeds = result.summary[0].per_seed;
  for (size_t i = 0; i < n && i < seeds.size(); i++) md += fmt::format(" seed {} |", seeds[i].seed);
  md += "\n|---|";
  for (size_t i = 0; i < n && i < seeds.size(); i++) md += "---|";
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
std::string seeds_section(const ReportInputs& in) {
  const CompareResult& result = in.result;
  const CompareReport& r = in.r;
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

}  // namespace

std::string tuning_margin_text(const LrTuning& t, size_t k) {
  if (k >= t.margin.size() || !std::isfinite(t.runner_up[k])) return "";
  const PairedDifferences& m = t.margin[k];
  if (m.n < 2)
    return fmt::format(" (ahead of {:g} by {:.4f} on one tuning seed: how sure is not measured)",
                       t.runner_up[k], m.mean);
  if (!std::isfinite(m.ci_low))  // a tuning seed without a loss at one of the two rates
    return fmt::format(" (ahead of {:g} by {} over {} tuning seeds, no interval)", t.runner_up[k],
                       fmt_or_dash("{:.4f}", m.mean), m.n);
  return fmt::format(" (ahead of {:g} by {:.4f} [{:+.4f}, {:+.4f}] over {} tuning seeds: {})",
                     t.runner_up[k], m.mean, m.ci_low, m.ci_high, m.n,
                     m.ci_low > 0 ? "told apart" : "not told apart");
}

namespace {

// --tune-lr: each variant's validation loss at each candidate rate, and the one chosen.
std::string tuning_section(const ReportInputs& in) {
  const CompareReport& r = in.r;
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
  md += fmt::format(
      "\n**How sure each choice is.** The runner-up rate's final validation loss minus the "
      "chosen one's, paired by tuning seed (each seed starts every rate from the same weights on "
      "the same batches), with its 95 % t-interval over the tuning seeds: at least 0 on average by "
      "construction (a tie goes to the lower rate); an interval that reaches 0 says that other "
      "tuning seeds could have chosen the runner-up. The margin is measured on the seeds that made "
      "the choice, so it leans towards the choice: *yes* is optimistic, *no* is not. {}\n\n| "
      "variant | chosen | runner-up | runner-up − chosen [95 % CI] | "
      "tuning seeds | told apart? |\n|---|---|---|---|---|---|\n",
      t.seeds.size() > 1
          ? "It describes the choice; it is no test of the comparison above."
          : "One tuning seed gives no interval, and a one-seed margin can be smaller than the "
            "seed-to-seed spread of the difference between two rates (docs/study.md, the T 4 096 "
            "confirmation: SA's one-seed choice of 0.002, ahead of 0.004 by 0.06 on its tuning "
            "seed, was 0.05 behind it over 20 seeds); `--tune-seeds 3` measures it.");
  for (size_t k = 0; k < r.variants.size() && k < t.margin.size(); k++) {
    const PairedDifferences& m = t.margin[k];
    if (!std::isfinite(t.runner_up[k])) {
      md += fmt::format("| {} | {:g} | – | – | {} | no other rate ran without diverging |\n",
                        r.variants[k], t.chosen[k], t.seeds.size());
      continue;
    }
    const bool interval = std::isfinite(m.ci_low);
    md += fmt::format(
        "| {} | {:g} | {:g} | {} | {} | {} |\n", r.variants[k], t.chosen[k], t.runner_up[k],
        interval ? fmt::format("{:+.4f} [{:+.4f}, {:+.4f}]", m.mean, m.ci_low, m.ci_high)
                 : fmt_or_dash("{:+.4f}", m.mean),
        m.n,
        m.n < 2        ? "not measured (one seed)"
        : !interval    ? "no interval (a seed without a loss)"
        : m.ci_low > 0 ? "yes"
                       : "no");
  }
  return md;
}

// Arms in another precision than the run's (xsa@bf16): against their twins, and the XSA-vs-SA
// difference inside each precision.
std::string precision_section(const ReportInputs& in) {
  const CompareResult& result = in.result;
  const CompareReport& r = in.r;
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

// The plots' images, then where each arm's weights are.
std::string closing_section(const ReportInputs& in) {
  std::string md = "\n";
  for (const std::string& p : in.plots)
    if (p.size() > 4 && p.substr(p.size() - 4) == ".svg")
      md += fmt::format("![{0}]({0})\n\n", fs::path(p).filename().string());
  return md +
         "Final weights of every arm: `arms/<variant>-seed<seed>/` (inspect with `xsa analyze "
         "--ckpt`).\n";
}

// report.md, section by section, in this order.
struct ReportSection {
  const char* title;  // its heading, where it has one (the terminal prints some: compare.cpp)
  std::string (*render)(const ReportInputs&);
};
const ReportSection kReportSections[] = {
    {"", header_section},
    {"", table_section},
    {"", eval_sets_section},
    {"## Differences to SA", differences_section},
    {"## Settled?", settled_section},
    {"## Loss by position", position_section},
    {"## Equal loss", equal_loss_section},
    {"## Seeds", seeds_section},
    {"## Learning rates", tuning_section},
    {"## Precision", precision_section},
    {"", closing_section},
};

}  // namespace

std::string compare_report_markdown(const CompareReport& r, const CompareResult& result,
                                    const std::vector<std::string>& plots) {
  const ReportInputs in{r, result, plots};
  std::string md;
  for (const ReportSection& section : kReportSections) md += section.render(in);
  return md;
}

}  // namespace xsa
