#include "xsa/io/interop.h"

#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "xsa/io/safetensors.h"
#include "xsa/ops/matmul_bf16.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/fmt.h"

namespace xsa {
namespace {

using nlohmann::json;

constexpr int kLlmcMagic = 20240326;
constexpr int kGpt2Vocab = 50257;

// The tokenizer a foreign vocabulary size stands for.
TokenizerKind tokenizer_for_vocab(int vocab, const std::string& source) {
  if (vocab == kGpt2Vocab) return TokenizerKind::gpt2;
  if (vocab == 256) return TokenizerKind::byte;
  fail("{}: vocab_size {} is neither GPT-2's ({}) nor bytes (256), the tokenizers xsa has", source,
       vocab, kGpt2Vocab);
}

// A GPT-2 architecture config from the sizes another program gives.
ModelConfig gpt2_config(int vocab, int n_layer, int n_head, int n_embd, int n_positions,
                        const std::string& source) {
  ModelConfig cfg;
  set_architecture(cfg, "gpt2");
  cfg.tokenizer = tokenizer_for_vocab(vocab, source);
  cfg.vocab_size = vocab, cfg.padded_vocab = pad_vocab(vocab);
  cfg.n_layer = n_layer, cfg.n_head = n_head, cfg.n_embd = n_embd, cfg.seq_len = n_positions;
  if (n_layer > kMaxLayers) fail("{}: {} layers, more than xsa's {}", source, n_layer, kMaxLayers);
  // Bounded so that the parameter arithmetic cannot overflow and a few bytes of config cannot ask
  // for terabytes (a 65536-wide model is far past any GPT-2).
  constexpr int kMost = 1 << 16, kMostRows = 1 << 24;
  if (n_embd > kMost || n_positions > kMostRows)
    fail("{}: n_embd {} or n_positions {} is impossible (at most {} and {})", source, n_embd,
         n_positions, kMost, kMostRows);
  try {
    cfg.validate();
  } catch (const Error& e) {
    fail("{}: {}", source, e.what());
  }
  return cfg;
}

// The Hugging Face name of an xsa tensor, and whether HF stores it transposed (Conv1D, [in, out]).
std::string hf_name(const std::string& name) {
  const std::string prefix = "transformer.";
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}
bool hf_transposed(const TensorInfo& t) {
  return t.shape.size() == 2 && t.name.find(".h.") != std::string::npos;  // the blocks' matrices
}

// Hugging Face's shape of an xsa tensor: the real vocabulary rows of wte, Conv1D transposed.
std::vector<int64_t> hf_shape(const ModelConfig& cfg, const TensorInfo& t) {
  if (t.name == "transformer.wte.weight") return {cfg.vocab_size, cfg.n_embd};
  if (hf_transposed(t)) return {t.shape[1], t.shape[0]};
  return t.shape;
}

void transpose(const float* in, int64_t rows, int64_t cols, float* out) {  // out [cols, rows]
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) out[c * rows + r] = in[r * cols + c];
}

int json_int(const json& j, const char* key, const std::string& path) {
  // An integer past int's range would be cut to a wrong size by get<int>().
  if (!j.contains(key) || !j[key].is_number_integer() || j[key] < INT32_MIN || j[key] > INT32_MAX)
    fail("{}: '{}' is missing or not an integer", path, key);
  return j[key].get<int>();
}

// json::value() throws its own type_error (naming no file) for a value of another type.
bool json_bool(const json& j, const char* key, bool otherwise, const std::string& path) {
  if (!j.contains(key)) return otherwise;
  if (!j[key].is_boolean()) fail("{}: '{}' is not true or false", path, key);
  return j[key].get<bool>();
}

// GPT-2's sizes from Hugging Face's config.json; the options that would change the computation
// away from GPT-2's are refused.
ModelConfig hf_config(const std::string& text, const std::string& path) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) fail("{}: not a JSON object", path);
  if (j.contains("model_type") && j["model_type"] != "gpt2")
    fail("{}: model_type {} is not gpt2", path, j["model_type"].dump());
  if (j.contains("activation_function") && !j["activation_function"].is_string())
    fail("{}: activation_function is not a string", path);
  const std::string act = j.value("activation_function", std::string("gelu_new"));
  if (act != "gelu_new" && act != "gelu_pytorch_tanh" && act != "gelu_fast")
    fail("{}: activation_function \"{}\" is not GPT-2's tanh GELU (gelu_new)", path, act);
  if (j.contains("layer_norm_epsilon") && j["layer_norm_epsilon"].is_number() &&
      std::fabs(j["layer_norm_epsilon"].get<double>() - 1e-5) > 1e-12)
    fail("{}: layer_norm_epsilon {} is not GPT-2's 1e-5", path, j["layer_norm_epsilon"].dump());
  if (json_bool(j, "scale_attn_by_inverse_layer_idx", false, path) ||
      !json_bool(j, "scale_attn_weights", true, path))
    fail("{}: scale_attn_weights / scale_attn_by_inverse_layer_idx: not GPT-2's 1/√d attention",
         path);
  const int n_embd = json_int(j, "n_embd", path);
  if (j.contains("n_inner") && !j["n_inner"].is_null() && j["n_inner"] != 4 * (int64_t)n_embd)
    fail("{}: n_inner {} is not 4 × n_embd", path, j["n_inner"].dump());
  const int n_positions =
      j.contains("n_positions") ? json_int(j, "n_positions", path) : json_int(j, "n_ctx", path);
  ModelConfig cfg = gpt2_config(json_int(j, "vocab_size", path), json_int(j, "n_layer", path),
                                json_int(j, "n_head", path), n_embd, n_positions, path);
  if (j.contains("xsa_layer_attn")) {  // written by export_hf for XSA models
    if (!j["xsa_layer_attn"].is_string()) fail("{}: xsa_layer_attn is not a string", path);
    try {
      set_attention(cfg, j["xsa_layer_attn"].get<std::string>());
    } catch (const Error& e) {
      fail("{}: xsa_layer_attn: {}", path, e.what());
    }
  }
  return cfg;
}

// The llm.c file's tensors in order: name, elements per layer (0: not per layer) or in all.
struct LlmcTensor {
  const char* name;  // the xsa tensor, "h.{}" per layer
  int64_t numel;     // per layer, or whole
  bool per_layer;
};

std::vector<LlmcTensor> llmc_tensors(int64_t Vp, int64_t maxT, int64_t C) {
  return {{"transformer.wte.weight", Vp * C, false},
          {"transformer.wpe.weight", maxT * C, false},
          {"ln_1.weight", C, true},
          {"ln_1.bias", C, true},
          {"attn.c_attn.weight", 3 * C * C, true},
          {"attn.c_attn.bias", 3 * C, true},
          {"attn.c_proj.weight", C * C, true},
          {"attn.c_proj.bias", C, true},
          {"ln_2.weight", C, true},
          {"ln_2.bias", C, true},
          {"mlp.c_fc.weight", 4 * C * C, true},
          {"mlp.c_fc.bias", 4 * C, true},
          {"mlp.c_proj.weight", 4 * C * C, true},
          {"mlp.c_proj.bias", C, true},
          {"transformer.ln_f.weight", C, false},
          {"transformer.ln_f.bias", C, false}};
}

std::map<std::string, const TensorInfo*> by_name(const std::vector<TensorInfo>& layout) {
  std::map<std::string, const TensorInfo*> out;
  for (const TensorInfo& t : layout) out[t.name] = &t;
  return out;
}

std::string layer_name(int l, const char* name) {
  return fmt::format("transformer.h.{}.{}", l, name);
}

// What of the modern recipe's MLP and head (docs/SPEC.md §11) GPT-2's code lacks, or empty:
// "GELU only, and this model's MLP is relu2".
std::string recipe_refusal(const ModelConfig& cfg) {
  if (cfg.mlp != MlpActivation::gelu)
    return fmt::format("GELU only, and this model's MLP is {} (--mlp)", to_string(cfg.mlp));
  if (cfg.logit_softcap != 0)
    return fmt::format("no logit soft-cap, and this model caps at {} (--logit-softcap)",
                       cfg.logit_softcap);
  return "";
}

// Why llm.c cannot compute this model, or empty.
std::string llmc_refusal(const ModelConfig& cfg) {
  if (!cfg.gpt2_architecture())
    return "llm.c's GPT-2 has learned positions and linear biases; this model has the xsa "
           "architecture (RoPE, no biases): train it with --arch gpt2";
  if (cfg.n_kv_head != 0 && cfg.n_kv_head != cfg.n_head)
    return "llm.c has no grouped-query attention (--kv-heads)";
  if (has_rivals(cfg))
    return fmt::format("llm.c has no {} (XSA's rivals, docs/SPEC.md §8)",
                       rivals_string(options_on_any_layer(cfg.attention, cfg.n_layer)));
  if (const std::string options =
          whole_model_options_string(options_on_any_layer(cfg.attention, cfg.n_layer));
      !options.empty())
    return "llm.c has no " + options;
  if (const std::string recipe = recipe_refusal(cfg); !recipe.empty()) return "llm.c has " + recipe;
  for (int l = 0; l < cfg.n_layer; l++) {
    if (is_exclusive(cfg.attention[l].kind))
      return fmt::format(
          "llm.c computes standard attention, and layer {} is {}: an XSA model would be computed "
          "as a different one",
          l, to_string(cfg.attention[l].kind));
    if (cfg.attention[l].sink) return fmt::format("llm.c has no attention sinks (layer {})", l);
  }
  return "";
}

}  // namespace

ForeignModel import_hf(const fs::path& file_or_folder) {
  std::error_code ec;
  if (!fs::exists(file_or_folder, ec)) fail("{}: no such file or folder", file_or_folder.string());
  const bool folder = fs::is_directory(file_or_folder, ec);
  const fs::path file = folder ? file_or_folder / "model.safetensors" : file_or_folder;
  const fs::path config = file.parent_path() / "config.json";
  if (!fs::exists(file, ec))
    fail("{}: no model.safetensors in this folder", file_or_folder.string());
  if (!fs::exists(config, ec))
    fail("{}: no config.json beside it (Hugging Face's, giving n_layer, n_head, n_embd, ...)",
         file.string());
  const std::string config_text = read_file(config);
  return import_hf_bytes(config_text, config.string(), read_file(file), file.string());
}

ForeignModel import_hf_bytes(const std::string& config_json, const std::string& config_name,
                             std::string safetensors, const std::string& file) {
  ForeignModel m;
  m.cfg = hf_config(config_json, config_name);
  const ModelConfig& cfg = m.cfg;
  const SafetensorsFile st(file, std::move(safetensors));

  // Every tensor of the file is one the model expects, a buffer GPT-2 files carry, or a tied head.
  const std::string prefix = st.contains("transformer.wte.weight") ? "transformer." : "";
  const std::vector<TensorInfo> layout = param_layout(cfg);
  std::set<std::string> expected;
  for (const TensorInfo& t : layout) expected.insert(prefix + hf_name(t.name));
  for (const std::string& name : st.names()) {
    const std::string bare = name.substr(name.rfind(prefix, 0) == 0 ? prefix.size() : 0);
    const bool buffer =
        bare.size() > 10 && (bare.compare(bare.size() - 10, 10, ".attn.bias") == 0 ||
                             bare.find(".attn.masked_bias") != std::string::npos);
    if (expected.count(name) || buffer || name == "lm_head.weight") continue;
    fail("{}: tensor '{}' is not part of a GPT-2 model with {} layers{}", file, name, cfg.n_layer,
         name.find("xsa_gate") != std::string::npos || name.find(".sink") != std::string::npos
             ? " and this config's attention"
             : "");
  }
  // Every tensor the model needs is there with its shape before the model's memory is taken: a
  // config.json of a few bytes must not allocate the model it claims for a file that lacks it.
  for (const TensorInfo& t : layout) {
    const std::string name = prefix + hf_name(t.name);
    const std::vector<int64_t> shape = hf_shape(cfg, t);
    if (!st.contains(name)) fail("{}: tensor '{}' is missing", file, name);
    if (st.shape(name) != shape)
      fail("{}: tensor '{}' has shape {}, the model needs {}", file, name,
           shape_string(st.shape(name)), shape_string(shape));
  }
  m.params.assign(param_arena_size(layout), 0.0f);
  std::vector<float> scratch;
  for (const TensorInfo& t : layout) {
    const std::vector<int64_t> shape = hf_shape(cfg, t);
    scratch.resize((size_t)shape[0] * (shape.size() > 1 ? shape[1] : 1));
    st.read(prefix + hf_name(t.name), shape, scratch.data());
    float* dst = m.params.data() + t.offset;
    if (hf_transposed(t))
      transpose(scratch.data(), shape[0], shape[1], dst);
    else
      std::memcpy(dst, scratch.data(), scratch.size() * sizeof(float));
  }
  if (st.contains("lm_head.weight")) {  // must be the tied head, wte itself
    std::vector<float> head((size_t)cfg.vocab_size * cfg.n_embd);
    st.read("lm_head.weight", {cfg.vocab_size, cfg.n_embd}, head.data());
    if (std::memcmp(head.data(), m.params.data() + layout[0].offset, head.size() * sizeof(float)))
      fail("{}: lm_head.weight differs from wte.weight; xsa's head is tied to wte", file);
  }
  m.description = fmt::format("Hugging Face GPT-2 {} ({} layers, {} heads, width {}, {} positions)",
                              file, cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.seq_len);
  return m;
}

ForeignModel import_llmc(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail("{}: no such file", path.string());
  return import_llmc_bytes(read_file(path), path.string());
}

ForeignModel import_llmc_bytes(const std::string& bytes, const std::string& where) {
  if (bytes.size() < 256 * 4)
    fail("{}: {} bytes, too short for llm.c's 1024-byte header", where, bytes.size());
  int32_t h[256];
  std::memcpy(h, bytes.data(), sizeof(h));
  if (h[0] != kLlmcMagic)
    fail("{}: magic {} is not llm.c's model file ({}){}", where, h[0], kLlmcMagic,
         h[0] == 20240520   ? " (it is a token shard)"
         : h[0] == 20240328 ? " (it is a tokenizer)"
                            : "");
  if (h[1] != 3 && h[1] != 5)
    fail("{}: version {} is not one xsa reads (3: fp32, 5: bf16)", where, h[1]);
  const int maxT = h[2], V = h[3], L = h[4], H = h[5], C = h[6], Vp = h[7];
  // Bounded so that the sizes below cannot overflow (a 65536-wide model is far past any GPT-2).
  constexpr int kMost = 1 << 16, kMostRows = 1 << 24;
  if (maxT <= 0 || V <= 0 || L <= 0 || H <= 0 || C <= 0 || Vp < V || C > kMost || H > kMost ||
      L > kMaxLayers || maxT > kMostRows || Vp > kMostRows)
    fail("{}: header sizes maxT {}, V {}, L {}, H {}, C {}, padded V {} are impossible", where,
         maxT, V, L, H, C, Vp);
  ForeignModel m;
  m.cfg = gpt2_config(V, L, H, C, maxT, where);
  const ModelConfig& cfg = m.cfg;
  const bool bf16 = h[1] == 5;
  const size_t value_bytes = bf16 ? 2 : 4;
  size_t count = 0;
  for (const LlmcTensor& t : llmc_tensors(Vp, maxT, C)) count += t.numel * (t.per_layer ? L : 1);
  if (bytes.size() != 1024 + count * value_bytes)
    fail("{}: {} bytes, but a version {} file of these sizes has {}", where, bytes.size(), h[1],
         1024 + count * value_bytes);

  const std::vector<TensorInfo> layout = param_layout(cfg);
  const auto tensors = by_name(layout);
  m.params.assign(param_arena_size(layout), 0.0f);
  size_t at = 1024;
  auto take = [&](const std::string& name, int64_t numel) {
    const TensorInfo& t = *tensors.at(name);
    // wte: llm.c pads to its own Vp; the real rows are the first V either way.
    const int64_t keep = std::min<int64_t>(numel, (int64_t)t.numel);
    float* dst = m.params.data() + t.offset;
    if (bf16) {
      ops::from_bf16(reinterpret_cast<const ops::bf16*>(bytes.data() + at), dst, keep);
    } else {
      std::memcpy(dst, bytes.data() + at, keep * sizeof(float));
    }
    if (name == "transformer.wte.weight")  // rows past V stay zero, as xsa keeps them
      std::fill(dst + (size_t)V * C, dst + t.numel, 0.0f);
    at += numel * value_bytes;
  };
  for (const LlmcTensor& t : llmc_tensors(Vp, maxT, C)) {
    if (!t.per_layer) {
      take(t.name, t.numel);
      continue;
    }
    for (int l = 0; l < L; l++) take(layer_name(l, t.name), t.numel);
  }
  m.description = fmt::format("llm.c model file {} (version {}: {}; {} layers, {} heads, width {})",
                              where, h[1], bf16 ? "bf16" : "fp32", L, H, C);
  return m;
}

void export_llmc(const ModelConfig& cfg, const std::vector<TensorInfo>& layout, const float* params,
                 const fs::path& file, bool bf16) {
  if (const std::string why = llmc_refusal(cfg); !why.empty())
    fail("cannot export to llm.c: {}", why);
  const int64_t C = cfg.n_embd, Vp = cfg.padded_vocab, T = cfg.seq_len;
  int32_t h[256] = {};
  h[0] = kLlmcMagic, h[1] = bf16 ? 5 : 3, h[2] = (int32_t)T, h[3] = cfg.vocab_size,
  h[4] = cfg.n_layer, h[5] = cfg.n_head, h[6] = (int32_t)C, h[7] = (int32_t)Vp;
  std::string out(reinterpret_cast<const char*>(h), sizeof(h));
  const auto tensors = by_name(layout);
  std::vector<ops::bf16> rounded;
  auto put = [&](const std::string& name) {
    const TensorInfo& t = *tensors.at(name);
    const float* src = params + t.offset;
    if (!bf16) {
      out.append(reinterpret_cast<const char*>(src), t.numel * sizeof(float));
      return;
    }
    rounded.resize(t.numel);
    ops::to_bf16(src, rounded.data(), t.numel);
    out.append(reinterpret_cast<const char*>(rounded.data()), t.numel * sizeof(ops::bf16));
  };
  for (const LlmcTensor& t : llmc_tensors(Vp, T, C)) {
    if (!t.per_layer) {
      put(t.name);
      continue;
    }
    for (int l = 0; l < cfg.n_layer; l++) put(layer_name(l, t.name));
  }
  write_file_atomic(file, out);
}

void export_hf(const ModelConfig& cfg, const std::vector<TensorInfo>& layout, const float* params,
               const fs::path& folder) {
  if (!cfg.gpt2_architecture())
    fail(
        "cannot export to Hugging Face GPT-2: GPT-2 has learned positions and linear biases; this "
        "model has the xsa architecture (RoPE, no biases): train it with --arch gpt2");
  if (cfg.n_kv_head != 0 && cfg.n_kv_head != cfg.n_head)
    fail("cannot export to Hugging Face GPT-2: it has no grouped-query attention (--kv-heads)");
  if (has_rivals(cfg))
    fail("cannot export to Hugging Face GPT-2: it has no {} (XSA's rivals, docs/SPEC.md §8)",
         rivals_string(options_on_any_layer(cfg.attention, cfg.n_layer)));
  if (const std::string options =
          whole_model_options_string(options_on_any_layer(cfg.attention, cfg.n_layer));
      !options.empty())
    fail("cannot export to Hugging Face GPT-2: it has no {}", options);
  if (const std::string recipe = recipe_refusal(cfg); !recipe.empty())
    fail("cannot export to Hugging Face GPT-2: it has {}", recipe);
  std::vector<std::vector<float>> transposed;
  std::vector<TensorRef> refs;
  for (const TensorInfo& t : layout) {
    const std::vector<int64_t> shape = hf_shape(cfg, t);
    const float* data = params + t.offset;
    if (hf_transposed(t)) {
      transposed.emplace_back((size_t)t.numel);
      transpose(data, t.shape[0], t.shape[1], transposed.back().data());
      data = transposed.back().data();
    }
    refs.push_back({hf_name(t.name), shape, data});
  }
  json config = {{"model_type", "gpt2"},
                 {"architectures", {"GPT2LMHeadModel"}},
                 {"vocab_size", cfg.vocab_size},
                 {"n_positions", cfg.seq_len},
                 {"n_ctx", cfg.seq_len},
                 {"n_embd", cfg.n_embd},
                 {"n_layer", cfg.n_layer},
                 {"n_head", cfg.n_head},
                 {"activation_function", "gelu_new"},
                 {"layer_norm_epsilon", 1e-5},
                 {"tie_word_embeddings", true},
                 {"bos_token_id", 50256},
                 {"eos_token_id", 50256}};
  bool all_sa = true;
  for (int l = 0; l < cfg.n_layer; l++)
    all_sa &= !is_exclusive(cfg.attention[l].kind) && !cfg.attention[l].sink;
  if (!all_sa) config["xsa_layer_attn"] = attention_string(cfg);
  create_owned_folder(folder);
  write_file_atomic(folder / "model.safetensors", encode_safetensors(refs, {{"format", "pt"}}));
  write_file_atomic(folder / "config.json", config.dump(2) + "\n");
}

}  // namespace xsa
