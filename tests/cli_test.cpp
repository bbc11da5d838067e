// The `xsa` command as a user runs it: help, train → metrics and checkpoints → info, config files,
// resume through the CLI, and every bad input: one line on stderr, a non-zero exit status, and no
// existing checkpoint touched.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "bounds.h"
#include "test_util.h"
#include "xsa/backend/backend.h"
#include "xsa/io/checkpoint.h"
#include "xsa/io/safetensors.h"
#include "xsa/options/run_config.h"
#include "xsa/util/blas.h"
#include "xsa/util/files.h"
#include "xsa/util/fmt.h"
#include "xsa/util/rng.h"
#include "xsa/util/stats.h"

namespace xsa {
namespace {

namespace fs = std::filesystem;

using Result = test::CommandResult;

int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) n++;
  return n;
}

fs::path work_dir() {
  static fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("xsa_cli_test_" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// Runs `xsa ARGS` in the work folder, one thread (ctest runs tests side by side).
Result xsa(const std::string& args) {
  return test::run_command(std::string(XSA_BINARY) + " " + args, work_dir());
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories((work_dir() / path).parent_path());
  std::ofstream(work_dir() / path) << text;
}

using test::text_of;

const std::string kSmall =
    "--layers 2 --heads 4 --embd 32 --seq-len 16 --batch 4 --threads 1 --quiet";

// Two validations of the same weights (float forwards, possibly of other batch shapes: other
// summation orders) agree within twice the forward chain's bound of kSmall's model
// (tests/bounds.h), relative to the loss.
double same_weights_bound(double loss) {
  ModelConfig cfg;
  cfg.n_layer = 2, cfg.n_head = 4, cfg.n_embd = 32, cfg.seq_len = 16;
  return 2 * test::chain_error(test::model_chain(cfg, 4, 16).forward, test::kFloatRoundoff) *
         std::fabs(loss);
}

std::vector<nlohmann::json> metrics(const fs::path& run) {
  std::vector<nlohmann::json> out;
  std::ifstream in(work_dir() / run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

class Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { write("data.txt", text_of(30000)); }
};

TEST_F(Cli, HelpForEveryCommand) {
  for (const char* args :
       {"--help", "train --help", "info --help", "prepare --help", "tokenize --help",
        "tokenizer encode --help", "eval --help", "sample --help", "import --help", "export --help",
        "compare --help", "sweep --help", "analyze --help", "bench --help"}) {
    Result r = xsa(args);
    EXPECT_EQ(r.status, 0) << args;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << args;
  }
  Result r = xsa("train --help");
  for (const char* flag : {"--data", "--attn", "--layers", "--resume", "--ckpt-every", "--config",
                           "--arch", "--init-from", "--precision"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}

TEST_F(Cli, TrainWritesMetricsAndCheckpointsThatInfoReads) {
  Result r = xsa("train --data data.txt --attn xsa " + kSmall +
                 " --steps 12 --val-every 5 --ckpt-every 5 --out run_a");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(work_dir() / "run_a/ckpt_000005/model.safetensors"));
  EXPECT_TRUE(fs::exists(work_dir() / "run_a/ckpt_000010/optimizer.safetensors"));
  EXPECT_TRUE(fs::exists(work_dir() / "run_a/ckpt_000012/trainer.json"));
  auto m = metrics("run_a");
  int train_records = 0, val_records = 0;
  for (auto& rec : m) {
    if (rec.contains("split")) {
      EXPECT_EQ(rec["split"], "val");
      EXPECT_TRUE(rec.contains("step") && rec.contains("loss"));
      val_records++;
    } else {
      for (const char* key : {"step", "loss", "lr", "grad_norm", "ms", "tokens_per_s"})
        EXPECT_TRUE(rec.contains(key)) << key;
      train_records++;
    }
  }
  EXPECT_EQ(train_records, 12);
  EXPECT_EQ(val_records, 4);  // steps 0, 5, 10, 12

  Result info = xsa("info run_a");
  ASSERT_EQ(info.status, 0) << info.err;
  EXPECT_NE(info.out.find("ckpt_000012"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("step:        12 of 12"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("attention:   xsa"), std::string::npos) << info.out;
  // 2 layers of 12·C² + 4·C, wte 256·C, ln_f 2·C, with C = 32
  EXPECT_NE(info.out.find("parameters:  " +
                          std::to_string(2 * (12 * 32 * 32 + 4 * 32) + 256 * 32 + 2 * 32)),
            std::string::npos)
      << info.out;
}

// --attn reads compare's grammar: a rival alone, options in any order, a rival on one layer only;
// the checkpoint's config.json says so per layer (version 4) and info prints it back.
TEST_F(Cli, TrainTakesARivalOnSomeLayers) {
  Result r = xsa("train --data data.txt --attn gated-attn,xsa+no-self+sink " + kSmall +
                 " --steps 2 --quiet --out run_rivals");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json cfg =
      nlohmann::json::parse(std::ifstream(work_dir() / "run_rivals/ckpt_000002/config.json"));
  EXPECT_EQ(cfg["version"], 4);
  EXPECT_EQ(cfg["layer_rivals"][0]["gated_attn"], true);
  EXPECT_EQ(cfg["layer_rivals"][1]["no_self"], true);
  EXPECT_EQ(cfg["layer_rivals"][1]["gated_attn"], false);
  Result info = xsa("info run_rivals");
  ASSERT_EQ(info.status, 0) << info.err;
  EXPECT_NE(info.out.find("attention:   sa+gated-attn,xsa+sink+no-self"), std::string::npos)
      << info.out;
}

TEST_F(Cli, ConfigFileSetsOptionsAndTheCommandLineWins) {
  write("run.toml",
        "layers = 3\nheads = 2\nembd = 16\nseq-len = 16\nbatch = 2\nsteps = 3\nattn = "
        "\"sa\"\nthreads = 1\n");
  Result r = xsa("train --config run.toml --data data.txt --heads 4 --quiet --out run_cfg");
  ASSERT_EQ(r.status, 0) << r.err;
  Result info = xsa("info run_cfg");
  EXPECT_NE(info.out.find("layers:      3"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("heads:       4"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("attention:   sa"), std::string::npos) << info.out;

  // compare and sweep read such files too (compare has no --attn: its variants set attention); a
  // key that is not an option of the command is refused with the file's name.
  write("cmp.toml",
        "layers = 3\nheads = 2\nembd = 16\nseq-len = 16\nbatch = 2\nsteps = 3\nthreads = 1\n");
  r = xsa(
      "compare --config cmp.toml --data data.txt --steps 2 --val-every 0 --quiet --out cmp_cfg");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string report = read_file(work_dir() / "cmp_cfg" / "report.md");
  EXPECT_NE(report.find("3 layers, 2 heads, width 16, context 16, batch 2, 2 steps"),
            std::string::npos)
      << report;
  write("bad.toml", "layers = 3\nlayer_count = 2\n");
  for (const char* command : {"train", "compare", "sweep"}) {
    r = xsa(std::string(command) + " --config bad.toml --data data.txt --quiet");
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, std::string("xsa: error: --config bad.toml: 'layer_count' is not an option of "
                                 "xsa ") +
                         command + " (xsa " + command + " --help lists them)\n");
  }
}

// With a constant learning rate the schedule does not depend on --steps, so a run stopped at step
// 10 and resumed to 20 must reproduce the uninterrupted 20-step run exactly, whatever run options
// it was started with (resume reads them all back from trainer.json).
// The modern small-model recipe (docs/SPEC.md §11) from the command line: config.json version 7
// with its MLP and cap, Muon's momentum in the optimizer file in place of the hidden matrices'
// AdamW moments, info, sample, a resume with the other optimizer refused in one line, the exports'
// refusal, and compare and its report naming the recipe. (Resume bit for bit:
// ResumeReproducesTheUninterruptedCurve.)
TEST_F(Cli, TheRecipeTrainsSamplesComparesAndIsRefusedByExports) {
  Result r =
      xsa("train --data data.txt --attn xsa --optimizer muon --mlp relu2 --logit-softcap 15 " +
          kSmall + " --steps 3 --out run_recipe");
  ASSERT_EQ(r.status, 0) << r.err;
  const fs::path ckpt = work_dir() / "run_recipe/ckpt_000003";
  const nlohmann::json cfg = nlohmann::json::parse(std::ifstream(ckpt / "config.json"));
  EXPECT_EQ(cfg["version"], 7);
  EXPECT_EQ(cfg["mlp_activation"], "relu2");
  EXPECT_EQ(cfg["logit_softcap"], 15.0);
  const SafetensorsFile opt((ckpt / "optimizer.safetensors").string(),
                            read_file(ckpt / "optimizer.safetensors"));
  EXPECT_TRUE(opt.contains("transformer.h.0.attn.c_attn.weight.muon_momentum"));
  EXPECT_TRUE(opt.contains("transformer.h.1.mlp.c_fc.weight.muon_momentum"));
  EXPECT_FALSE(opt.contains("transformer.h.0.attn.c_attn.weight.exp_avg"));
  EXPECT_TRUE(opt.contains("transformer.wte.weight.exp_avg"));
  EXPECT_TRUE(opt.contains("transformer.h.0.ln_1.weight.exp_avg_sq"));
  EXPECT_FALSE(opt.contains("transformer.wte.weight.muon_momentum"));
  const nlohmann::json state = nlohmann::json::parse(std::ifstream(ckpt / "trainer.json"));
  EXPECT_EQ(state["run"]["optimizer"], "muon");
  r = xsa("sample --ckpt run_recipe --prompt 'It was' --max-new-tokens 8 --threads 1");
  EXPECT_EQ(r.status, 0) << r.err;
  r = xsa("train --resume run_recipe --steps 5 --optimizer adamw");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--optimizer adamw contradicts the checkpoint"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  // The exports: a GPT-2-shaped model (learned positions, biases) with ReLU² is refused for its
  // MLP (an xsa-architecture one would be refused for its positions first).
  ASSERT_EQ(xsa("train --data data.txt --arch gpt2 --attn sa --mlp relu2 " + kSmall +
                " --steps 1 --out run_recipe_gpt2")
                .status,
            0);
  for (const char* format : {"llmc", "hf"}) {
    r = xsa(std::string("export ") + format + " run_recipe_gpt2 recipe_export");
    EXPECT_EQ(r.status, 1) << format;
    EXPECT_NE(r.err.find("GELU only"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(work_dir() / "recipe_export"));
  }
  r = xsa("train --data data.txt --optimizer sgd " + kSmall + " --steps 3 --out run_sgd");
  EXPECT_EQ(r.err, "xsa: error: --optimizer sgd is not known (adamw, muon)\n");
  r = xsa(
      "compare --data data.txt --preset tiny --variants sa,xsa --optimizer muon --mlp relu2 "
      "--logit-softcap 15 --qk-norm --steps 4 --val-every 2 --seeds 1 --quiet --out cmp_recipe");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string md = read_file(work_dir() / "cmp_recipe/report.md");
  EXPECT_NE(md.find("Recipe: Muon (peak lr 0.02"), std::string::npos) << md;
  EXPECT_NE(md.find("ReLU²"), std::string::npos);
  EXPECT_NE(md.find("logits soft-capped at 15"), std::string::npos);
  EXPECT_NE(md.find("Every variant has QK-norm"), std::string::npos);
  // The preset: the demo in the recipe, tuned on Muon's rate (a dry run says what would run).
  r = xsa("compare --data data.txt --preset recipe --variants sa,xsa --dry-run");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("Muon's peak lr (AdamW's x 0.1) tuned over 0.01, 0.02, 0.04"),
            std::string::npos)
      << r.out;
}

// Muon with bf16 products (each matrix's iteration reads its scratch through bf16 copies): the
// run ends with finite losses, which `train` checks at every step (it stops on NaN, exit 1). It
// became NaN at step 2 when a copy outlived what its memory held.
TEST_F(Cli, MuonTrainsInBf16) {
  if (!bf16_products_available(nullptr)) GTEST_SKIP() << "no bf16 products on this CPU";
  const Result r = xsa("train --data data.txt --optimizer muon --precision bf16 " + kSmall +
                       " --steps 6 --out run_muon16");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(work_dir() / "run_muon16/ckpt_000006/model.safetensors"));
}

// Value embeddings (docs/SPEC.md §10) from the command line: train (config.json version 6 with
// its list), info, sample, compare's --value-embed and +value-embed, and the exports' one-line
// refusal with nothing written. (Resume: ResumeReproducesTheUninterruptedCurve.)
TEST_F(Cli, ValueEmbeddingsTrainSampleCompareAndAreRefusedByExports) {
  // The GPT-2 architecture, so that the exports' refusal is for the value embeddings.
  Result r = xsa("train --data data.txt --arch gpt2 --attn sa,xsa --value-embed " + kSmall +
                 " --steps 3 --out run_value_embed");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json cfg =
      nlohmann::json::parse(std::ifstream(work_dir() / "run_value_embed/ckpt_000003/config.json"));
  EXPECT_EQ(cfg["version"], 6);
  EXPECT_EQ(cfg["layer_value_embed"], nlohmann::json({true, true}));
  Result info = xsa("info run_value_embed");
  ASSERT_EQ(info.status, 0) << info.err;
  EXPECT_NE(info.out.find("attention:   sa+value-embed,xsa+value-embed"), std::string::npos)
      << info.out;
  r = xsa("sample --ckpt run_value_embed --prompt 'It was' --max-new-tokens 8 --threads 1");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
  r = xsa("export llmc run_value_embed ve.bin");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("llm.c has no value embeddings"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(work_dir() / "ve.bin"));
  r =
      xsa("compare --data data.txt --preset tiny --variants sa,xsa,xsa+value-embed --steps 4 "
          "--val-every 2 --seeds 1 --quiet --out cmp_value_embed");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto report =
      nlohmann::json::parse(std::ifstream(work_dir() / "cmp_value_embed/report.json"));
  EXPECT_EQ(report["parameters"]["xsa+value-embed"]["value_embed"], true);
  EXPECT_FALSE(report["parameters"]["xsa"].contains("value_embed"));
  r =
      xsa("compare --data data.txt --preset tiny --variants sa,xsa --value-embed --steps 4 "
          "--val-every 2 --seeds 1 --quiet --out cmp_value_embed_all");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(read_file(work_dir() / "cmp_value_embed_all/report.md")
                .find("Every variant has value embeddings"),
            std::string::npos);
}

TEST_F(Cli, ResumeReproducesTheUninterruptedCurve) {
  for (const std::string extra :
       {"", " --no-shuffle --beta2 0.99 --adam-eps 1e-6 --grad-clip 0.5 --weight-decay 0.05",
        " --optimizer muon --muon-lr 0.03 --mlp relu2 --logit-softcap 15 --qk-norm",
        " --value-embed --kv-heads 2"}) {
    SCOPED_TRACE(extra);
    const std::string flags =
        "--data data.txt " + kSmall + " --min-lr-fraction 1 --warmup 0 --val-every 0" + extra;
    ASSERT_EQ(xsa("train " + flags + " --steps 20 --out whole --force").status, 0);
    ASSERT_EQ(xsa("train " + flags + " --steps 10 --out split --force").status, 0);
    Result r = xsa("train --resume split --steps 20 --quiet");
    ASSERT_EQ(r.status, 0) << r.err;
    auto a = metrics("whole"), b = metrics("split");
    std::vector<double> la, lb;
    for (auto& m : a)
      if (!m.contains("split")) la.push_back(m["loss"]);
    for (auto& m : b)
      if (!m.contains("split")) lb.push_back(m["loss"]);
    ASSERT_EQ(la.size(), 20u);
    EXPECT_EQ(la, lb);
    EXPECT_EQ(read_file(work_dir() / "whole/ckpt_000020/model.safetensors"),
              read_file(work_dir() / "split/ckpt_000020/model.safetensors"));
  }
}

// A comparison's finished seeds are taken over only by the same comparison: --no-shuffle (like
// every option that changes the numbers) is part of its fingerprint.
TEST_F(Cli, CompareFingerprintHoldsEveryResultOption) {
  const std::string flags =
      "compare --data data.txt --preset tiny --steps 2 --val-every 1 --seeds 1 --quiet --out fp";
  ASSERT_EQ(xsa(flags + " --no-shuffle --threads 1").status, 0);
  fs::remove(work_dir() / "fp/report.json");  // as if interrupted after the seed
  Result r = xsa(flags + " --threads 1");
  EXPECT_NE(r.err.find("seed-1.json: comes from a different comparison"), std::string::npos)
      << r.err;
  EXPECT_EQ(xsa(flags + " --no-shuffle --threads 2").status, 0) << "threads change no number";
}

TEST_F(Cli, TokenizeEncodesAndDecodes) {
  const std::string vocab = std::string(" --vocab-dir ") + XSA_VOCAB_DIR;
  Result r = xsa("tokenize" + vocab + " \"Hello, world\"");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "15496 11 995\n");
  r = xsa("tokenize" + vocab + " --decode 15496 11 995");
  EXPECT_EQ(r.out, "Hello, world\n");
  r = xsa("tokenize --tokenizer byte AB");
  EXPECT_EQ(r.out, "65 66\n");
  r = xsa("tokenize" + vocab + " --decode 15496 x1");
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.err,
            "xsa: error: --decode: 'x1' is not a token id of the gpt2 vocabulary (0..50256)\n");
  // The same under xsa tokenizer (tokenize is its encode's short name).
  r = xsa("tokenizer encode" + vocab + " \"Hello, world\"");
  EXPECT_EQ(r.out, "15496 11 995\n") << r.err;
  r = xsa("tokenizer decode" + vocab + " 15496 11 995");
  EXPECT_EQ(r.out, "Hello, world\n") << r.err;
}

// Text → xsa prepare → shards → xsa train with the GPT-2 tokenizer → a checkpoint that says so.
TEST_F(Cli, PrepareThenTrainOnShards) {
  const std::string vocab = std::string(" --vocab-dir ") + XSA_VOCAB_DIR;
  fs::create_directories(work_dir() / "corpus");
  for (int i = 0; i < 40; i++)
    write("corpus/doc" + std::to_string(i) + ".txt", text_of(300 + 10 * i));
  Result r = xsa("prepare --input corpus --tokenizer gpt2 --out shards --val-fraction 0.2 --quiet" +
                 vocab);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(work_dir() / "shards/train_000000.bin"));
  EXPECT_TRUE(fs::exists(work_dir() / "shards/val_000000.bin"));
  r =
      xsa("train --data shards --layers 1 --heads 2 --embd 16 --seq-len 16 --batch 2 --steps 3 "
          "--threads 1 --quiet "
          "--out run_gpt2" +
          vocab);
  ASSERT_EQ(r.status, 0) << r.err;
  Result info = xsa("info run_gpt2");
  EXPECT_NE(info.out.find("tokenizer:   gpt2 (vocab 50257, padded 50304)"), std::string::npos)
      << info.out;
  EXPECT_NE(info.out.find("val loss:"), std::string::npos) << info.out;
  // Sampling and scoring with GPT-2 tokens: a prompt of several tokens, and none (a new document).
  r = xsa("sample --ckpt run_gpt2 --prompt \"It was the best\" --max-new-tokens 8 --threads 1" +
          vocab);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("It was the best", 0), 0u) << r.out;
  EXPECT_NE(r.err.find("prompt 4 tokens"), std::string::npos) << r.err;
  r = xsa("sample --ckpt run_gpt2 --max-new-tokens 8 --ignore-eot --threads 1" + vocab);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("8 tokens"), std::string::npos) << r.err;
  write(
      "mc_gpt2.jsonl",
      "{\"context\": \"It was the best of\", \"choices\": [\"times\", \"days\"], \"label\": 0}\n");
  r = xsa("eval --ckpt run_gpt2 --task mc --file mc_gpt2.jsonl --data shards --threads 1" + vocab);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("| mc | 1 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| val |"), std::string::npos) << r.out;

  // Bad data: one line each, naming the file.
  write("broken/x_train_000000.bin", "not a shard at all, just some bytes that are far too short");
  r = xsa("train --data broken " + kSmall + " --out x2");
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("x_train_000000.bin: "), std::string::npos) << r.err;
  write("bad.jsonl", "{\"text\": \"ok\"}\n[1, 2]\n");
  r = xsa("prepare --input bad.jsonl --out x3 --tokenizer byte --quiet");
  EXPECT_EQ(r.err, "xsa: error: bad.jsonl:2: has no \"text\" field holding a string\n");
  r = xsa("prepare --input corpus --out shards --tokenizer byte --quiet");
  EXPECT_EQ(r.err, "xsa: error: shards: already exists; pass --force to replace it\n");
  r = xsa("prepare --input corpus --out x4 --vocab-dir novocab --quiet");
  EXPECT_NE(r.err.find("scripts/get_data.sh"), std::string::npos) << r.err;
  r = xsa("prepare --input corpus --out x5 --tokenizer byte --save-every -1 --quiet");
  EXPECT_EQ(r.err, "xsa: error: --save-every -1 must be at least 0 (seconds)\n");
  EXPECT_FALSE(fs::exists(work_dir() / "x5"));
  EXPECT_FALSE(fs::exists(work_dir() / "x3"));
  EXPECT_FALSE(fs::exists(work_dir() / "x4"));
}

// xsa bench runs end to end and writes the documented records (speed itself is not tested).
// --precision bf16: the step table with bf16 products, against the bf16 ceiling, and --gemm's
// per-product table of those products.
TEST_F(Cli, BenchInBf16) {
  if (!bf16_products_available(nullptr)) {
    Result r = xsa("bench --model tiny --steps 1 --warmup 0 --no-attention --precision bf16");
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err.rfind("xsa: error: --precision bf16: ", 0), 0u) << r.err;
    GTEST_SKIP() << "no bf16 products here: only the refusal was checked";
  }
  Result r =
      xsa("bench --model tiny --steps 1 --warmup 0 --threads 2 --no-attention --gemm "
          "--precision bf16 --json bench16.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("bf16 GEMM ceiling"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(oneDNN, bf16 inputs, fp32 accumulation)"), std::string::npos) << r.out;
  int steps = 0, gemm = 0;
  for (const auto& rec : nlohmann::json::parse(read_file(work_dir() / "bench16.json")))
    if (rec["kind"] == "step") {
      steps++;
      EXPECT_EQ(rec["precision"], "bf16");
    } else if (rec["kind"] == "gemm") {
      gemm++;
      EXPECT_EQ(rec["precision"], "bf16");
      EXPECT_GE(rec["ops"].size(), 5u);  // qkv, attn_proj, fc, mlp_proj, head
      for (const auto& op : rec["ops"]) EXPECT_GT(op["bwd_gflops"].get<double>(), 0) << op;
    }
  EXPECT_EQ(steps, 2);
  EXPECT_EQ(gemm, 1);
}

// (--config: the old name of --model, still taken.)
// The data side: the tokenizers and prepare at 1 and 2 threads, and the loader against training.
TEST_F(Cli, BenchMeasuresTheDataSide) {
  // (the loader against the tiny model's training: gpt2's takes minutes on a busy machine)
  Result r =
      xsa("bench --data --model tiny --data-text-mb 1 --data-gb 0.01 --threads 2 --json data.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("## The loader"), std::string::npos) << r.out;
  auto records = nlohmann::json::parse(read_file(work_dir() / "data.json"));
  int prepares = 0, loaders = 0;
  for (const auto& rec : records) {
    if (rec["kind"] == "prepare") {
      prepares++;
      EXPECT_GT(rec["prepare_mbs"].get<double>(), 0);
      // efficiency: the median over rounds of prepare ÷ (the tokenizer alone on 1 thread, in the
      // same round, × threads)
      std::vector<double> ratios;
      for (const auto& round : rec["rounds"])
        ratios.push_back(
            round["prepare_mbs"].get<double>() /
            (round["tokenizer_1_thread_mbs"].get<double>() * rec["threads"].get<double>()));
      ASSERT_EQ(ratios.size(), 5u) << rec;
      std::sort(ratios.begin(), ratios.end());
      EXPECT_NEAR(rec["efficiency"].get<double>(), ratios[2], 1e-9) << rec;
      EXPECT_EQ(rec["efficiency_min"].get<double>(), ratios.front());
      EXPECT_EQ(rec["efficiency_max"].get<double>(), ratios.back());
    } else if (rec["kind"] == "loader") {
      loaders++;
      // Shuffled windows out of a memory map outrun even the tiny model's training by far.
      EXPECT_EQ(rec["model"], "tiny");
      EXPECT_GT(rec["served_tokens_per_s"].get<double>(),
                100 * rec["train_tokens_per_s"].get<double>());
    }
  }
  EXPECT_EQ(prepares, 4);  // gpt2 and byte, 1 and 2 threads
  EXPECT_EQ(loaders, 1);
}

TEST_F(Cli, BenchWritesItsRecords) {
  Result r =
      xsa("bench --config tiny --steps 1 --warmup 0 --threads 1 --attn-T 64,130 --attn-D 16 "
          "--json bench.json --csv bench.csv");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("| tiny | sa |"), std::string::npos) << r.out;
  auto records = nlohmann::json::parse(read_file(work_dir() / "bench.json"));
  int steps = 0, attention = 0, ratios = 0;
  for (const auto& rec : records) {
    if (rec["kind"] == "step") {
      steps++;
      for (const char* key : {"config", "attn", "ms_median", "ms_min", "ms_max", "tokens_per_s",
                              "gflops", "gemm_ceiling_gflops", "gemm_ceiling_round_min_gflops",
                              "gemm_ceiling_round_max_gflops", "peak_mb"})
        EXPECT_TRUE(rec.contains(key)) << key;
      // One step per arm: one round of the ceiling, whose rate is the ceiling itself.
      EXPECT_GT(rec["gemm_ceiling_round_min_gflops"].get<double>(), 0);
      // (the same timings summed in another order: within a sum's bound in float64)
      EXPECT_NEAR(
          rec["gemm_ceiling_round_min_gflops"].get<double>(),
          rec["gemm_ceiling_gflops"].get<double>(),
          test::sum_error(64, test::kDoubleRoundoff) * rec["gemm_ceiling_gflops"].get<double>());
      EXPECT_EQ(rec["gemm_ceiling_round_min_gflops"], rec["gemm_ceiling_round_max_gflops"]);
    } else if (rec["kind"] == "attention") {
      attention++;
      for (const char* key :
           {"D", "T", "pass", "attn", "ms_median", "gflops", "share_of_fma_peak", "extra_mb"})
        EXPECT_TRUE(rec.contains(key)) << key;
      EXPECT_EQ(rec["D"], 16);
    } else if (rec["kind"] == "ratio") {
      ratios++;
      EXPECT_TRUE(rec.contains("what") && rec.contains("value"));
    }
  }
  EXPECT_EQ(steps, 2);
  EXPECT_EQ(attention, 8);  // 2 lengths × fwd, fwdbwd × SA, XSA
  EXPECT_EQ(ratios, 5);
  EXPECT_NE(read_file(work_dir() / "bench.csv").find("kind,"), std::string::npos);
  r = xsa("bench --model huge");
  EXPECT_EQ(r.err,
            "xsa: error: --model huge is not known (expected tiny, demo, small, gpt2 or all)\n");
}

// Decoding alone reports no share of the FMA peak, so it does not measure one (the machine record
// says null); the step table does.
TEST_F(Cli, BenchMeasuresTheFmaPeakOnlyForTablesThatUseIt) {
  Result r = xsa(
      "bench --config tiny --decode --no-steps --no-attention --steps 1 --threads 1 --json d.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("FMA peak"), std::string::npos) << r.out;
  auto records = nlohmann::json::parse(read_file(work_dir() / "d.json"));
  ASSERT_EQ(records[0]["kind"], "machine");
  EXPECT_TRUE(records[0]["fma_peak_gflops"].is_null());
  r = xsa("bench --config tiny --steps 1 --warmup 0 --no-attention --threads 1 --json s.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("FMA peak"), std::string::npos) << r.out;
  records = nlohmann::json::parse(read_file(work_dir() / "s.json"));
  EXPECT_GT(records[0]["fma_peak_gflops"].get<double>(), 0);
}

// report.html is a view of report.json: a folder in its way costs the page (one line on stderr),
// not the comparison's results nor its exit status; the same command then writes it.
TEST_F(Cli, CompareKeepsItsResultsWhenReportHtmlCannotBeWritten) {
  fs::create_directories(work_dir() / "cmp_html/report.html/in-the-way");
  const std::string command =
      "compare --data data.txt --preset tiny --steps 4 --val-every 2 --seeds 1 --threads 1 "
      "--out cmp_html";
  Result r = xsa(command + " --quiet");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::is_regular_file(work_dir() / "cmp_html/report.json"));
  EXPECT_NE(read_file(work_dir() / "cmp_html/report.md").find("| xsa | 1 |"), std::string::npos);
  EXPECT_NE(r.err.find("xsa: warning: cmp_html/report.html not written ("), std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  fs::remove_all(work_dir() / "cmp_html/report.html");
  r = xsa(command);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("seed 1: finished earlier"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_regular_file(work_dir() / "cmp_html/report.html"));
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
}

// --profile: every kernel entry a step calls, timed; the work behind each rate counted from the
// entry's arguments (here checked for attention against the model's own shape: 2 layers, T 64,
// 4 heads of 16, batch 4, the causal T(T+1)/2 pairs), and the entries' time within the step's.
TEST_F(Cli, BenchProfilesAStep) {
  Result r = xsa(
      "bench --profile --model tiny --attn xsa --steps 2 --warmup 1 --threads 1 --json prof.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("| attention_backward | backward | 2 |"), std::string::npos) << r.out;
  double in_ops = 0, step_ms = 0;
  std::map<std::string, nlohmann::json> ops;
  for (const auto& rec : nlohmann::json::parse(read_file(work_dir() / "prof.json")))
    if (rec["kind"] == "profile") {
      ops[rec["op"]] = rec;
      in_ops += rec["ms_per_step"].get<double>();
    } else if (rec["kind"] == "profile_step") {
      step_ms = rec["ms_per_step"].get<double>();
    }
  for (const char* op : {"matmul_forward", "matmul_backward", "attention_forward",
                         "attention_backward", "layernorm_forward", "adamw_update"})
    EXPECT_TRUE(ops.count(op)) << op;
  EXPECT_LE(in_ops, step_ms * (1 + 1e-9));
  const double pairs = 64.0 * 65 / 2, per_product = 2 * pairs * 16 * 4 * 4 * 2;  // × layers
  const auto flops = [&](const char* op) {
    return ops[op]["gflops"].get<double>() * 1e9 * ops[op]["ms_per_step"].get<double>() / 1e3;
  };
  EXPECT_NEAR(flops("attention_forward"), 2 * per_product, 1e-9 * per_product);
  EXPECT_NEAR(flops("attention_backward"), 5 * per_product, 1e-9 * per_product);
  r = xsa("bench --profile --model tiny --attn xsa+bogus");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err.rfind("xsa: error: --attn", 0), 0u) << r.err;
}

// On a CPU that OpenBLAS does not recognise it runs generic kernels; xsa restarts itself with
// OPENBLAS_CORETYPE set from the CPU's features (simulated here by a library that reports
// Prescott).
TEST_F(Cli, CorrectsAMisdetectedBlasCore) {
  if (xsa::best_blas_core_for_cpu().empty())
    GTEST_SKIP() << "this CPU has no AVX2: nothing to correct towards";
  Result r = xsa("bench --no-steps --no-attention --model tiny");
  EXPECT_EQ(r.out.find("set by xsa"), std::string::npos) << "no correction without misdetection";
  std::string cmd = std::string("env -u OPENBLAS_CORETYPE LD_PRELOAD=") + XSA_FAKE_CORE_LIB;
  fs::path out = work_dir() / "blas.txt";
  std::system(
      (cmd + " " + XSA_BINARY + " bench --no-steps --no-attention --config tiny > " + out.string())
          .c_str());
  EXPECT_NE(read_file(out).find("set by xsa from the CPU's features; OpenBLAS detected Prescott"),
            std::string::npos)
      << read_file(out);
}

TEST_F(Cli, CompareAndAnalyze) {
  Result r =
      xsa("compare --data data.txt --preset tiny --steps 6 --val-every 3 --seeds 2 --threads 1 "
          "--out cmp --quiet");
  ASSERT_EQ(r.status, 0) << r.err;
  auto report = nlohmann::json::parse(read_file(work_dir() / "cmp/report.json"));
  EXPECT_EQ(report["arms"].size(), 4u);
  EXPECT_EQ(report["summary"][1]["variant"], "xsa");
  EXPECT_NE(read_file(work_dir() / "cmp/report.md").find("| xsa | 2 |"), std::string::npos);
  r = xsa("analyze --ckpt cmp/arms/xsa-seed1 --batches 1 --threads 1 --json bias.json --plot bias");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("| 1 | 3 | xsa |"), std::string::npos) << r.out;
  auto heads = nlohmann::json::parse(read_file(work_dir() / "bias.json"));
  ASSERT_EQ(heads.size(), 8u);  // 2 layers x 4 heads
  for (const char* key :
       {"layer", "head", "cos_yv", "cos_zv", "self_weight", "cos_vv", "cos_y_vj", "own_lean"})
    EXPECT_TRUE(heads[0].contains(key)) << key;
  EXPECT_TRUE(fs::exists(work_dir() / "bias.svg"));
  // Bad input: one line each.
  r = xsa("compare --data data.txt --preset tiny --variants sa,gated --out cmp2");
  EXPECT_EQ(
      r.err,
      "xsa: error: --variants gated is not known (sa, xsa, xsa-gated, xsa-gated-one, "
      "xsa-lastN, xsa-firstN, xsa-layers-0.2.5, gated-attn, value-residual, no-self; then "
      "+sink, +gated-attn, +value-residual, +no-self, +qk-norm, +value-embed in any order)\n");
  r = xsa("compare --data data.txt --preset tiny --out cmp --quiet");
  EXPECT_EQ(r.err,
            "xsa: error: cmp: already holds a report of another comparison; pass --force to "
            "replace it, or choose another --out\n");
  // The same comparison with more seeds extends the report: seeds 1 and 2 are taken, 3 trains.
  r =
      xsa("compare --data data.txt --preset tiny --steps 6 --val-every 3 --seeds 3 --threads 1 "
          "--out cmp");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("seed 2: finished earlier"), std::string::npos) << r.out;
  EXPECT_EQ(nlohmann::json::parse(read_file(work_dir() / "cmp/report.json"))["arms"].size(), 6u);
  r = xsa("compare --data data.txt --layers 48 --embd 8192 --heads 64 --out cmp_huge");
  EXPECT_NE(r.err.find("GB are available"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
  r = xsa("compare --data data.txt --preset huge");
  EXPECT_EQ(r.err, "xsa: error: --preset huge is not known (demo, recipe, tiny)\n");
}

// The main job's preset compares each variant at its own tuned rate (best against best); a rate
// given (--lr, or a variant's own @RATE) compares at that rate instead; the table shows each rate.
TEST_F(Cli, TheDemoPresetTunesEachVariantsRate) {
  const std::string demo =  // the preset's rates and seeds on a small model
      "compare --data data.txt --preset demo --layers 1 --embd 32 --heads 2 --seq-len 32 "
      "--batch 4 --steps 4 --val-every 2 --seeds 2 --threads 1 --quiet --out ";
  Result r = xsa(demo + "demo_tuned");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(read_file(work_dir() / "demo_tuned/report.json"));
  ASSERT_TRUE(j["lr_tuning"].is_object());
  EXPECT_EQ(j["lr_tuning"]["grid"], nlohmann::json({2e-3, 4e-3, 8e-3}));
  for (const auto& s : j["summary"])
    EXPECT_EQ(s["lr"], j["lr_tuning"]["chosen"][s["variant"] == "sa" ? 0 : 1]);
  EXPECT_TRUE(fs::exists(work_dir() / "demo_tuned/tune/lr-0.004/report.json"));
  EXPECT_NE(read_file(work_dir() / "demo_tuned/report.md").find("| variant | seeds | lr |"),
            std::string::npos);
  r = xsa(demo + "demo_shared --lr 3e-3");
  ASSERT_EQ(r.status, 0) << r.err;
  j = nlohmann::json::parse(read_file(work_dir() / "demo_shared/report.json"));
  EXPECT_TRUE(j["lr_tuning"].is_null());
  for (const auto& a : j["arms"]) EXPECT_EQ(a["lr"], 3e-3);
  r = xsa(demo + "demo_own --variants sa,xsa@8e-3");
  ASSERT_EQ(r.status, 0) << r.err;
  j = nlohmann::json::parse(read_file(work_dir() / "demo_own/report.json"));
  EXPECT_TRUE(j["lr_tuning"].is_null());
  EXPECT_EQ(j["summary"][0]["lr"], 4e-3);  // the preset's --lr
  EXPECT_EQ(j["summary"][1]["lr"], 8e-3);
  EXPECT_EQ(xsa("compare --data data.txt --eval-batches 4 --out x").err,
            "xsa: error: --eval-batches is gone: every arm is now scored on every window of each "
            "set (--score-tokens caps it)\n");
}

// Time that nothing else can move: a comparison whose process is stopped (SIGSTOP) three times for
// a second while its arms train gives the same equal-time figures as one without a pause, within
// the machine's noise (their wall-clock totals would move by seconds against a 1-second run), and
// counts the paused steps as slow.
TEST_F(Cli, APauseMovesNoTimingFigure) {
  const std::string args =
      " compare --data data.txt --preset tiny --steps 200 --val-every 20 --seeds 2 --threads 1 "
      "--quiet --out ";
  ASSERT_EQ(xsa(args + "unpaused").status, 0);
  write("pause.sh",
        std::string(XSA_BINARY) + args +
            "paused &\npid=$!\n"
            "until [ -s paused/arms/xsa-seed1/metrics.jsonl ]; do sleep 0.01; done\n"
            "for i in 1 2 3; do sleep 0.2; kill -STOP $pid; sleep 1; kill -CONT $pid; done\n"
            "wait $pid\n");
  const Result paused = test::run_command("bash pause.sh", work_dir());
  ASSERT_EQ(paused.status, 0) << paused.err;
  const auto a = nlohmann::json::parse(read_file(work_dir() / "unpaused/report.json"));
  const auto b = nlohmann::json::parse(read_file(work_dir() / "paused/report.json"));
  const auto &ea = a["summary"][1]["equal_loss"], &eb = b["summary"][1]["equal_loss"];
  EXPECT_NEAR(eb["delta_at_sa_time_mean"].get<double>(), ea["delta_at_sa_time_mean"].get<double>(),
              0.02);
  for (const char* speedup : {"step_speedup", "time_speedup", "mean_curve_time_speedup"})
    if (!ea[speedup].is_null() && !eb[speedup].is_null())
      EXPECT_NEAR(eb[speedup].get<double>() / ea[speedup].get<double>(), 1, 0.15) << speedup;
  EXPECT_NEAR(b["summary"][1]["overhead_vs_sa"].get<double>(),
              a["summary"][1]["overhead_vs_sa"].get<double>(), 0.15);
  for (size_t i = 0; i < a["arms"].size(); i++)
    EXPECT_NEAR(
        b["arms"][i]["tokens_per_s"].get<double>() / a["arms"][i]["tokens_per_s"].get<double>(), 1,
        0.3)
        << i;
  int slow = 0;
  for (const auto& arm : b["arms"]) slow += arm["slow_steps"].get<int>();
  EXPECT_GE(slow, 1) << "a paused step is counted";
  // The losses are the same bits: a pause changes no arithmetic.
  EXPECT_EQ(b["arms"][1]["val_loss"], a["arms"][1]["val_loss"]);
}

// The reproductions of issue 67's attack, each a clean run or one line now.
TEST_F(Cli, AttackReproductionsEndCleanly) {
  // A baseline with a suffix: the first variant is the baseline whatever its spelling.
  Result r =
      xsa("compare --data data.txt --preset tiny --steps 20 --seeds 1 --threads 1 --quiet "
          "--variants sa+qk-norm,xsa --out suffixed");
  ASSERT_EQ(r.status, 0) << r.err;
  auto report = nlohmann::json::parse(read_file(work_dir() / "suffixed/report.json"));
  EXPECT_EQ(report["summary"][0]["variant"], "sa+qk-norm");
  EXPECT_EQ(report["summary"][0]["verdict"], "baseline");
  EXPECT_TRUE(report["summary"][1]["delta_vs_sa"].is_object());
  r =
      xsa("sweep --data data.txt --preset tiny --steps 6 --seeds 1 --threads 1 --quiet "
          "--variants sa+qk-norm,xsa --param steps=4,6 --out suffixed_sweep");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(work_dir() / "suffixed_sweep/sweep.json"));
  // More layers than the attention table holds: one line, before any layer is touched.
  std::string items;
  for (int l = 0; l < 257; l++) items += l ? ",sa" : "sa";
  for (const std::string& args :
       {std::string("train --data data.txt --layers 300 --attn xsa-layers-299"),
        "train --data data.txt --layers 257 --attn " + items,
        std::string("train --data data.txt --layers 100000 --attn xsa"),
        std::string("compare --data data.txt --layers 100000 --variants sa,xsa-last100000")}) {
    r = xsa(args + " --out too_deep");
    EXPECT_EQ(r.status, 1) << args;
    EXPECT_EQ(count_of(r.err, "\n"), 1) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("--layers"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("256"), std::string::npos) << r.err;
  }
  // One model spelled two ways: refused, not compared with itself.
  r =
      xsa("compare --data data.txt --preset tiny --variants sa,xsa+sink+no-self,xsa+no-self+sink "
          "--out twice");
  EXPECT_EQ(r.err,
            "xsa: error: --variants xsa+sink+no-self and xsa+no-self+sink are the same model; list "
            "it once\n");
  r = xsa("compare --data data.txt --preset tiny --variants sa,sa+qk-norm --qk-norm --out twice");
  EXPECT_EQ(r.err,
            "xsa: error: --variants sa and sa+qk-norm are the same model (--qk-norm gives it to "
            "every variant); list it once\n");
  // A resume on other data of the same size, or on its file rewritten: refused, the file named.
  ASSERT_EQ(xsa("train --data data.txt " + kSmall + " --steps 4 --out same_size").status, 0);
  std::string other = read_file(work_dir() / "data.txt");
  std::reverse(other.begin(), other.end());
  write("other.txt", other);
  r = xsa("train --resume same_size --data other.txt --steps 6");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err.rfind("xsa: error: other.txt", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(": not the data the checkpoint "), std::string::npos) << r.err;
  EXPECT_EQ(count_of(r.err, "\n"), 1) << r.err;
  const std::string data = read_file(work_dir() / "data.txt");
  write("data.txt", other);
  r = xsa("train --resume same_size --steps 6");
  EXPECT_NE(r.err.find("data.txt"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(": not the data the checkpoint "), std::string::npos) << r.err;
  write("data.txt", data);
  r = xsa("train --resume same_size --steps 6");
  EXPECT_EQ(r.status, 0) << r.err;
}

// A symbolic link where a command's own file or folder goes (its output, the output's .partial
// twin, a lock file) is refused in one line and never written through: every command that
// writes, each facing a link to a folder or file it does not own, which stays as it was.
TEST_F(Cli, NothingIsWrittenThroughALink) {
  const fs::path w = work_dir();
  fs::create_directories(w / "victim");
  std::ofstream(w / "victim/precious.txt") << "keep me";
  std::ofstream(w / "victim.txt") << "keep me too";
  write("small.jsonl", "{\"text\": \"a short document\"}\n{\"text\": \"another one\"}\n");
  auto untouched = [&](const std::string& what) {
    EXPECT_EQ(read_file(w / "victim/precious.txt"), "keep me") << what;
    EXPECT_EQ(std::distance(fs::directory_iterator(w / "victim"), fs::directory_iterator()), 1)
        << what;
    EXPECT_EQ(read_file(w / "victim.txt"), "keep me too") << what;
  };
  auto refused = [&](const std::string& args, const std::string& link) {
    const Result r = xsa(args);
    EXPECT_EQ(r.status, 1) << args << "\n" << r.err;
    EXPECT_EQ(r.err, "xsa: error: " + link +
                         ": is a symbolic link; xsa does not write through links (remove it, or "
                         "choose another path)\n")
        << args;
    untouched(args);
  };
  auto link = [&](const std::string& target, const std::string& name) {
    fs::remove_all(w / name);
    fs::create_symlink(target, w / name);
  };
  const std::string prepare = "prepare --input small.jsonl --tokenizer byte --val-fraction 0 ";
  link("victim", "o.partial");  // the 67th issue's reproduction: it emptied victim/
  refused(prepare + "--out o", "o.partial");
  fs::remove(w / "o.partial");
  link("victim.txt", "o.lock");
  refused(prepare + "--out o", "o.lock");
  fs::remove(w / "o.lock");
  link("nowhere", "o");  // a dangling link as the output: said first, not at the final rename
  refused(prepare + "--out o", "o");
  fs::remove(w / "o");
  link("victim", "tok");
  refused("tokenizer train --input data.txt --vocab 512 --out tok", "tok");
  fs::remove(w / "tok");
  // train: its run folder, and a resumed run's lock.
  link("victim", "run_link");
  refused("train --data data.txt " + kSmall + " --steps 2 --out run_link", "run_link");
  fs::remove(w / "run_link");
  ASSERT_EQ(
      xsa("train --data data.txt " + kSmall + " --arch gpt2 --attn sa --steps 2 --out run_locked")
          .status,
      0);
  link(fs::absolute(w / "victim.txt").string(), "run_locked/.lock");
  refused("train --resume run_locked --steps 4", "run_locked/.lock");
  fs::remove(w / "run_locked/.lock");
  // compare and sweep: the report folder, and its lock.
  link("victim", "cmp_link");
  refused("compare --data data.txt --preset tiny --steps 2 --seeds 1 --out cmp_link", "cmp_link");
  fs::remove(w / "cmp_link");
  fs::create_directories(w / "cmp_locked");
  link(fs::absolute(w / "victim.txt").string(), "cmp_locked/.lock");
  refused("compare --data data.txt --preset tiny --steps 2 --seeds 1 --out cmp_locked",
          "cmp_locked/.lock");
  link("victim", "sweep_link");
  refused("sweep --data data.txt --preset tiny --steps 2 --param steps=2,3 --out sweep_link",
          "sweep_link");
  fs::remove(w / "sweep_link");
  // export to a folder: refused; a file (llm.c's, eval's --json) replaces the link itself.
  link("victim", "hf_link");
  refused("export hf run_locked hf_link", "hf_link");
  fs::remove(w / "hf_link");
  link("victim.txt", "model.bin");
  Result r = xsa("export llmc run_locked model.bin");  // it exists: asked first
  EXPECT_EQ(r.err, "xsa: error: model.bin: already exists; pass --force to replace it\n");
  untouched("export llmc without --force");
  r = xsa("export llmc run_locked model.bin --force");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(fs::is_symlink(w / "model.bin"));
  untouched("export llmc");
  link("victim.txt", "e.json");
  r =
      xsa("eval --ckpt run_locked --data data.txt --threads 1 --batch 4 --val-batches 1 --json "
          "e.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(fs::is_symlink(w / "e.json"));
  untouched("eval --json");
}

// The parser and the model's construction driven by random options (a property test): whatever
// values and combinations, `xsa train --dry-run` and `xsa compare --dry-run` end cleanly or with
// one line on stderr, never by a signal. Values are drawn from each option's edges (0, -1, its
// maximum and one past it, huge, not a number) and ordinary ones; attention specs from the
// grammar's pieces, layer lists of every length. Each command runs with its address space limited
// (4 GB), so that an allocation a check let through fails as bad_alloc rather than swapping;
// under AddressSanitizer (scripts/check.sh) a failed allocation throws instead.
TEST_F(Cli, RandomOptionsEndCleanlyOrInOneLine) {
  Rng rng(20261207);
  auto pick = [&](const std::vector<std::string>& pool) {
    return pool[rng.next_u64() % pool.size()];
  };
  const std::vector<std::string> counts = {
      "-1",         "0",    "1",   "2",   "3",     "4",     "7",       "8",
      "16",         "255",  "256", "257", "65536", "65537", "1048576", "1048577",
      "2147483648", "1e30", "abc", "",    "nan",   "1.5"};
  const std::vector<std::string> reals = {"-1", "0",    "1e-3", "0.5", "1",
                                          "2",  "1e30", "nan",  "inf", "x"};
  const std::vector<std::string> pieces = {"sa",
                                           "xsa",
                                           "xsa-gated",
                                           "xsa-gated-one",
                                           "xsa-last1",
                                           "xsa-last300",
                                           "xsa-first2",
                                           "xsa-layers-0.1",
                                           "xsa-layers-299",
                                           "gated-attn",
                                           "value-residual",
                                           "no-self",
                                           "bogus",
                                           ""};
  const std::vector<std::string> options = {"sink",    "gated-attn", "value-residual",
                                            "no-self", "qk-norm",    "x"};
  auto spec = [&] {
    const int items = rng.next_u64() % 4 == 0 ? (int)(rng.next_u64() % 300) : 1;
    std::string s;
    for (int i = 0; i < items; i++) {
      s += (i ? "," : "") + pick(pieces);
      for (int o = (int)(rng.next_u64() % 3); o > 0; o--) s += "+" + pick(options);
    }
    return s;
  };
  const std::vector<std::pair<std::string, const std::vector<std::string>*>> numeric = {
      {"--layers", &counts},     {"--heads", &counts},
      {"--kv-heads", &counts},   {"--embd", &counts},
      {"--seq-len", &counts},    {"--batch", &counts},
      {"--steps", &counts},      {"--val-batches", &counts},
      {"--val-every", &counts},  {"--total-batch-tokens", &counts},
      {"--warmup", &counts},     {"--lr", &reals},
      {"--rope-theta", &reals},  {"--grad-clip", &reals},
      {"--weight-decay", &reals}};
  // Under AddressSanitizer (GCC says so with __SANITIZE_ADDRESS__, clang 14 only through
  // __has_feature) a ulimit -v leaves no room for its shadow memory: its allocator refuses instead.
#if defined(__SANITIZE_ADDRESS__)
#define XSA_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define XSA_UNDER_ASAN 1
#endif
#endif
#if defined(XSA_UNDER_ASAN)
  const std::string limit = "ASAN_OPTIONS=allocator_may_return_null=1 ";
#else
  const std::string limit = "ulimit -v 4000000; ";
#endif
  int ran = 0, refused = 0;
  for (int i = 0; i < 240; i++) {
    const bool compare = i % 4 == 3;
    std::string args =
        compare ? "compare --variants sa," + pick(pieces) : "train --attn '" + spec() + "'";
    for (int k = (int)(rng.next_u64() % 6); k > 0; k--) {
      const auto& [flag, pool] = numeric[rng.next_u64() % numeric.size()];
      args += " " + flag + " '" + pick(*pool) + "'";
    }
    const std::string command = limit + XSA_BINARY + " " + args +
                                " --data data.txt --dry-run --threads 1 --quiet --out dry";
    write("dry.sh", command + "\n");
    const Result r = test::run_command("bash dry.sh", work_dir());
    ASSERT_NE(r.status, -1) << "killed by a signal: " << args;
    ASSERT_LT(r.status, 128) << "killed by a signal: " << args << "\n" << r.err;
    if (r.status == 0) {
      ran++;
      EXPECT_TRUE(r.err.empty()) << args << "\n" << r.err;
    } else {
      refused++;
      EXPECT_EQ(count_of(r.err, "\n"), 1) << args << "\n" << r.err;
      EXPECT_EQ(r.err.rfind("xsa: error: ", 0), 0u) << args << "\n" << r.err;
    }
    EXPECT_FALSE(fs::exists(work_dir() / "dry")) << "a dry run writes nothing: " << args;
  }
  // The draws reach both outcomes.
  EXPECT_GT(ran, 10);
  EXPECT_GT(refused, 10);
}

TEST_F(Cli, SweepRunsCompareForEachValue) {
  Result r =
      xsa("sweep --param seq-len=16,32 --data data.txt --preset tiny --steps 4 --val-every 2 "
          "--seeds 2 --threads 1 "
          "--out sw --quiet");
  ASSERT_EQ(r.status, 0) << r.err;
  auto rows = nlohmann::json::parse(read_file(work_dir() / "sw/sweep.json"));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1]["seq-len"], 32);
  auto inner = nlohmann::json::parse(read_file(work_dir() / "sw/seq-len-32/report.json"));
  EXPECT_EQ(rows[1]["delta_vs_sa_mean"], inner["summary"][1]["delta_vs_sa_mean"]);
  for (const char* key : {"time_speedup", "step_speedup", "delta_at_sa_time_mean"})
    EXPECT_EQ(rows[1][key], inner["summary"][1]["equal_loss"][key]) << key;
  // The interval, effect size and rank test of each value's report; Holm across the sweep's tests.
  EXPECT_EQ(rows[1]["delta_ci95"], inner["summary"][1]["delta_vs_sa"]["ci95"]);
  EXPECT_EQ(rows[1]["d_z"], inner["summary"][1]["delta_vs_sa"]["d_z"]);
  EXPECT_EQ(rows[1]["p_wilcoxon"], inner["summary"][1]["delta_vs_sa"]["p_wilcoxon"]);
  const std::vector<double> holm =
      holm_adjusted({rows[0]["p_value"].get<double>(), rows[1]["p_value"].get<double>()});
  EXPECT_DOUBLE_EQ(rows[0]["p_holm_sweep"].get<double>(), holm[0]);
  EXPECT_DOUBLE_EQ(rows[1]["p_holm_sweep"].get<double>(), holm[1]);
  EXPECT_EQ(rows[1]["overhead_vs_sa"], inner["summary"][1]["overhead_vs_sa"]);
  EXPECT_EQ(rows[1]["cos_yv_mean"], inner["summary"][1]["cos_yv_mean"]);
  EXPECT_EQ(rows[1]["sa_cos_yv_mean"], inner["summary"][0]["cos_yv_mean"]);
  double sum = 0;  // the summary's figure is the mean over the report's heads of that variant
  int heads = 0;
  for (const auto& h : inner["similarity_bias"])
    if (h["variant"] == "xsa") sum += h["cos_yv"].get<double>(), heads++;
  ASSERT_EQ(heads, 8);  // 2 layers x 4 heads
  EXPECT_NEAR(inner["summary"][1]["cos_yv_mean"].get<double>(), sum / heads, 1e-12);
  const std::string sweep_md = read_file(work_dir() / "sw/sweep.md");
  for (const char* section : {"## Equal loss and wall-clock", "## Similarity bias", "| 32 | xsa |",
                              "Δ bits per byte", "p (Holm, sweep)"})
    EXPECT_NE(sweep_md.find(section), std::string::npos) << section << "\n" << sweep_md;
  EXPECT_TRUE(fs::exists(work_dir() / "sw/delta_vs_seq-len.svg"));
  // Run again (an interrupted sweep resumed): every value's seeds are taken, nothing trains.
  r =
      xsa("sweep --param seq-len=16,32 --data data.txt --preset tiny --steps 4 --val-every 2 "
          "--seeds 2 --threads 1 --out sw");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(count_of(r.out, "finished earlier"), 4) << r.out;
  EXPECT_EQ(nlohmann::json::parse(read_file(work_dir() / "sw/sweep.json")), rows);
  r = xsa("sweep --param dropout=0.1 --data data.txt --preset tiny --out sw2");
  EXPECT_EQ(
      r.err,
      "xsa: error: --param dropout is not a sweepable option (seq-len, lr, embd, layers, "
      "heads, kv-heads, steps, batch, warmup, weight-decay, muon-lr, logit-softcap, precision)\n");
  r = xsa("sweep --param seq-len=16,abc --data data.txt --preset tiny --out sw3");
  EXPECT_EQ(r.err, "xsa: error: --param seq-len: value 'abc' is not a number\n");
  EXPECT_FALSE(fs::exists(work_dir() / "sw3/seq-len-16"))
      << "every value is checked before the first run";
}

// --tokens-per-step: every value's step holds the same tokens, its micro-batch and accumulation
// derived from its sequence length (at most --batch rows per micro-batch); a length that does not
// divide the tokens is refused before anything runs.
TEST_F(Cli, SweepHoldsTokensPerStep) {
  Result r =
      xsa("sweep --param seq-len=16,32,64 --tokens-per-step 512 --batch 8 --data data.txt --preset "
          "tiny --steps 2 --val-every 2 --threads 1 --out swt --quiet");
  ASSERT_EQ(r.status, 0) << r.err;
  auto rows = nlohmann::json::parse(read_file(work_dir() / "swt/sweep.json"));
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& [T, batch, accumulation] :
       {std::tuple{16, 8, 4}, std::tuple{32, 8, 2}, std::tuple{64, 8, 1}}) {
    auto run = nlohmann::json::parse(
        read_file(work_dir() / ("swt/seq-len-" + std::to_string(T) + "/report.json")))["run"];
    EXPECT_EQ(run["batch"], batch) << T;
    EXPECT_EQ(run["total_batch_tokens"], 512) << T;
    EXPECT_EQ(batch * accumulation * T, 512);
  }
  EXPECT_NE(read_file(work_dir() / "swt/sweep.md")
                .find("Every step 512 tokens: 16 → batch 8 × 4 accumulation; 32 → batch 8 × 2 "
                      "accumulation; 64 → batch 8 × 1 accumulation."),
            std::string::npos);
  r =
      xsa("sweep --param seq-len=16,48 --tokens-per-step 512 --data data.txt --preset tiny --out "
          "swt2");
  EXPECT_EQ(r.err,
            "xsa: error: --tokens-per-step 512 is not a multiple of --seq-len 48 × 1 process = 48: "
            "the nearest are 480 and 528\n");
  EXPECT_FALSE(fs::exists(work_dir() / "swt2/seq-len-16"));
  r = xsa("sweep --param batch=4,8 --tokens-per-step 512 --data data.txt --preset tiny --out swt3");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("do not combine"), std::string::npos) << r.err;
}

// The batch for a number of tokens per step: the largest divisor of the rows per process not above
// the cap.
TEST(RunConfig, BatchForStepTokens) {
  EXPECT_EQ(RunConfig::batch_for_step_tokens(16384, 64, 1, 16), 16);   // 256 rows: 16 × 16
  EXPECT_EQ(RunConfig::batch_for_step_tokens(16384, 4096, 1, 16), 4);  // 4 rows: one pass
  EXPECT_EQ(RunConfig::batch_for_step_tokens(16384, 1024, 2, 16), 8);  // 8 rows per process
  EXPECT_EQ(RunConfig::batch_for_step_tokens(16384, 256, 1, 48), 32);  // 64 rows: 32 × 2
  EXPECT_EQ(RunConfig::batch_for_step_tokens(15360, 256, 1, 16), 15);  // 60 rows: 15 × 4
  EXPECT_THROW(RunConfig::batch_for_step_tokens(16384, 48, 1, 16), Error);
  EXPECT_THROW(RunConfig::batch_for_step_tokens(0, 64, 1, 16), Error);
}

struct BadInput {
  const char* name;
  std::string args;
  std::string expected;  // a piece of the one-line message
};

// Each bad input: a non-zero exit and one line on stderr, `xsa: error: ` and the expected piece.
void expect_one_line_errors(const std::vector<BadInput>& cases) {
  for (const BadInput& c : cases) {
    SCOPED_TRACE(c.name);
    Result r = xsa(c.args);
    EXPECT_NE(r.status, 0);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("xsa: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << r.err;
  }
}

// xsa eval and xsa sample on a trained checkpoint, as a user runs them, and their bad input.
// The paper's suite from a folder of hub-format files, two checkpoints, the paired average; and
// compare --eval-suite adds the table to its report.
TEST_F(Cli, EvalSuiteAndCompareEvalSuite) {
  ASSERT_EQ(xsa("train --data data.txt " + kSmall + " --steps 6 --attn sa --out suite_sa").status,
            0);
  ASSERT_EQ(xsa("train --data data.txt " + kSmall + " --steps 6 --out suite_xsa").status, 0);
  write("paper/piqa_validation.jsonl",
        "{\"goal\": \"To open a jar\", \"sol1\": \"twist the lid\", \"sol2\": \"hit it\", "
        "\"label\": 0}\n{\"goal\": \"To dry\", \"sol1\": \"use water\", \"sol2\": \"a "
        "towel\", \"label\": 1}\n");
  write("paper/boolq.jsonl",
        "{\"passage\": \"It was the best of times.\", \"question\": \"was it\", \"label\": "
        "1}\n");
  write("paper/winogrande_dev.jsonl",
        "{\"sentence\": \"It was the _ of times.\", \"option1\": \"best\", \"option2\": "
        "\"worst\", \"answer\": \"1\"}\n");
  Result r =
      xsa("eval --ckpt suite_sa --ckpt suite_xsa --suite paper --dir paper --threads 1 "
          "--json suite.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(
      r.out.find(
          "| checkpoint | boolq (acc) | piqa (acc / acc_norm) | winogrande (acc) | average |"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("| average | 4 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("On average"), std::string::npos) << r.out;
  for (const char* missing : {"arc_easy: no file", "hellaswag: no file", "lambada: no file"})
    EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
  const nlohmann::json j = nlohmann::json::parse(read_file(work_dir() / "suite.json"));
  int averages = 0;
  for (const auto& rec : j) averages += rec["task"] == "paper_average";
  EXPECT_EQ(averages, 2);
  // A file of the folder whose fields match no task: refused, its fields named.
  write("paper_bad/weird.jsonl", "{\"prompt\": \"p\", \"target\": \"t\"}\n");
  r = xsa("eval --ckpt suite_sa --suite paper --dir paper_bad");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("weird.jsonl: its records' fields (prompt, target) match no known task"),
            std::string::npos)
      << r.err;
  // Bad suite arguments: one line each.
  r = xsa("eval --ckpt suite_sa --suite paper");
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.err, "xsa: error: --suite and --dir go together: --suite paper --dir TASKS/\n");
  r = xsa("eval --ckpt suite_sa --suite other --dir paper");
  EXPECT_EQ(r.err, "xsa: error: --suite 'other' is not known (expected paper)\n");
  const std::string compare_args = "compare --data data.txt " + kSmall +
                                   " --steps 4 --seeds 2 --eval-suite paper --out suite_cmp";
  r = xsa(compare_args);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(read_file(work_dir() / "suite_cmp" / "report.md").find("## Downstream tasks"),
            std::string::npos);
  const std::string whole = read_file(work_dir() / "suite_cmp" / "eval_suite.json");
  const nlohmann::json e = nlohmann::json::parse(whole);
  EXPECT_EQ(e["arms"].size(), 4u);
  EXPECT_EQ(e["against_sa"][0]["against"], "sa seed 1");
  EXPECT_EQ(e["against_sa"][1]["arm"], "xsa seed 2");
  // Interrupted after seed 1: the rerun takes seed 1 from its file and scores its saved arms.
  fs::remove(work_dir() / "suite_cmp" / "report.json");
  fs::remove(work_dir() / "suite_cmp" / "seed-2.json");
  r = xsa(compare_args);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_file(work_dir() / "suite_cmp" / "eval_suite.json"), whole);
}

// bf16 where the CPU lacks it: oneDNN held to AVX2 stands in for such a CPU.
TEST_F(Cli, Bf16WithoutTheInstructionsIsOneLine) {
  Result r = test::run_command("DNNL_MAX_CPU_ISA=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 " +
                                   std::string(XSA_BINARY) + " train --data data.txt " + kSmall +
                                   " --steps 2 --precision bf16 --out nobf16b",
                               work_dir());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err.rfind("xsa: error: --precision bf16: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(work_dir() / "nobf16b"));
  r = xsa("train --data data.txt " + kSmall + " --steps 2 --precision fp16 --out nofp16");
  EXPECT_EQ(r.err, "xsa: error: --precision fp16 is not known (fp32 or bf16)\n");
}

// --precision bf16 in every command that runs a model, and precision as what compare and sweep
// vary: twins in fp32 and bf16 from the same weights and batches, their paired difference.
TEST_F(Cli, PrecisionInCompareSweepEvalAndSample) {
  if (!bf16_products_available(nullptr)) GTEST_SKIP() << "no bf16 products on this CPU";
  Result r =
      xsa("compare --data data.txt --preset tiny --steps 6 --val-every 3 --threads 1 --quiet "
          "--variants sa,xsa,sa@bf16,xsa@bf16 --out cp16");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto report = nlohmann::json::parse(read_file(work_dir() / "cp16/report.json"));
  const auto& arms = report["arms"];
  ASSERT_EQ(arms.size(), 8u);  // 4 variants × 2 seeds
  for (int seed = 0; seed < 2; seed++)
    for (int k = 1; k < 4; k++) {
      const auto &a = arms[4 * seed + k], &sa = arms[4 * seed];
      EXPECT_EQ(a["init_hash"], sa["init_hash"]) << a["variant"];
      EXPECT_EQ(a["batches_hash"], sa["batches_hash"]) << a["variant"];
    }
  auto val = [&](int i) { return arms[i]["val_loss"].get<double>(); };
  for (int k : {0, 1}) {  // each bf16 arm against its fp32 twin
    const auto& twin = report["summary"][2 + k]["vs_twin"];
    EXPECT_EQ(twin["against"], k ? "xsa" : "sa");
    const double d1 = val(2 + k) - val(k), d2 = val(6 + k) - val(4 + k);
    // (the report's arithmetic in float64 on the same numbers: a few roundings of them)
    const double u = test::kDoubleRoundoff;
    EXPECT_NEAR(twin["delta_mean"].get<double>(), (d1 + d2) / 2,
                8 * u * (std::fabs(d1) + std::fabs(d2) + val(k)));
    // (the same function of the same differences, each within a few roundings of the report's)
    EXPECT_NEAR(twin["p_value"].get<double>(), paired_t_test_p({d1, d2}), 1e-9);
    // The bf16 arm really ran in bf16 (not the same bits) and stays near its twin: within 2 %,
    // mixed precision's promise of the README (not a rounding bound: bf16 changes the training
    // itself; seen within 0.1 % here).
    EXPECT_NE(val(2 + k), val(k));
    EXPECT_LT(std::fabs(d1), 0.02 * val(k));
  }
  EXPECT_EQ(report["summary"][3]["vs_precision_sa"]["against"], "sa@bf16");
  EXPECT_TRUE(report["summary"][1]["vs_twin"].is_null());
  const std::string md = read_file(work_dir() / "cp16/report.md");
  EXPECT_NE(md.find("## Precision"), std::string::npos) << md;
  EXPECT_NE(md.find("| xsa@bf16 | xsa |"), std::string::npos) << md;
  r = xsa("compare --data data.txt --preset tiny --variants sa,xsa@fp16 --out cp16b");
  EXPECT_EQ(
      r.err,
      "xsa: error: --variants xsa@fp16: 'fp16' after @ is neither a precision (fp32 or bf16) nor a "
      "positive learning rate\n");
  r =
      xsa("compare --data data.txt --preset tiny --precision bf16 --variants sa,xsa,xsa@bf16 "
          "--out cp16b");
  EXPECT_NE(r.err.find("the run's --precision is already bf16"), std::string::npos) << r.err;
  r = xsa("compare --data data.txt --preset tiny --variants sa,sa@bf16@fp32 --out cp16b");
  EXPECT_NE(r.err.find("one precision per variant"), std::string::npos) << r.err;

  r =
      xsa("sweep --param precision=fp32,bf16 --data data.txt --preset tiny --steps 4 "
          "--val-every 2 --threads 1 --quiet --out sw16");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rows = nlohmann::json::parse(read_file(work_dir() / "sw16/sweep.json"));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1]["precision"], "bf16");
  const auto inner =
      nlohmann::json::parse(read_file(work_dir() / "sw16/precision-bf16/report.json"));
  EXPECT_EQ(inner["run"]["precision"], "bf16");
  EXPECT_EQ(rows[1]["delta_vs_sa_mean"], inner["summary"][1]["delta_vs_sa_mean"]);
  EXPECT_NE(read_file(work_dir() / "sw16/delta_vs_precision.svg").find(">bf16</text>"),
            std::string::npos);
  r = xsa("sweep --param precision=fp32,fp16 --data data.txt --preset tiny --out sw16b");
  EXPECT_EQ(r.err, "xsa: error: --param precision: value 'fp16' is not fp32 or bf16\n");

  // eval and sample on a compare arm, in both precisions.
  double loss[2];
  for (int b : {0, 1}) {
    r =
        xsa(fmt::format("eval --ckpt cp16/arms/xsa-seed1 --threads 1 --batch 4 --val-batches 4 "
                        "--precision {} --json val{}.json",
                        b ? "bf16" : "fp32", b));
    ASSERT_EQ(r.status, 0) << r.err;
    loss[b] =
        nlohmann::json::parse(read_file(work_dir() / fmt::format("val{}.json", b)))[0]["val_loss"]
            .get<double>();
  }
  EXPECT_NE(loss[1], loss[0]);
  // (bf16 products against fp32 ones on the same weights: within 1 %, the README's promise)
  EXPECT_LT(std::fabs(loss[1] - loss[0]), 0.01 * loss[0]);
  r =
      xsa("sample --ckpt cp16/arms/xsa-seed1 --prompt 'It was' --max-new-tokens 8 --threads 1 "
          "--precision bf16");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("It was", 0), 0u) << r.out;
  r = xsa("eval --ckpt cp16/arms/xsa-seed1 --precision fp16");
  EXPECT_EQ(r.err, "xsa: error: --precision fp16 is not known (fp32 or bf16)\n");
}

// The GPT-2 architecture through the commands: train, info, export to llm.c and back, eval of
// both the same, fine-tuning with --init-from (its step 0 is the source's model), and the refusals.
TEST_F(Cli, Gpt2ArchitectureImportExportAndInitFrom) {
  Result r = xsa("train --data data.txt " + kSmall + " --arch gpt2 --attn sa --steps 6 --out g2");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string info = xsa("info g2").out;
  EXPECT_NE(info.find("arch:        gpt2"), std::string::npos) << info;
  EXPECT_EQ(info.find("rope_theta"), std::string::npos) << "learned positions: no RoPE base";
  r = xsa("export llmc g2 g2.bin");
  ASSERT_EQ(r.status, 0) << r.err;
  r = xsa("import llmc g2.bin --out g2_back");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_file(work_dir() / "g2/ckpt_000006/model.safetensors").size(),
            read_file(work_dir() / "g2_back/ckpt_000000/model.safetensors").size());
  double loss[2];
  int i = 0;
  for (const char* run : {"g2", "g2_back"}) {
    r = xsa(std::string("eval --ckpt ") + run +
            " --data data.txt --threads 1 --batch 4 --val-batches 4 --json e.json");
    ASSERT_EQ(r.status, 0) << r.err;
    loss[i++] = nlohmann::json::parse(read_file(work_dir() / "e.json"))[0]["val_loss"];
  }
  EXPECT_EQ(loss[0], loss[1]) << "the same weights after a round trip through llm.c's file";
  // Fine-tuning as XSA from those weights; as SA its first validation is the source's own.
  r =
      xsa("train --data data.txt --init-from g2_back --attn sa --batch 4 --threads 1 --quiet "
          "--steps 2 --val-batches 2 --out ft_sa");
  ASSERT_EQ(r.status, 0) << r.err;
  r = xsa("eval --ckpt g2 --data data.txt --threads 1 --batch 4 --val-batches 2 --json e2.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NEAR(metrics("ft_sa")[0]["loss"].get<double>(),
              nlohmann::json::parse(read_file(work_dir() / "e2.json"))[0]["val_loss"],
              same_weights_bound(metrics("ft_sa")[0]["loss"].get<double>()));
  r =
      xsa("train --data data.txt --init-from g2_back --attn xsa-gated --seq-len 8 --batch 4 "
          "--threads 1 --steps 2 --out ft_xsa");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("new tensor(s) at their initial values"), std::string::npos) << r.out;
  // Refusals: one line each, nothing written.
  r = xsa("export llmc ft_xsa x.bin");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("llm.c computes standard attention"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(work_dir() / "x.bin"));
  r = xsa("export hf g2 hf_out");  // then its tensors truncated: one line, nothing written
  ASSERT_EQ(r.status, 0) << r.err;
  write("hf_bad/config.json", read_file(work_dir() / "hf_out/config.json"));
  write("hf_bad/model.safetensors", "short");
  r = xsa("import hf hf_bad --out not_made");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("hf_bad/model.safetensors: truncated"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(work_dir() / "not_made"));
  EXPECT_EQ(xsa("import hf hf_out --out hf_back").status, 0);
  r = xsa("import llmc data.txt --out not_made");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(work_dir() / "not_made"));
  r = xsa("train --data data.txt --init-from g2_back --embd 64 --out nope");
  EXPECT_NE(r.err.find("--embd 64 contradicts the checkpoint"), std::string::npos) << r.err;
  r = xsa("train --data data.txt --init-from g2_back --seq-len 64 --out nope");
  EXPECT_NE(r.err.find("is longer than the 16 learned positions"), std::string::npos) << r.err;
  r = xsa("export llmc g2 g2.bin");
  EXPECT_NE(r.err.find("already exists; pass --force"), std::string::npos) << r.err;
  // --force never clears a run before --init-from has been checked whole: not when the source lies
  // inside --out, not when the source does not fit the model (a gate the SA model has no place
  // for).
  const std::string before = read_file(work_dir() / "ft_sa/metrics.jsonl");
  r =
      xsa("train --data data.txt --init-from ft_sa --attn sa --batch 4 --threads 1 --steps 2 "
          "--out ft_sa --force");
  EXPECT_NE(r.err.find("lies inside --out ft_sa, which --force would clear"), std::string::npos)
      << r.err;
  r =
      xsa("train --data data.txt --init-from ft_xsa --attn sa --batch 4 --threads 1 --steps 2 "
          "--out ft_sa --force");
  EXPECT_NE(r.err.find("has no place in the model being trained"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(work_dir() / "ft_sa/metrics.jsonl"), before);
  EXPECT_TRUE(fs::exists(work_dir() / "ft_sa/ckpt_000002"));
  // A sweep checks each value against the checkpoint before the first run.
  r =
      xsa("sweep --data data.txt --init-from g2_back --param seq-len=8,32 --batch 4 --steps 2 "
          "--out sw_init");
  EXPECT_NE(r.err.find("--seq-len 32 is longer than the 16 learned positions"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(work_dir() / "sw_init/seq-len-8"));
  r = xsa("sweep --data data.txt --init-from g2_back --param layers=1,2 --out sw_init");
  EXPECT_NE(r.err.find("--param layers cannot vary with --init-from"), std::string::npos) << r.err;
  // import --force replaces the whole run: no later checkpoint of the old one shadows it.
  r = xsa("import llmc g2.bin --out ft_sa --force");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(list_checkpoints(work_dir() / "ft_sa").size(), 1u);
  EXPECT_FALSE(fs::exists(work_dir() / "ft_sa/metrics.jsonl"));
  r = xsa("export hf " + std::string("ev_missing") + " out_hf");
  EXPECT_EQ(r.status, 1);
}

TEST_F(Cli, EvalAndSample) {
  ASSERT_EQ(xsa("train --data data.txt " + kSmall + " --steps 6 --out ev").status, 0);
  write("mc.jsonl",
        "{\"context\": \"It was the best of\", \"choices\": [\"times\", \"xq\"], \"label\": 0}\n"
        "{\"context\": \"the age of\", \"choices\": [\"wisdom.\", \"zz\", \"times\"], \"label\": "
        "0}\n");
  write("hs.jsonl",
        "{\"ctx\": \"It was the\", \"endings\": [\"best\", \"a\", \"b\", \"c\"], \"label\": "
        "\"0\"}\n");
  write("lambada.jsonl", "{\"text\": \"it was the worst of times\"}\n");
  Result r = xsa(
      "eval --ckpt ev --task mc --file mc.jsonl --task hellaswag --file hs.jsonl --task lambada "
      "--file lambada.jsonl --data data.txt --threads 1 --json results.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("| mc | 2 |"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(read_file(work_dir() / "results.json"));
  ASSERT_EQ(j.size(), 4u);
  for (const char* key : {"task", "n", "acc", "acc_norm", "acc_mean_token"}) {
    EXPECT_TRUE(j[0].contains(key)) << key;
    EXPECT_TRUE(j[1].contains(key)) << key;
  }
  EXPECT_EQ(j[2]["task"], "lambada");
  EXPECT_TRUE(j[2].contains("ppl"));
  EXPECT_EQ(j[3]["task"], "val");
  // The checkpoint's own validation loss: training's last val pass saw the same windows.
  const nlohmann::json last_val = [&] {
    nlohmann::json v;
    for (const auto& m : metrics("ev"))
      if (m.value("split", "") == "val") v = m;
    return v;
  }();
  r = xsa("eval --ckpt ev --threads 1 --batch 4 --val-batches 8 --json val.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json v = nlohmann::json::parse(read_file(work_dir() / "val.json"))[0];
  EXPECT_NEAR(v["val_loss"].get<double>(), last_val["loss"].get<double>(),
              same_weights_bound(last_val["loss"].get<double>()));
  EXPECT_NEAR(v["bpb"].get<double>(), v["val_loss"].get<double>() / std::log(2.0),
              4 * test::kDoubleRoundoff * v["bpb"].get<double>());

  // Two checkpoints on the same examples: a row each, and the paired counts agree with their
  // accuracies (Δ acc · n = only the second right − only the first right).
  ASSERT_EQ(xsa("train --data data.txt " + kSmall + " --steps 6 --attn sa --out ev_sa").status, 0);
  r =
      xsa("eval --ckpt ev_sa --ckpt ev --task mc --file mc.jsonl --task lambada --file "
          "lambada.jsonl --threads 1 --json paired.json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("| checkpoint | task |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exact McNemar"), std::string::npos) << r.out;
  const nlohmann::json pj = nlohmann::json::parse(read_file(work_dir() / "paired.json"));
  ASSERT_EQ(pj.size(), 6u);  // 2 checkpoints × 2 tasks, then 2 paired records
  for (int t = 0; t < 2; t++) {
    const nlohmann::json &first = pj[t], &second = pj[2 + t], &pair = pj[4 + t];
    EXPECT_EQ(pair["task"], first["task"]);
    const int n = pair["n"].get<int>();
    EXPECT_NEAR(pair["delta_acc"].get<double>(),
                second["acc"].get<double>() - first["acc"].get<double>(),
                4 * test::kDoubleRoundoff);
    EXPECT_NEAR(pair["delta_acc"].get<double>() * n,
                pair["only_second_right"].get<int>() - pair["only_first_right"].get<int>(),
                4 * test::kDoubleRoundoff * n);
    EXPECT_GE(pair["p_mcnemar"].get<double>(), 0.0);
    EXPECT_LE(pair["p_mcnemar"].get<double>(), 1.0);
  }

  // A bad line stops the run, naming file and line; --skip-bad-lines counts it and goes on.
  write("bad.jsonl",
        "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"label\": 1}\n"
        "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"label\": 7}\n");
  r = xsa("eval --ckpt ev --task mc --file bad.jsonl --threads 1");
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.err,
            "xsa: error: bad.jsonl:2: label 7 is out of range for 2 choices (--skip-bad-lines "
            "leaves such lines out)\n");
  r = xsa("eval --ckpt ev --task mc --file bad.jsonl --threads 1 --skip-bad-lines");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("left out 1 bad line(s); the first: bad.jsonl:2:"), std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("| mc | 1 |"), std::string::npos) << r.out;

  // Sampling: the same seed gives the same text; streaming ends with a tokens/s line.
  const std::string sample = "sample --ckpt ev --prompt \"It was\" --max-new-tokens 30 --threads 1";
  Result a = xsa(sample + " --seed 5"), b = xsa(sample + " --seed 5"),
         c = xsa(sample + " --seed 6");
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(a.out.rfind("It was", 0), 0u) << a.out;
  EXPECT_GT(a.out.size(), std::string("It was").size());
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  EXPECT_NE(a.err.find("tokens/s"), std::string::npos) << a.err;
  write("prompt.txt", "It was");
  Result f =
      xsa("sample --ckpt ev --prompt-file prompt.txt --max-new-tokens 30 --threads 1 --seed 5");
  EXPECT_EQ(f.out, a.out) << "a prompt from a file is the same prompt";
  // Past the context of 16: the context shifts and generation goes on.
  r = xsa("sample --ckpt ev --prompt \"It\" --max-new-tokens 40 --threads 1 --temperature 0");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("context shifted"), std::string::npos) << r.err;

  // Checkpoint on data of another tokenizer: refused, naming both.
  fs::create_directories(work_dir() / "gpt2corpus");
  for (int i = 0; i < 10; i++)  // distinct: the split is drawn from each document's text
    write("gpt2corpus/doc" + std::to_string(i) + ".txt",
          "document " + std::to_string(i) + ": " + text_of(400));
  ASSERT_EQ(
      xsa("prepare --input gpt2corpus --tokenizer gpt2 --out gpt2shards --quiet --val-fraction 0.2 "
          "--vocab-dir " XSA_VOCAB_DIR)
          .status,
      0);
  const std::vector<BadInput> cases = {
      {"data of another tokenizer", "eval --ckpt ev --data gpt2shards",
       "gpt2shards/meta.json says tokenizer gpt2, which contradicts the byte tokenizer"},
      {"unknown task", "eval --ckpt ev --task arc --file mc.jsonl", "--task 'arc' is not known"},
      {"task without file", "eval --ckpt ev --task mc", "1 --task but 0 --file"},
      {"missing task file", "eval --ckpt ev --task mc --file none.jsonl",
       "none.jsonl: cannot open"},
      {"empty prompt", "sample --ckpt ev --prompt \"\"", "encodes to no tokens"},
      {"prompt past the context", "sample --ckpt ev --prompt \"" + text_of(17) + "\"",
       "the prompt is 17 tokens; the model's context is 16"},
      {"byte model without a prompt", "sample --ckpt ev", "give --prompt"},
      {"bad top-p", "sample --ckpt ev --prompt a --top-p 0", "--top-p 0 must be in (0, 1]"},
      {"missing prompt file", "sample --ckpt ev --prompt-file none.txt",
       "--prompt-file none.txt: no such file"},
  };
  expect_one_line_errors(cases);
}

TEST_F(Cli, BadInputGivesOneLineAndKeepsCheckpoints) {
  // A good run whose checkpoint must survive every failure below.
  ASSERT_EQ(xsa("train --data data.txt " + kSmall + " --steps 4 --out good").status, 0);
  const fs::path ckpt = work_dir() / "good/ckpt_000004";
  const std::string before = read_file(ckpt / "model.safetensors") +
                             read_file(ckpt / "optimizer.safetensors") +
                             read_file(ckpt / "trainer.json");
  write("short.txt", text_of(40));
  fs::create_directories(work_dir() / "adir");
  // Damaged copies of the good checkpoint.
  for (const char* name : {"truncated", "missing", "contradicted"}) {
    fs::remove_all(work_dir() / name);
    fs::copy(work_dir() / "good", work_dir() / name, fs::copy_options::recursive);
  }
  {
    fs::path p = work_dir() / "truncated/ckpt_000004/model.safetensors";
    std::string b = read_file(p);
    write_file_atomic(p, b.substr(0, b.size() / 2));
    p = work_dir() / "missing/ckpt_000004/model.safetensors";
    b = read_file(p);
    b.replace(b.find("transformer.ln_f.bias"), 13, "transformer.Q");
    write_file_atomic(p, b);
  }
  const std::vector<BadInput> cases = {
      {"missing data file", "train --data nothere.txt " + kSmall + " --out x1",
       "nothere.txt: no such file"},
      {"data is a folder without shards", "train --data adir " + kSmall + " --out x1",
       "adir: holds no token shards"},
      {"data shorter than a batch", "train --data short.txt " + kSmall + " --out x1",
       "short.txt: 40 tokens leave 23 for training"},
      {"C not divisible by H", "train --data data.txt --embd 30 --heads 4 --out x1",
       "--embd 30 is not divisible by --heads 4"},
      {"odd head dim", "train --data data.txt --embd 36 --heads 4 --out x1", "head dimension 9"},
      {"zero layers", "train --data data.txt --layers 0 --out x1",
       "--layers: 0 is outside [1, 256]"},
      {"unknown attention", "train --data data.txt --attn gated --out x1",
       "--attn gated is not known"},
      {"layer list of the wrong length",
       "train --data data.txt --layers 2 --attn sa,xsa,xsa --out x1", "lists 3 layers"},
      {"existing run without --resume", "train --data data.txt " + kSmall + " --steps 4 --out good",
       "already holds a run"},
      {"config contradicts the checkpoint", "train --resume good --layers 3 --steps 8",
       "--layers 3 contradicts"},
      {"attention contradicts the checkpoint", "train --resume good --attn sa --steps 8",
       "--attn sa contradicts"},
      {"truncated checkpoint", "train --resume truncated --steps 8",
       "model.safetensors: truncated"},
      {"checkpoint lacks a tensor", "train --resume missing --steps 8",
       "'transformer.ln_f.bias' is missing"},
      {"no checkpoint there", "info adir", "adir: holds no checkpoint"},
      // (loss or gradient norm, NaN or infinite: which comes first is rounding's choice)
      {"loss becomes NaN", "train --resume good --steps 8 --lr 1e30 --quiet", " became "},
      {"resume on other data", "train --resume good --data short.txt --steps 8", "short.txt"},
  };
  expect_one_line_errors(cases);
  EXPECT_EQ(before, read_file(ckpt / "model.safetensors") +
                        read_file(ckpt / "optimizer.safetensors") +
                        read_file(ckpt / "trainer.json"))
      << "a failed command changed the existing checkpoint";
  EXPECT_FALSE(fs::exists(work_dir() / "good/ckpt_000005")) << "the NaN run saved a checkpoint";
  EXPECT_FALSE(fs::exists(work_dir() / "x1/ckpt_000000"));
}

}  // namespace
}  // namespace xsa
