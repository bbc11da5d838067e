// xsa sweep: compare for each value of one option.
#include <string>

#include "xsa/research/sweep.h"
#include "xsa/tools/commands.h"
#include "xsa/util/error.h"
#include "xsa/util/parse.h"
#include "xsa/util/signals.h"

namespace xsa::cli {

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
                  "warmup, weight-decay, muon-lr, logit-softcap, precision (fp32,bf16)")
      ->required();
  cmd->add_option("--tokens-per-step", *tokens_per_step,
                  "Hold every step at this many tokens for every value: each value's --batch "
                  "(at most the one given) and accumulation follow from its --seq-len");
  cmd->callback([a, cmd, param, tokens_per_step] {
    catch_stop_signals();
    const size_t eq = param->find('=');
    if (eq == std::string::npos || eq + 1 >= param->size())
      fail("--param {}: expected NAME=V1,V2,...", *param);
    sweep(compare_config_of(cmd, *a), param->substr(0, eq), split(param->substr(eq + 1), ','),
          *tokens_per_step);
  });
}

}  // namespace xsa::cli
