// The training loop: data, model, AdamW with warm-up + cosine schedule and global-norm clipping,
// validation, metrics.jsonl, checkpoints, exact resume.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "xsa/data/dataset.h"
#include "xsa/model/config.h"
#include "xsa/model/gpt.h"
#include "xsa/model/params.h"
#include "xsa/train/run_config.h"
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

// The optimizer settings of a run.
OptimizerSettings optimizer_settings(const RunConfig& run);

}  // namespace xsa
