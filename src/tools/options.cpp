// The model and training options that train, compare and sweep share, each from its table
// (options/model_options.h, options/run_config.h), bound straight to ModelConfig and RunConfig.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "xsa/tools/commands.h"
#include "xsa/util/error.h"

namespace xsa::cli {

void add_model_options(CLI::App* cmd, ModelConfig& m) {
  for_each_model_option(m, [&](const ModelOption& o, auto& field) {
    cmd->add_option(o.flag, field, o.help)->capture_default_str();
  });
  cmd->add_option_function<std::string>(
      "--arch", [&m](const std::string& name) { set_architecture(m, name); },
      "xsa (RoPE, no linear biases; the default) or gpt2 (learned positions, a bias on every "
      "linear layer, as GPT-2 and llm.c)");
}

void add_precision_option(CLI::App* cmd, Precision& precision, const std::string& help,
                          const std::string& flag) {
  cmd->add_option_function<std::string>(
         flag,
         [&precision, flag](const std::string& name) {
           const auto named = precision_named(name);
           if (!named) fail("{} {} is not known ({})", flag, name, kPrecisionChoices);
           precision = *named;
         },
         help)
      ->default_str(to_string(precision));
}

namespace {

// One run option on the command line: a flag, the precision by its name, or a value.
template <typename Field>
void add_run_field(CLI::App* cmd, const std::string& flag, Field& field, const std::string& help) {
  if constexpr (std::is_same_v<Field, bool>)
    cmd->add_flag(flag, field, help);
  else if constexpr (std::is_same_v<Field, Precision>)
    add_precision_option(cmd, field, help, flag);
  else
    cmd->add_option(flag, field, help)->capture_default_str();
}

}  // namespace

void add_training_options(CLI::App* cmd, RunConfig& r) {
  // Read in main (expand_config_file) before parsing; declared here for --help.
  cmd->add_option(
      "--config",
      "Read options from a TOML/INI file (key = value, e.g. layers = 4); the command line wins");
  for_each_run_option(r, [&](const RunOption& o, auto& field) {
    if (o.roles & kShared) add_run_field(cmd, o.flag, field, o.help);
  });
}

void add_run_option(CLI::App* cmd, RunConfig& r, const std::string& key, const std::string& help) {
  bool found = false;
  for_each_run_option(r, [&](const RunOption& o, auto& field) {
    if (o.key != key) return;
    found = true;
    add_run_field(cmd, o.flag, field, help.empty() ? o.help : help);
  });
  XSA_CHECK(found, "no run option {}", key);
}

bool option_given(const CLI::App& cmd, std::string_view flags) {
  const CLI::Option* option =
      cmd.get_option_no_throw(std::string(flags.substr(0, flags.find(','))));
  return option && option->count() > 0;
}

bool smoke_test() {
  const char* v = std::getenv("XSA_SMOKE_TEST");
  return v && std::string(v) == "1";
}

void apply_smoke_test(RunConfig& run) {
  if (!smoke_test()) return;
  run.steps = std::min<int64_t>(run.steps, 3);
  run.batch = std::min(run.batch, 4), run.total_batch_tokens = 0;  // a step: one pass of 4 rows
  if (run.warmup > run.steps) run.warmup = -1;
  run.val_batches = std::min(run.val_batches, 2);
}

}  // namespace xsa::cli
