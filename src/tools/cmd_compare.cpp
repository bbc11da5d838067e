// xsa compare (the main job) and xsa analyze.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "xsa/analysis/similarity_bias.h"
#include "xsa/io/checkpoint.h"
#include "xsa/report/svg.h"
#include "xsa/research/compare.h"
#include "xsa/research/sweep.h"
#include "xsa/tools/commands.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/fmt.h"
#include "xsa/util/signals.h"
#include "xsa/util/threads.h"

namespace xsa::cli {

namespace {

struct CompareArgs {
  CompareConfig cfg;
  std::string variants = "sa,xsa", preset, seeds = "1", tune_lr;
  int max_seeds = 10;
};

// The options of compare, shared by sweep.
void add_compare_options(CLI::App* cmd, CompareArgs& a) {
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // --config's
  ModelConfig& m = a.cfg.model;
  RunConfig& r = a.cfg.run;
  add_training_options(cmd, r);
  add_model_options(cmd, m);
  cmd->get_option("--data")->required();
  cmd->add_option("--preset", a.preset,
                  "demo (the README's main job, ~8 min on 2 cores) or tiny; options given win");
  cmd->add_option("--variants", a.variants,
                  "sa first, then any of: xsa, xsa-gated, xsa-gated-one, xsa-lastN, xsa-firstN, "
                  "xsa-layers-0.2.5, and XSA's rivals gated-attn, value-residual, no-self; each "
                  "optionally +sink, +gated-attn, +value-residual, +no-self (xsa+gated-attn), "
                  "@bf16 or @fp32")
      ->capture_default_str();
  cmd->add_option("--seeds", a.seeds,
                  "Repeats with seeds --seed, --seed+1, ...; auto: a group-sequential test that "
                  "looks after 3, 4, ... --max-seeds seeds and stops once every variant differs "
                  "from SA or cannot (O'Brien-Fleming spending, 5 % false positives in all)")
      ->capture_default_str();
  cmd->add_option("--max-seeds", a.max_seeds, "The cap of --seeds auto")->capture_default_str();
  cmd->add_option("--tune-lr", a.tune_lr,
                  "LR1,LR2,...: train every variant at each peak lr on tuning seeds first, then "
                  "compare each at its best on fresh seeds (tuning in OUT/tune/)");
  cmd->add_option("--tune-seeds", a.cfg.tune_seeds, "Seeds per rate of --tune-lr")
      ->capture_default_str();
  cmd->add_option("--eval-suite", a.cfg.eval_suite,
                  "A folder of the paper's eight task files (as xsa eval --suite paper --dir): "
                  "every arm is scored at the end and the table joins the report");
  cmd->add_option("--eval-data", a.cfg.eval_data,
                  "Further evaluation sets, each reported with its loss by position (their "
                  "validation split, else all; prepare's OUT/long: long documents)");
  cmd->add_option("--eval-batches", a.cfg.eval_batches,
                  "Batches of the step's size read of each --eval-data set, evenly across it "
                  "(0: as --val-batches)")
      ->capture_default_str();
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
  }
  if (option_given(*cmd, "--seeds") || option_given(*cmd, "--max-seeds"))
    parse_seeds(option_given(*cmd, "--seeds") ? a.seeds : std::to_string(cfg.seeds), a.max_seeds,
                cfg);
  cfg.variants = split_list(a.variants);
  if (!a.tune_lr.empty()) cfg.tune_lrs = parse_tune_lrs(a.tune_lr);
  if (cfg.eval_batches < 0) fail("--eval-batches {} must be 0 or more", cfg.eval_batches);
  apply_smoke_test(cfg.run);
  // (--seeds auto keeps its first look)
  if (smoke_test()) cfg.seeds = std::min(cfg.seeds, cfg.seeds_auto ? kFirstLook : 2);
  // The arms' shape is the checkpoint's; each variant sets its attention.
  if (!cfg.run.init_from.empty()) cfg.model = init_from_model(*cmd, cfg.model, cfg.run);
  return cfg;
}

}  // namespace

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

void add_sweep_command(CLI::App& root) {
  auto* cmd = root.add_subcommand(
      "sweep", "Run compare for each value of one option and plot the XSA gain against it");
  auto a = std::make_shared<CompareArgs>();
  auto param = std::make_shared<std::string>();
  auto tokens_per_step = std::make_shared<int64_t>(0);
  a->cfg.run.out = "runs/sweep";
  add_compare_options(cmd, *a);
  cmd->add_option("--param", *param,
                  "NAME=V1,V2,...: seq-len, lr, embd, layers, heads, kv-heads, steps, batch, "
                  "warmup, weight-decay, precision (fp32,bf16)")
      ->required();
  cmd->add_option("--tokens-per-step", *tokens_per_step,
                  "Hold every step at this many tokens for every value: each value's --batch "
                  "(at most the one given) and accumulation follow from its --seq-len");
  cmd->callback([a, cmd, param, tokens_per_step] {
    catch_stop_signals();
    const size_t eq = param->find('=');
    if (eq == std::string::npos || eq + 1 >= param->size())
      fail("--param {}: expected NAME=V1,V2,...", *param);
    sweep(compare_config_of(cmd, *a), param->substr(0, eq), split_list(param->substr(eq + 1)),
          *tokens_per_step);
  });
}

void add_analyze_command(CLI::App& root) {
  auto* cmd = root.add_subcommand(
      "analyze", "Measure the attention similarity bias of a checkpoint per layer and head");
  struct Args {
    std::string ckpt, data, json_path, plot, vocab_dir;
    int batches = 4, batch = 8, threads = 0;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--ckpt", a->ckpt, "A run folder (its latest checkpoint) or a checkpoint folder")
      ->required();
  cmd->add_option("--data", a->data,
                  "Data to measure on (default: the data the checkpoint was trained on)");
  cmd->add_option("--batches", a->batches, "Batches of the validation split to average over")
      ->capture_default_str();
  cmd->add_option("--batch", a->batch, "Sequences per batch")->capture_default_str();
  cmd->add_option("--json", a->json_path,
                  "Write one record per layer and head to this file (a JSON array)");
  cmd->add_option("--plot", a->plot,
                  "Heat map of cos(y, v), layers × heads: PATH.svg (and PATH.png)");
  cmd->add_option("--vocab-dir", a->vocab_dir, "Folder with GPT-2's encoder.json and vocab.bpe");
  cmd->add_option("--threads", a->threads, "Threads (0: every core)")->capture_default_str();
  cmd->callback([a] {
    set_thread_count(a->threads);
    fs::path ckpt = resolve_checkpoint(a->ckpt);
    ModelConfig cfg = load_checkpoint_config(ckpt);
    std::string data_path = a->data;
    std::error_code ec;
    if (data_path.empty() && fs::exists(ckpt / "trainer.json", ec))
      data_path = load_trainer_state(ckpt).value("/data/source"_json_pointer, std::string());
    if (data_path.empty())
      fail("{}: does not say what data it was trained on; pass --data", ckpt.string());
    Dataset data = open_dataset(data_path, cfg.tokenizer, 0.1, 1, cfg.seq_len,
                                tokenizer_folder(ckpt, cfg, a->vocab_dir), /*evaluation=*/true);
    check_same_vocabulary(data, ckpt);
    const TokenStream& stream = data.val.size() > (size_t)cfg.seq_len ? data.val : data.train;
    Gpt<float> model(cfg, a->batch, cfg.seq_len, GptMode::inference);
    load_checkpoint_weights(ckpt, model.params(), false);
    const int batches = val_batch_count(stream, a->batch, cfg.seq_len, a->batches);
    auto heads = attention_similarity_bias(model, stream, batches);
    std::printf("attention similarity bias of %s (%s attention) on %s, %d batch(es) of %d x %d\n\n",
                ckpt.string().c_str(), layer_attn_string(cfg).c_str(), data_path.c_str(), batches,
                a->batch, cfg.seq_len);
    std::printf(
        "| layer | head | attn | cos(y,v) | |cos(z,v)| | self weight a_ii | cos(v_i,v_j) "
        "|\n|---|---|---|---|---|---|---|\n");
    nlohmann::json records = nlohmann::json::array();
    std::vector<std::vector<double>> grid(cfg.n_layer, std::vector<double>(cfg.n_head));
    for (const HeadBias& h : heads) {
      std::printf("| %d | %d | %s | %.4f | %s | %.4f | %.4f |\n", h.layer, h.head,
                  to_string(cfg.layer_attn[h.layer]), h.cos_yv,
                  h.exclusive ? fmt::format("{:.2e}", h.cos_zv).c_str() : "–", h.self_weight,
                  h.cos_vv);
      nlohmann::json r = {{"layer", h.layer},
                          {"head", h.head},
                          {"attn", to_string(cfg.layer_attn[h.layer])},
                          {"cos_yv", h.cos_yv},
                          {"self_weight", h.self_weight},
                          {"cos_vv", h.cos_vv}};
      if (h.exclusive) r["cos_zv"] = h.cos_zv;
      records.push_back(r);
      grid[h.layer][h.head] = h.cos_yv;
    }
    if (!a->json_path.empty()) write_file_atomic(a->json_path, records.dump(2) + "\n");
    if (!a->plot.empty()) {
      auto files =
          write_plot(a->plot, svg_heatmap("mean cos(y_i, v_i): attention output vs own value", grid,
                                          "layer", "head", 0, 1));
      std::printf("\nplot: %s\n", fmt::format("{}", fmt::join(files, ", ")).c_str());
    }
  });
}

}  // namespace xsa::cli
