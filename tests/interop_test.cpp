// GPT-2 interoperability (io/interop.h): files in Hugging Face's and llm.c's layouts, written here
// with known values, are read into xsa; the imported model's logits are held to a float64 GPT-2
// forward written below directly on the files' own tensors (Conv1D [in, out] layouts, learned
// positions, biases), and import → export → import is exact. Every malformed input is one Error
// naming what is wrong.
#include "xsa/io/interop.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bounds.h"
#include "test_util.h"
#include "xsa/io/checkpoint.h"
#include "xsa/io/safetensors.h"
#include "xsa/model/gpt.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/rng.h"

namespace xsa {
namespace {

namespace fs = std::filesystem;

constexpr int V = 256, L = 2, H = 2, C = 16, NPOS = 12;

// A GPT-2 in Hugging Face's layout: name → (shape, values).
using Tensors = std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>;

Tensors random_gpt2(uint64_t seed) {
  Rng rng(seed);
  Tensors t;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, double scale, double mean) {
    size_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(n);
    for (float& x : v) x = (float)(mean + scale * rng.normal());
    t[name] = {shape, v};
  };
  add("wte.weight", {V, C}, 0.3, 0), add("wpe.weight", {NPOS, C}, 0.3, 0);
  for (int l = 0; l < L; l++) {
    const std::string p = "h." + std::to_string(l) + ".";
    add(p + "ln_1.weight", {C}, 0.1, 1), add(p + "ln_1.bias", {C}, 0.1, 0);
    add(p + "attn.c_attn.weight", {C, 3 * C}, 0.4, 0), add(p + "attn.c_attn.bias", {3 * C}, 0.1, 0);
    add(p + "attn.c_proj.weight", {C, C}, 0.3, 0), add(p + "attn.c_proj.bias", {C}, 0.1, 0);
    add(p + "ln_2.weight", {C}, 0.1, 1), add(p + "ln_2.bias", {C}, 0.1, 0);
    add(p + "mlp.c_fc.weight", {C, 4 * C}, 0.3, 0), add(p + "mlp.c_fc.bias", {4 * C}, 0.1, 0);
    add(p + "mlp.c_proj.weight", {4 * C, C}, 0.2, 0), add(p + "mlp.c_proj.bias", {C}, 0.1, 0);
  }
  add("ln_f.weight", {C}, 0.1, 1), add("ln_f.bias", {C}, 0.1, 0);
  return t;
}

// GPT-2's forward in double on Hugging Face's tensors: logits [T, V].
std::vector<double> reference_logits(const Tensors& w, const std::vector<int32_t>& tokens) {
  const int T = (int)tokens.size(), D = C / H;
  auto W = [&](const std::string& name) { return w.at(name).second.data(); };
  auto layernorm = [&](const std::vector<double>& x, const float* g, const float* b) {
    std::vector<double> out(x.size());
    for (int t = 0; t < T; t++) {
      double mean = 0, var = 0;
      for (int c = 0; c < C; c++) mean += x[t * C + c] / C;
      for (int c = 0; c < C; c++) var += (x[t * C + c] - mean) * (x[t * C + c] - mean) / C;
      for (int c = 0; c < C; c++)
        out[t * C + c] = (x[t * C + c] - mean) / std::sqrt(var + 1e-5) * g[c] + b[c];
    }
    return out;
  };
  auto conv1d = [&](const std::vector<double>& x, int in, int out, const float* wt,
                    const float* b) {  // x [T, in] · w [in, out] + b
    std::vector<double> y((size_t)T * out);
    for (int t = 0; t < T; t++)
      for (int o = 0; o < out; o++) {
        double s = b[o];
        for (int i = 0; i < in; i++) s += x[t * in + i] * wt[(size_t)i * out + o];
        y[(size_t)t * out + o] = s;
      }
    return y;
  };
  std::vector<double> x((size_t)T * C);
  for (int t = 0; t < T; t++)
    for (int c = 0; c < C; c++)
      x[t * C + c] = (double)W("wte.weight")[tokens[t] * C + c] + W("wpe.weight")[t * C + c];
  for (int l = 0; l < L; l++) {
    const std::string p = "h." + std::to_string(l) + ".";
    const auto h = layernorm(x, W(p + "ln_1.weight"), W(p + "ln_1.bias"));
    const auto qkv = conv1d(h, C, 3 * C, W(p + "attn.c_attn.weight"), W(p + "attn.c_attn.bias"));
    std::vector<double> y((size_t)T * C, 0.0);
    for (int head = 0; head < H; head++)
      for (int t = 0; t < T; t++) {
        std::vector<double> score(t + 1);
        double mx = -1e300, sum = 0;
        for (int s = 0; s <= t; s++) {
          double dot = 0;
          for (int d = 0; d < D; d++)
            dot += qkv[t * 3 * C + head * D + d] * qkv[s * 3 * C + C + head * D + d];
          score[s] = dot / std::sqrt((double)D), mx = std::max(mx, score[s]);
        }
        for (int s = 0; s <= t; s++) sum += (score[s] = std::exp(score[s] - mx));
        for (int s = 0; s <= t; s++)
          for (int d = 0; d < D; d++)
            y[t * C + head * D + d] += score[s] / sum * qkv[s * 3 * C + 2 * C + head * D + d];
      }
    const auto proj = conv1d(y, C, C, W(p + "attn.c_proj.weight"), W(p + "attn.c_proj.bias"));
    for (size_t i = 0; i < x.size(); i++) x[i] += proj[i];
    const auto h2 = layernorm(x, W(p + "ln_2.weight"), W(p + "ln_2.bias"));
    auto f = conv1d(h2, C, 4 * C, W(p + "mlp.c_fc.weight"), W(p + "mlp.c_fc.bias"));
    for (double& v : f)
      v = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    const auto down = conv1d(f, 4 * C, C, W(p + "mlp.c_proj.weight"), W(p + "mlp.c_proj.bias"));
    for (size_t i = 0; i < x.size(); i++) x[i] += down[i];
  }
  const auto xf = layernorm(x, W("ln_f.weight"), W("ln_f.bias"));
  std::vector<double> logits((size_t)T * V);
  for (int t = 0; t < T; t++)
    for (int v = 0; v < V; v++) {
      double s = 0;
      for (int c = 0; c < C; c++) s += xf[t * C + c] * W("wte.weight")[v * C + c];
      logits[(size_t)t * V + v] = s;
    }
  return logits;
}

void write_hf(const fs::path& dir, const Tensors& t, bool with_buffers_and_head) {
  fs::create_directories(dir);
  std::vector<TensorRef> refs;
  std::vector<float> buffer(NPOS * NPOS, 1.0f);
  for (const auto& [name, v] : t) refs.push_back({name, v.first, v.second.data()});
  if (with_buffers_and_head) {
    for (int l = 0; l < L; l++)
      refs.push_back({"h." + std::to_string(l) + ".attn.bias", {1, 1, NPOS, NPOS}, buffer.data()});
    refs.push_back({"lm_head.weight", {V, C}, t.at("wte.weight").second.data()});
  }
  write_file_atomic(dir / "model.safetensors", encode_safetensors(refs));
  nlohmann::json config = {{"model_type", "gpt2"},
                           {"vocab_size", V},
                           {"n_positions", NPOS},
                           {"n_embd", C},
                           {"n_layer", L},
                           {"n_head", H},
                           {"activation_function", "gelu_new"}};
  write_file_atomic(dir / "config.json", config.dump());
}

// llm.c's file of the same model: [out, in] weights, layers stacked, wte padded to Vp rows.
std::string llmc_bytes(const Tensors& t, int version) {
  const int Vp = 256;
  int32_t h[256] = {};
  h[0] = 20240326, h[1] = version, h[2] = NPOS, h[3] = V, h[4] = L, h[5] = H, h[6] = C, h[7] = Vp;
  std::vector<float> all;
  auto put = [&](const std::vector<float>& v) { all.insert(all.end(), v.begin(), v.end()); };
  auto transposed = [&](const std::string& name) {
    const auto& [shape, v] = t.at(name);
    std::vector<float> out(v.size());
    for (int64_t i = 0; i < shape[0]; i++)
      for (int64_t o = 0; o < shape[1]; o++) out[o * shape[0] + i] = v[i * shape[1] + o];
    return out;
  };
  put(t.at("wte.weight").second), put(t.at("wpe.weight").second);
  auto per_layer = [&](const std::string& suffix, bool transpose) {
    for (int l = 0; l < L; l++) {
      const std::string name = "h." + std::to_string(l) + "." + suffix;
      put(transpose ? transposed(name) : t.at(name).second);
    }
  };
  per_layer("ln_1.weight", false), per_layer("ln_1.bias", false);
  per_layer("attn.c_attn.weight", true), per_layer("attn.c_attn.bias", false);
  per_layer("attn.c_proj.weight", true), per_layer("attn.c_proj.bias", false);
  per_layer("ln_2.weight", false), per_layer("ln_2.bias", false);
  per_layer("mlp.c_fc.weight", true), per_layer("mlp.c_fc.bias", false);
  per_layer("mlp.c_proj.weight", true), per_layer("mlp.c_proj.bias", false);
  put(t.at("ln_f.weight").second), put(t.at("ln_f.bias").second);
  std::string out(reinterpret_cast<const char*>(h), sizeof(h));
  if (version == 3)
    return out + std::string(reinterpret_cast<const char*>(all.data()), all.size() * 4);
  for (float f : all) {  // bf16 by truncation: the test's values need only be some bf16 values
    uint32_t u;
    std::memcpy(&u, &f, 4);
    const uint16_t b = (uint16_t)(u >> 16);
    out.append(reinterpret_cast<const char*>(&b), 2);
  }
  return out;
}

// xsa's logits for the imported model (float), against the reference in double.
void expect_logits_match(const ForeignModel& m, const Tensors& t) {
  ASSERT_TRUE(m.cfg.gpt2_architecture());
  const std::vector<int32_t> tokens = {5, 200, 17, 17, 99, 0, 255, 42, 7, 130};
  const int T = (int)tokens.size();
  Gpt<float> model(m.cfg, 1, T, GptMode::inference);
  std::copy(m.params.begin(), m.params.end(), model.params().params.data());
  std::vector<int32_t> targets(T, 1);
  model.forward(tokens.data(), targets.data());
  const std::vector<double> want = reference_logits(t, tokens);
  // Float against double: each position's logits within the forward chain's bound of their
  // largest (tests/bounds.h).
  const double chain =
      test::chain_error(test::model_chain(m.cfg, 1, T).forward, test::kFloatRoundoff);
  std::vector<float> row(m.cfg.padded_vocab);
  for (int n = 0; n < T; n++) {
    model.logits_row(n, row.data());
    double top = 0;
    for (int v = 0; v < V; v++) top = std::max(top, std::fabs(want[(size_t)n * V + v]));
    for (int v = 0; v < V; v++)
      ASSERT_NEAR(row[v], want[(size_t)n * V + v], chain * top)
          << "position " << n << ", token " << v;
  }
}

class Interop : public ::testing::Test {
 protected:
  fs::path dir = test::temp_dir("interop");
  void TearDown() override { fs::remove_all(dir); }
};

TEST_F(Interop, HuggingFaceFileComputesGpt2) {
  const Tensors t = random_gpt2(1);
  write_hf(dir / "hf", t, /*with_buffers_and_head=*/true);
  const ForeignModel m = import_hf(dir / "hf");
  EXPECT_EQ(m.cfg.n_layer, L);
  EXPECT_EQ(m.cfg.seq_len, NPOS);
  EXPECT_EQ(m.cfg.tokenizer, TokenizerKind::byte);
  expect_logits_match(m, t);
  // The file itself (not its folder), and names with the transformer. prefix, read the same.
  EXPECT_EQ(import_hf(dir / "hf" / "model.safetensors").params, m.params);
  Tensors prefixed;
  for (const auto& [name, v] : t) prefixed["transformer." + name] = v;
  write_hf(dir / "hf2", prefixed, false);
  EXPECT_EQ(import_hf(dir / "hf2").params, m.params);
}

TEST_F(Interop, LlmcFileComputesGpt2InBothVersions) {
  const Tensors t = random_gpt2(2);
  write_file_atomic(dir / "model.bin", llmc_bytes(t, 3));
  const ForeignModel m = import_llmc(dir / "model.bin");
  expect_logits_match(m, t);
  write_hf(dir / "hf", t, false);
  EXPECT_EQ(m.params, import_hf(dir / "hf").params) << "both formats, one model";
  // Version 5 holds bf16: read exactly (bf16 widens to float without rounding).
  write_file_atomic(dir / "model5.bin", llmc_bytes(t, 5));
  const ForeignModel m5 = import_llmc(dir / "model5.bin");
  for (size_t i = 0; i < m5.params.size(); i++) {
    uint32_t a, b;
    std::memcpy(&a, &m5.params[i], 4), std::memcpy(&b, &m.params[i], 4);
    ASSERT_EQ(a, b & 0xffff0000u) << i;
  }
}

TEST_F(Interop, ImportExportImportIsExact) {
  const Tensors t = random_gpt2(3);
  const std::string v3 = llmc_bytes(t, 3), v5 = llmc_bytes(t, 5);
  write_file_atomic(dir / "model.bin", v3);
  write_file_atomic(dir / "model5.bin", v5);
  const ForeignModel m = import_llmc(dir / "model.bin");
  const std::vector<TensorInfo> layout = param_layout(m.cfg);
  // llm.c → xsa → llm.c: the same bytes, both versions.
  export_llmc(m.cfg, layout, m.params.data(), dir / "again.bin", false);
  EXPECT_EQ(read_file(dir / "again.bin"), v3);
  const ForeignModel m5 = import_llmc(dir / "model5.bin");
  export_llmc(m5.cfg, layout, m5.params.data(), dir / "again5.bin", true);
  EXPECT_EQ(read_file(dir / "again5.bin"), v5);
  // Hugging Face → xsa → Hugging Face → xsa: the same parameters; through an xsa checkpoint too.
  export_hf(m.cfg, layout, m.params.data(), dir / "hf");
  const ForeignModel back = import_hf(dir / "hf");
  EXPECT_EQ(back.params, m.params);
  save_checkpoint(dir / "run", 0, back.cfg, {layout, back.params.data()}, nlohmann::json(), false);
  std::vector<float> loaded(m.params.size());
  load_checkpoint_tensors(resolve_checkpoint(dir / "run"), {layout, loaded.data()});
  EXPECT_EQ(loaded, m.params);
  EXPECT_FALSE(fs::exists(resolve_checkpoint(dir / "run") / "trainer.json")) << "weights only";
  // An XSA model travels to Hugging Face's layout and back with its attention; llm.c refuses it.
  ModelConfig xsa_cfg = m.cfg;
  set_attention(xsa_cfg, "sa,xsa+sink");
  const std::vector<TensorInfo> xsa_layout = param_layout(xsa_cfg);
  std::vector<float> xsa_params(param_arena_size(xsa_layout));
  for (const TensorInfo& ti : xsa_layout)  // every element of every tensor (not the gaps)
    for (size_t i = 0; i < ti.numel; i++)
      xsa_params[ti.offset + i] = 0.001f * (float)((ti.offset + i) % 997);
  export_hf(xsa_cfg, xsa_layout, xsa_params.data(), dir / "hf_xsa");
  const ForeignModel xsa_back = import_hf(dir / "hf_xsa");
  EXPECT_EQ(attention_string(xsa_back.cfg), "sa,xsa+sink");
  EXPECT_EQ(xsa_back.params, xsa_params);
  try {
    export_llmc(xsa_cfg, xsa_layout, xsa_params.data(), dir / "x.bin", false);
    FAIL() << "llm.c computes SA";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("llm.c computes standard attention"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "x.bin"));
}

// Each malformed input: an Error whose message holds the expected piece.
void expect_error(const std::function<void()>& f, const std::string& piece) {
  try {
    f();
    FAIL() << "no error; expected one with: " << piece;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(piece), std::string::npos) << e.what();
  }
}

TEST_F(Interop, MalformedFilesAreNamed) {
  const Tensors t = random_gpt2(4);
  const std::string good = llmc_bytes(t, 3);
  auto llmc_with = [&](int index, int32_t value) {
    std::string b = good;
    std::memcpy(&b[index * 4], &value, 4);
    write_file_atomic(dir / "bad.bin", b);
    return [&] { import_llmc(dir / "bad.bin"); };
  };
  expect_error(llmc_with(0, 20240520), "magic 20240520 is not llm.c's model file");
  expect_error(llmc_with(1, 4), "version 4 is not one xsa reads");
  expect_error(llmc_with(6, 17), "is not divisible by");  // C = 17 over 2 heads
  expect_error(llmc_with(6, 1 << 30), "are impossible");  // sizes that would overflow
  write_file_atomic(dir / "bad.bin", good.substr(0, good.size() - 4));
  expect_error([&] { import_llmc(dir / "bad.bin"); }, "bytes, but a version 3 file");
  write_file_atomic(dir / "bad.bin", "short");
  expect_error([&] { import_llmc(dir / "bad.bin"); }, "too short");

  auto hf_with = [&](Tensors changed, const std::string& case_name) {
    write_hf(dir / case_name, changed, false);
    return [this, case_name] { import_hf(dir / case_name); };
  };
  Tensors missing = t;
  missing.erase("h.1.mlp.c_fc.bias");
  expect_error(hf_with(missing, "missing"), "tensor 'h.1.mlp.c_fc.bias' is missing");
  Tensors extra = t;
  extra["h.0.attn.rotary"] = {{C}, std::vector<float>(C)};
  expect_error(hf_with(extra, "extra"), "tensor 'h.0.attn.rotary' is not part of a GPT-2 model");
  Tensors misshaped = t;
  misshaped["h.0.attn.c_proj.weight"] = {{C, C + 1}, std::vector<float>(C * (C + 1))};
  expect_error(hf_with(misshaped, "misshaped"),
               "tensor 'h.0.attn.c_proj.weight' has shape [16, 17], the model needs [16, 16]");
  // A config that disagrees with the tensors (3 layers claimed, 2 present).
  write_hf(dir / "layers", t, false);
  nlohmann::json config = nlohmann::json::parse(read_file(dir / "layers" / "config.json"));
  config["n_layer"] = 3;
  write_file_atomic(dir / "layers" / "config.json", config.dump());
  expect_error([&] { import_hf(dir / "layers"); }, "tensor 'h.2.ln_1.weight' is missing");
  config["n_layer"] = 2, config["scale_attn_weights"] = false;
  write_file_atomic(dir / "layers" / "config.json", config.dump());
  expect_error([&] { import_hf(dir / "layers"); }, "not GPT-2's 1/√d attention");
  config.erase("scale_attn_weights"), config["model_type"] = "llama";  // another architecture
  write_file_atomic(dir / "layers" / "config.json", config.dump());
  expect_error([&] { import_hf(dir / "layers"); }, "model_type \"llama\" is not gpt2");
  config["model_type"] = "gpt2", config["activation_function"] = "relu";
  write_file_atomic(dir / "layers" / "config.json", config.dump());
  expect_error([&] { import_hf(dir / "layers"); }, "is not GPT-2's tanh GELU");
  fs::remove(dir / "layers" / "config.json");
  expect_error([&] { import_hf(dir / "layers"); }, "no config.json beside it");
  // An untied head.
  Tensors head = t;
  head["lm_head.weight"] = {{V, C}, std::vector<float>(V * C, 0.5f)};
  expect_error(hf_with(head, "head"), "lm_head.weight differs from wte.weight");
}

// F16 and BF16 tensors (other programs' files) read widened to float, exactly.
TEST_F(Interop, HalfAndBf16TensorsWiden) {
  const uint16_t half[4] = {0x3c00, 0xc000, 0x0001, 0x7bff};  // 1, -2, 2^-24, 65504
  const uint16_t bf16[2] = {0x3f80, 0xc0a0};                  // 1, -5
  nlohmann::json header = {{"a", {{"dtype", "F16"}, {"shape", {4}}, {"data_offsets", {0, 8}}}},
                           {"b", {{"dtype", "BF16"}, {"shape", {2}}, {"data_offsets", {8, 12}}}}};
  const std::string json = header.dump();
  std::string bytes(8, '\0');
  const uint64_t n = json.size();
  std::memcpy(&bytes[0], &n, 8);
  bytes += json;
  bytes.append(reinterpret_cast<const char*>(half), 8)
      .append(reinterpret_cast<const char*>(bf16), 4);
  const SafetensorsFile f("mixed.safetensors", bytes);
  float a[4], b[2];
  f.read("a", {4}, a), f.read("b", {2}, b);
  EXPECT_EQ(a[0], 1.0f);
  EXPECT_EQ(a[1], -2.0f);
  EXPECT_EQ(a[2], std::ldexp(1.0f, -24));
  EXPECT_EQ(a[3], 65504.0f);
  EXPECT_EQ(b[0], 1.0f);
  EXPECT_EQ(b[1], -5.0f);
}

// Sizes no file can back are refused before anything is allocated, and a config value of the
// wrong type is an Error naming the file (not nlohmann's type_error). Found while fuzzing
// (fuzz/fuzz_hf.cpp, fuzz/fuzz_safetensors.cpp); the inputs are in fuzz/corpus/.
TEST_F(Interop, HostileSizesAndTypesAreRefused) {
  // A shape whose byte count wraps around 2^64 to the 0 bytes it claims.
  const std::string json =
      R"({"t":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})";
  std::string bytes(8, '\0');
  const uint64_t n = json.size();
  std::memcpy(&bytes[0], &n, 8);
  expect_error([&] { SafetensorsFile("wrap.safetensors", bytes + json); },
               "too large for any file");
  // A float offset or dimension is malformed, not cast to an integer.
  const std::string float_json = R"({"f":{"dtype":"F32","shape":[1],"data_offsets":[0,1.6e145]}})";
  const uint64_t float_n = float_json.size();
  std::memcpy(&bytes[0], &float_n, 8);
  expect_error([&] { SafetensorsFile("float.safetensors", bytes + float_json); },
               "malformed shape or data_offsets");
  // An empty tensor reads into nothing (an empty vector's data() is null; memcpy's must not be).
  const std::string empty_json = R"({"e":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]}})";
  const uint64_t empty_n = empty_json.size();
  std::memcpy(&bytes[0], &empty_n, 8);
  SafetensorsFile("empty.safetensors", bytes + empty_json).read("e", {0, 3}, nullptr);

  const std::string empty_file = std::string("\2\0\0\0\0\0\0\0{}", 10);
  const nlohmann::json config = {{"model_type", "gpt2"}, {"vocab_size", 256}, {"n_layer", 2},
                                 {"n_head", 2},          {"n_embd", 16},      {"n_positions", 8}};
  auto hf_with = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json changed = config;
    changed[key] = value;
    return [changed, empty_file] {
      import_hf_bytes(changed.dump(), "config.json", empty_file, "model.safetensors");
    };
  };
  // A width past any GPT-2, and a valid one whose tensors the file lacks: refused, not allocated.
  expect_error(hf_with("n_embd", 1 << 20), "is impossible");
  expect_error(hf_with("n_embd", 4096), "tensor 'wte.weight' is missing");
  expect_error(hf_with("n_layer", 4294967298), "'n_layer' is missing or not an integer");
  expect_error(hf_with("activation_function", 5), "activation_function is not a string");
  expect_error(hf_with("scale_attn_weights", "yes"), "'scale_attn_weights' is not true or false");
}

}  // namespace
}  // namespace xsa
