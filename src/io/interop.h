// Other programs' GPT-2 files (docs/SPEC.md §6): Hugging Face's model.safetensors + config.json
// and llm.c's model file (gpt2_124M.bin), read into and written from xsa's parameter layout.
// Every reader checks what it is given against what it expects (magic, version, sizes, each
// tensor's name and shape) and names the first thing that is wrong.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "xsa/model/model_config.h"
#include "xsa/model/params.h"

namespace xsa {

namespace fs = std::filesystem;

// A model read from another program's files: its configuration and its parameters, laid out as
// param_layout(cfg) lays them (padded vocabulary rows zero).
struct ForeignModel {
  ModelConfig cfg;
  std::vector<float> params;
  std::string description;  // what was read, for the user: "Hugging Face GPT-2 (12 layers, ...)"
};

// A Hugging Face GPT-2 checkpoint: model.safetensors (a file, or a folder holding it) and the
// config.json beside it. Names with or without the `transformer.` prefix; Conv1D weights [in, out]
// transposed; the attn.bias / masked_bias buffers ignored; a tied lm_head.weight accepted.
ForeignModel import_hf(const fs::path& file_or_folder);
// llm.c's model file: magic 20240326, version 3 (fp32) or 5 (bf16).
ForeignModel import_llmc(const fs::path& file);
// The same from the files' bytes; the names are those errors give.
ForeignModel import_hf_bytes(const std::string& config_json, const std::string& config_name,
                             std::string safetensors, const std::string& safetensors_name);
ForeignModel import_llmc_bytes(const std::string& bytes, const std::string& name);

// Writes llm.c's model file (version 3, fp32; or 5, bf16 rounded to nearest even). Only models
// llm.c computes: the GPT-2 architecture with standard attention (no XSA, gates, sinks or
// grouped-query heads); the others are refused naming why.
void export_llmc(const ModelConfig& cfg, const std::vector<TensorInfo>& layout, const float* params,
                 const fs::path& file, bool bf16);
// Writes a Hugging Face GPT-2 folder (model.safetensors, config.json). XSA layers, gates and sinks
// travel as extra entries (config.json "xsa_layer_attn", tensors attn.xsa_gate / attn.sink) that
// import_hf reads back; transformers' GPT2LMHeadModel itself would compute SA.
void export_hf(const ModelConfig& cfg, const std::vector<TensorInfo>& layout, const float* params,
               const fs::path& folder);

}  // namespace xsa
