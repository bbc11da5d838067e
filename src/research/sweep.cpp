#include "xsa/research/sweep.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "xsa/board/page.h"
#include "xsa/dist/comm.h"
#include "xsa/io/checkpoint.h"
#include "xsa/report/svg.h"
#include "xsa/tokenizer/tokenizer.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/fmt.h"
#include "xsa/util/parse.h"
#include "xsa/util/stats.h"

namespace xsa {

using nlohmann::json;

namespace {

// The options a sweep can vary: name, whether it takes whole numbers only, and where it goes.
struct SweepOption {
  const char* name;
  bool whole;
  void (*set)(CompareConfig&, double);
};
constexpr SweepOption kSweepOptions[] = {
    {"seq-len", true, [](CompareConfig& c, double v) { c.model.seq_len = (int)v; }},
    {"lr", false, [](CompareConfig& c, double v) { c.run.lr = v; }},
    {"embd", true, [](CompareConfig& c, double v) { c.model.n_embd = (int)v; }},
    {"layers", true, [](CompareConfig& c, double v) { c.model.n_layer = (int)v; }},
    {"heads", true, [](CompareConfig& c, double v) { c.model.n_head = (int)v; }},
    {"kv-heads", true, [](CompareConfig& c, double v) { c.model.n_kv_head = (int)v; }},
    {"steps", true, [](CompareConfig& c, double v) { c.run.steps = (int64_t)v; }},
    {"batch", true, [](CompareConfig& c, double v) { c.run.batch = (int)v; }},
    {"warmup", true, [](CompareConfig& c, double v) { c.run.warmup = (int64_t)v; }},
    {"weight-decay", false, [](CompareConfig& c, double v) { c.run.weight_decay = v; }},
    {"muon-lr", false, [](CompareConfig& c, double v) { c.run.muon_lr = v; }},
    {"logit-softcap", false, [](CompareConfig& c, double v) { c.model.logit_softcap = v; }},
};
constexpr const char* kPrecision = "precision";

// With --tokens-per-step: what each value's step is made of.
std::string steps_note(const std::vector<CompareConfig>& configs,
                       const std::vector<std::string>& values, int64_t tokens_per_step) {
  if (tokens_per_step <= 0) return "";
  const int world = world_comm().size();
  std::string note = fmt::format(" Every step {} tokens:", tokens_per_step);
  for (size_t i = 0; i < configs.size(); i++) {
    const RunConfig& r = configs[i].run;
    note += fmt::format("{} {} → batch {} × {} accumulation{}", i ? ";" : "", values[i], r.batch,
                        r.accumulation_steps(configs[i].model.seq_len, world),
                        world > 1 ? fmt::format(" × {} processes", world) : "");
  }
  return note + ".";
}

// A figure or "–" where it is undefined; in JSON, null.
std::string figure(double x, const char* spec) {
  return std::isfinite(x) ? fmt::format(fmt::runtime(spec), x) : "–";
}
json finite_or_null(double x) {
  return std::isfinite(x) ? json(x) : json();
}

// Per value: what each variant costs and gains at equal loss and at equal wall-clock (each
// report's Equal loss section in one table), and the similarity bias of every variant.
std::string cost_and_bias_tables(const std::string& param, const std::vector<std::string>& values,
                                 const std::vector<CompareResult>& results,
                                 const std::vector<std::string>& variants) {
  std::string md = fmt::format(
      "\n## Equal loss and wall-clock\n\nPer value and variant: the seeds whose validation "
      "curve reached SA's final loss, the speed-up to reach it in steps and in the arm's own "
      "wall-clock (its overhead counted; SA's over the Kaplan–Meier median of every seed, a seed "
      "that never got there censored at its run's end, – when half or more never did), the same "
      "from the seed-mean curves, the validation loss minus SA's final loss at SA's total "
      "training time with its 95 % interval, and the step's overhead vs SA (each report's Equal "
      "loss section).\n\n"
      "| {} | variant | reached | speed-up, steps | speed-up, wall-clock | mean curves: steps / "
      "wall-clock | Δ at SA's wall-clock [95 % CI] | overhead vs SA |\n"
      "|---|---|---|---|---|---|---|---|\n",
      param);
  for (size_t i = 0; i < results.size(); i++)
    for (size_t k = 1; k < results[i].summary.size(); k++) {
      const VariantSummary& s = results[i].summary[k];
      const EqualLoss& e = s.equal_loss;
      md += fmt::format(
          "| {} | {} | {} of {} | {} | {} | {} / {} | {}{} | {:+.1f}% |\n", values[i], s.variant,
          e.reached, e.seeds, figure(e.step_speedup, "{:.3f}"), figure(e.time_speedup, "{:.3f}"),
          figure(e.mean_curve_step_speedup, "{:.3f}"), figure(e.mean_curve_time_speedup, "{:.3f}"),
          figure(e.delta_at_sa_time_mean, "{:+.4f}") +
              (std::isfinite(e.delta_at_sa_time_ci_low)
                   ? fmt::format(" [{:+.4f}, {:+.4f}]", e.delta_at_sa_time_ci_low,
                                 e.delta_at_sa_time_ci_high)
                   : ""),
          e.beyond_own_run ? " (finished sooner: its final loss)" : "", 100 * s.overhead_vs_sa);
    }
  md += fmt::format(
      "\n## Similarity bias\n\nMean cos(y_i, v_i) over every layer and head (the first seed's "
      "arms, on validation data): how much of each token's attention output points along its own "
      "value.\n\n| {} |",
      param);
  for (const std::string& v : variants) md += fmt::format(" {} |", v);
  md += "\n|---|";
  for (size_t k = 0; k < variants.size(); k++) md += "---|";
  md += "\n";
  for (size_t i = 0; i < results.size(); i++) {
    md += "| " + values[i] + " |";
    for (const VariantSummary& s : results[i].summary)
      md += fmt::format(" {} |", figure(s.cos_yv_mean, "{:.3f}"));
    md += "\n";
  }
  return md;
}

}  // namespace

void apply_sweep_param(CompareConfig& cfg, const std::string& param, const std::string& value) {
  if (param == kPrecision) {  // the one option whose values are names, not numbers
    const auto precision = precision_named(value);
    if (!precision) fail("--param precision: value '{}' is not {}", value, kPrecisionChoices);
    cfg.run.precision = *precision;
    return;
  }
  const std::optional<double> number = parse_number(value);
  if (!number) fail("--param {}: value '{}' is not a number", param, value);
  const double v = *number;
  std::string names;
  for (const SweepOption& option : kSweepOptions) {
    if (param == option.name) {
      if (option.whole && (v != std::floor(v) || v < 1))
        fail("--param {}: value '{}' must be a positive whole number", param, value);
      option.set(cfg, v);
      return;
    }
    names += (names.empty() ? "" : ", ") + std::string(option.name);
  }
  names += ", " + std::string(kPrecision);
  fail("--param {} is not a sweepable option ({})", param, names);
}

namespace {

// Each value's comparison, checked and derived (its batch from --tokens-per-step, its shape from
// --init-from, its output folder) before the first one runs.
std::vector<CompareConfig> sweep_configs(const CompareConfig& base, const std::string& param,
                                         const std::vector<std::string>& values,
                                         int64_t tokens_per_step) {
  namespace fs = std::filesystem;
  std::vector<CompareConfig> configs;
  for (const std::string& value : values) {
    CompareConfig cfg = base;
    apply_sweep_param(cfg, param, value);
    if (!cfg.run.init_from.empty()) {  // the shape is the checkpoint's; seq-len must fit it
      for (const char* shape : {"layers", "embd", "heads", "kv-heads"})
        if (param == shape)
          fail("--param {} cannot vary with --init-from: the model's shape is the checkpoint's",
               param);
      cfg.model = init_from_config(resolve_checkpoint(cfg.run.init_from), cfg.model);
    }
    if (tokens_per_step > 0) {
      cfg.run.total_batch_tokens = tokens_per_step;
      cfg.run.batch = RunConfig::batch_for_step_tokens(tokens_per_step, cfg.model.seq_len,
                                                       world_comm().size(), base.run.batch);
    }
    cfg.model.validate();
    cfg.run.validate();
    check_compare_variants(cfg);
    backend_for(cfg.run);  // bf16 where the CPU cannot: said before the first value runs
    cfg.run.out = (fs::path(base.run.out) / (param + "-" + value)).string();
    configs.push_back(cfg);
  }
  return configs;
}

// Values spanning a factor of 8 or more (lengths 256…4096) are drawn evenly spaced, labelled with
// their values: on a linear axis the small ones would crowd at the left edge. So are names.
bool plot_evenly(const std::string& param, const std::vector<std::string>& values) {
  if (param == kPrecision) return true;
  double lo = std::stod(values.front()), hi = lo;
  for (const std::string& v : values) {
    lo = std::min(lo, std::stod(v));
    hi = std::max(hi, std::stod(v));
  }
  return lo > 0 && hi / lo >= 8;
}

// One variant at one value, as a row of sweep.json: the swept value, the summary fields that go to
// sweep.json (report/compare_report.h's one list), and the sweep's own: its Holm across every
// test, SA's similarity bias beside the variant's, the report, the step.
json sweep_row(const std::string& param, const json& value, const CompareResult& result,
               const VariantSummary& s, const CompareConfig& cfg, double p_holm_sweep) {
  json row = {{param, value}};
  row.update(summary_record(s, &s == &result.summary[0], result.val_bytes_per_token, std::nullopt,
                            kInSweep));
  row["p_holm_sweep"] = finite_or_null(p_holm_sweep);
  row["report"] = result.report_dir;
  row["sa_cos_yv_mean"] = finite_or_null(result.summary[0].cos_yv_mean);
  row["batch"] = cfg.run.batch;
  row["tokens_per_step"] = cfg.run.step_tokens(cfg.model.seq_len, world_comm().size());
  return row;
}

// sweep.md, sweep.json and the Δ plot: Δ validation loss vs SA (mean and its 95 % interval over
// seeds) per variant against the swept value, then the equal-loss and similarity-bias tables.
void write_sweep_report(const CompareConfig& base, const std::string& param,
                        const std::vector<std::string>& values, int64_t tokens_per_step,
                        const std::vector<CompareConfig>& configs,
                        const std::vector<CompareResult>& results) {
  namespace fs = std::filesystem;
  const bool categorical = param == kPrecision;
  const bool evenly = plot_evenly(param, values);
  std::vector<Series> series;
  json rows = nlohmann::json::array();
  // Holm across every test of the sweep (each variant at each value against SA).
  std::vector<double> raw;
  for (const CompareResult& r : results)
    for (size_t k = 1; k < r.summary.size(); k++) raw.push_back(r.summary[k].p_value);
  const std::vector<double> holm = holm_adjusted(raw);
  std::string md = fmt::format(
      "# xsa sweep over {}\n\nΔ = validation loss minus SA's (below 0: the variant is better), "
      "paired by seed over {} seed(s): mean [95 % t-interval], the same in bits per byte, Cohen's "
      "d_z, and two-sided p-values: the paired t-test's, the same Holm-corrected across all {} "
      "tests of this sweep (every variant at every value; each value's own report corrects only "
      "across its variants, so read this column when picking the best of many), and the exact "
      "Wilcoxon signed-rank test's.{}\n\n| {} | variant | lr | Δ [95 % CI] | Δ bits per byte "
      "[95 % CI] | d_z | p (t) | p (Holm, sweep) | p (Wilcoxon) |\n"
      "|---|---|---|---|---|---|---|---|---|\n",
      param, base.seeds, raw.size(), steps_note(configs, values, tokens_per_step), param);
  for (size_t k = 1; k < base.variants.size(); k++)
    series.push_back({base.variants[k], {}, {}, {}, {}});
  size_t test = 0;
  for (size_t i = 0; i < results.size(); i++) {
    const double x = evenly ? (double)i : std::stod(values[i]);
    const json x_value = categorical ? json(values[i]) : json(std::stod(values[i]));
    const double bpt = results[i].val_bytes_per_token;
    for (size_t k = 1; k < results[i].summary.size(); k++, test++) {
      const VariantSummary& s = results[i].summary[k];
      const PairedDifferences& d = s.delta;
      Series& se = series[k - 1];
      se.x.push_back(x), se.y.push_back(s.delta_vs_sa_mean);
      if (base.seeds > 1) se.y_low.push_back(d.ci_low), se.y_high.push_back(d.ci_high);
      const auto interval = [&](double scale_bpt, const char* f) {
        // scale_bpt: 0 for nats; bytes per token for bits per byte (NaN when not known: "–").
        const auto conv = [&](double v) {
          return scale_bpt == 0 ? v : bits_per_byte(v, scale_bpt);
        };
        if (!std::isfinite(conv(d.mean))) return std::string("–");
        std::string out = fmt::format(fmt::runtime(f), conv(d.mean));
        if (std::isfinite(d.ci_low))
          out += fmt::format(" [{}, {}]", fmt::format(fmt::runtime(f), conv(d.ci_low)),
                             fmt::format(fmt::runtime(f), conv(d.ci_high)));
        return out;
      };
      md += fmt::format("| {} | {} | {:g} | {} | {} | {} | {} | {} | {} |\n", values[i], s.variant,
                        s.lr, interval(0, "{:+.4f}"), interval(bpt, "{:+.4f}"),
                        figure(d.d_z, "{:+.2f}"), figure(s.p_value, "{:.3g}"),
                        figure(holm[test], "{:.3g}"), figure(d.p_wilcoxon, "{:.3g}"));
      rows.push_back(sweep_row(param, x_value, results[i], s, configs[i], holm[test]));
    }
  }
  const fs::path out = base.run.out;
  auto files = write_plot(
      (out / ("delta_vs_" + param)).string(),
      svg_line_chart(
          fmt::format("Each variant vs SA across {} (band: 95 % interval over seeds)", param),
          param, "Δ validation loss vs SA", series, true, 1,
          evenly ? values : std::vector<std::string>()));
  md += fmt::format("\n![{0}]({0})\n", fs::path(files[0]).filename().string());
  md += cost_and_bias_tables(param, values, results, base.variants);
  md += fmt::format("\nEach value's full report: `{}-<value>/report.md`.\n", param);
  write_file_atomic(out / "sweep.md", md);
  write_file_atomic(out / "sweep.json", rows.dump(2) + "\n");
  // report.html from the results in memory: the sweep's chart, then each value's comparison.
  json page = {{"kind", "sweep"},
               {"title", out.filename().string()},
               {"param", param},
               {"sweep", rows},
               {"comparisons", json::array()}};
  for (size_t i = 0; i < results.size(); i++)
    page["comparisons"].push_back(
        comparison_page_json(fs::path(configs[i].run.out).filename().string(), results[i]));
  write_report_html(out, page);
  if (!base.run.quiet)
    std::printf("\n%s\nsweep report: %s (and report.html)\n", md.c_str(),
                (out / "sweep.md").string().c_str());
}

}  // namespace

void sweep(const CompareConfig& base, const std::string& param,
           const std::vector<std::string>& values, int64_t tokens_per_step) {
  if (values.empty()) fail("--param {}: no values", param);
  if (tokens_per_step > 0 && param == "batch")
    fail("--param batch and --tokens-per-step do not combine: the batch follows from the tokens");
  if (tokens_per_step < 0) fail("--tokens-per-step {} must be positive", tokens_per_step);
  if (param == "lr" && !base.tune_lrs.empty())
    fail("--param lr and --tune-lr do not combine: --tune-lr picks each variant's rate itself");
  if (world_comm().is_root()) refuse_symlink(base.run.out);  // its folder holds every value's
  const std::vector<CompareConfig> configs = sweep_configs(base, param, values, tokens_per_step);
  // Under mpirun each value's comparison is data-parallel; rank 0 writes the reports.
  const bool root = world_comm().is_root();
  std::vector<CompareResult> results;
  for (size_t i = 0; i < configs.size(); i++) {
    if (!base.run.quiet && root)
      std::printf("\n== %s = %s (%zu of %zu)\n", param.c_str(), values[i].c_str(), i + 1,
                  values.size());
    results.push_back(compare(configs[i]));
  }
  if (root) write_sweep_report(base, param, values, tokens_per_step, configs, results);
}

}  // namespace xsa
