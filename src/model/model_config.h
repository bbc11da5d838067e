// The model's shape and attention per layer: a plain, trivially copyable struct, written into
// every checkpoint (config.json). An SA model and an XSA model differ only in `attention`.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <type_traits>

#include "xsa/model/attention.h"
#include "xsa/tokenizer/kind.h"

namespace xsa {

// How tokens know their place: rotary embeddings on q and k (xsa's default, as the paper's models),
// or a learned table wpe [seq_len, C] added to the token embedding (GPT-2, llm.c).
enum class Positions : uint8_t { rope, learned };

// The MLP's activation: GELU (tanh approximation; GPT-2, nanoGPT) or ReLU² (relu(x)²: the modern
// small-model recipe's, docs/SPEC.md §11).
enum class MlpActivation : uint8_t { gelu, relu2 };
inline const char* to_string(MlpActivation a) {
  return a == MlpActivation::relu2 ? "relu2" : "gelu";
}

// The largest width (and head count) and the largest context or vocabulary a model may have: far
// past any model this engine trains, small enough that no size computed from them (4·C² per
// layer, V_pad·C, T·C) overflows, so that no option or config.json asks for an absurd allocation.
// (The most layers: kMaxLayers, model/attention.h.)
inline constexpr int kMostWidth = 1 << 16, kMostSequence = 1 << 24;

struct ModelConfig {
  TokenizerKind tokenizer = TokenizerKind::byte;
  int vocab_size = 256;    // V: real tokens
  int padded_vocab = 256;  // V_pad: V rounded up to a multiple of 64 (rows of wte)
  int n_layer = 4;
  int n_head = 4;
  int n_kv_head = 0;  // key/value heads (grouped-query attention); 0: n_head
  int n_embd = 128;
  int seq_len = 256;  // context length T (RoPE table size, or rows of wpe)
  double rope_theta = 10000.0;
  Positions positions = Positions::rope;
  bool linear_bias = false;     // a bias on every linear layer (GPT-2); LayerNorms always have one
  AttentionLayers attention{};  // each layer's attention (model/attention.h); first n_layer used
  MlpActivation mlp = MlpActivation::gelu;
  double logit_softcap = 0;  // c > 0: logits ← c·tanh(logits/c) before the loss and sampling

  int head_dim() const { return n_embd / n_head; }
  int kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  int qkv_dim() const { return n_embd + 2 * kv_heads() * head_dim(); }  // rows of c_attn: q | k | v
  // The GPT-2 architecture: learned positions and linear biases (GPT-2, llm.c, Hugging Face).
  bool gpt2_architecture() const { return positions == Positions::learned && linear_bias; }
  // Throws Error naming the first impossible value (C % H, odd head dim, non-positive sizes, ...).
  void validate() const;
};
static_assert(std::is_trivially_copyable_v<ModelConfig>);

int pad_vocab(int vocab_size);  // multiple of 64
// "xsa" (RoPE, no linear biases) or "gpt2" (learned positions, biases): --arch.
const char* architecture_name(const ModelConfig& cfg);
void set_architecture(ModelConfig& cfg, const std::string& name);  // throws Error for another

// cfg.attention from --attn's grammar (parse_attention), and back (attention_string).
void set_attention(ModelConfig& cfg, const std::string& spec);
std::string attention_string(const ModelConfig& cfg);
// The names of before 2026-12-05, kept for programs written against them.
[[deprecated("use set_attention")]] inline void set_layer_attn(ModelConfig& cfg,
                                                               const std::string& spec) {
  set_attention(cfg, spec);
}
[[deprecated("use attention_string")]] inline std::string layer_attn_string(
    const ModelConfig& cfg) {
  return attention_string(cfg);
}
// --mlp: "gelu" or "relu2"; throws Error for another name.
void set_mlp_activation(ModelConfig& cfg, const std::string& name);
// Whether some layer holds one of XSA's rivals.
bool has_rivals(const ModelConfig& cfg);

// Parameter count of the model (padded vocabulary rows included, as stored).
int64_t parameter_count(const ModelConfig& cfg);

void to_json(nlohmann::json& j, const ModelConfig& cfg);
// Reads config.json; `source` names the file in errors.
ModelConfig model_config_from_json(const nlohmann::json& j, const std::string& source);

}  // namespace xsa
