// Checkpoints (docs/SPEC.md §3): a directory run/ckpt_NNNNNN/ holding config.json,
// model.safetensors (nanoGPT names, [out, in] layouts), and for resuming optimizer.safetensors
// (AdamW moments) and trainer.json (step, data position, RNG state, run settings).
// A checkpoint is written into a temporary directory and renamed into place when complete, so
// a run killed at any moment leaves every earlier checkpoint intact; the latest checkpoint of a
// run is the complete ckpt_* directory with the highest step.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "xsa/io/safetensors.h"
#include "xsa/model/model_config.h"
#include "xsa/model/params.h"

namespace xsa {

namespace fs = std::filesystem;

// Writes run_dir/ckpt_<step> atomically, with a copy of each of `extra_files` (what the model
// needs besides its weights: a SentencePiece vocabulary); fails if it already exists unless
// replace is set.
fs::path save_checkpoint(const fs::path& run_dir, int64_t step, const ModelConfig& cfg,
                         const ParamArena<float>& arena, const nlohmann::json& trainer_state,
                         bool replace, const std::vector<fs::path>& extra_files = {});

// The same from host memory laid out by `layout`: the parameters and both full moments. Without
// moments (adam_m null) and trainer state (null) it is a weights-only checkpoint (an imported
// model): eval, sample, analyze and --init-from read it; it cannot be resumed. With muon_m (Muon's
// momentum, --optimizer muon) the hidden matrices' optimizer state is theirs
// (`<name>.muon_momentum`) and not AdamW's.
struct CheckpointTensors {
  const std::vector<TensorInfo>& layout;
  const float* params;
  const float* adam_m = nullptr;
  const float* adam_v = nullptr;
  const float* muon_m = nullptr;
};
fs::path save_checkpoint(const fs::path& run_dir, int64_t step, const ModelConfig& cfg,
                         const CheckpointTensors& tensors, const nlohmann::json& trainer_state,
                         bool replace, const std::vector<fs::path>& extra_files = {});

// A run folder (its latest ckpt_*) or a checkpoint folder itself. Throws Error when neither.
fs::path resolve_checkpoint(const fs::path& path);
std::optional<fs::path> latest_checkpoint(const fs::path& run_dir);
std::vector<fs::path> list_checkpoints(const fs::path& run_dir);  // ascending by step

ModelConfig load_checkpoint_config(const fs::path& ckpt_dir);
// Where a checkpoint's tokenizer files are: the checkpoint's own folder for a SentencePiece
// vocabulary (it carries a copy), else GPT-2's (gpt2_vocab_dir, empty: the default places).
std::string tokenizer_folder(const fs::path& ckpt_dir, const ModelConfig& cfg,
                             const std::string& gpt2_vocab_dir);
// Loads parameters (and, with_optimizer, the AdamW moments) checking every name and shape.
void load_checkpoint_weights(const fs::path& ckpt_dir, ParamArena<float>& arena,
                             bool with_optimizer);
// The same into host memory laid out by `layout` (adam_m and adam_v null: parameters only; muon_m
// not null: the hidden matrices' Muon momentum instead of their AdamW moments).
struct CheckpointTarget {
  const std::vector<TensorInfo>& layout;
  float* params;
  float* adam_m = nullptr;
  float* adam_v = nullptr;
  float* muon_m = nullptr;
};
void load_checkpoint_tensors(const fs::path& ckpt_dir, const CheckpointTarget& target);
nlohmann::json load_trainer_state(const fs::path& ckpt_dir);

// --init-from: the model a run starts from a checkpoint's weights. Its shape, architecture and
// tokenizer are the checkpoint's; its attention per layer and its context length are `requested`'s
// (a shorter context keeps the first rows of learned positions). Throws Error naming a
// contradiction.
ModelConfig init_from_config(const fs::path& ckpt_dir, const ModelConfig& requested);
// --init-from's weights, read once: checked against every model that starts from them before
// anything is written or deleted, then copied into each.
class InitialWeights {
 public:
  // `init_from`: a run or checkpoint folder. With `force`, one inside `out` (which --force would
  // clear) is refused.
  InitialWeights(const std::string& init_from, const fs::path& out, bool force);
  // Every tensor of the checkpoint has a place in cfg's model and every tensor of the model is in
  // the checkpoint with its shape (learned positions: at least the model's rows), except an XSA
  // gate or sink new to it; those are returned. Throws Error naming the first mismatch.
  std::vector<std::string> check(const std::vector<TensorInfo>& layout) const;
  // check, then overwrites the freshly initialised `arena` with the checkpoint's tensors (learned
  // positions cut to the model's rows); the new gates and sinks keep their initial values.
  std::vector<std::string> load(ParamArena<float>& arena) const;

 private:
  std::string path_;
  SafetensorsFile file_;
};

}  // namespace xsa
