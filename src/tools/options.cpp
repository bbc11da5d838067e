// The model and training options that train, compare and sweep share, each from its table
// (options/model_options.h, options/run_config.h), bound straight to ModelConfig and RunConfig.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "xsa/tools/commands.h"
#include "xsa/util/error.h"
#include "xsa/util/fmt.h"

namespace xsa::cli {

CLI::Validator within(double least, double most) {
  return CLI::Validator(
      [least, most](std::string& input) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(input.c_str(), &end);
        if (end == input.c_str() || *end != '\0') return "";  // not a number: the conversion says
        if (v >= least && v <= most) return "";
        return fmt::format("{} is outside [{}, {}]", input, least, most);
      },
      fmt::format("in [{}, {}]", least, most), "within");
}

namespace {

// A table option with its limits (ModelOption, RunOption: least and most) checked as it is read.
template <typename Option>
CLI::Option* limited(CLI::Option* option, const Option& o) {
  if (std::isfinite(o.least) || std::isfinite(o.most)) option->check(within(o.least, o.most));
  return option;
}

}  // namespace

void add_model_options(CLI::App* cmd, ModelConfig& m) {
  for_each_model_option(m, [&](const ModelOption& o, auto& field) {
    limited(cmd->add_option(o.flag, field, o.help)->capture_default_str(), o);
  });
  cmd->add_option_function<std::string>(
      "--arch", [&m](const std::string& name) { set_architecture(m, name); },
      "xsa (RoPE, no linear biases; the default) or gpt2 (learned positions, a bias on every "
      "linear layer, as GPT-2 and llm.c)");
  cmd->add_option_function<std::string>(
         "--mlp", [&m](const std::string& name) { set_mlp_activation(m, name); },
         "The MLP's activation: gelu (tanh approximation, GPT-2's) or relu2 (relu(x)², "
         "modded-nanogpt's and nanochat's)")
      ->default_str("gelu");
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

// One run option on the command line: a flag, the precision by its name, or a value (a number
// within the option's limits).
template <typename Field>
void add_run_field(CLI::App* cmd, const RunOption& o, Field& field, const std::string& help) {
  if constexpr (std::is_same_v<Field, bool>)
    cmd->add_flag(o.flag, field, help);
  else if constexpr (std::is_same_v<Field, Precision>)
    add_precision_option(cmd, field, help, o.flag);
  else
    limited(cmd->add_option(o.flag, field, help)->capture_default_str(), o);
}

}  // namespace

void add_training_options(CLI::App* cmd, RunConfig& r) {
  // Read in main (expand_config_file) before parsing; declared here for --help.
  cmd->add_option(
      "--config",
      "Read options from a TOML/INI file (key = value, e.g. layers = 4); the command line wins");
  for_each_run_option(r, [&](const RunOption& o, auto& field) {
    if (o.roles & kShared) add_run_field(cmd, o, field, o.help);
  });
}

void add_run_option(CLI::App* cmd, RunConfig& r, const std::string& key, const std::string& help) {
  bool found = false;
  for_each_run_option(r, [&](const RunOption& o, auto& field) {
    if (o.key != key) return;
    found = true;
    add_run_field(cmd, o, field, help.empty() ? o.help : help);
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
