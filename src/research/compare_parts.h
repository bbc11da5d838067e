// The parts of a comparison (research/compare.h) that its files share: the arms of one seed and
// what every comparison prepares before its first step (compare_arms.cpp trains them), the
// variants as models (compare_options.cpp parses them) and the statistics of their differences
// (compare_statistics.cpp). research/compare.cpp runs a comparison from these parts.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "xsa/analysis/similarity_bias.h"
#include "xsa/dist/comm.h"
#include "xsa/eval/suite.h"
#include "xsa/io/checkpoint.h"
#include "xsa/research/compare.h"
#include "xsa/train/training_run.h"

namespace xsa::comparison {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

// One variant's model of one seed, as it trains.
struct Arm {
  std::vector<TaskResult> suite;  // --eval-suite's results
  Variant variant;
  std::unique_ptr<Gpt<float>> model;
  std::unique_ptr<TrainStep> step;
  std::unique_ptr<BatchLoader> loader;
  std::vector<double> ms, losses;
  double seconds = 0;    // training time so far (its steps' wall-clock)
  bool stopped = false;  // diverged in a tuning comparison: no more steps
  ArmResult result;
};

// Everything a comparison needs before its first step, checked before anything is written: what
// every training run needs (the step's shape, threads, data, the model with the data's
// vocabulary, the validation batches), and a comparison's own.
struct Setup : RunInputs {
  std::vector<Variant> variants;
  std::vector<Dataset> evals;
  nlohmann::json identity;  // finished seeds of an interrupted run with the same one resume
  Comm* comm = nullptr;
  SuiteFiles suite;  // --eval-suite's tasks, tokenized once
  std::vector<std::vector<ScoringItem>> suite_items;
  std::optional<InitialWeights> init_weights;  // --init-from's checkpoint
};

// ---- the variants as models and backends (compare_options.cpp) ----
// The backend of a variant's arms: its own precision, else the run's.
Backend<float>& variant_backend(const RunConfig& run, const Variant& v);
ModelConfig variant_model(const ModelConfig& base, const Variant& v);
// cfg.variants parsed and checked: an SA baseline first, no repeats, precisions other than the
// run's, no @RATE beside --tune-lr.
std::vector<Variant> parse_variants(const CompareConfig& cfg);
// Each variant's peak rate: its own (@RATE), else run_lr; empty when no variant has its own.
std::vector<double> variant_rates(const std::vector<Variant>& variants, double run_lr);

// ---- the arms (compare_arms.cpp) ----
// Every rank prepares its own copy (its data); rank 0 alone checks and clears the report folder.
void prepare(const CompareConfig& cfg, Comm& comm, Setup& s);
void print_header(const CompareConfig& cfg, const Setup& s);
// Peak memory of each variant alone: a fresh model and one step.
std::vector<double> measure_peaks(const CompareConfig& cfg, const Setup& s);
// The arms of one seed: the same initial weights where they share tensors, and the same batches.
std::vector<Arm> make_arms(const CompareConfig& cfg, const Setup& s, uint64_t seed);
fs::path arm_folder(const fs::path& out, const std::string& variant, uint64_t seed);
// Steps every arm of a seed interleaved, rotating who goes first so the timing stays fair;
// appends each step's ms / ms(SA) per variant to overhead. Returns the seconds spent validating.
double train_arms(const CompareConfig& cfg, const Setup& s, std::vector<Arm>& arms, uint64_t seed,
                  int seed_index, std::vector<std::vector<double>>& overhead,
                  clock_type::time_point start);
// After the last step: each arm's summary figures, its further evaluations and its checkpoint.
void finish_arms(const CompareConfig& cfg, const Setup& s, std::vector<Arm>& arms,
                 const std::vector<double>& peak);
// A seed finished before an interruption: its results, when it belongs to this comparison.
bool take_finished_seed(const fs::path& seed_file, const Setup& s, const RunConfig& run,
                        CompareResult& result, std::vector<std::vector<double>>& overhead,
                        double& validation_seconds);
// This seed is done: its results survive an interruption (Ctrl-C) of the later ones.
void save_finished_seed(const fs::path& seed_file, const Setup& s, const std::vector<Arm>& arms,
                        const std::vector<std::vector<double>>& overhead, size_t first_overhead,
                        double validation_seconds);
// The similarity bias of every variant, from the first seed's saved final weights.
std::vector<std::vector<HeadBias>> analyze_arms(const CompareConfig& cfg, const Setup& s);
// The --eval-suite tasks on an arm's saved checkpoint (a seed finished before an interruption).
std::vector<TaskResult> score_suite_from_checkpoint(const Setup& s, const fs::path& arm,
                                                    Backend<float>& backend);

// ---- the statistics (compare_statistics.cpp) ----
// --tune-lr: variant k's rates that never diverged (indices into t.lrs), lowest mean loss first;
// ties: the lower rate. The first is the one chosen, the second the runner-up.
std::vector<size_t> rates_by_loss(const LrTuning& t, size_t k);
// --tune-lr's chosen rates: each one's runner-up and margin over it (LrTuning::margin), from the
// tuning seeds' losses.
void measure_tuning_margins(LrTuning& t);
// --seeds auto after `done` seeds: the note for the report once it stops (seeds_stop_here), else
// empty.
std::string auto_seeds_verdict(const CompareConfig& cfg, const SequentialDesign& design,
                               const CompareResult& result, int done,
                               std::vector<SequentialLook>& looks);
// Differences to SA paired by seed: intervals, effect sizes and tests, Holm across the variants;
// a verdict that never calls a single seed a win; every figure the report shows (its means, each
// seed's, the curves), so that the report only lays them out. Fills result.summary.
void summarize(CompareResult& result, const Setup& s, const CompareConfig& cfg,
               const std::vector<std::vector<double>>& overhead,
               const std::vector<SequentialLook>& looks);

}  // namespace xsa::comparison
