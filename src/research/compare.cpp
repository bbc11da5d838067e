#include "xsa/research/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "xsa/board/page.h"
#include "xsa/dist/agree.h"
#include "xsa/dist/comm.h"
#include "xsa/eval/suite.h"
#include "xsa/research/compare_parts.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/fmt.h"
#include "xsa/util/stats.h"

namespace xsa {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace comparison;

namespace {

// What the report holds beside the arms' results: the settings, the similarity bias of each
// variant, the peaks, validation's share of the wall-clock, the parameter counts. Sets each
// variant's summary cos_yv_mean from the bias.
CompareReport make_report(const CompareConfig& cfg, const Setup& s, CompareResult& result,
                          int seeds_run, const std::vector<double>& peak, double validation_seconds,
                          const std::string& seeds_note,
                          const std::optional<SequentialDesign>& design) {
  double training_seconds = 0;
  for (const ArmResult& a : result.arms)
    training_seconds += a.val_seconds.empty() ? 0 : a.val_seconds.back();
  std::vector<int64_t> parameters;
  std::vector<LayerAttention> rivals;
  for (const Variant& v : s.variants) {
    parameters.push_back(parameter_count(variant_model(s.model, v)));
    rivals.push_back(options_on_any_layer(v.attention, s.model.n_layer));
  }
  CompareReport report;
  report.variants = cfg.variants, report.eval_data = cfg.eval_data;
  report.model = s.model, report.run = cfg.run, report.seeds = seeds_run;
  report.bias = analyze_arms(cfg, s), report.peak_mb = peak;
  report.validation_share = validation_seconds / (validation_seconds + training_seconds);
  report.seeds_note = seeds_note, report.parameters = parameters, report.rivals = rivals;
  report.val_bytes_per_token = s.val_bytes_per_token;
  report.design = design;
  report.tuning = cfg.tuned;
  report.score_tokens = cfg.score_tokens;
  report.plots = !cfg.tuning;
  const auto sampled = [&](const TokenStream& st) {
    const int64_t T = s.model.seq_len, windows = st.size() > (size_t)T ? (st.size() - 1) / T : 0;
    return cfg.score_tokens > 0 && windows > std::max<int64_t>(1, cfg.score_tokens / T);
  };
  report.score_sampled.push_back(sampled(s.data.val));
  for (const Dataset& e : s.evals)
    report.score_sampled.push_back(
        sampled(e.val.size() > (size_t)s.model.seq_len ? e.val : e.train));
  for (size_t k = 0; k < report.bias.size() && k < result.summary.size(); k++)
    result.summary[k].cos_yv_mean = mean_cos_yv(report.bias[k]);
  return report;
}

// The terminal's view of report.md: the main table with its timing note, then the loss by
// position, equal-loss, seeds, learning-rate and precision sections, each up to what follows it.
void print_report_summary(const std::string& md, const fs::path& out) {
  const size_t table = md.find("| variant");
  const size_t note = md.find(kTimingNote, table);
  const size_t shown_end = note + std::string_view(kTimingNote).size() - 1;
  std::string shown = md.substr(table, shown_end - table);
  for (const char* section : {"## Settled?", "## Loss by position", "## Equal loss", "## Seeds",
                              "## Learning rates", "## Precision", "## In the same setting"})
    if (const size_t at = md.find(section); at != std::string::npos)
      shown += "\n\n" + md.substr(at, std::min(md.find("\n\n## ", at), md.find("\n\n![", at)) - at);
  std::printf("\n%s\nreport: %s (report.md, report.html, report.json, plot files)\n", shown.c_str(),
              out.string().c_str());
}

// --eval-suite: the paper's table of every arm, and each variant against SA of the same seed
// (the average's paired bootstrap), appended to report.md and written to eval_suite.json.
void append_suite_report(const fs::path& out, const Setup& s, const std::vector<std::string>& names,
                         const std::vector<std::vector<TaskResult>>& results, bool quiet) {
  if (results.empty()) return;
  std::string md =
      "\n## Downstream tasks (--eval-suite)\n\nEach arm's final weights on the "
      "paper's tasks found in the folder, scored as lm-evaluation-harness v0.4 "
      "does (%, acc_norm where the harness reports it, else acc).\n\n" +
      suite_table(names, results);
  json j = {{"arms", json::array()}, {"against_sa", json::array()}};
  for (size_t k = 0; k < results.size(); k++) {
    json arm = {{"arm", names[k]}, {"tasks", json::object()}};
    for (const TaskResult& r : results[k]) arm["tasks"][r.task] = suite_metric(r);
    j["arms"].push_back(arm);
  }
  md +=
      "\n| arm | against | Δ average (points) | 95 % interval | p (paired bootstrap) |\n"
      "|---|---|---|---|---|\n";
  const size_t per_seed = s.variants.size();
  for (size_t k = 0; k < results.size(); k++) {
    if (k % per_seed == 0) continue;  // SA itself
    const size_t sa = k - k % per_seed;
    const SuiteComparison avg = compare_suite(results[sa], results[k]).back();
    md += fmt::format("| {} | {} | {:+.2f} | [{:+.2f}, {:+.2f}] | {:.3g} |\n", names[k], names[sa],
                      100 * avg.delta, 100 * avg.low, 100 * avg.high, avg.p);
    j["against_sa"].push_back({{"arm", names[k]},
                               {"against", names[sa]},
                               {"delta", avg.delta},
                               {"ci95", {avg.low, avg.high}},
                               {"p_bootstrap", avg.p}});
  }
  for (const std::string& note : s.suite.notes) md += "\n- " + note;
  std::string report = read_file(out / "report.md");
  write_file_atomic(out / "report.md", report + md + "\n");
  write_file_atomic(out / "eval_suite.json", j.dump(2) + "\n");
  if (!quiet) std::printf("%s\n", md.c_str());
}

namespace {

// What a dry run would run, resolved (scripts/readme_pin.sh pins the demo's line).
void print_dry_run(const CompareConfig& cfg, const Setup& s) {
  const RunConfig& run = cfg.run;
  // With Muon the rate is Muon's, AdamW's moving with it (RunConfig::tuned_rate).
  const std::string rate_name =
      run.muon() ? fmt::format("Muon's peak lr (AdamW's x {:g})", run.lr / run.muon_lr)
                 : std::string("peak lr");
  std::printf(
      "dry run: %s | %d layers x %d (%d heads), context %d, %s, %lld steps, %s, validation "
      "every %lld steps on %d batch(es), %d seed(s) from %llu; nothing written\n",
      fmt::format("{}", fmt::join(cfg.variants, ", ")).c_str(), s.model.n_layer, s.model.n_embd,
      s.model.n_head, s.model.seq_len,
      fmt::format("{} tokens a step ({} rows x {} accumulation)", s.shape.tokens(), s.shape.batch,
                  s.shape.accumulation)
          .c_str(),
      (long long)run.steps,
      cfg.tune_lrs.empty() ? fmt::format("{} {:g}", rate_name, run.tuned_rate()).c_str()
                           : fmt::format("{} tuned over {:g} ({} tuning seed(s))", rate_name,
                                         fmt::join(cfg.tune_lrs, ", "), cfg.tune_seeds)
                                 .c_str(),
      (long long)run.val_every, run.val_batches, cfg.seeds, (unsigned long long)run.seed);
}

// What the loop over the seeds gathers for the summary and the report.
struct SeedLoop {
  std::vector<std::vector<double>> overhead;  // per variant: ms / ms(SA), step by step
  std::vector<std::string> suite_names;       // an arm per row of the suite's table
  std::vector<std::vector<TaskResult>> suite_results;
  double validation_seconds = 0;  // every seed's, this run's and those taken from seed files
  std::string seeds_note;
  std::optional<SequentialDesign> design;  // --seeds auto's, fixed before the first seed
  std::vector<SequentialLook> looks;       // its answers so far, per variant
  int seeds_run = 0;
};

// Every seed's arms, trained or taken from its finished seed file, until --seeds auto's design
// has every answer or the seeds run out.
void run_seeds(const CompareConfig& cfg, Setup& s, const std::vector<double>& peak,
               CompareResult& result, SeedLoop& loop) {
  const RunConfig& run = cfg.run;
  const fs::path out = run.out;
  const bool root = s.comm->is_root();
  auto& [overhead, suite_names, suite_results, validation_seconds, seeds_note, design, looks,
         seeds_run] = loop;
  overhead.resize(s.variants.size());
  const auto start = clock_type::now();
  if (cfg.seeds_auto) design = auto_seeds_design((int)s.variants.size(), cfg.seeds);
  for (int k = 0; k < cfg.seeds && seeds_note.empty(); k++) {
    if (k > 0 && design) {  // a look after the seeds so far: is every answer final?
      seeds_note = auto_seeds_verdict(cfg, *design, result, k, looks);
      if (!seeds_note.empty()) break;
    }
    const uint64_t seed = run.seed + k;
    const fs::path seed_file = out / fmt::format("seed-{}.json", seed);
    if (take_finished_seed(seed_file, s, run, result, overhead, validation_seconds)) {
      if (root && !s.suite.files.empty())  // its arms' saved final weights take the suite
        for (const Variant& v : s.variants) {
          suite_names.push_back(fmt::format("{} seed {}", v.name, seed));
          suite_results.push_back(score_suite_from_checkpoint(s, arm_folder(out, v.name, seed),
                                                              variant_backend(run, v)));
        }
      continue;
    }
    const size_t first_overhead = overhead.size() > 1 ? overhead[1].size() : 0;
    std::vector<Arm> arms = make_arms(cfg, s, seed);
    const double validated = train_arms(cfg, s, arms, seed, k, overhead, start);
    validation_seconds += validated;
    finish_arms(cfg, s, arms, peak);
    for (const Arm& a : arms) result.arms.push_back(a.result);
    for (const Arm& a : arms)
      if (!a.suite.empty())
        suite_names.push_back(fmt::format("{} seed {}", a.variant.name, seed)),
            suite_results.push_back(a.suite);
    if (root) save_finished_seed(seed_file, s, arms, overhead, first_overhead, validated);
  }
  seeds_run = (int)arms_of(result, cfg.variants[0]).size();
  if (design && seeds_note.empty())
    seeds_note = auto_seeds_verdict(cfg, *design, result, seeds_run, looks);
}

// report.md, report.json, the plots, the suite's table and report.html (rank 0's).
void write_reports(const CompareConfig& cfg, const Setup& s, CompareResult& result,
                   const std::vector<double>& peak, const SeedLoop& loop) {
  const RunConfig& run = cfg.run;
  const fs::path out = run.out;
  if (!run.quiet && !loop.seeds_note.empty()) std::printf("%s\n", loop.seeds_note.c_str());
  const CompareReport report = make_report(cfg, s, result, loop.seeds_run, peak,
                                           loop.validation_seconds, loop.seeds_note, loop.design);
  result.val_bytes_per_token = s.val_bytes_per_token, result.tuning = cfg.tuned;
  const WrittenReport written = write_compare_report(out, report, result);
  result.report = written.json;
  if (!s.suite.files.empty())
    append_suite_report(out, s, loop.suite_names, loop.suite_results, run.quiet);
  if (!cfg.tuning)  // from the figures in memory, not report.json read back
    write_report_html(
        out,
        {{"kind", "comparison"},
         {"title", out.filename().string()},
         {"comparisons", json::array({comparison_page_json(out.filename().string(), result)})}});
  if (!run.quiet && !cfg.tuning) print_report_summary(written.markdown, out);
}

}  // namespace

// One comparison: every variant at its rate (cfg.variant_lrs, else run.lr) over the seeds.
CompareResult run_comparison(const CompareConfig& requested) {
  Comm& comm = world_comm();
  const bool root = comm.is_root();
  check_ranks_agree(comm, {{"model", requested.model},
                           {"run", run_config_to_json(requested.run)},
                           {"variants", requested.variants},
                           {"seeds", requested.seeds},
                           {"eval_data", requested.eval_data},
                           {"eval_suite", requested.eval_suite},
                           {"score_tokens", requested.score_tokens},
                           {"variant_lrs", requested.variant_lrs},
                           {"analyze_batches", requested.analyze_batches}});
  CompareConfig cfg = requested;
  cfg.run.quiet = cfg.run.quiet || !root;  // rank 0 speaks for the job
  const RunConfig& run = cfg.run;
  Setup s;
  // One live comparison per report folder: locked before it is looked at when it exists, else
  // as soon as it is created.
  std::unique_ptr<FolderLock> lock;
  const auto lock_out = [&] {
    std::error_code ec;
    if (run.dry_run) return;  // writes nothing, not even a lock
    if (root) refuse_symlink(run.out);
    if (root && !lock && fs::is_directory(run.out, ec))
      lock = std::make_unique<FolderLock>(fs::path(run.out) / ".lock", run.out);
  };
  agree_on(comm, lock_out);
  agree_on(comm, [&] { prepare(cfg, comm, s); });
  check_ranks_agree(comm,
                    {{"train_tokens", s.data.train.size()}, {"val_tokens", s.data.val.size()}});
  const fs::path out = run.out;
  if (!run.quiet) print_header(cfg, s);
  if (run.dry_run) {  // every arm's model built once, nothing written
    for (const Variant& v : s.variants)
      Gpt<float>(variant_model(s.model, v), run.batch, s.model.seq_len, GptMode::training,
                 variant_backend(run, v));
    if (!run.quiet) print_dry_run(cfg, s);
    return CompareResult{};
  }
  const std::vector<double> peak = measure_peaks(cfg, s);

  CompareResult result;
  result.report_dir = out.string();
  agree_on(comm, [&] {
    if (root && !run.dry_run) create_owned_folder(out, "report folder");
    lock_out();
  });
  SeedLoop loop;
  run_seeds(cfg, s, peak, result, loop);
  summarize(result, s, cfg, loop.overhead, loop.looks);
  if (!root) return result;  // the report is rank 0's
  write_reports(cfg, s, result, peak, loop);
  return result;
}

// The shortest text that reads back as the same rate: two rates never share a folder.
std::string rate_folder_name(double lr) {
  return fmt::format("lr-{}", lr);
}

// A rate of an extended grid to 6 significant digits: 2e-3 / (4e-3 / 2e-3) is 1e-3, not
// 0.0009999999999999998 (its folder's name and the report show it).
double rounded_rate(double lr) {
  return std::stod(fmt::format("{:.6g}", lr));
}

// One rate of --tune-lr: the variants `which` (indices into cfg.variants) on the tuning seeds, a
// comparison of its own (resumable like any); per variant the mean validation loss (NaN when a
// tuning seed diverged or the variant was not run), each tuning seed's (NaN: diverged) and the
// diverged seeds.
void tune_at_rate(const CompareConfig& cfg, double lr, const LrTuning& t,
                  const std::vector<size_t>& which, std::vector<double>& loss,
                  std::vector<std::vector<double>>& seed_loss, std::vector<int>& diverged) {
  CompareConfig sub = cfg;
  sub.tune_lrs.clear(), sub.variant_lrs.clear(), sub.variants.clear();
  for (size_t k : which) sub.variants.push_back(cfg.variants[k]);
  sub.run.set_tuned_rate(lr);  // with Muon: Muon's, AdamW's in the ratio given
  sub.run.seed = t.seeds[0];
  sub.seeds = cfg.tune_seeds, sub.seeds_auto = false;
  sub.tuning = true;
  sub.analyze_batches = 0, sub.eval_suite.clear(), sub.eval_data.clear();
  sub.run.out = (fs::path(t.folder) / rate_folder_name(lr)).string();
  const bool speak = !cfg.run.quiet && world_comm().is_root();
  if (speak)
    std::printf("\n== tuning: %s at peak lr %g on tuning seed(s) %s (%s)\n",
                fmt::format("{}", fmt::join(sub.variants, ", ")).c_str(), lr,
                fmt::format("{}", fmt::join(t.seeds, ", ")).c_str(), sub.run.out.c_str());
  const CompareResult r = run_comparison(sub);
  const size_t V = cfg.variants.size();
  loss.assign(V, NAN), diverged.assign(V, 0);
  seed_loss.assign(V, std::vector<double>(t.seeds.size(), NAN));
  std::string line;
  for (size_t k : which) {
    std::vector<double> losses;
    for (const ArmResult* a : arms_of(r, cfg.variants[k])) {
      const bool failed = a->diverged_at > 0 || !std::isfinite(a->val_loss);
      losses.push_back(a->val_loss);
      diverged[k] += failed;
      for (size_t j = 0; j < t.seeds.size(); j++)
        if (t.seeds[j] == a->seed && !failed) seed_loss[k][j] = a->val_loss;
    }
    loss[k] = diverged[k] ? NAN : mean(losses);
    line += fmt::format("{}{} {}", line.empty() ? "" : ", ", cfg.variants[k],
                        diverged[k] ? std::string("diverged") : fmt::format("{:.4f}", loss[k]));
  }
  if (speak) std::printf("   lr %g: final validation loss %s\n", lr, line.c_str());
}

// Each variant's best rate (rates_by_loss's first), or lrs.size() when it diverged at every rate.
std::vector<size_t> best_rates(const LrTuning& t) {
  std::vector<size_t> best(t.val_loss.size(), t.lrs.size());
  for (size_t k = 0; k < t.val_loss.size(); k++) {
    const std::vector<size_t> ranked = rates_by_loss(t, k);
    if (!ranked.empty()) best[k] = ranked[0];
  }
  return best;
}

// --tune-lr: every variant at every rate on the tuning seeds, and each variant's rate with the
// lowest mean validation loss. A choice at the grid's edge extends the grid by one step in that
// direction (the ratio of the two rates next to the edge), and again until every choice is
// inside, at most kMaxGridExtensions times per direction.
LrTuning tune_rates(const CompareConfig& cfg) {
  LrTuning t;
  t.grid = cfg.tune_lrs, t.lrs = cfg.tune_lrs;
  t.folder = (fs::path(cfg.run.out) / "tune").string();
  for (int i = 0; i < cfg.tune_seeds; i++) t.seeds.push_back(cfg.run.seed + kTuningSeedOffset + i);
  const size_t V = cfg.variants.size();
  t.val_loss.assign(V, {}), t.diverged.assign(V, {}), t.seed_val_loss.assign(V, {});
  const bool root = world_comm().is_root();
  // Rates run so far, in t.lrs's order (rising): each rate's results go in at its place.
  auto run_rate = [&](size_t at, const std::vector<size_t>& which) {
    std::vector<double> loss;
    std::vector<std::vector<double>> seed_loss;
    std::vector<int> diverged;
    tune_at_rate(cfg, t.lrs[at], t, which, loss, seed_loss, diverged);
    for (size_t k = 0; k < V; k++) {
      t.val_loss[k].insert(t.val_loss[k].begin() + at, loss[k]);
      t.seed_val_loss[k].insert(t.seed_val_loss[k].begin() + at, seed_loss[k]);
      t.diverged[k].insert(t.diverged[k].begin() + at, diverged[k]);
    }
  };
  std::vector<size_t> every(V);
  for (size_t k = 0; k < V; k++) every[k] = k;
  for (size_t i = 0; i < t.lrs.size(); i++) run_rate(i, every);
  // A rate beyond an edge is run only by the variants whose choice is at that edge.
  for (int down = 0, up = 0;;) {
    const std::vector<size_t> best = best_rates(t);
    std::vector<size_t> low, high;
    for (size_t k = 0; k < V; k++) {
      if (best[k] == 0) low.push_back(k);
      if (best[k] + 1 == t.lrs.size()) high.push_back(k);
    }
    if (!low.empty() && down < kMaxGridExtensions) {
      t.lrs.insert(t.lrs.begin(), rounded_rate(t.lrs[0] / (t.lrs[1] / t.lrs[0])));
      t.extended_down = ++down;
      run_rate(0, low);
    } else if (!high.empty() && up < kMaxGridExtensions) {
      const size_t n = t.lrs.size();
      t.lrs.push_back(rounded_rate(t.lrs[n - 1] * (t.lrs[n - 1] / t.lrs[n - 2])));
      t.extended_up = ++up;
      run_rate(n, high);
    } else {
      break;
    }
  }
  const std::vector<size_t> best = best_rates(t);
  for (size_t k = 0; k < V; k++) {
    if (best[k] == t.lrs.size())
      fail("--tune-lr: {} diverged at every rate ({}); try lower rates", cfg.variants[k],
           fmt::join(t.lrs, ", "));
    t.chosen.push_back(t.lrs[best[k]]);
  }
  measure_tuning_margins(t);
  if (!cfg.run.quiet && root) {
    std::string chosen;
    for (size_t k = 0; k < V; k++)
      chosen += fmt::format("{}{} {:g}{}", k ? ", " : "", cfg.variants[k], t.chosen[k],
                            tuning_margin_text(t, k));
    std::printf("\n== tuned: %s; the comparison runs on fresh seeds at these rates\n",
                chosen.c_str());
  }
  return t;
}

}  // namespace

// Before hours of tuning: a finished report in the output folder must come from this very tuning
// (the same rates and tuning seeds), else it is another comparison and --force is needed.
void check_tuned_report(const CompareConfig& cfg) {
  const fs::path report = fs::path(cfg.run.out) / "report.json";
  std::error_code ec;
  if (cfg.run.force || !world_comm().is_root() || !fs::exists(report, ec)) return;
  const json done = json::parse(read_file(report), nullptr, false);
  const json tuning = done.is_object() ? done.value("lr_tuning", json()) : json();
  // The grid asked for (reports written before the grid could grow name it "lrs").
  const json grid = tuning.is_object() ? tuning.value("grid", tuning.value("lrs", json())) : json();
  const bool same = tuning.is_object() && grid == json(cfg.tune_lrs) &&
                    tuning.value("seeds", json()).size() == (size_t)cfg.tune_seeds;
  if (!same)
    fail(
        "{}: already holds a report of another comparison (not of this --tune-lr); pass --force "
        "to replace it, or choose another --out",
        cfg.run.out);
}

CompareResult compare(const CompareConfig& requested) {
  if (requested.tune_lrs.empty() || requested.run.dry_run) {
    CompareConfig cfg = requested;  // variants at their own @RATE
    if (cfg.variant_lrs.empty())
      cfg.variant_lrs = variant_rates(parse_variants(cfg), cfg.run.tuned_rate());
    return run_comparison(cfg);
  }
  if (requested.tune_seeds < 1) fail("--tune-seeds {} must be at least 1", requested.tune_seeds);
  if (!requested.variant_lrs.empty())
    fail("--tune-lr chooses each variant's rate; it does not combine with rates given per variant");
  check_compare_variants(requested);
  agree_on(world_comm(), [&] { check_tuned_report(requested); });
  CompareConfig confirm = requested;
  confirm.tuned = tune_rates(requested);
  confirm.variant_lrs = confirm.tuned.chosen;
  confirm.run.set_tuned_rate(confirm.tuned.chosen[0]);  // SA's: the run's schedule is SA's own
  return run_comparison(confirm);
}

}  // namespace xsa
