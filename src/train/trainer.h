// The training loop: data, model, AdamW with warm-up + cosine schedule and global-norm clipping,
// validation, metrics.jsonl, checkpoints, exact resume.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "data/dataset.h"
#include "model/config.h"
#include "model/gpt.h"
#include "model/params.h"

namespace xsa {

// Run settings, kept apart from the model's shape (ModelConfig). Stored in trainer.json.
struct RunConfig {
  std::string data;       // text file, shard folder or glob (see open_dataset)
  std::string tokenizer;  // "byte" or "gpt2"; empty: from the data (text: byte, shards: meta.json)
  std::string vocab_dir;  // GPT-2 vocabulary folder; empty: the default places
  bool shuffle = true;    // visit windows in a seeded random order each epoch
  std::string out = "runs/run";
  int batch = 16;  // B
  int64_t steps = 500;
  double lr = 1e-3;  // peak learning rate
  double min_lr_fraction = 0.1;
  int64_t warmup = -1;  // steps; −1: 5 % of steps
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double adam_eps = 1e-8;
  double grad_clip = 1.0;  // global norm; 0 disables
  uint64_t seed = 1;
  int threads = 0;          // 0: every core
  int64_t ckpt_every = 0;   // steps between checkpoints; 0: only at the end
  int64_t val_every = 100;  // steps between validation passes; 0: only at the end
  int val_batches = 8;
  double val_fraction = 0.1;
  int64_t log_every = 10;  // progress lines when stdout is not a terminal
  bool force = false;      // start over in (or resume into) a folder with later checkpoints
  bool quiet = false;      // no progress output (tests)

  int64_t warmup_steps() const { return warmup >= 0 ? warmup : steps / 20; }
  void validate() const;  // throws Error naming the bad value
};

nlohmann::json run_config_to_json(const RunConfig& run);
// Overlays the keys present in j onto `run`; `source` names the file in errors.
void run_config_update_from_json(RunConfig& run, const nlohmann::json& j,
                                 const std::string& source);

struct TrainResult {
  int64_t steps_done = 0;
  double final_loss = 0;
  double final_val_loss = -1;  // −1 when there was no validation
  std::string last_checkpoint;
};

// Trains from scratch (resume_from empty) or continues the checkpoint at resume_from.
TrainResult train(const ModelConfig& model, const RunConfig& run,
                  const std::string& resume_from = "");

// One optimizer step on the gradients in `arena`: global-norm clipping (run.grad_clip), then AdamW
// with weight decay on 2-D matrices only. `step` is 1-based (bias correction).
double gradient_norm(const ParamArena<float>& arena);
void optimizer_step(ParamArena<float>& arena, const RunConfig& run, double lr, int64_t step,
                    double grad_norm);

// Mean loss over the first n_batches fixed windows of `stream` (see val_batch). After each batch's
// forward, on_batch (when given) sees its targets [B·T] (−1: not scored).
double evaluate_loss(Gpt<float>& model, const TokenStream& stream, int n_batches,
                     const std::function<void(const int32_t* targets)>& on_batch = nullptr);

// Sets the thread count of OpenMP and OpenBLAS (0: every core) and returns it.
int set_thread_count(int threads);

}  // namespace xsa
