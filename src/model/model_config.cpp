#include "xsa/model/model_config.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

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
  // Far past any model this engine trains, and small enough that no size computed from them
  // (4·C² per layer, V_pad·C, T·C) overflows; a config.json cannot ask for an absurd allocation.
  constexpr int kMostWidth = 1 << 16, kMostRows = 1 << 24;
  if (n_embd > kMostWidth) fail("--embd {} is more than {}", n_embd, kMostWidth);
  if (padded_vocab > kMostRows) fail("vocabulary {} is more than {}", padded_vocab, kMostRows);
  if (seq_len > kMostRows) fail("--seq-len {} is more than {}", seq_len, kMostRows);
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

const char* to_string(AttnKind kind) {
  switch (kind) {
    case AttnKind::sa:
      return "sa";
    case AttnKind::xsa:
      return "xsa";
    case AttnKind::xsa_gated:
      return "xsa-gated";
    case AttnKind::xsa_gated_one:
      return "xsa-gated-one";
  }
  return "?";
}
namespace {
AttnKind parse_attn(const std::string& word) {
  if (word == "sa") return AttnKind::sa;
  if (word == "xsa") return AttnKind::xsa;
  if (word == "xsa-gated") return AttnKind::xsa_gated;
  if (word == "xsa-gated-one") return AttnKind::xsa_gated_one;
  fail(
      "--attn '{}' is not known (expected sa, xsa, xsa-gated, each optionally +sink, or a comma "
      "list, one per layer; then optionally +gated-attn, +value-residual, +no-self)",
      word);
}
}  // namespace

std::string rivals_string(const AttentionRivals& rivals) {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += '+';
    s += name;
  };
  add(rivals.gated_attn, "gated-attn");
  add(rivals.value_residual, "value-residual");
  add(rivals.no_self, "no-self");
  return s;
}

static bool take_rival_suffix(std::string& spec, AttentionRivals& rivals) {
  const std::pair<const char*, bool AttentionRivals::*> suffixes[] = {
      {"+gated-attn", &AttentionRivals::gated_attn},
      {"+value-residual", &AttentionRivals::value_residual},
      {"+no-self", &AttentionRivals::no_self}};
  for (const auto& [suffix, flag] : suffixes) {
    const size_t n = std::char_traits<char>::length(suffix);
    if (spec.size() > n && spec.compare(spec.size() - n, n, suffix) == 0) {
      spec.resize(spec.size() - n);
      rivals.*flag = true;
      return true;
    }
  }
  return false;
}

void set_layer_attn(ModelConfig& cfg, std::string spec) {
  cfg.rivals = {};
  while (take_rival_suffix(spec, cfg.rivals)) {
  }
  // "xsa+sink": the kind, with a learned attention sink.
  auto apply = [&](int l, std::string word) {
    const bool sink = word.size() > 5 && word.compare(word.size() - 5, 5, "+sink") == 0;
    if (sink) word.resize(word.size() - 5);
    cfg.layer_attn[l] = parse_attn(word);
    cfg.layer_sink[l] = sink;
  };
  if (spec.find(',') == std::string::npos) {
    for (int l = 0; l < kMaxLayers; l++) apply(l, spec);
    return;
  }
  std::stringstream ss(spec);
  std::string word;
  int n = 0;
  while (std::getline(ss, word, ',')) {
    if (n >= kMaxLayers) fail("--attn lists more than {} layers", kMaxLayers);
    apply(n++, word);
  }
  if (n != cfg.n_layer)
    fail("--attn lists {} layers but the model has {} (--layers)", n, cfg.n_layer);
}

namespace {
std::string layer_kinds_string(const ModelConfig& cfg) {
  bool any_sink = false;
  for (int l = 0; l < cfg.n_layer; l++) any_sink |= cfg.layer_sink[l];
  if (any_sink) {
    std::string s;
    for (int l = 0; l < cfg.n_layer; l++) {
      if (l) s += ',';
      s += to_string(cfg.layer_attn[l]);
      if (cfg.layer_sink[l]) s += "+sink";
    }
    return s;
  }
  bool uniform = true;
  for (int l = 1; l < cfg.n_layer; l++) uniform &= cfg.layer_attn[l] == cfg.layer_attn[0];
  if (uniform) return to_string(cfg.layer_attn[0]);
  std::string s;
  for (int l = 0; l < cfg.n_layer; l++) {
    if (l) s += ',';
    s += to_string(cfg.layer_attn[l]);
  }
  return s;
}
}  // namespace

std::string layer_attn_string(const ModelConfig& cfg) {
  const std::string rivals = rivals_string(cfg.rivals);
  return layer_kinds_string(cfg) + (rivals.empty() ? "" : "+" + rivals);
}

int64_t parameter_count(const ModelConfig& cfg) {
  int64_t n = 0;
  for (const auto& t : param_layout(cfg)) n += t.numel;
  return n;
}

void to_json(nlohmann::json& j, const ModelConfig& cfg) {
  std::vector<std::string> attn;
  std::vector<bool> sink;
  for (int l = 0; l < cfg.n_layer; l++)
    attn.push_back(to_string(cfg.layer_attn[l])), sink.push_back(cfg.layer_sink[l]);
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
  // Rivals: version 3, which readers that do not know them refuse rather than misread.
  if (cfg.rivals.any()) {
    j["version"] = 3;
    j["positions"] = cfg.positions == Positions::rope ? "rope" : "learned";
    j["linear_bias"] = cfg.linear_bias;
    j["rivals"] = {{"gated_attn", cfg.rivals.gated_attn},
                   {"value_residual", cfg.rivals.value_residual},
                   {"no_self", cfg.rivals.no_self}};
  }
}

ModelConfig model_config_from_json(const nlohmann::json& j, const std::string& source) {
  ModelConfig cfg;
  auto get_int = [&](const char* key) -> int {
    // An integer past int's range would be cut to a wrong size by get<int>().
    if (!j.contains(key) || !j[key].is_number_integer() || j[key] < INT32_MIN || j[key] > INT32_MAX)
      fail("{}: '{}' is missing or not an integer", source, key);
    return j[key].get<int>();
  };
  if (!j.is_object()) fail("{}: not a JSON object", source);
  // Types checked before value(): its type_error would name no file.
  if (!j.contains("format") || j["format"] != "xsa-gpt")
    fail("{}: 'format' is not \"xsa-gpt\"", source);
  const int version =
      j.contains("version") && j["version"].is_number_integer() ? j["version"].get<int>() : 0;
  if (version < 1 || version > 3) fail("{}: unsupported version {}", source, version);
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
  if (version == 3) {
    const auto& rivals = j.contains("rivals") ? j["rivals"] : nlohmann::json();
    if (!rivals.is_object()) fail("{}: 'rivals' must be an object (version 3)", source);
    for (const auto& [key, flag] : {std::pair{"gated_attn", &AttentionRivals::gated_attn},
                                    std::pair{"value_residual", &AttentionRivals::value_residual},
                                    std::pair{"no_self", &AttentionRivals::no_self}}) {
      if (!rivals.contains(key) || !rivals[key].is_boolean())
        fail("{}: rivals.{} must be true or false", source, key);
      cfg.rivals.*flag = rivals[key].get<bool>();
    }
    for (const auto& item : rivals.items())
      if (item.key() != "gated_attn" && item.key() != "value_residual" && item.key() != "no_self")
        fail("{}: rivals.{} is not known (gated_attn, value_residual, no_self)", source,
             item.key());
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
  const auto& attn = j.contains("layer_attn") ? j["layer_attn"] : nlohmann::json();
  if (!attn.is_array() || (int)attn.size() != cfg.n_layer)
    fail("{}: 'layer_attn' must list one of \"sa\"/\"xsa\" per layer ({} layers)", source,
         cfg.n_layer);
  for (int l = 0; l < cfg.n_layer; l++) {
    std::string a = attn[l].is_string() ? attn[l].get<std::string>() : "";
    const char* kinds[] = {"sa", "xsa", "xsa-gated", "xsa-gated-one"};
    auto known = std::find(std::begin(kinds), std::end(kinds), a);
    if (known == std::end(kinds))
      fail("{}: layer_attn[{}] is not one of sa, xsa, xsa-gated, xsa-gated-one", source, l);
    cfg.layer_attn[l] = (AttnKind)(known - std::begin(kinds));
  }
  if (j.contains("layer_sink")) {  // optional: checkpoints without it have no sinks
    const auto& sink = j["layer_sink"];
    if (!sink.is_array() || (int)sink.size() != cfg.n_layer)
      fail("{}: 'layer_sink' must list true/false per layer ({} layers)", source, cfg.n_layer);
    for (int l = 0; l < cfg.n_layer; l++) {
      if (!sink[l].is_boolean()) fail("{}: layer_sink[{}] is not true or false", source, l);
      cfg.layer_sink[l] = sink[l].get<bool>();
    }
  }
  return cfg;
}

}  // namespace xsa
