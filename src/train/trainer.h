// The training loop: data, model, AdamW with warm-up + cosine schedule and global-norm clipping,
// validation, metrics.jsonl, checkpoints, exact resume.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "xsa/backend/device.h"
#include "xsa/options/run_config.h"
#include "xsa/data/dataset.h"
#include "xsa/dist/comm.h"
#include "xsa/io/checkpoint.h"
#include "xsa/model/model_config.h"
#include "xsa/model/gpt.h"
#include "xsa/model/params.h"
#include "xsa/train/step.h"

namespace xsa {

struct TrainResult {
  int64_t steps_done = 0;
  double final_loss = 0;
  double final_val_loss = -1;  // −1 when there was no validation
  std::string last_checkpoint;
};

// Trains from scratch (resume_from empty) or continues the checkpoint at resume_from.
TrainResult train(const ModelConfig& model, const RunConfig& run,
                  const std::string& resume_from = "");

// What a checkpoint of a model with a SentencePiece vocabulary carries besides its weights (the
// data's tokenizer.model and tokenizer.json), so that sample, eval and analyze need nothing else.
// Nothing for the other tokenizers.
std::vector<fs::path> vocabulary_files(const Dataset& data);

// The backend a run's --device and --precision ask for (backend/device.h). Throws Error naming
// what is missing: bf16 on a CPU that cannot, a GPU where there is none.
BackendOptions backend_options(const RunConfig& run);
Backend<float>& backend_for(const RunConfig& run);

// The optimizer settings of a run.
OptimizerSettings optimizer_settings(const RunConfig& run);

// How one step is shared out: each of `world` processes runs `accumulation` micro-batches of
// `batch` rows.
struct StepShape {
  int batch = 0, accumulation = 1, world = 1, T = 0;
  int rows_per_process() const { return batch * accumulation; }
  int64_t tokens() const { return (int64_t)batch * accumulation * world * T; }
};
// "step: 2048 tokens = 4 rows x 1 accumulation x 2 processes, ZeRO-1; 1 thread per process"
std::string describe_step(const StepShape& shape, const RunConfig& run, int threads);

// The step's shape for `world` processes: --batch rows per pass, the accumulation that makes up
// --total-batch-tokens. Throws Error when it does not divide.
StepShape step_shape(const RunConfig& run, int T, int world);

// A checkpoint's parameters and moments, read by rank 0 and sent to every rank: the parameters
// whole, the moments whole or, under ZeRO-1 (arena.keep_moments), each rank's shard. Every rank
// must call it. On a device host code cannot address, the parameters go by the device's
// collectives where `comm_choice` (--comm) takes them, the moments' shards through host memory.
void load_training_state(Comm& comm, const fs::path& ckpt, ParamArena<float>& arena,
                         const std::string& comm_choice = "auto");
// Writes a checkpoint from rank 0, with the moments gathered from every rank's shard under ZeRO-1
// (rank 0 then holds them whole while it writes). Every rank must call it; returns the
// checkpoint's folder on rank 0, an empty path elsewhere.
fs::path save_training_state(Comm& comm, const fs::path& run_dir, int64_t step,
                             const ModelConfig& cfg, const ParamArena<float>& arena,
                             const nlohmann::json& state, bool replace,
                             const std::vector<fs::path>& extra_files = {});

}  // namespace xsa
