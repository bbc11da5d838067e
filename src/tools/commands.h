// The `xsa` subcommands. Each registers its options on the root app (declared once: name,
// default, help) and runs from its callback; xsa::Error escapes to main, which prints one line.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "model/config.h"
#include "train/trainer.h"

namespace xsa::cli {

// Shared option groups (options.cpp).
void add_model_options(CLI::App* cmd, ModelConfig& m);
void add_training_options(CLI::App* cmd, RunConfig& r, std::string& tokenizer);

void add_train_command(CLI::App& root);
void add_info_command(CLI::App& root);
void add_tokenize_command(CLI::App& root);
void add_prepare_command(CLI::App& root);
void add_bench_command(CLI::App& root);
void add_compare_command(CLI::App& root);
void add_analyze_command(CLI::App& root);
void add_sweep_command(CLI::App& root);
void add_eval_command(CLI::App& root);
void add_sample_command(CLI::App& root);

}  // namespace xsa::cli
