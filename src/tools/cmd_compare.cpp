// xsa compare, the main job: its options (which sweep shares) and the command.
#include <algorithm>
#include <string>
#include <string_view>

#include "xsa/research/compare.h"
#include "xsa/tools/commands.h"
#include "xsa/util/error.h"
#include "xsa/util/parse.h"
#include "xsa/util/precision.h"
#include "xsa/util/signals.h"

namespace xsa::cli {

// The options of compare, shared by sweep.
void add_compare_options(CLI::App* cmd, CompareArgs& a) {
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // --config's
  ModelConfig& m = a.cfg.model;
  RunConfig& r = a.cfg.run;
  add_training_options(cmd, r);
  add_model_options(cmd, m);
  cmd->get_option("--data")->required();
  cmd->add_option("--preset", a.preset,
                  "demo (the README's main job, ~7 min on 2 cores), recipe (the demo with Muon, "
                  "ReLU², logit soft-cap 15 and QK-norm) or tiny; options given win");
  cmd->add_option("--variants", a.variants,
                  "The baseline first (standard attention: sa, sa+qk-norm, ...), then any of: " +
                      attention_grammar() +
                      " (xsa+gated-attn); each optionally @bf16 or @fp32, @RATE (xsa@4e-3)")
      ->capture_default_str();
  for (const AttentionOption& o : kAttentionOptions)
    if (o.whole_model)
      cmd->add_flag(std::string("--") + o.name, a.cfg.whole_model.*o.flag,
                    fmt::format("{} in every variant, the baseline included, as --precision is "
                                "every variant's (one variant alone: its +{})",
                                o.title, o.name));
  cmd->add_option("--seeds", a.seeds,
                  "Repeats with seeds --seed, --seed+1, ...; auto: a group-sequential test that "
                  "looks after 3, 4, ... --max-seeds seeds and stops once every variant differs "
                  "from SA or cannot (O'Brien-Fleming spending, 5 % false positives in all)")
      ->capture_default_str();
  cmd->add_option("--max-seeds", a.max_seeds, "The cap of --seeds auto")
      ->capture_default_str()
      ->check(within(1, 100));
  cmd->add_option("--tune-lr", a.tune_lr,
                  "LR1,LR2,...: train every variant at each peak lr on tuning seeds first, then "
                  "compare each at its best on fresh seeds (tuning in OUT/tune/)");
  cmd->add_option("--tune-seeds", a.cfg.tune_seeds, "Seeds per rate of --tune-lr")
      ->capture_default_str()
      ->check(within(1, 1000));
  cmd->add_option("--eval-suite", a.cfg.eval_suite,
                  "A folder of the paper's eight task files (as xsa eval --suite paper --dir): "
                  "every arm is scored at the end and the table joins the report");
  cmd->add_option("--eval-data", a.cfg.eval_data,
                  "Further evaluation sets, each reported with its loss by position (their "
                  "validation split, else all; prepare's OUT/long: long documents)");
  // Replaced by the final score on every window (--score-tokens): said in one line, not ignored.
  cmd->add_option_function<std::string>(
      "--eval-batches",
      [](const std::string&) {
        fail(
            "--eval-batches is gone: every arm is now scored on every window of each set "
            "(--score-tokens caps it)");
      },
      "Gone: see --score-tokens");
  cmd->add_option("--score-tokens", a.cfg.score_tokens,
                  "The final score of each arm, the figure the table and its tests use: every "
                  "window of the validation split and of each --eval-data set, or of a set larger "
                  "than this many tokens an even sample of whole windows (0: every window)")
      ->capture_default_str()
      ->check(within(0, 1e12));
  add_run_option(cmd, r, "out", "Report folder");
  add_run_option(cmd, r, "force", "Replace a report in --out");
}

// The preset first, then every option given on the command line again on top of it.
CompareConfig compare_config_of(const CLI::App* cmd, const CompareArgs& a) {
  CompareConfig cfg = a.cfg;
  if (!a.preset.empty()) {
    CompareConfig preset = cfg;
    apply_compare_preset(a.preset, preset.model, preset.run, preset);
    auto given = [&](std::string_view flags) { return option_given(*cmd, flags); };
    take_options_not_given(
        cfg.model, preset.model, [](auto& m, auto&& fn) { for_each_model_option(m, fn); }, given);
    take_options_not_given(
        cfg.run, preset.run, [](auto& r, auto&& fn) { for_each_run_option(r, fn); }, given);
    if (!given("--seeds")) cfg.seeds = preset.seeds;
    if (!given("--mlp")) cfg.model.mlp = preset.model.mlp;
    for (const AttentionOption& o : kAttentionOptions)
      if (o.whole_model && !given(std::string("--") + o.name))
        cfg.whole_model.*o.flag = preset.whole_model.*o.flag;
    // The preset's tuning grid, unless a rate is given: --lr (one rate for every variant),
    // --tune-lr (another grid) or a variant's own @RATE.
    bool own_rate = false;
    for (const std::string& v : split(a.variants, ',')) {
      const std::vector<std::string> parts = split(v, '@');
      for (size_t i = 1; i < parts.size(); i++) own_rate |= !precision_named(parts[i]);
    }
    if (!given("--lr") && !given("--muon-lr") && !given("--tune-lr") && !own_rate) {
      cfg.tune_lrs = preset.tune_lrs;
      if (!given("--tune-seeds")) cfg.tune_seeds = preset.tune_seeds;
    }
  }
  if (option_given(*cmd, "--seeds") || option_given(*cmd, "--max-seeds"))
    parse_seeds(option_given(*cmd, "--seeds") ? a.seeds : std::to_string(cfg.seeds), a.max_seeds,
                cfg);
  cfg.variants = split(a.variants, ',');
  if (!a.tune_lr.empty()) cfg.tune_lrs = parse_tune_lrs(a.tune_lr);
  if (cfg.score_tokens < 0) fail("--score-tokens {} must be 0 or more", cfg.score_tokens);
  apply_smoke_test(cfg.run);
  // (--seeds auto keeps its first look)
  if (smoke_test()) cfg.seeds = std::min(cfg.seeds, cfg.seeds_auto ? kFirstLook : 2);
  // The arms' shape is the checkpoint's; each variant sets its attention.
  if (!cfg.run.init_from.empty()) cfg.model = init_from_model(*cmd, cfg.model, cfg.run);
  if (smoke_test()) {  // the final scores too: at most 2 batches of windows a set
    const int64_t cap = 2 * (int64_t)cfg.run.batch * cfg.model.seq_len;
    cfg.score_tokens = cfg.score_tokens > 0 ? std::min(cfg.score_tokens, cap) : cap;
  }
  return cfg;
}

void add_compare_command(CLI::App& root) {
  auto* cmd = root.add_subcommand(
      "compare", "Train twin models that differ only in attention (SA, XSA, variants) and report");
  auto a = std::make_shared<CompareArgs>();
  a->cfg.run.out = "runs/compare";
  add_compare_options(cmd, *a);
  cmd->callback([a, cmd] {
    catch_stop_signals();  // Ctrl-C or SIGTERM: keep the finished seeds, then exit
    compare(compare_config_of(cmd, *a));
  });
}

}  // namespace xsa::cli
