// The `xsa` subcommands. Each registers its options on the root app (declared once: name,
// default, help) and runs from its callback; xsa::Error escapes to main, which prints one line.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>

#include "xsa/model/model_config.h"
#include "xsa/options/model_options.h"
#include "xsa/research/compare.h"
#include "xsa/train/trainer.h"

namespace xsa::cli {

// Shared option groups (options.cpp).
void add_model_options(CLI::App* cmd, ModelConfig& m);
// The run options of the one table marked kShared.
void add_training_options(CLI::App* cmd, RunConfig& r);
// --precision into `precision`, its name parsed once here (an unknown one: one line, exit 1).
void add_precision_option(CLI::App* cmd, Precision& precision, const std::string& help,
                          const std::string& flag = "--precision");
// One more option of the table (a command's own, e.g. --ckpt-every); help: the table's when empty.
void add_run_option(CLI::App* cmd, RunConfig& r, const std::string& key,
                    const std::string& help = "");

// Whether a table's option (its flag in CLI11's syntax: "--shuffle,!--no-shuffle" is one option
// under both names) was given, on the command line or by --config.
bool option_given(const CLI::App& cmd, std::string_view flags);
// A number's limits on the command line: "--layers: 300 is outside [1, 256]".
CLI::Validator within(double least, double most);

// --init-from: the model of a run starting from a checkpoint's weights (its shape; attention and
// --seq-len as requested), shape options that contradict the checkpoint refused; sets the run's
// tokenizer to the checkpoint's when none was given.
ModelConfig init_from_model(const CLI::App& cmd, const ModelConfig& requested, RunConfig& run);

// XSA_SMOKE_TEST=1: every command at the smallest size that still runs it whole, so that the
// documentation's commands can all be run as written (tests/docs_test.py): training at most 3 steps
// of at most 4 rows per process (a comparison or sweep at most 2 seeds; --total-batch-tokens
// dropped), validation, a comparison's final scores and evaluation at most 2 batches and 8
// examples per task, sampling at most 16 tokens, bench the tiny configuration for one step and
// attention at T 256. Each cap applies only where the command asks for more.
bool smoke_test();
void apply_smoke_test(RunConfig& run);

// compare's options, which sweep shares (cmd_compare.cpp).
struct CompareArgs {
  CompareConfig cfg;
  std::string variants = "sa,xsa", preset, seeds = "1", tune_lr;
  int max_seeds = 10;
};
void add_compare_options(CLI::App* cmd, CompareArgs& a);
// The preset first, then every option given on the command line again on top of it.
CompareConfig compare_config_of(const CLI::App* cmd, const CompareArgs& a);

void add_train_command(CLI::App& root);
void add_info_command(CLI::App& root);
void add_prepare_command(CLI::App& root);
void add_bench_command(CLI::App& root);
void add_compare_command(CLI::App& root);
void add_analyze_command(CLI::App& root);
void add_sweep_command(CLI::App& root);
void add_eval_command(CLI::App& root);
void add_sample_command(CLI::App& root);
void add_import_command(CLI::App& root);
void add_export_command(CLI::App& root);
void add_board_command(CLI::App& root);
void add_tokenizer_command(CLI::App& root);
// After add_tokenizer_command: encode and decode under it, and the top-level tokenize.
void add_tokenize_command(CLI::App& root);

}  // namespace xsa::cli
