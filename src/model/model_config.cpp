#include "xsa/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "xsa/model/params.h"
#include "xsa/util/error.h"

namespace xsa {

void ModelConfig::validate() const {
  if (vocab_size <= 0) fail("vocab_size {} must be positive", vocab_size);
  if (padded_vocab < vocab_size || padded_vocab % 64 != 0)
    fail("padded_vocab {} must be a multiple of 64 and at least vocab_size {}", padded_vocab,
         vocab_size);
  if (n_layer <= 0 || n_layer > kMaxLayers)
    fail("--layers {} must be between 1 and {}", n_layer, kMaxLayers);
  if (n_head <= 0) fail("--heads {} must be positive", n_head);
  if (n_embd <= 0) fail("--embd {} must be positive", n_embd);
  if (n_embd % n_head != 0)
    fail("--embd {} is not divisible by --heads {}: the head dimension must be a whole number",
         n_embd, n_head);
  if (head_dim() % 2 != 0 && positions == Positions::rope)
    fail("head dimension {} (--embd {} / --heads {}) is odd: RoPE rotates pairs and needs it even",
         head_dim(), n_embd, n_head);
  if (seq_len <= 0) fail("--seq-len {} must be positive", seq_len);
  if (n_kv_head < 0 || n_kv_head > n_head || (n_kv_head > 0 && n_head % n_kv_head != 0))
    fail("--kv-heads {} must divide --heads {} (grouped-query attention)", n_kv_head, n_head);
  if (!(rope_theta > 0)) fail("rope_theta {} must be positive", rope_theta);
  if (n_embd > kMostWidth) fail("--embd {} is more than {}", n_embd, kMostWidth);
  if (padded_vocab > kMostSequence)
    fail("vocabulary {} is more than {}", padded_vocab, kMostSequence);
  if (seq_len > kMostSequence) fail("--seq-len {} is more than {}", seq_len, kMostSequence);
  if (!(logit_softcap >= 0) || !std::isfinite(logit_softcap))
    fail("--logit-softcap {} must be 0 (off) or positive", logit_softcap);
}

void set_mlp_activation(ModelConfig& cfg, const std::string& name) {
  if (name == "gelu")
    cfg.mlp = MlpActivation::gelu;
  else if (name == "relu2")
    cfg.mlp = MlpActivation::relu2;
  else
    fail("--mlp {} is not known (gelu, relu2)", name);
}

const char* architecture_name(const ModelConfig& cfg) {
  if (cfg.gpt2_architecture()) return "gpt2";
  if (cfg.positions == Positions::rope && !cfg.linear_bias) return "xsa";
  return cfg.positions == Positions::learned ? "learned positions" : "rope with biases";
}

void set_architecture(ModelConfig& cfg, const std::string& name) {
  if (name == "xsa") {
    cfg.positions = Positions::rope, cfg.linear_bias = false;
  } else if (name == "gpt2") {
    cfg.positions = Positions::learned, cfg.linear_bias = true;
  } else {
    fail("--arch {} is not known (xsa: RoPE, no linear biases; gpt2: learned positions, biases)",
         name);
  }
}

int pad_vocab(int vocab_size) {
  return (vocab_size + 63) / 64 * 64;
}

void set_attention(ModelConfig& cfg, const std::string& spec) {
  cfg.attention = parse_attention(spec, cfg.n_layer, "--attn");
}

std::string attention_string(const ModelConfig& cfg) {
  return attention_string(cfg.attention, cfg.n_layer);
}

bool has_rivals(const ModelConfig& cfg) {
  return options_on_any_layer(cfg.attention, cfg.n_layer).has_rivals();
}

namespace {

// The rivals' flags as config.json writes them (kAttentionOptions' keys): version 3 one object for
// every layer, versions 4 and later one per layer.
nlohmann::json rivals_json(const LayerAttention& layer) {
  nlohmann::json j = nlohmann::json::object();
  for (const AttentionOption& o : kAttentionOptions)
    if (o.rival) j[o.key] = layer.*o.flag;
  return j;
}

void read_rivals(const nlohmann::json& j, LayerAttention& layer, const std::string& where) {
  if (!j.is_object()) fail("{} must be an object", where);
  std::string known;
  for (const AttentionOption& o : kAttentionOptions) {
    if (!o.rival) continue;
    if (!j.contains(o.key) || !j[o.key].is_boolean())
      fail("{}.{} must be true or false", where, o.key);
    layer.*o.flag = j[o.key].get<bool>();
    known += (known.empty() ? "" : ", ") + std::string(o.key);
  }
  for (const auto& item : j.items()) {
    bool rival = false;
    for (const AttentionOption& o : kAttentionOptions) rival |= o.rival && item.key() == o.key;
    if (!rival) fail("{}.{} is not known ({})", where, item.key(), known);
  }
}

// The version of config.json that brought the recipe's MLP activation and logit soft-cap.
constexpr int kRecipeConfigVersion = 7;

// The newest config.json this reader knows: the recipe's, or a later whole-model option's.
constexpr int newest_config_version() {
  int newest = kRecipeConfigVersion;
  for (const AttentionOption& o : kAttentionOptions) newest = std::max(newest, o.config_version);
  return newest;
}
constexpr int kNewestConfigVersion = newest_config_version();

}  // namespace

int64_t parameter_count(const ModelConfig& cfg) {
  int64_t n = 0;
  for (const auto& t : param_layout(cfg)) n += t.numel;
  return n;
}

void to_json(nlohmann::json& j, const ModelConfig& cfg) {
  std::vector<std::string> attn;
  std::vector<bool> sink;
  for (int l = 0; l < cfg.n_layer; l++)
    attn.push_back(to_string(cfg.attention[l].kind)), sink.push_back(cfg.attention[l].sink);
  j = nlohmann::json{{"format", "xsa-gpt"},
                     {"version", 1},
                     {"tokenizer", to_string(cfg.tokenizer)},
                     {"vocab_size", cfg.vocab_size},
                     {"padded_vocab_size", cfg.padded_vocab},
                     {"n_layer", cfg.n_layer},
                     {"n_head", cfg.n_head},
                     {"n_kv_head", cfg.kv_heads()},
                     {"n_embd", cfg.n_embd},
                     {"seq_len", cfg.seq_len},
                     {"rope_theta", cfg.rope_theta},
                     {"layer_attn", attn},
                     {"layer_sink", sink}};
  // Only a model that needs them says so (and as version 2, which older readers refuse rather
  // than misread): the files of RoPE models stay as they were.
  if (cfg.positions != Positions::rope || cfg.linear_bias) {
    j["version"] = 2;
    j["positions"] = cfg.positions == Positions::rope ? "rope" : "learned";
    j["linear_bias"] = cfg.linear_bias;
  }
  // Rivals: version 3 when every layer has the same, version 4 when they differ by layer; readers
  // that do not know them refuse rather than misread. A whole-model option (QK-norm, value
  // embeddings) raises the version to its own (kAttentionOptions), with the rivals per layer and
  // its list "layer_<key>".
  const LayerAttention any = options_on_any_layer(cfg.attention, cfg.n_layer);
  // The recipe's MLP and head (docs/SPEC.md §11) raise it to version 7.
  const bool recipe = cfg.mlp != MlpActivation::gelu || cfg.logit_softcap != 0;
  int option_version = recipe ? kRecipeConfigVersion : 0;
  for (const AttentionOption& o : kAttentionOptions)
    if (o.whole_model && any.*o.flag) option_version = std::max(option_version, o.config_version);
  if (has_rivals(cfg) || option_version) {
    bool uniform = !option_version;
    for (int l = 1; l < cfg.n_layer; l++)
      uniform &= rivals_json(cfg.attention[l]) == rivals_json(cfg.attention[0]);
    j["version"] = option_version ? option_version : uniform ? 3 : 4;
    j["positions"] = cfg.positions == Positions::rope ? "rope" : "learned";
    j["linear_bias"] = cfg.linear_bias;
    if (uniform) {
      j["rivals"] = rivals_json(cfg.attention[0]);
    } else {
      nlohmann::json layers = nlohmann::json::array();
      for (int l = 0; l < cfg.n_layer; l++) layers.push_back(rivals_json(cfg.attention[l]));
      j["layer_rivals"] = layers;
    }
    for (const AttentionOption& o : kAttentionOptions) {
      if (!o.whole_model || !(any.*o.flag)) continue;
      std::vector<bool> on;
      for (int l = 0; l < cfg.n_layer; l++) on.push_back(cfg.attention[l].*o.flag);
      j[std::string("layer_") + o.key] = on;
    }
  }
  if (recipe) {
    j["mlp_activation"] = to_string(cfg.mlp);
    j["logit_softcap"] = cfg.logit_softcap;
  }
}

namespace {

// The file's version, checked: what every later part of the reader depends on.
int config_version(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) fail("{}: not a JSON object", source);
  // Types checked before value(): its type_error would name no file.
  if (!j.contains("format") || j["format"] != "xsa-gpt")
    fail("{}: 'format' is not \"xsa-gpt\"", source);
  const int version =
      j.contains("version") && j["version"].is_number_integer() ? j["version"].get<int>() : 0;
  if (version < 1 || version > kNewestConfigVersion)
    fail("{}: unsupported version {}", source, version);
  return version;
}

// The model's shape (positions, tokenizer, sizes), validated as a whole.
void read_model_shape(const nlohmann::json& j, int version, const std::string& source,
                      ModelConfig& cfg) {
  auto get_int = [&](const char* key) -> int {
    // An integer past int's range would be cut to a wrong size by get<int>().
    if (!j.contains(key) || !j[key].is_number_integer() || j[key] < INT32_MIN || j[key] > INT32_MAX)
      fail("{}: '{}' is missing or not an integer", source, key);
    return j[key].get<int>();
  };
  if (version >= 2) {
    const std::string positions = j.contains("positions") && j["positions"].is_string()
                                      ? j["positions"].get<std::string>()
                                      : "";
    if (positions != "rope" && positions != "learned")
      fail("{}: 'positions' must be \"rope\" or \"learned\"", source);
    cfg.positions = positions == "rope" ? Positions::rope : Positions::learned;
    if (!j.contains("linear_bias") || !j["linear_bias"].is_boolean())
      fail("{}: 'linear_bias' must be true or false", source);
    cfg.linear_bias = j["linear_bias"].get<bool>();
  }
  if (!j.contains("tokenizer") || !j["tokenizer"].is_string())
    fail("{}: 'tokenizer' is missing", source);
  cfg.tokenizer = tokenizer_named(j["tokenizer"].get<std::string>());
  cfg.vocab_size = get_int("vocab_size");
  cfg.padded_vocab = get_int("padded_vocab_size");
  cfg.n_layer = get_int("n_layer");
  cfg.n_head = get_int("n_head");
  cfg.n_kv_head = j.contains("n_kv_head") ? get_int("n_kv_head") : 0;  // older checkpoints: none
  if (cfg.n_kv_head == cfg.n_head) cfg.n_kv_head = 0;  // canonical: 0 = one per head
  cfg.n_embd = get_int("n_embd");
  cfg.seq_len = get_int("seq_len");
  if (!j.contains("rope_theta") || !j["rope_theta"].is_number())
    fail("{}: 'rope_theta' is missing", source);
  cfg.rope_theta = j["rope_theta"].get<double>();
  try {
    cfg.validate();
  } catch (const Error& e) {
    fail("{}: {}", source, e.what());
  }
}

// Each layer's attention: its kind, its rivals (one set, version 3; per layer, 4 on), the
// whole-model options' per-layer lists and the sinks.
void read_layer_attention(const nlohmann::json& j, int version, const std::string& source,
                          ModelConfig& cfg) {
  const auto& attn = j.contains("layer_attn") ? j["layer_attn"] : nlohmann::json();
  if (!attn.is_array() || (int)attn.size() != cfg.n_layer)
    fail("{}: 'layer_attn' must list one of \"sa\"/\"xsa\" per layer ({} layers)", source,
         cfg.n_layer);
  for (int l = 0; l < cfg.n_layer; l++) {
    const auto kind = attention_kind_named(attn[l].is_string() ? attn[l].get<std::string>() : "");
    if (!kind) fail("{}: layer_attn[{}] is not one of {}", source, l, attention_kind_names());
    cfg.attention[l].kind = *kind;
  }
  if (version == 3) {  // one set of rivals for every layer
    LayerAttention rivals;
    read_rivals(j.contains("rivals") ? j["rivals"] : nlohmann::json(), rivals, source + ": rivals");
    for (int l = 0; l < cfg.n_layer; l++)
      for (const AttentionOption& o : kAttentionOptions)
        if (o.rival) cfg.attention[l].*o.flag = rivals.*o.flag;
  } else if (version >= 4) {  // one set per layer
    const auto& layers = j.contains("layer_rivals") ? j["layer_rivals"] : nlohmann::json();
    if (!layers.is_array() || (int)layers.size() != cfg.n_layer)
      fail("{}: 'layer_rivals' must list one object per layer ({} layers)", source, cfg.n_layer);
    for (int l = 0; l < cfg.n_layer; l++)
      read_rivals(layers[l], cfg.attention[l], fmt::format("{}: layer_rivals[{}]", source, l));
  }
  // The whole-model options per layer: the one that introduced the file's version must be there;
  // those of earlier versions, where they are.
  for (const AttentionOption& o : kAttentionOptions) {
    const std::string key = std::string("layer_") + (o.key ? o.key : "");
    if (!o.whole_model || version < o.config_version) continue;
    if (!j.contains(key) && version > o.config_version) continue;
    const auto& on = j.contains(key) ? j[key] : nlohmann::json();
    if (!on.is_array() || (int)on.size() != cfg.n_layer)
      fail("{}: '{}' must list true/false per layer ({} layers)", source, key, cfg.n_layer);
    for (int l = 0; l < cfg.n_layer; l++) {
      if (!on[l].is_boolean()) fail("{}: {}[{}] is not true or false", source, key, l);
      cfg.attention[l].*o.flag = on[l].get<bool>();
    }
  }
  if (j.contains("layer_sink")) {  // optional: checkpoints without it have no sinks
    const auto& sink = j["layer_sink"];
    if (!sink.is_array() || (int)sink.size() != cfg.n_layer)
      fail("{}: 'layer_sink' must list true/false per layer ({} layers)", source, cfg.n_layer);
    for (int l = 0; l < cfg.n_layer; l++) {
      if (!sink[l].is_boolean()) fail("{}: layer_sink[{}] is not true or false", source, l);
      cfg.attention[l].sink = sink[l].get<bool>();
    }
  }
}

// The recipe's MLP and head (docs/SPEC.md §11), from the version that introduced them.
void read_recipe(const nlohmann::json& j, int version, const std::string& source,
                 ModelConfig& cfg) {
  if (version >= kRecipeConfigVersion) {  // the recipe's MLP and head
    if (!j.contains("mlp_activation") || !j["mlp_activation"].is_string())
      fail("{}: 'mlp_activation' must be \"gelu\" or \"relu2\"", source);
    try {
      set_mlp_activation(cfg, j["mlp_activation"].get<std::string>());
    } catch (const Error& e) {
      fail("{}: {}", source, e.what());
    }
    if (!j.contains("logit_softcap") || !j["logit_softcap"].is_number() ||
        !(j["logit_softcap"].get<double>() >= 0))
      fail("{}: 'logit_softcap' must be 0 (off) or a positive number", source);
    cfg.logit_softcap = j["logit_softcap"].get<double>();
  }
}

}  // namespace

ModelConfig model_config_from_json(const nlohmann::json& j, const std::string& source) {
  ModelConfig cfg;
  const int version = config_version(j, source);
  read_model_shape(j, version, source, cfg);
  read_layer_attention(j, version, source, cfg);
  read_recipe(j, version, source, cfg);
  return cfg;
}

}  // namespace xsa
