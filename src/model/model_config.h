// The model's shape and attention per layer: a plain, trivially copyable struct, written into
// every checkpoint (config.json). An SA model and an XSA model differ only in layer_attn.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <type_traits>

#include "xsa/tokenizer/kind.h"

namespace xsa {

// sa: standard attention; xsa: exclusive (docs/SPEC.md §2); xsa_gated: z = y − tanh(w_h)(y·u)u
// with a learnable w per head, zero-initialised (training starts as exact SA).
// xsa_gated_one: the same with w = 1 at the start (α = tanh 1 ≈ 0.76, mostly exclusive).
enum class AttnKind : uint8_t { sa, xsa, xsa_gated, xsa_gated_one };

inline constexpr int kMaxLayers = 256;

// The rival ideas to XSA (docs/SPEC.md §8), each on every layer, combinable with each other and
// with XSA in the order: values mixed → attention → XSA → gate → W_o.
//   gated_attn: y ⊙ σ(x W_g) before W_o (Qiu et al.), W_g [C, C] per layer, initialised as W_q.
//   value_residual: layers l ≥ 1 attend to v' = λ_l v_l + (1 − λ_l) v_0, the first layer's values
//     (ResFormer), λ_l one learnable scalar per layer starting at 0.5.
//   no_self: token i attends to j < i only; token 0 sees no key and its output is zero.
struct AttentionRivals {
  bool gated_attn = false;
  bool value_residual = false;
  bool no_self = false;
  bool any() const { return gated_attn || value_residual || no_self; }
};
// "gated-attn+value-residual" (the suffix form of --attn and --variants), "" when none.
std::string rivals_string(const AttentionRivals& rivals);

// How tokens know their place: rotary embeddings on q and k (xsa's default, as the paper's models),
// or a learned table wpe [seq_len, C] added to the token embedding (GPT-2, llm.c).
enum class Positions : uint8_t { rope, learned };

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
  bool linear_bias = false;  // a bias on every linear layer (GPT-2); LayerNorms always have one
  std::array<AttnKind, kMaxLayers> layer_attn{};  // first n_layer entries used
  std::array<bool, kMaxLayers> layer_sink{};      // a learned attention-sink logit per head
  AttentionRivals rivals;                         // XSA's rivals (docs/SPEC.md §8), on every layer

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
const char* to_string(AttnKind kind);
// "xsa" (RoPE, no linear biases) or "gpt2" (learned positions, biases): --arch.
const char* architecture_name(const ModelConfig& cfg);
void set_architecture(ModelConfig& cfg, const std::string& name);  // throws Error for another

// "sa", "xsa" (every layer), or a comma list with one entry per layer ("sa,sa,xsa,xsa"); any of
// them followed by rivals for every layer: "+gated-attn", "+value-residual", "+no-self"
// ("xsa+gated-attn", "sa,xsa+no-self").
void set_layer_attn(ModelConfig& cfg, std::string spec);
// Inverse of set_layer_attn: "sa" or "xsa" when uniform, else the per-layer list; then the rivals.
std::string layer_attn_string(const ModelConfig& cfg);

// Parameter count of the model (padded vocabulary rows included, as stored).
int64_t parameter_count(const ModelConfig& cfg);

void to_json(nlohmann::json& j, const ModelConfig& cfg);
// Reads config.json; `source` names the file in errors.
ModelConfig model_config_from_json(const nlohmann::json& j, const std::string& source);

}  // namespace xsa
