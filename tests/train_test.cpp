// Training end to end through the library: over-fitting one batch, bit-identical resume, exact
// checkpoint round trips, and checkpoints that are damaged in each way a user may meet.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "step_check.h"
#include "test_util.h"
#include "xsa/dist/comm.h"
#include "xsa/io/checkpoint.h"
#include "xsa/io/safetensors.h"
#include "xsa/model/gpt.h"
#include "xsa/train/trainer.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"

namespace xsa {
namespace {

// A fresh folder per test under the build's temporary directory.
using test::temp_dir;

std::string sample_text(size_t n) {
  static const char* words[] = {"the ", "cat ",  "sat ", "on ",  "a ",   "mat ",
                                "and ", "then ", "it ",  "ran ", "far. "};
  std::string s;
  uint64_t x = 1;
  while (s.size() < n)
    s += words[(x = x * 6364136223846793005ull + 1442695040888963407ull) >> 60 & 7 ? (x >> 33) % 11
                                                                                   : 0];
  s.resize(n);
  return s;
}

fs::path write_text(const fs::path& dir, size_t n) {
  fs::path path = dir / "data.txt";
  std::ofstream(path) << sample_text(n);
  return path;
}

ModelConfig tiny_model(const std::string& attn = "xsa") {
  ModelConfig cfg;
  cfg.n_layer = 2, cfg.n_head = 4, cfg.n_embd = 64, cfg.seq_len = 32;
  set_attention(cfg, attn);
  return cfg;
}

RunConfig tiny_run(const fs::path& data, const fs::path& out) {
  RunConfig run;
  run.data = data.string();
  run.out = out.string();
  run.batch = 4;
  run.steps = 40;
  run.lr = 3e-3;
  run.threads = 1;
  run.val_every = 10;
  run.val_batches = 2;
  run.quiet = true;
  return run;
}

std::vector<nlohmann::json> read_metrics(const fs::path& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(Train, OverfitsOneBatch) {
  for (const char* attn : {"sa", "xsa"}) {
    SCOPED_TRACE(attn);
    fs::path dir = temp_dir(std::string("overfit_") + attn);
    // Exactly one batch of data: every step sees the same B×T window.
    RunConfig run = tiny_run(write_text(dir, 4 * 32 + 1), dir / "run");
    run.val_fraction = 0;
    run.steps = 150;
    run.warmup = 10;
    run.lr = 1e-2;
    run.weight_decay = 0;
    TrainResult r = train(tiny_model(attn), run);
    EXPECT_LT(r.final_loss, 0.1);
    fs::remove_all(dir);
  }
}

// Gradient accumulation in one process: 2 micro-batches of 2 rows per step take the step of one
// batch of 4 (the same windows, the same rows' gradients summed in another order): steps 1, 2, 10
// and 20 of a 20-step run, each from the whole-batch run's state before it, give the training
// loss within twice the forward chain's bound and the weights within AdamW's response to the
// gradients' bound (tests/step_check.h: derived, for any summation order; over many steps the two
// trajectories part by their roundings, which nothing bounds). And the step's size is refused,
// with the fix, when it does not divide.
TEST(Train, AccumulationFollowsTheWholeBatch) {
  fs::path dir = temp_dir("accumulation");
  RunConfig whole = tiny_run(write_text(dir, 60000), dir / "whole");
  whole.steps = 20, whole.ckpt_every = 1;
  whole.warmup = 0, whole.min_lr_fraction = 1;  // constant: a shorter run takes the same steps
  train(tiny_model(), whole);
  const auto records = [](const fs::path& run_dir) {
    std::map<int64_t, double> loss;
    for (const auto& m : read_metrics(run_dir / "metrics.jsonl"))
      if (!m.contains("split")) loss[m["step"].get<int64_t>()] = m["loss"].get<double>();
    return loss;
  };
  const auto whole_loss = records(dir / "whole");
  const test::ModelChain chain = test::model_chain(tiny_model(), 4, 32);
  const auto ckpt = [](int64_t step) { return fmt::format("ckpt_{:06d}", step); };
  RunConfig split = whole;
  split.batch = 2;
  split.total_batch_tokens = 4 * 32;
  for (int64_t step : {1, 2, 10, 20}) {
    SCOPED_TRACE(testing::Message() << "step " << step);
    const fs::path out = dir / ("split_" + std::to_string(step));
    split.out = out.string(), split.steps = step, split.ckpt_every = 0;
    fs::create_directories(out);
    if (step > 1) {
      fs::copy(dir / "whole" / ckpt(step - 1), out / ckpt(step - 1), fs::copy_options::recursive);
      train(tiny_model(), split, out.string());
    } else {
      train(tiny_model(), split);
    }
    const double want = whole_loss.at(step);
    EXPECT_NEAR(records(out).at(step), want,
                2 * test::chain_error(chain.forward, test::kFloatRoundoff) * want);
    EXPECT_TRUE(test::same_step(step > 1 ? dir / "whole" / ckpt(step - 1) : fs::path(),
                                out / ckpt(step), dir / "whole" / ckpt(step), 3e-3, (int)step,
                                chain));
  }
  const auto state = load_trainer_state(dir / "split_20" / "ckpt_000020");
  EXPECT_EQ(state["accumulation_steps"], 2);
  EXPECT_EQ(state["run"]["total_batch_tokens"], 128);

  split.total_batch_tokens = 4 * 32 + 32;  // 5 rows: not a multiple of 2
  split.force = true;
  try {
    train(tiny_model(), split);
    FAIL() << "a step of 5 rows in micro-batches of 2 was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "--total-batch-tokens 160 is not a multiple of 1 process × --batch 2 × --seq-len "
                 "32 = 64 tokens per pass; use --batch 1 or --total-batch-tokens 128 or "
                 "--total-batch-tokens 192");
  }
  fs::remove_all(dir);
}

// A communicator that claims `world` ranks and is rank `me` of them; its collectives do nothing.
struct Pretend : Comm {
  int world, me;
  explicit Pretend(int w, int r = 0) : world(w), me(r) {}
  int size() const override { return world; }
  int rank() const override { return me; }
};

// Each rank's shard: consecutive, covering the buffer once, cache-line aligned.
TEST(Comm, ShardsCoverTheBufferOnce) {
  for (int world : {1, 2, 3, 7, 64})
    for (size_t n : {0ul, 1ul, 15ul, 16ul, 17ul, 1000ul, 123456789ul}) {
      Pretend comm(world);
      size_t next = 0;
      for (int r = 0; r < world; r++) {
        const ShardRange s = comm.shard(n, r);
        EXPECT_EQ(s.begin, next) << world << " " << n << " " << r;
        EXPECT_LE(s.begin, s.end);
        if (s.size() > 0 && s.begin < n) {
          EXPECT_EQ(s.begin % 16, 0u);
        }
        next = s.end;
      }
      EXPECT_EQ(next, n) << world << " " << n;
    }
}

// ZeRO-1 keeps the moments of this rank's shard only: optimizer memory falls by the world size.
TEST(Comm, ZeroOneKeepsOneShardOfTheMoments) {
  const ModelConfig cfg = [] {
    ModelConfig m = tiny_model();
    m.vocab_size = 256, m.padded_vocab = 256;
    return m;
  }();
  for (int world : {2, 4})
    for (int rank = 0; rank < world; rank++) {
      Pretend comm(world, rank);
      Gpt<float> model(cfg, 2, 8);
      const size_t n = model.params().params.size();
      TrainStep step(model, {}, {&comm, /*zero1=*/true});
      const ShardRange mine = comm.shard(n, rank);
      EXPECT_EQ(model.params().adam_m.size(), mine.size());
      EXPECT_EQ(model.params().adam_v.size(), mine.size());
      EXPECT_EQ(model.params().moments_begin, mine.begin);
      EXPECT_LE(model.params().adam_m.size(), n / world + 16);
    }
  // Without ZeRO, or in one process, every rank keeps them all.
  Pretend two(2);
  Gpt<float> model(cfg, 2, 8);
  TrainStep plain(model, {}, {&two, false});
  EXPECT_EQ(model.params().adam_m.size(), model.params().params.size());
}

// --precision bf16: products in bf16, master weights, gradients and AdamW in fp32. Over 50 steps
// the loss follows the fp32 run within 1 % (bf16 keeps 8 significant bits: each product moves by
// about 2⁻⁸ relative, the logits by a fraction of that, the loss by ~1e-3 here), without being
// the same (the bf16 path really ran); a run resumed in bf16 is bit-identical.
TEST(Train, Bf16FollowsFp32AndResumesExactly) {
  std::string why;
  if (!bf16_products_available(&why)) GTEST_SKIP() << "no bf16 products here: " << why;
  fs::path dir = temp_dir("bf16");
  RunConfig fp32 = tiny_run(write_text(dir, 60000), dir / "fp32");
  fp32.steps = 50, fp32.val_every = 25, fp32.ckpt_every = 25;
  RunConfig bf16 = fp32;
  bf16.precision = Precision::bf16, bf16.out = (dir / "bf16").string();
  const TrainResult a = train(tiny_model(), fp32), b = train(tiny_model(), bf16);
  const auto ma = read_metrics(dir / "fp32" / "metrics.jsonl");
  const auto mb = read_metrics(dir / "bf16" / "metrics.jsonl");
  ASSERT_EQ(ma.size(), mb.size());
  bool differ = false;
  for (size_t i = 0; i < ma.size(); i++) {
    const double x = ma[i]["loss"].get<double>(), y = mb[i]["loss"].get<double>();
    EXPECT_NEAR(y, x, 0.01 * x) << "record " << i;
    differ = differ || x != y;
  }
  EXPECT_TRUE(differ);
  EXPECT_NEAR(b.final_val_loss, a.final_val_loss, 0.01 * a.final_val_loss);
  // Resumed from step 25 in bf16: the same numbers as without the interruption.
  fs::copy(dir / "bf16", dir / "bf16_resumed", fs::copy_options::recursive);
  fs::remove_all(dir / "bf16_resumed" / "ckpt_000050");
  RunConfig resumed = bf16;
  resumed.out = (dir / "bf16_resumed").string();
  train(tiny_model(), resumed, (dir / "bf16_resumed" / "ckpt_000025").string());
  EXPECT_EQ(read_file(dir / "bf16_resumed" / "ckpt_000050" / "model.safetensors"),
            read_file(dir / "bf16" / "ckpt_000050" / "model.safetensors"));
  const auto mr = read_metrics(dir / "bf16_resumed" / "metrics.jsonl");
  ASSERT_EQ(mr.size(), mb.size());
  for (size_t i = 0; i < mb.size(); i++) EXPECT_EQ(mr[i]["loss"], mb[i]["loss"]) << i;
  fs::remove_all(dir);
}

TEST(Train, ResumeIsBitIdentical) {
  fs::path dir = temp_dir("resume");
  fs::path data = write_text(dir, 20000);
  RunConfig run = tiny_run(data, dir / "full");
  run.ckpt_every = 20;
  run.threads = 2;  // with threads, as users train
  train(tiny_model(), run);

  // A second run continues from the first one's step-20 checkpoint, as after a crash there.
  fs::create_directories(dir / "resumed");
  fs::copy(dir / "full" / "ckpt_000020", dir / "resumed" / "ckpt_000020",
           fs::copy_options::recursive);
  RunConfig again = run;
  again.out = (dir / "resumed").string();
  train(tiny_model(), again, (dir / "resumed").string());

  auto full = read_metrics(dir / "full" / "metrics.jsonl");
  auto resumed = read_metrics(dir / "resumed" / "metrics.jsonl");
  std::vector<double> full_losses, resumed_losses;
  for (auto& m : full)
    if (m["step"].get<int>() > 20) full_losses.push_back(m["loss"]);
  for (auto& m : resumed) resumed_losses.push_back(m["loss"]);
  ASSERT_EQ(full_losses.size(), 22u);      // 20 train records and val at steps 30 and 40
  EXPECT_EQ(full_losses, resumed_losses);  // exact equality of every double
  EXPECT_EQ(read_file(dir / "full" / "ckpt_000040" / "model.safetensors"),
            read_file(dir / "resumed" / "ckpt_000040" / "model.safetensors"));
  EXPECT_EQ(read_file(dir / "full" / "ckpt_000040" / "optimizer.safetensors"),
            read_file(dir / "resumed" / "ckpt_000040" / "optimizer.safetensors"));
  fs::remove_all(dir);
}

// A saved run's precision is read by its name; another value is refused in one line.
TEST(RunOptions, ASavedPrecisionIsOneOfTheKnown) {
  RunConfig r;
  run_config_update_from_json(r, {{"precision", "bf16"}}, "trainer.json");
  EXPECT_EQ(r.precision, Precision::bf16);
  for (const nlohmann::json& bad : {nlohmann::json("fp16"), nlohmann::json(1)}) {
    try {
      run_config_update_from_json(r, {{"precision", bad}}, "trainer.json");
      ADD_FAILURE() << "took precision " << bad.dump();
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                "trainer.json: run setting precision must be fp32 or bf16, not " + bad.dump());
    }
  }
}

// Every run option marked saved goes into trainer.json and comes back on resume: set each to a
// value other than its default, write, read into a fresh RunConfig, and compare all of them.
TEST(RunOptions, SavedOptionsRoundTrip) {
  RunConfig changed;
  for_each_run_option(changed, [](const RunOption&, auto& field) {
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_same_v<T, bool>)
      field = !field;
    else if constexpr (std::is_same_v<T, std::string>)
      field += "x";
    else if constexpr (std::is_same_v<T, Precision>)
      field = Precision::bf16;
    else
      field = field + 3;
  });
  RunConfig back;
  run_config_update_from_json(back, run_config_to_json(changed), "test");
  const nlohmann::json want = run_config_to_json(changed, 0), got = run_config_to_json(back, 0);
  int saved = 0;
  for_each_run_option(changed, [&](const RunOption& o, const auto&) {
    if (!(o.roles & kSaved)) return;
    saved++;
    EXPECT_EQ(got[o.key], want[o.key]) << o.key << " does not survive a resume";
  });
  EXPECT_GE(saved, 20);
  // What changes the numbers is saved (so resume and compare's fingerprint see it).
  for_each_run_option(changed, [&](const RunOption& o, const auto&) {
    if (o.roles & kResult) {
      EXPECT_TRUE(o.roles & kSaved) << o.key;
    }
  });
  for (const char* key : {"shuffle", "tokenizer", "data", "seed", "adam_eps"})
    EXPECT_TRUE(run_config_to_json(changed, kSaved | kResult).contains(key)) << key;
}

// Integer settings that are floats or out of range (found by fuzz_run_config): one line naming
// the setting, never a cast.
TEST(RunOptions, IntegerSettingsOutOfRangeAreRefused) {
  for (const char* bad : {R"({"steps": 1555555555555555555555555555555554})", R"({"steps": 1e20})",
                          R"({"batch": 2.5})", R"({"batch": 4294967296})", R"({"seed": -1})",
                          R"({"threads": "2"})"}) {
    RunConfig r;
    try {
      run_config_update_from_json(r, nlohmann::json::parse(bad), "t.json");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("t.json: run setting ", 0), 0u) << e.what();
    }
  }
  RunConfig r;
  run_config_update_from_json(r, nlohmann::json::parse(R"({"steps": 9000000000, "seed": 7})"), "t");
  EXPECT_EQ(r.steps, 9000000000);
  EXPECT_EQ(r.seed, 7u);
}

TEST(Train, SameSeedSameCurve) {
  fs::path dir = temp_dir("repeat");
  fs::path data = write_text(dir, 20000);
  train(tiny_model(), tiny_run(data, dir / "a"));
  train(tiny_model(), tiny_run(data, dir / "b"));
  auto a = read_metrics(dir / "a" / "metrics.jsonl"), b = read_metrics(dir / "b" / "metrics.jsonl");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); i++) EXPECT_EQ(a[i]["loss"], b[i]["loss"]) << "record " << i;
  fs::remove_all(dir);
}

TEST(Checkpoint, RoundTripIsExact) {
  fs::path dir = temp_dir("roundtrip");
  ModelConfig cfg = tiny_model("sa,xsa-gated");
  cfg.vocab_size = 50257, cfg.padded_vocab = 50304, cfg.tokenizer = TokenizerKind::gpt2;
  cfg.n_embd = 16;
  ParamArena<float> a(cfg);
  a.init(cfg, 3);
  for (size_t i = 0; i < a.params.size(); i++)
    a.adam_m.data()[i] = 0.5f * a.params.data()[i],
    a.adam_v.data()[i] = a.params.data()[i] * a.params.data()[i];
  nlohmann::json state = {{"step", 17}, {"data_position", 12345}};
  fs::path ckpt = save_checkpoint(dir, 17, cfg, a, state, false);
  EXPECT_EQ(ckpt.filename(), "ckpt_000017");
  EXPECT_EQ(resolve_checkpoint(dir), ckpt);

  ModelConfig loaded = load_checkpoint_config(ckpt);
  EXPECT_EQ(0, std::memcmp(&loaded, &cfg, sizeof cfg));  // trivially copyable: every field
  ParamArena<float> b(loaded);
  load_checkpoint_weights(ckpt, b, true);
  EXPECT_EQ(0, std::memcmp(a.params.data(), b.params.data(), a.params.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(a.adam_m.data(), b.adam_m.data(), a.adam_m.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(a.adam_v.data(), b.adam_v.data(), a.adam_v.size() * sizeof(float)));
  EXPECT_EQ(load_trainer_state(ckpt), state);

  // nanoGPT names and [out, in] layouts.
  SafetensorsFile file((ckpt / "model.safetensors").string(),
                       read_file(ckpt / "model.safetensors"));
  std::vector<float> qkv(3 * 16 * 16);
  EXPECT_NO_THROW(file.read("transformer.h.1.attn.c_attn.weight", {48, 16}, qkv.data()));
  std::vector<float> gate(4);
  EXPECT_NO_THROW(file.read("transformer.h.1.attn.xsa_gate", {4}, gate.data()));  // gated XSA's w_h
  EXPECT_FALSE(file.contains("transformer.h.0.attn.xsa_gate"));
  EXPECT_NO_THROW(
      file.read("transformer.wte.weight", {50304, 16}, std::vector<float>(50304 * 16).data()));

  // The same step is never overwritten silently.
  EXPECT_THROW(save_checkpoint(dir, 17, cfg, a, state, false), Error);
  fs::remove_all(dir);
}

// A run killed while writing a checkpoint leaves a temporary folder; it never counts as a
// checkpoint, and the next save of that step replaces it.
// trainer.json fields of the wrong type: one line naming the file and the field.
TEST(Checkpoint, TrainerStateOfTheWrongShapeIsNamed) {
  fs::path dir = temp_dir("trainer_state");
  const std::pair<const char*, const char*> cases[] = {
      {R"([1, 2])", "not a JSON object"},
      {R"({"step": 2.5})", "step has the wrong type (number)"},
      {R"({"data": {"source": 5}})", "data/source has the wrong type (number)"},
      {R"({"data": "x"})", "data has the wrong type (string)"},
      {R"({"run": {"val_fraction": "0.1"}})", "run/val_fraction has the wrong type (string)"}};
  for (const auto& [text, why] : cases) {
    write_file_atomic(dir / "trainer.json", text);
    try {
      load_trainer_state(dir);
      ADD_FAILURE() << text << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), (dir / "trainer.json").string() + ": " + why);
    }
  }
  write_file_atomic(dir / "trainer.json", R"({"step": 3, "data": {"source": "a.txt"}})");
  EXPECT_EQ(load_trainer_state(dir)["step"], 3);
  fs::remove_all(dir);
}

TEST(Checkpoint, HalfWrittenCheckpointIsIgnored) {
  fs::path dir = temp_dir("halfwritten");
  ModelConfig cfg = tiny_model();
  ParamArena<float> a(cfg);
  a.init(cfg, 1);
  fs::path good = save_checkpoint(dir, 10, cfg, a, {{"step", 10}}, false);
  fs::create_directories(dir / ".tmp_ckpt_000020");
  write_file_atomic(dir / ".tmp_ckpt_000020" / "config.json", "{");
  EXPECT_EQ(resolve_checkpoint(dir), good);
  EXPECT_EQ(list_checkpoints(dir).size(), 1u);
  fs::path next = save_checkpoint(dir, 20, cfg, a, {{"step", 20}}, false);
  EXPECT_EQ(resolve_checkpoint(dir), next);
  EXPECT_FALSE(fs::exists(dir / ".tmp_ckpt_000020"));
  fs::remove_all(dir);
}

// Each damaged checkpoint gives an Error naming the file and the problem.
class DamagedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = temp_dir("damaged");
    cfg = tiny_model();
    ParamArena<float> a(cfg);
    a.init(cfg, 1);
    ckpt = save_checkpoint(dir, 5, cfg, a, {{"step", 5}}, false);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string load_error() {
    try {
      ModelConfig c = load_checkpoint_config(ckpt);
      ParamArena<float> b(c);
      load_checkpoint_weights(ckpt, b, true);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  void rewrite_model(const std::function<void(std::string&)>& edit) {
    std::string bytes = read_file(ckpt / "model.safetensors");
    edit(bytes);
    write_file_atomic(ckpt / "model.safetensors", bytes);
  }
  fs::path dir, ckpt;
  ModelConfig cfg;
};

TEST_F(DamagedCheckpoint, Truncated) {
  rewrite_model([](std::string& b) { b.resize(b.size() - 100); });
  std::string err = load_error();
  EXPECT_NE(err.find("model.safetensors"), std::string::npos) << err;
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
}

TEST_F(DamagedCheckpoint, MissingTensor) {
  rewrite_model([](std::string& b) {
    size_t p = b.find("transformer.h.1.mlp.c_fc.weight");
    b.replace(p, 11, "transformer.X");  // renames it, same length
  });
  std::string err = load_error();
  EXPECT_NE(err.find("'transformer.h.1.mlp.c_fc.weight' is missing"), std::string::npos) << err;
}

TEST_F(DamagedCheckpoint, WrongShapeForConfig) {
  nlohmann::json j = cfg;
  j["n_embd"] = 32;  // config.json now contradicts the tensors
  write_file_atomic(ckpt / "config.json", j.dump());
  std::string err = load_error();
  EXPECT_NE(err.find("has shape [256, 64], the model needs [256, 32]"), std::string::npos) << err;
}

TEST_F(DamagedCheckpoint, BadConfigJson) {
  write_file_atomic(ckpt / "config.json", "{\"format\": \"xsa-gpt\", \"version\": 1, ");
  std::string err = load_error();
  EXPECT_NE(err.find("config.json: not valid JSON"), std::string::npos) << err;
}

TEST_F(DamagedCheckpoint, ImpossibleConfig) {
  nlohmann::json j = cfg;
  j["n_head"] = 3;
  write_file_atomic(ckpt / "config.json", j.dump());
  std::string err = load_error();
  EXPECT_NE(err.find("config.json"), std::string::npos) << err;
  EXPECT_NE(err.find("not divisible"), std::string::npos) << err;
}

TEST_F(DamagedCheckpoint, MissingOptimizerState) {
  fs::remove(ckpt / "optimizer.safetensors");
  std::string err = load_error();
  EXPECT_NE(err.find("optimizer.safetensors: no such file"), std::string::npos) << err;
}

}  // namespace
}  // namespace xsa
