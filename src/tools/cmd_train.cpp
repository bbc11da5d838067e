// xsa train: options bind straight to ModelConfig and RunConfig; a config file (--config, TOML or
// INI: `layers = 4`) can set any of them, the command line wins.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string_view>
#include <type_traits>

#include "xsa/io/checkpoint.h"
#include "xsa/tools/commands.h"
#include "xsa/train/trainer.h"
#include "xsa/util/error.h"
#include "xsa/util/signals.h"

namespace xsa::cli {
namespace {

struct TrainArgs {
  ModelConfig model;
  RunConfig run;
  std::string attn = "xsa";
  LayerAttention whole_model;  // --qk-norm, --value-embed: options on every item of --attn
  std::string resume;
};

// The shape options a resumed or initialised run takes from its checkpoint: one given on the
// command line (or config file) must agree with it (the context too with seq_len_too).
void check_shape_agrees(const CLI::App& cmd, const ModelConfig& model, const ModelConfig& stored,
                        const fs::path& ckpt, bool seq_len_too) {
  // Key/value heads compared as counts: 0 means one per head.
  ModelConfig given = model, kept = stored;
  given.n_kv_head = model.kv_heads(), kept.n_kv_head = stored.kv_heads();
  for_each_model_option(given, [&](const ModelOption& o, const auto& value) {
    if (!(o.roles & kShapeOfWeights) || ((o.roles & kContext) && !seq_len_too)) return;
    if (!option_given(cmd, o.flag)) return;
    for_each_model_option(kept, [&](const ModelOption& k, const auto& stored_value) {
      if (std::string_view(k.key) == o.key && value != stored_value)
        fail("{} {} contradicts the checkpoint {} ({}); drop it", o.flag, value,
             (ckpt / "config.json").string(), stored_value);
    });
  });
  if (cmd.count("--arch") && std::string(architecture_name(model)) != architecture_name(stored))
    fail("--arch {} contradicts the checkpoint {} ({})", architecture_name(model),
         (ckpt / "config.json").string(), architecture_name(stored));
  if (cmd.count("--mlp") && model.mlp != stored.mlp)
    fail("--mlp {} contradicts the checkpoint {} ({})", to_string(model.mlp),
         (ckpt / "config.json").string(), to_string(stored.mlp));
}

// The tokenizer a checkpoint was trained with, as --tokenizer names it: an spm vocabulary is the
// copy the checkpoint carries.
std::string recorded_tokenizer(const ModelConfig& stored, const fs::path& ckpt) {
  if (stored.tokenizer != TokenizerKind::spm) return to_string(stored.tokenizer);
  return "spm:" + ckpt.string();
}

}  // namespace

ModelConfig init_from_model(const CLI::App& cmd, const ModelConfig& requested, RunConfig& run) {
  const fs::path ckpt = resolve_checkpoint(run.init_from);
  const ModelConfig stored = load_checkpoint_config(ckpt);
  check_shape_agrees(cmd, requested, stored, ckpt, /*seq_len_too=*/false);
  ModelConfig wanted = requested;
  if (!cmd.count("--seq-len")) wanted.seq_len = stored.seq_len;
  if (run.tokenizer.empty()) run.tokenizer = recorded_tokenizer(stored, ckpt);
  return init_from_config(ckpt, wanted);
}

void add_train_command(CLI::App& root) {
  auto* cmd = root.add_subcommand("train", "Train an xsa-gpt model (SA or XSA) on a text file");
  auto a = std::make_shared<TrainArgs>();
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  ModelConfig& m = a->model;
  RunConfig& r = a->run;

  add_training_options(cmd, r);
  add_model_options(cmd, m);
  cmd->add_option("--attn", a->attn,
                  "Attention: " + attention_grammar() +
                      " (xsa+gated-attn); or one item per layer (sa,sa,xsa+no-self,xsa+no-self)")
      ->capture_default_str();
  for (const AttentionOption& o : kAttentionOptions)
    if (o.whole_model)
      cmd->add_flag(
          std::string("--") + o.name, a->whole_model.*o.flag,
          fmt::format("{} on every layer (= +{} on each item of --attn)", o.title, o.name));
  add_run_option(cmd, r, "ckpt_every");
  add_run_option(cmd, r, "skip_bad_steps");
  add_run_option(cmd, r, "out", "Run folder: checkpoints and metrics.jsonl");
  cmd->add_option("--resume", a->resume, "Continue a run (its folder, or one checkpoint folder)");
  add_run_option(cmd, r, "force",
                 "Start over in a folder that holds a run, or resume over later checkpoints");

  cmd->callback([a, cmd] {
    catch_stop_signals();  // Ctrl-C or SIGTERM: checkpoint at this step, then exit
    ModelConfig model = a->model;
    RunConfig run = a->run;
    const std::string attn = with_whole_model_options(a->attn, a->whole_model);
    if (a->resume.empty()) {
      if (!run.tokenizer.empty()) parse_run_tokenizer(run.tokenizer);  // reject a bad name first
      set_attention(model, attn);
      if (!run.init_from.empty()) model = init_from_model(*cmd, model, run);
      apply_smoke_test(run);
      train(model, run);
      return;
    }
    if (!run.init_from.empty())
      fail("--init-from and --resume exclude each other: a resumed run has its own weights");
    // Resume: the model comes from the checkpoint; run settings too, unless given again.
    fs::path ckpt = resolve_checkpoint(a->resume);
    ModelConfig stored = load_checkpoint_config(ckpt);
    check_shape_agrees(*cmd, model, stored, ckpt, /*seq_len_too=*/true);
    if (cmd->count("--tokenizer") && parse_run_tokenizer(run.tokenizer).kind != stored.tokenizer)
      fail("--tokenizer {} contradicts the checkpoint {} ({})", run.tokenizer,
           (ckpt / "config.json").string(), to_string(stored.tokenizer));
    if (cmd->count("--attn") || a->whole_model != LayerAttention{}) {
      ModelConfig wanted = stored;
      set_attention(wanted, cmd->count("--attn") ? attn
                                                 : with_whole_model_options(
                                                       attention_string(stored), a->whole_model));
      if (attention_string(wanted) != attention_string(stored))
        fail("--attn {} contradicts the checkpoint {} ({})", attention_string(wanted),
             (ckpt / "config.json").string(), attention_string(stored));
    }
    nlohmann::json state = load_trainer_state(ckpt);
    const std::string state_path = (ckpt / "trainer.json").string();
    nlohmann::json stored_run = state.value("run", nlohmann::json::object());
    if (cmd->count("--seed") && stored_run.contains("seed") && stored_run["seed"] != run.seed)
      fail("--seed {} contradicts the checkpoint {} (seed {})", run.seed, state_path,
           stored_run["seed"].dump());
    // The optimizer's state in the checkpoint is one optimizer's: another cannot continue it.
    const std::string stored_optimizer = stored_run.value("optimizer", std::string("adamw"));
    if (cmd->count("--optimizer") && run.optimizer != stored_optimizer)
      fail("--optimizer {} contradicts the checkpoint {} ({}): its optimizer state is {}'s",
           run.optimizer, state_path, stored_optimizer, stored_optimizer);
    // Run options given again override the stored ones (the table maps flags to keys), a value
    // given that equals the default too (the JSON leaves some of those out).
    const nlohmann::json given = run_config_to_json(run);
    for_each_run_option(run, [&](const RunOption& o, const auto& field) {
      if (!option_given(*cmd, o.flag) || std::string_view(o.key) == "out" || !(o.roles & kSaved))
        return;
      if (given.contains(o.key))
        stored_run[o.key] = given[o.key];
      else if constexpr (!std::is_same_v<std::decay_t<decltype(field)>, Precision>)
        stored_run[o.key] = field;
    });
    RunConfig resumed;
    run_config_update_from_json(resumed, stored_run, state_path);
    // A text file is tokenized as before: with the checkpoint's copy of an spm vocabulary, or the
    // one --tokenizer names again (which must then be the same).
    resumed.tokenizer = cmd->count("--tokenizer") && run.tokenizer != "spm"
                            ? run.tokenizer
                            : recorded_tokenizer(stored, ckpt);
    resumed.vocab_dir = run.vocab_dir;
    resumed.force = run.force;
    resumed.quiet = run.quiet;
    resumed.out = ckpt.parent_path().string();
    apply_smoke_test(resumed);
    train(stored, resumed, ckpt.string());
  });
}

}  // namespace xsa::cli
