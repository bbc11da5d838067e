#include "xsa/report/compare_report.h"

#include <cmath>

#include "xsa/report/svg.h"
#include "xsa/tokenizer/tokenizer.h"
#include "xsa/util/files.h"
#include "xsa/util/fmt.h"
#include "xsa/util/stats.h"

namespace xsa {

namespace fs = std::filesystem;
using nlohmann::json;

json arm_to_json(const ArmResult& a) {
  json curve = json::array(), evals = json::array();
  for (auto& [st, v] : a.val_curve)
    curve.push_back({st, std::isfinite(v) ? json(v) : json(nullptr)});
  for (double v : a.eval_losses) evals.push_back(std::isfinite(v) ? json(v) : json(nullptr));
  return {{"variant", a.variant},
          {"seed", a.seed},
          {"train_loss", a.train_loss},
          {"val_loss", std::isfinite(a.val_loss) ? json(a.val_loss) : json(nullptr)},
          {"eval_losses", evals},
          {"ms_per_step", a.ms_per_step},
          {"tokens_per_s", a.tokens_per_s},
          {"peak_mb", a.peak_mb},
          {"val_curve", curve},
          {"val_seconds", a.val_seconds},
          {"init_hash", fmt::format("{:016x}", a.init_hash)},
          {"batches_hash", fmt::format("{:016x}", a.batches_hash)}};
}

ArmResult arm_from_json(const json& j) {
  auto num = [](const json& v) { return v.is_null() ? NAN : v.get<double>(); };
  ArmResult a;
  a.variant = j.at("variant"), a.seed = j.at("seed");
  a.train_loss = num(j.at("train_loss")), a.val_loss = num(j.at("val_loss"));
  for (const auto& v : j.at("eval_losses")) a.eval_losses.push_back(num(v));
  a.ms_per_step = j.at("ms_per_step"), a.tokens_per_s = j.at("tokens_per_s"),
  a.peak_mb = j.at("peak_mb");
  for (const auto& p : j.at("val_curve")) a.val_curve.push_back({p[0].get<int64_t>(), num(p[1])});
  if (j.contains("val_seconds")) a.val_seconds = j.at("val_seconds").get<std::vector<double>>();
  a.init_hash = std::stoull(j.at("init_hash").get<std::string>(), nullptr, 16);
  a.batches_hash = std::stoull(j.at("batches_hash").get<std::string>(), nullptr, 16);
  return a;
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

namespace {

json nan_to_null(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

// A mean validation loss (nats per token) in bits per byte; NaN when the bytes are not known.
double val_bpb(const CompareReport& r, double val_loss) {
  return bits_per_byte(val_loss, r.val_bytes_per_token);
}

std::string fmt_or_dash(const char* f, double v) {
  return std::isfinite(v) ? fmt::vformat(f, fmt::make_format_args(v)) : "–";
}

json paired_to_json(const PairedDelta& d) {
  if (d.reference.empty()) return nullptr;
  return {{"against", d.reference},
          {"delta_mean", nan_to_null(d.mean)},
          {"delta_sd", nan_to_null(d.sd)},
          {"p_value", nan_to_null(d.p_value)},
          {"against_val_loss_sd", nan_to_null(d.reference_sd)},
          {"time_ratio", nan_to_null(d.time_ratio)}};
}

json equal_loss_to_json(const EqualLoss& e) {
  return {{"seeds", e.seeds},
          {"seeds_reached", e.reached},
          {"target", "each seed's SA final validation loss"},
          {"steps_mean", nan_to_null(e.steps_mean)},
          {"steps_sd", nan_to_null(e.steps_sd)},
          {"tokens_mean", nan_to_null(e.tokens_mean)},
          {"tokens_sd", nan_to_null(e.tokens_sd)},
          {"seconds_mean", nan_to_null(e.seconds_mean)},
          {"seconds_sd", nan_to_null(e.seconds_sd)},
          {"step_speedup_mean", nan_to_null(e.step_speedup_mean)},
          {"time_speedup_mean", nan_to_null(e.time_speedup_mean)},
          {"time_speedup_sd", nan_to_null(e.time_speedup_sd)},
          {"val_loss_at_sa_time_mean", nan_to_null(e.loss_at_sa_time_mean)},
          {"val_loss_at_sa_time_sd", nan_to_null(e.loss_at_sa_time_sd)},
          {"delta_at_sa_time_mean", nan_to_null(e.delta_at_sa_time_mean)},
          {"delta_at_sa_time_sd", nan_to_null(e.delta_at_sa_time_sd)},
          {"finished_before_sa_time", e.beyond_own_run}};
}

// The equal-loss view (equal_loss.h): how soon each variant reaches SA's final loss, counting its
// own cost per step, and where it stands when it has trained as long as SA.
std::string equal_loss_section(const CompareResult& result, const CompareReport& r) {
  std::vector<double> sa_steps, sa_seconds;
  for (const ArmResult* a : arms_of(result, "sa")) {
    const std::vector<CurvePoint> c = curve_of(*a);
    if (!c.empty()) sa_steps.push_back(c.back().step), sa_seconds.push_back(c.back().seconds);
  }
  if (result.summary.size() < 2 || sa_steps.empty()) return "";
  std::string md = fmt::format(
      "\n## Equal loss\n\nHow soon each variant reaches SA's final validation loss (each seed's "
      "own SA arm's; SA ends at step {:.0f} after {:.1f} s of its own training time, mean over "
      "seeds), counting each arm's own time per step: the steps, tokens and seconds it needs "
      "(linear between validation points, every {} steps; mean ± sd over the seeds that reach "
      "it), SA's steps and seconds over those (above 1: sooner than SA), and its validation loss "
      "once it has trained as long as SA did. Validating took {:.1f} % of the comparison's "
      "wall-clock.\n\n| variant | reached | steps | tokens | seconds | speed-up, steps | speed-up, "
      "wall-clock | val loss at SA's time | Δ vs SA there "
      "|\n|---|---|---|---|---|---|---|---|---|\n",
      mean(sa_steps), mean(sa_seconds), r.run.val_every, 100 * r.validation_share);
  // "mean ± sd" in format f (the sd unsigned), or "not reached".
  const auto pm = [](double m, double sd, const char* f) {
    if (!std::isfinite(m)) return std::string("not reached");
    std::string sd_format = f;
    if (const size_t plus = sd_format.find('+'); plus != std::string::npos)
      sd_format.erase(plus, 1);
    return fmt::vformat(f, fmt::make_format_args(m)) +
           (sd > 0 ? " ± " + fmt::vformat(sd_format, fmt::make_format_args(sd)) : "");
  };
  for (const VariantSummary& s : result.summary) {
    if (s.variant == "sa") continue;
    const EqualLoss& e = s.equal_loss;
    md += fmt::format(
        "| {} | {} of {} | {} | {} | {} | {} | {} | {}{} | {} |\n", s.variant, e.reached, e.seeds,
        pm(e.steps_mean, e.steps_sd, "{:.0f}"), pm(e.tokens_mean, e.tokens_sd, "{:.0f}"),
        pm(e.seconds_mean, e.seconds_sd, "{:.1f}"), fmt_or_dash("{:.3f}", e.step_speedup_mean),
        e.reached ? pm(e.time_speedup_mean, e.time_speedup_sd, "{:.3f}") : "–",
        pm(e.loss_at_sa_time_mean, e.loss_at_sa_time_sd, "{:.4f}"),
        e.beyond_own_run ? " (finished sooner: its final loss)" : "",
        pm(e.delta_at_sa_time_mean, e.delta_at_sa_time_sd, "{:+.4f}"));
  }
  return md;
}

// How many seeds each difference takes: the observed difference and spread, and the seeds a
// paired t-test needs to find it at p < 0.05 with 80 % power; --seeds auto's stop.
std::string seeds_section(const CompareResult& result, const CompareReport& r) {
  if (result.summary.size() < 2) return "";
  std::string md = fmt::format(
      "\n## Seeds\n\nHow many seeds it takes to see each difference: the difference to SA "
      "observed here (paired by seed) and the seeds a paired t-test needs to find a difference of "
      "that size and spread at p < 0.05 with 80 % power, were it the true one (noncentral t). "
      "Fewer seeds than that can miss a real difference; the observed spread of a few seeds is "
      "itself uncertain.{}\n\n| variant | Δ vs SA (mean) | sd of Δ over seeds | seeds run | seeds "
      "for 80 % power |{}\n|---|---|---|---|---|{}\n",
      r.seeds_note.empty() ? "" : "\n\n" + r.seeds_note + ".",
      r.seeds_note.empty() ? "" : " answer |", r.seeds_note.empty() ? "" : "---|");
  for (const VariantSummary& s : result.summary) {
    if (s.variant == "sa") continue;
    const std::string needed = s.seeds_for_power == 0     ? "–"
                               : s.seeds_for_power > 1000 ? "more than 1000"
                                                          : std::to_string(s.seeds_for_power);
    md += fmt::format("| {} | {:+.4f} | {} | {} | {} |{}\n", s.variant, s.delta_vs_sa_mean,
                      s.n_seeds > 1 ? fmt::format("{:.4f}", s.delta_vs_sa_sd) : "–", s.n_seeds,
                      needed, r.seeds_note.empty() ? "" : " " + s.seeds_answer + " |");
  }
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
    if (!a.reference.empty())
      inside += fmt::format("| {} | {} | {:+.4f} ± {:.4f} | {} |\n", s.variant, a.reference, a.mean,
                            a.sd, fmt_or_dash("{:.3f}", a.p_value));
  }
  if (twins.empty()) return "";
  std::string md = fmt::format(
      "\n## Precision\n\nThe arms marked @ ran in that precision, the others in {}; twins start "
      "from the same weights and see the same batches. A difference matters when it is large "
      "against the seed-to-seed spread (sd of the twin's validation loss over seeds) and p is "
      "small.\n\n| arm | twin | Δ val loss vs twin (mean ± sd) | p (paired t) | twin's seed sd "
      "| time per step / twin's |\n|---|---|---|---|---|---|\n",
      r.run.precision);
  md += twins;
  if (!inside.empty())
    md +=
        "\nInside one precision: each arm against SA in the same precision.\n\n| arm | "
        "against | Δ val loss (mean ± sd) | p (paired t) |\n|---|---|---|---|\n" +
        inside;
  return md;
}

// Validation curves (mean over seeds, ± sd band), their difference to SA, the similarity bias.
std::vector<std::string> write_plots(const fs::path& out, const CompareReport& r,
                                     const CompareResult& result) {
  const auto sa_arms = arms_of(result, "sa");
  auto arms_of = [&](const std::string& v) { return xsa::arms_of(result, v); };
  std::vector<std::string> plots;
  {
    std::vector<Series> curves, deltas;
    for (size_t k = 0; k < r.variants.size(); k++) {
      const auto mine = arms_of(r.variants[k]);
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
      // The first point (step 0) is at initialisation: show the curve from the first evaluation on.
      curves.push_back(c);
      if (k > 0) deltas.push_back(d);
    }
    for (Series& c : curves)
      if (c.x.size() > 2) {
        c.x.erase(c.x.begin()), c.y.erase(c.y.begin());
        if (!c.y_low.empty()) c.y_low.erase(c.y_low.begin()), c.y_high.erase(c.y_high.begin());
      }
    // The same curves against each arm's own training time (the equal-loss view).
    std::vector<Series> by_time;
    for (const std::string& v : r.variants) {
      const auto mine = arms_of(v);
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
    auto add = [&](const std::vector<std::string>& files) {
      plots.insert(plots.end(), files.begin(), files.end());
    };
    add(write_plot((out / "val_loss").string(),
                   svg_line_chart(fmt::format("Validation loss ({} seed{}, band: ± sd)", r.seeds,
                                              r.seeds > 1 ? "s" : ""),
                                  "step", "validation loss", curves)));
    add(write_plot((out / "val_loss_by_time").string(),
                   svg_line_chart("Validation loss against each arm's own training time (mean over "
                                  "seeds)",
                                  "seconds of training", "validation loss", by_time)));
    if (!deltas.empty())
      add(write_plot((out / "delta_vs_sa").string(),
                     svg_line_chart("Validation loss minus SA's (below 0: better than SA)", "step",
                                    "Δ validation loss", deltas, true)));
    if (!r.bias[0].empty()) {
      std::vector<Series> per_layer;
      for (size_t k = 0; k < r.variants.size(); k++) {
        Series s{r.variants[k] + " cos(y,v)", {}, {}, {}, {}};
        for (int l = 0; l < r.model.n_layer; l++) {
          double sum = 0;
          for (int h = 0; h < r.model.n_head; h++) sum += r.bias[k][l * r.model.n_head + h].cos_yv;
          s.x.push_back(l), s.y.push_back(sum / r.model.n_head);
        }
        per_layer.push_back(s);
      }
      add(write_plot(
          (out / "similarity_bias").string(),
          svg_line_chart("Attention similarity bias: mean cos(y_i, v_i) per layer (seed 1)",
                         "layer", "cos(y, v)", per_layer, true)));
    }
  }

  return plots;
}

// Per variant: its parameter count and its rivals of XSA.
nlohmann::json parameters_json(const CompareReport& r) {
  nlohmann::json j = nlohmann::json::object();
  for (size_t k = 0; k < r.variants.size() && k < r.parameters.size(); k++)
    j[r.variants[k]] = {{"count", r.parameters[k]},
                        {"vs_sa", r.parameters[k] - r.parameters[0]},
                        {"rivals", k < r.rivals.size() ? rivals_string(r.rivals[k]) : ""}};
  return j;
}

void write_report_json(const fs::path& out, const CompareReport& r, const CompareResult& result) {
  json j_arms = json::array(), j_summary = json::array();
  for (const ArmResult& a : result.arms) j_arms.push_back(arm_to_json(a));
  for (const VariantSummary& s : result.summary)
    j_summary.push_back(
        {{"variant", s.variant},
         {"n_seeds", s.n_seeds},
         {"train_loss_mean", s.train_loss_mean},
         {"val_loss_mean", nan_to_null(s.val_loss_mean)},
         {"val_loss_sd", nan_to_null(s.val_loss_sd)},
         {"val_bpb_mean", nan_to_null(val_bpb(r, s.val_loss_mean))},
         {"delta_vs_sa_mean", nan_to_null(s.delta_vs_sa_mean)},
         {"delta_vs_sa_sd", nan_to_null(s.delta_vs_sa_sd)},
         {"p_value", nan_to_null(s.p_value)},
         {"overhead_vs_sa", s.overhead_vs_sa},
         {"cos_yv_mean", nan_to_null(s.cos_yv_mean)},
         {"equal_loss", s.variant == "sa" ? json(nullptr) : equal_loss_to_json(s.equal_loss)},
         {"seeds_for_80pct_power",
          s.variant == "sa" || s.seeds_for_power == 0 ? json(nullptr) : json(s.seeds_for_power)},
         {"seeds_answer", s.variant == "sa" ? json(nullptr) : json(s.seeds_answer)},
         {"eval_loss_mean", s.eval_loss_mean},
         {"eval_delta_vs_sa_mean", s.eval_delta_vs_sa_mean},
         {"verdict", s.verdict},
         {"vs_twin", paired_to_json(s.vs_twin)},
         {"vs_precision_sa", paired_to_json(s.vs_precision_sa)}});
  json j_bias = json::array();
  for (size_t k = 0; k < r.variants.size(); k++)
    for (const HeadBias& h : r.bias[k])
      j_bias.push_back({{"variant", r.variants[k]},
                        {"layer", h.layer},
                        {"head", h.head},
                        {"cos_yv", h.cos_yv},
                        {"cos_zv", nan_to_null(h.cos_zv)},
                        {"self_weight", h.self_weight},
                        {"cos_vv", h.cos_vv}});
  nlohmann::json model_json = r.model;
  json report = {{"data", r.run.data},
                 {"eval_data", r.eval_data},
                 {"model", model_json},
                 {"run", run_config_to_json(r.run)},
                 {"variants", r.variants},
                 {"seeds", r.seeds},
                 {"arms", j_arms},
                 {"summary", j_summary},
                 {"similarity_bias", j_bias},
                 {"seeds_note", r.seeds_note},
                 {"parameters", parameters_json(r)},
                 {"validation",
                  {{"every_steps", r.run.val_every},
                   {"batches", r.run.val_batches},
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
    if (r.rivals[k].gated_attn) gated.push_back(r.variants[k]);
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

std::string write_compare_report(const fs::path& out, const CompareReport& r,
                                 const CompareResult& result) {
  const std::vector<std::string> plots = write_plots(out, r, result);
  auto arms_of = [&](const std::string& v) { return xsa::arms_of(result, v); };

  std::string md = fmt::format(
      "# xsa compare\n\n{} on `{}`: {} layers, {} heads, width {}, context {}, batch {}, {} steps, "
      "peak lr {}, {}, "
      "{} seed(s) ({}…).\nEvery arm of a seed starts from the same weights and sees the same "
      "batches; steps run "
      "interleaved, so the timing columns compare like with like.\n\n",
      fmt::join(r.variants, ", "), r.run.data, r.model.n_layer, r.model.n_head, r.model.n_embd,
      r.model.seq_len, r.run.batch, r.run.steps, r.run.lr, r.run.precision, r.seeds, r.run.seed);
  // Bits per byte beside the loss when the validation set's bytes are known: runs of different
  // vocabularies compare by it, not by the loss per token.
  const bool bpb = std::isfinite(r.val_bytes_per_token);
  md += fmt::format(
      "| variant | seeds | train loss | val loss |{} Δ val vs SA (mean ± sd) | p (paired t) | "
      "verdict | ms/step | overhead vs SA | tokens/s | peak MB |\n",
      bpb ? " val bits per byte |" : "");
  md += fmt::format("|---|---|---|---|{}---|---|---|---|---|---|---|\n", bpb ? "---|" : "");
  for (const VariantSummary& s : result.summary) {
    const auto mine = arms_of(s.variant);
    std::vector<double> ms, tok;
    for (auto* a : mine) ms.push_back(a->ms_per_step), tok.push_back(a->tokens_per_s);
    md += fmt::format(
        "| {} | {} | {:.4f} | {} |{} {} | {} | {} | {:.1f} | {:+.1f}% | {:.0f} | {:.0f} |\n",
        s.variant, s.n_seeds, s.train_loss_mean,
        fmt_or_dash("{:.4f}", s.val_loss_mean) +
            (s.n_seeds > 1 ? " ± " + fmt_or_dash("{:.4f}", s.val_loss_sd) : ""),
        bpb ? fmt::format(" {} |", fmt_or_dash("{:.4f}", val_bpb(r, s.val_loss_mean))) : "",
        s.variant == "sa" ? "–"
                          : fmt::format("{:+.4f} ± {:.4f}", s.delta_vs_sa_mean, s.delta_vs_sa_sd),
        fmt_or_dash("{:.3f}", s.p_value), s.verdict, mean(ms), 100 * s.overhead_vs_sa, mean(tok),
        r.peak_mb[&s - &result.summary[0]]);
  }
  md += kTimingNote;
  md += parameters_note(r);
  if (!r.eval_data.empty()) {
    md +=
        "\nFurther evaluation sets (mean loss over seeds; Δ to SA). The sign of an effect can "
        "differ between "
        "in-domain and shifted text.\n\n| variant |";
    for (const std::string& e : r.eval_data) md += fmt::format(" {} | Δ |", e);
    md += "\n|---|";
    for (size_t e = 0; e < r.eval_data.size(); e++) md += "---|---|";
    md += "\n";
    for (const VariantSummary& s : result.summary) {
      md += "| " + s.variant + " |";
      for (size_t e = 0; e < r.eval_data.size(); e++)
        md += fmt::format(
            " {} | {} |", fmt_or_dash("{:.4f}", s.eval_loss_mean[e]),
            s.variant == "sa" ? "–" : fmt_or_dash("{:+.4f}", s.eval_delta_vs_sa_mean[e]));
      md += "\n";
    }
  }
  md += equal_loss_section(result, r);
  md += seeds_section(result, r);
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
