// What one layer's attention is, and the one grammar that names it: --attn, compare's --variants
// and config files all read it with parse_attention, and attention_string writes it back.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace xsa {

// sa: standard attention; xsa: exclusive (docs/SPEC.md §2); xsa_gated: z = y − tanh(w_h)(y·u)u
// with a learnable w per head, zero-initialised (training starts as exact SA).
// xsa_gated_one: the same with w = 1 at the start (α = tanh 1 ≈ 0.76, mostly exclusive).
// (The learned α is XSA's exclusion strength; gated-attn's output gate, a rival below, is another
// thing: "gate" alone names neither in the code.)
enum class AttnKind : uint8_t { sa, xsa, xsa_gated, xsa_gated_one };

// The kinds' one table: every question about a kind (its name in --attn, --variants and
// config.json, whether it is exclusive, whether it learns an exclusion strength α and from what
// start) reads it, in AttnKind's order.
struct AttentionKindRow {
  AttnKind kind;
  const char* name;         // --attn, --variants, config.json's layer_attn
  bool exclusive;           // removes y's component along the own value (the kernels' XSA step)
  bool learns_exclusion;    // α_h = tanh(w_h), a tensor attn.xsa_gate [H] (SPEC §2), not decayed
  double exclusion_init_w;  // w's start: 0 (α 0: exact SA at step 0) or 1 (α ≈ 0.76)
  const char* about;        // for the docs and help
};
inline constexpr AttentionKindRow kAttentionKinds[] = {
    {AttnKind::sa, "sa", false, false, 0, "standard attention"},
    {AttnKind::xsa, "xsa", true, false, 0, "exclusive self attention: z = y − (y·u) u"},
    {AttnKind::xsa_gated, "xsa-gated", true, true, 0,
     "XSA with a learned exclusion strength per head, α = tanh(w), w from 0 (starts as SA)"},
    {AttnKind::xsa_gated_one, "xsa-gated-one", true, true, 1,
     "the same with w from 1 (α ≈ 0.76 at the start)"}};
inline constexpr const AttentionKindRow& kind_row(AttnKind kind) {
  return kAttentionKinds[static_cast<int>(kind)];
}
inline constexpr const char* to_string(AttnKind kind) {
  return kind_row(kind).name;
}
inline constexpr bool is_exclusive(AttnKind kind) {
  return kind_row(kind).exclusive;
}
inline constexpr bool learns_exclusion(AttnKind kind) {
  return kind_row(kind).learns_exclusion;
}
static_assert(kAttentionKinds[3].kind == AttnKind::xsa_gated_one, "kAttentionKinds in enum order");

inline constexpr int kMaxLayers = 256;

// One layer's attention: its kind and the options on top of it, combinable in the order
// values projected → value embedding added → values mixed → attention (sink, no-self) → XSA →
// output gate → W_o. Three are XSA's rivals (docs/SPEC.md §8):
//   output_gate (gated-attn): y ⊙ σ(x W_g) before W_o (Qiu et al.), W_g [C, C], initialised as W_q.
//   value_residual: the layer attends to v' = λ v + (1 − λ) v_0, the first layer's values
//     (ResFormer), λ one learnable scalar starting at 0.5; on layer 0 it has nothing to mix.
//   no_self: token i attends to j < i only; token 0 sees no key and its output is zero.
// And options of the whole model, not rivals (commonly combined with XSA):
//   qk_norm: RMSNorm of each q and k head before RoPE, with a learned scale per head dimension
//     for the queries and one for the keys (modded-nanogpt, OLMo 2, Gemma 3; ops/args.h).
//   value_embed: a table E [V, Hkv·D] per layer whose row of each token is added to the token's
//     values (docs/SPEC.md §10; modded-nanogpt, nanochat), zero at the start.
struct LayerAttention {
  AttnKind kind = AttnKind::sa;
  bool sink = false;  // a learned attention-sink logit per head
  bool output_gate = false;
  bool value_residual = false;
  bool no_self = false;
  bool qk_norm = false;
  bool value_embed = false;
  bool operator==(const LayerAttention&) const = default;
  bool has_rivals() const { return output_gate || value_residual || no_self; }
};
using AttentionLayers = std::array<LayerAttention, kMaxLayers>;

// The options' one table, in the order they are written after '+'. A rival (docs/SPEC.md §8) may
// stand alone (on SA) and is saved in config.json's "rivals". An option of the whole model has a
// flag of train and compare of its own (--qk-norm: on every layer of every variant, the variants'
// names unchanged), config.json's per-layer list "layer_<key>" from `config_version` on (older
// readers refuse the file rather than misread it), a key in reports, and its title in the help
// and in the one-line refusals of the exports that cannot hold it.
struct AttentionOption {
  const char* name;  // after '+'; the whole-model flag is "--" + name
  bool LayerAttention::*flag;
  bool rival;
  bool whole_model;
  const char* key;     // config.json's (a rival's in "rivals", else "layer_" + key), report.json's
  int config_version;  // the config.json version that introduced its key
  const char* title;   // "QK-norm": help, reports, refusals
};
inline constexpr AttentionOption kAttentionOptions[] = {
    {"sink", &LayerAttention::sink, false, false, "sink", 1, "attention sinks"},
    {"gated-attn", &LayerAttention::output_gate, true, false, "gated_attn", 3, "gated attention"},
    {"value-residual", &LayerAttention::value_residual, true, false, "value_residual", 3,
     "the value residual"},
    {"no-self", &LayerAttention::no_self, true, false, "no_self", 3, "no-self attention"},
    {"qk-norm", &LayerAttention::qk_norm, false, true, "qk_norm", 5,
     "QK-norm (RMSNorm of q and k per head before RoPE)"},
    {"value-embed", &LayerAttention::value_embed, false, true, "value_embed", 6,
     "value embeddings (a table per layer added to the values)"}};

// The titles of the whole-model options `options` holds ("QK-norm (...), value embeddings
// (...)"), "" when none.
std::string whole_model_options_string(const LayerAttention& options);

// The kind named `name` (kAttentionKinds), if any; "sa, xsa, xsa-gated, xsa-gated-one".
std::optional<AttnKind> attention_kind_named(const std::string& name);
std::string attention_kind_names();
// What --attn and --variants take, from the two tables: "sa, xsa, ..., xsa-lastN, xsa-firstN,
// xsa-layers-0.2.5, gated-attn, value-residual, no-self; then +sink, ... in any order".
std::string attention_grammar();

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
// spec with each whole-model option that `options` holds added to each item (train's --qk-norm,
// --value-embed).
std::string with_whole_model_options(std::string spec, const LayerAttention& options);
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
