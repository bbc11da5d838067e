// What one layer's attention is, and the one grammar that names it: --attn, compare's --variants
// and config files all read it with parse_attention, and attention_string writes it back.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace xsa {

// sa: standard attention; xsa: exclusive (docs/SPEC.md §2); xsa_gated: z = y − tanh(w_h)(y·u)u
// with a learnable w per head, zero-initialised (training starts as exact SA).
// xsa_gated_one: the same with w = 1 at the start (α = tanh 1 ≈ 0.76, mostly exclusive).
enum class AttnKind : uint8_t { sa, xsa, xsa_gated, xsa_gated_one };
const char* to_string(AttnKind kind);

inline constexpr int kMaxLayers = 256;

// One layer's attention: its kind and the options on top of it, combinable in the order
// values mixed → attention (sink, no-self) → XSA → output gate → W_o. The last three are XSA's
// rivals (docs/SPEC.md §8):
//   output_gate (gated-attn): y ⊙ σ(x W_g) before W_o (Qiu et al.), W_g [C, C], initialised as W_q.
//   value_residual: the layer attends to v' = λ v + (1 − λ) v_0, the first layer's values
//     (ResFormer), λ one learnable scalar starting at 0.5; on layer 0 it has nothing to mix.
//   no_self: token i attends to j < i only; token 0 sees no key and its output is zero.
// And one option of the queries and keys, not a rival (commonly combined with XSA):
//   qk_norm: RMSNorm of each q and k head before RoPE, with a learned scale per head dimension
//     for the queries and one for the keys (modded-nanogpt, OLMo 2, Gemma 3; ops/args.h).
struct LayerAttention {
  AttnKind kind = AttnKind::sa;
  bool sink = false;  // a learned attention-sink logit per head
  bool output_gate = false;
  bool value_residual = false;
  bool no_self = false;
  bool qk_norm = false;
  bool operator==(const LayerAttention&) const = default;
  bool has_rivals() const { return output_gate || value_residual || no_self; }
};
using AttentionLayers = std::array<LayerAttention, kMaxLayers>;

// The options' one table: their names after '+' and their flags, in the order they are written.
struct AttentionOption {
  const char* name;
  bool LayerAttention::*flag;
  bool rival;  // one of XSA's rivals (docs/SPEC.md §8)
};
inline constexpr AttentionOption kAttentionOptions[] = {
    {"sink", &LayerAttention::sink, false},
    {"gated-attn", &LayerAttention::output_gate, true},
    {"value-residual", &LayerAttention::value_residual, true},
    {"no-self", &LayerAttention::no_self, true},
    {"qk-norm", &LayerAttention::qk_norm, false}};

// spec = item | item,item,...   one item for every layer, or one per layer (n_layer of them)
// item = base(+option)*         options in any order, each once: sink, gated-attn,
//                               value-residual, no-self, qk-norm
// base = sa | xsa | xsa-gated | xsa-gated-one
//      | xsa-lastN | xsa-firstN | xsa-layers-I.J.K   XSA on some layers, SA on the others (alone,
//                                                    not in a list; the options on every layer)
//      | gated-attn | value-residual | no-self       an option alone: on SA
// A single item fills every entry (so n_layer may change after); a list fills its n_layer.
// Throws Error in one line naming `what` (the option: "--attn", "--variants") and the spec.
AttentionLayers parse_attention(const std::string& spec, int n_layer, const std::string& what);
// spec with +option added to each of its items (before an @precision), where not there already:
// train's --qk-norm: "+qk-norm on every layer" of --attn. (compare's --qk-norm sets it on every
// variant's layers and keeps their names: CompareConfig::qk_norm.)
std::string with_option_on_every_item(const std::string& spec, const std::string& option);
// The inverse: one item when the n_layer layers agree, else the per-layer list.
std::string attention_string(const AttentionLayers& layers, int n_layer);
// "gated-attn+value-residual": the rivals among a layer's options, "" when none.
std::string rivals_string(const LayerAttention& options);
// Every option that some layer has (kind left sa): what a model holds somewhere.
LayerAttention options_on_any_layer(const AttentionLayers& layers, int n_layer);
// Whether layer l mixes in the first layer's values, and whether any layer does.
inline bool mixes_first_values(const AttentionLayers& layers, int l) {
  return l > 0 && layers[l].value_residual;
}
bool any_layer_mixes_values(const AttentionLayers& layers, int n_layer);

}  // namespace xsa
