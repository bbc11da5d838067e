// Data-parallel training as a user runs it: `mpirun -np 2 xsa train ...` (as CI runs it: as root,
// oversubscribed on a small machine). A step split over processes or micro-batches is the same
// step to float rounding; the same split gives the same bits; ZeRO-1 changes nothing; a run
// resumes on another process count; ranks started differently are refused; a killed rank ends the
// job with its checkpoints intact.
//
// "The same step to float rounding": a step's gradient is a sum over the same rows in every split,
// in another order (per-process or per-micro-batch partial sums, then added). Taken from the same
// state, the two ways' losses agree within twice the forward chain's bound and their weights
// after the step within AdamW's response to the gradients' bound (tests/step_check.h), derived,
// for any summation order. Each step is checked from a shared checkpoint: over many steps two
// trajectories part as their roundings feed later steps, which no derivation bounds (here they
// were seen ~1e-8 apart after 20 steps). A row left out or counted twice moves the loss by ~1e-2.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "step_check.h"
#include "test_util.h"
#include "xsa/dist/comm.h"
#include "xsa/io/checkpoint.h"
#include "xsa/util/files.h"
#include "xsa/util/fmt.h"

namespace xsa {
namespace {

namespace fs = std::filesystem;

using Result = test::CommandResult;

fs::path work_dir() {
  static fs::path dir = test::temp_dir("distributed");
  return dir;
}

// The launch line of every test: two ranks on however many cores there are, allowed as root (CI),
// one thread each, no core binding (ctest runs other tests beside), and Open MPI's shared-memory
// transport without the kernel-assisted copy some containers forbid.
std::string mpirun(int np) {
  return fmt::format(
      "timeout 120 mpirun -np {} --oversubscribe --allow-run-as-root --bind-to none --mca "
      "btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS=1 ",
      np);
}

Result run(const std::string& command) {
  return test::run_command(command, work_dir());
}

// `xsa ARGS` in `np` processes (np 0: without mpirun).
Result xsa(int np, const std::string& args) {
  return run((np > 0 ? mpirun(np) : std::string()) + XSA_BINARY + " " + args);
}

const std::string kModel =
    "--data data.txt --layers 2 --heads 2 --embd 32 --seq-len 32 --lr 3e-3 --val-every 10 "
    "--val-batches 2 --threads 1 --quiet";

std::vector<double> losses(const fs::path& run_dir, bool validation = false) {
  std::vector<double> out;
  std::ifstream in(work_dir() / run_dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("split") == validation) out.push_back(j["loss"].get<double>());
  }
  return out;
}

bool same_bytes(const fs::path& a, const fs::path& b) {
  return read_file(work_dir() / a) == read_file(work_dir() / b);
}

// The record of `step` in a run's metrics (training, or validation with `validation`).
double loss_at(const fs::path& run_dir, int64_t step, bool validation = false) {
  std::ifstream in(work_dir() / run_dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("split") == validation && j["step"].get<int64_t>() == step)
      return j["loss"].get<double>();
  }
  ADD_FAILURE() << run_dir << " has no " << (validation ? "validation" : "training")
                << " record at step " << step;
  return NAN;
}

std::string ckpt(int64_t step) {
  return fmt::format("ckpt_{:06d}", step);
}

// kModel's shape and its step of 8 sequences: the chain of its sums (tests/bounds.h).
test::ModelChain model_chain() {
  ModelConfig cfg;
  cfg.n_layer = 2, cfg.n_head = 2, cfg.n_embd = 32, cfg.seq_len = 32;
  return test::model_chain(cfg, 8, 32);
}

// Step `step` taken from `from`'s checkpoint of step − 1 (the initial weights for step 1) by a run
// in `np` processes with `split` (batch options), into `out`; then against `from`'s own step:
// the training loss within twice the forward chain's bound, the weights within
// test::same_step's. The learning rate must be constant (kConstant): a run of `step` steps then
// takes the same steps as a longer one. Returns whether the two steps differ in any bit.
bool expect_same_step(const fs::path& from, int64_t step, int np, const std::string& split,
                      const std::string& model, const std::string& out, double lr) {
  fs::remove_all(work_dir() / out);
  fs::create_directories(work_dir() / out);
  std::string resume;
  if (step > 1) {
    fs::copy(work_dir() / from / ckpt(step - 1), work_dir() / out / ckpt(step - 1),
             fs::copy_options::recursive);
    resume = " --resume " + out;
  }
  const Result r =
      xsa(np, fmt::format("train {} --steps {} {} --out {}{}", model, step, split, out, resume));
  EXPECT_EQ(r.status, 0) << r.err;
  const test::ModelChain chain = model_chain();
  const double want = loss_at(from, step);
  EXPECT_NEAR(loss_at(out, step), want,
              2 * test::chain_error(chain.forward, test::kFloatRoundoff) * want)
      << out << ": training loss of step " << step;
  EXPECT_TRUE(test::same_step(step > 1 ? work_dir() / from / ckpt(step - 1) : fs::path(),
                              work_dir() / out / ckpt(step), work_dir() / from / ckpt(step), lr,
                              (int)step, chain))
      << out;
  return !same_bytes(fs::path(out) / ckpt(step) / "model.safetensors",
                     from / ckpt(step) / "model.safetensors");
}

// A constant learning rate (no warm-up, no decay), for the runs stepped from checkpoints.
const std::string kConstant = " --warmup 0 --min-lr-fraction 1";

class Distributed : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string text;
    Rng rng(7);
    const char* words[] = {"the", "cat", "sat",  "on",  "a",   "mat",   "and", "ran",
                           "to",  "see", "what", "dog", "was", "doing", "in",  "yard"};
    while (text.size() < 120000) text += std::string(words[rng.next_u64() % 16]) + " ";
    std::ofstream(work_dir() / "data.txt") << text;
  }
  void SetUp() override {
    if (!built_with_mpi()) GTEST_SKIP() << "xsa was built without MPI (libopenmpi-dev)";
  }
};

TEST_F(Distributed, TwoProcessesEqualOneProcessAndAccumulation) {
  // One step = 8 sequences of 32 tokens = 256 tokens: one process of 8 rows, two of 4, one with
  // two micro-batches of 4, two with two of 2; steps 1, 2, 10 and 20 of a 20-step run, each
  // taken from the one-process run's state before it.
  const std::string model = kModel + kConstant;
  ASSERT_EQ(xsa(0, "train " + model + " --steps 20 --batch 8 --ckpt-every 1 --out one").status, 0);
  bool differ = false;
  for (int64_t step : {1, 2, 10, 20}) {
    SCOPED_TRACE(testing::Message() << "step " << step);
    differ |= expect_same_step("one", step, 2, "--batch 4 --total-batch-tokens 256", model,
                               "two_" + std::to_string(step), 3e-3);
    differ |= expect_same_step("one", step, 0, "--batch 4 --total-batch-tokens 256", model,
                               "acc_" + std::to_string(step), 3e-3);
    differ |= expect_same_step("one", step, 2, "--batch 2 --total-batch-tokens 256", model,
                               "two_acc_" + std::to_string(step), 3e-3);
  }
  // Close but not bit-identical: the sums really run in another order.
  EXPECT_TRUE(differ);
  // The validation before any step: the same initial weights, evaluated over two processes.
  const double val0 = loss_at("one", 0, true);
  EXPECT_NEAR(loss_at("two_1", 0, true), val0,
              2 * test::chain_error(model_chain().forward, test::kFloatRoundoff) * val0);
}

TEST_F(Distributed, SameProcessCountGivesTheSameBitsAndRankZeroAloneSpeaks) {
  const std::string args = "train " + kModel + " --steps 12 --batch 4 --total-batch-tokens 256";
  Result r = xsa(2, args + " --out first --log-every 4");
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(xsa(2, args + " --out second").status, 0);
  EXPECT_EQ(losses("first"), losses("second"));
  EXPECT_TRUE(
      same_bytes("first/ckpt_000012/model.safetensors", "second/ckpt_000012/model.safetensors"));
  EXPECT_TRUE(same_bytes("first/ckpt_000012/optimizer.safetensors",
                         "second/ckpt_000012/optimizer.safetensors"));
  // Without --quiet rank 0 prints the header once, and says how the step is split: by default
  // one pass of every process (2 × 4 rows × 32 tokens). mpirun hands each rank a pseudo-terminal
  // even though the output goes to a file here: progress comes as whole lines, no '\r'.
  r = xsa(2, "train " + kModel.substr(0, kModel.size() - 8) +
                 " --steps 4 --batch 4 --log-every 2 --out loud");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find('\r'), std::string::npos) << r.out;
  size_t headers = 0;
  for (size_t at = 0; (at = r.out.find("xsa train:", at)) != std::string::npos; at++) headers++;
  EXPECT_EQ(headers, 1u) << r.out;
  EXPECT_NE(r.out.find("256 tokens = 4 rows x 1 accumulation x 2 processes"), std::string::npos)
      << r.out;
  // xsa info tells how the checkpoint was trained.
  r = xsa(0, "info first");
  EXPECT_NE(r.out.find("trained on:  2 processes; 256 tokens per step"), std::string::npos)
      << r.out;
}

TEST_F(Distributed, ZeroOneGivesTheSameRunAndCheckpoint) {
  // The summed gradient and the norm's parts are added in the same order with or without ZeRO-1,
  // and AdamW is elementwise, so the runs are bit-identical, not only close.
  const std::string args = "train " + kModel + " --steps 20 --batch 4 --total-batch-tokens 256";
  ASSERT_EQ(xsa(2, args + " --out plain").status, 0);
  Result r = xsa(2, args + " --zero 1 --out zero");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(losses("zero"), losses("plain"));
  EXPECT_TRUE(
      same_bytes("zero/ckpt_000020/model.safetensors", "plain/ckpt_000020/model.safetensors"));
  // The moments were gathered whole into the one optimizer file.
  EXPECT_TRUE(same_bytes("zero/ckpt_000020/optimizer.safetensors",
                         "plain/ckpt_000020/optimizer.safetensors"));
}

// Muon (docs/SPEC.md §11) over two ranks: each orthogonalises the matrices it owns (whole
// matrices) and sends them to the other; every rank moves the whole momentum. Plain and ZeRO-1 sum
// alike, so they give the same bits, checkpoints included. Against one process the step's gradient
// is summed in another order (rounding-size differences), which the orthogonalisation, smooth in
// its input, carries into rounding-size differences of O: after the first step every hidden
// matrix agrees with one process's within 1e-3 of Muon's step (η · max(1, rows/cols)^½ ≤ 0.04
// here, O's entries below 1), far below any matrix left out or sent from the wrong rank (a whole
// step, ~1e-2).
TEST_F(Distributed, MuonOverTwoRanksEqualsOneProcess) {
  const std::string model = "train " + kModel + kConstant + " --optimizer muon";
  const std::string two = model + " --steps 3 --batch 4 --total-batch-tokens 256 --ckpt-every 1";
  Result r = xsa(2, two + " --out muon_plain");
  ASSERT_EQ(r.status, 0) << r.err;
  r = xsa(2, two + " --zero 1 --out muon_zero");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(losses("muon_zero"), losses("muon_plain"));
  for (const char* file : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_TRUE(same_bytes(fs::path("muon_zero/ckpt_000003") / file,
                           fs::path("muon_plain/ckpt_000003") / file))
        << file;
  r = xsa(0, model + " --steps 1 --batch 8 --out muon_one");
  ASSERT_EQ(r.status, 0) << r.err;
  auto weights = [](const fs::path& at) {  // the parameters alone (Muon's state is its own)
    const ModelConfig cfg = load_checkpoint_config(at);
    test::CheckpointState s{param_layout(cfg), {}, {}, {}};
    s.params.resize(param_arena_size(s.layout));
    load_checkpoint_tensors(at, {s.layout, s.params.data()});
    return s;
  };
  const test::CheckpointState one = weights(work_dir() / "muon_one" / ckpt(1)),
                              both = weights(work_dir() / "muon_plain" / ckpt(1));
  int matrices = 0;
  for (const TensorInfo& t : one.layout) {
    if (!is_hidden_matrix(t.name)) continue;
    matrices++;
    for (size_t i = 0; i < t.numel; i++)
      ASSERT_NEAR(both.params[t.offset + i], one.params[t.offset + i], 1e-3 * 0.04)
          << t.name << "[" << i << "]";
  }
  EXPECT_EQ(matrices, 8);  // 2 layers: c_attn, attn c_proj, c_fc, mlp c_proj
}

TEST_F(Distributed, OverlappedSumsGiveTheSameBits) {
  // Each layer's sum starts during the backward, in buckets; every element is still added in rank
  // order, so the run is bit-identical to summing after the backward, with accumulation too.
  for (const char* batch : {"4", "2"}) {
    const std::string args = "train " + kModel + " --steps 12 --batch " + batch +
                             " --total-batch-tokens 256 --out overlap_" + batch;
    ASSERT_EQ(xsa(2, args + "_plain").status, 0);
    Result r = xsa(2, args + "_on --overlap");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(losses(std::string("overlap_") + batch + "_on"),
              losses(std::string("overlap_") + batch + "_plain"));
    EXPECT_TRUE(
        same_bytes(std::string("overlap_") + batch + "_on/ckpt_000012/model.safetensors",
                   std::string("overlap_") + batch + "_plain/ckpt_000012/model.safetensors"));
  }
  Result r = xsa(2, "train " + kModel +
                        " --steps 2 --batch 4 --total-batch-tokens 256 --overlap "
                        "--zero 1 --out overlap_zero");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--overlap and --zero 1 do not combine (yet)"), std::string::npos) << r.err;
}

// A device the host cannot address (--device isolated, the GPU's stand-in): the step's sums,
// ZeRO-1's shards, --overlap, and a resume's broadcast and scatter go through host memory
// (StagedComm), and every bit equals the CPU's run under mpirun.
TEST_F(Distributed, ADeviceTheHostCannotAddressGivesTheCpuBits) {
  const std::string args =
      "train " + kModel + " --steps 12 --batch 4 --total-batch-tokens 256 --ckpt-every 6";
  for (const char* mode : {"", " --zero 1", " --overlap"}) {
    SCOPED_TRACE(mode);
    for (const char* device : {"cpu", "isolated"}) {
      const std::string out = std::string("staged_") + device;
      Result r = xsa(2, args + mode + " --force --device " + device + " --out " + out);
      ASSERT_EQ(r.status, 0) << r.err;
      fs::remove_all(work_dir() / out / "ckpt_000012");
      r = xsa(2, "train --resume " + out + " --steps 12 --quiet --device " + device);
      ASSERT_EQ(r.status, 0) << r.err;
    }
    EXPECT_EQ(losses("staged_cpu"), losses("staged_isolated"));
    for (const char* file : {"model", "optimizer"})
      EXPECT_TRUE(same_bytes(std::string("staged_cpu/ckpt_000012/") + file + ".safetensors",
                             std::string("staged_isolated/ckpt_000012/") + file + ".safetensors"))
          << file;
  }
}

// Resumed on another process count, the run's next step is the uninterrupted run's step 11 to float
// rounding (the same state, the same rows, summed in another split: expect_same_step's bounds),
// and the run goes on to its end.
TEST_F(Distributed, ResumesOnAnotherProcessCountAtTheSameGlobalBatch) {
  const std::string args = kModel + kConstant + " --steps 20 --ckpt-every 1";
  const test::ModelChain chain = model_chain();
  // 2 → 1: two processes of 4 rows (ZeRO-1), resumed by one process of 4 rows × 2 accumulation.
  ASSERT_EQ(xsa(2, "train " + args + " --batch 4 --total-batch-tokens 256 --zero 1 --out a").status,
            0);
  fs::copy(work_dir() / "a", work_dir() / "a_resumed", fs::copy_options::recursive);
  Result r = xsa(0, "train --resume a_resumed/ckpt_000010 --force --quiet --threads 1");
  ASSERT_EQ(r.status, 0) << r.err;
  const double bound = 2 * test::chain_error(chain.forward, test::kFloatRoundoff);
  EXPECT_NEAR(loss_at("a_resumed", 11), loss_at("a", 11), bound * loss_at("a", 11));
  EXPECT_TRUE(test::same_step(work_dir() / "a" / ckpt(10), work_dir() / "a_resumed" / ckpt(11),
                              work_dir() / "a" / ckpt(11), 3e-3, 11, chain));
  EXPECT_TRUE(fs::exists(work_dir() / "a_resumed" / ckpt(20)));
  // 1 → 2: one process of 8 rows, resumed by two processes of 4 rows (the batch given anew).
  ASSERT_EQ(xsa(0, "train " + args + " --batch 8 --out b").status, 0);
  fs::copy(work_dir() / "b", work_dir() / "b_resumed", fs::copy_options::recursive);
  r = xsa(2, "train --resume b_resumed/ckpt_000010 --force --quiet --threads 1 --batch 4");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NEAR(loss_at("b_resumed", 11), loss_at("b", 11), bound * loss_at("b", 11));
  EXPECT_TRUE(test::same_step(work_dir() / "b" / ckpt(10), work_dir() / "b_resumed" / ckpt(11),
                              work_dir() / "b" / ckpt(11), 3e-3, 11, chain));
  EXPECT_TRUE(fs::exists(work_dir() / "b_resumed" / ckpt(20)));
  // Without the new batch the step does not divide: refused, once, with what would.
  r = xsa(2, "train --resume b_resumed/ckpt_000010 --force --quiet --threads 1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--total-batch-tokens 256 is not a multiple of 2 processes × --batch 8"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("use --batch 4"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("xsa: error"), r.err.rfind("xsa: error")) << r.err;  // one message
}

TEST_F(Distributed, RanksStartedDifferentlyAreRefusedBeforeAnythingIsWritten) {
  const std::string args = kModel + " --steps 5 --batch 4 --total-batch-tokens 256 --out mixed";
  // An MPMD launch: rank 1 gets another learning rate.
  Result r = run(mpirun(1) + XSA_BINARY + " train " + args + " : -np 1 " + XSA_BINARY + " train " +
                 args + " --lr 0.002");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("rank 1 was started with run.lr = 0.002, rank 0 with run.lr = 0.003"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("xsa: error"), r.err.rfind("xsa: error")) << r.err;  // one message
  EXPECT_FALSE(fs::exists(work_dir() / "mixed"));
  // Rank 1 runs another build (here: the same program with one byte appended).
  fs::copy_file(XSA_BINARY, work_dir() / "xsa_other", fs::copy_options::overwrite_existing);
  std::ofstream(work_dir() / "xsa_other", std::ios::app) << '\n';
  r = run(mpirun(1) + XSA_BINARY + " train " + args + " : -np 1 ./xsa_other train " + args);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("rank 1 runs a different xsa executable than rank 0"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(work_dir() / "mixed"));
  // A step that does not divide among the processes (without --total-batch-tokens the step is
  // one pass of every process, which always divides).
  r = xsa(2, "train " + kModel + " --steps 5 --batch 8 --total-batch-tokens 256 --out odd");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("use --batch 4"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(work_dir() / "odd"));
  // Commands that run in one process say so.
  r = xsa(2, "info a");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("xsa info runs in one process"), std::string::npos) << r.err;
}

// The pids of `mpirun`'s children that are xsa rank `rank` of the run writing into `out`.
std::vector<pid_t> rank_pids(int rank, const std::string& run = "killtest") {
  std::vector<pid_t> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string env;
    try {
      env = read_file(entry.path() / "environ");
    } catch (const std::exception&) {
      continue;
    }
    const std::string cmdline = [&] {
      try {
        return read_file(entry.path() / "cmdline");
      } catch (const std::exception&) {
        return std::string();
      }
    }();
    if (cmdline.find(run) == std::string::npos || cmdline.rfind("timeout", 0) == 0) continue;
    if (env.find(std::string("OMPI_COMM_WORLD_RANK=") + std::to_string(rank) + '\0') !=
        std::string::npos)
      out.push_back(std::stoi(name));
  }
  return out;
}

// `xsa ARGS` on 2 processes from a child of the test, which writes the job's exit status and
// stderr into `status_file` when it ends; returns the child's pid (−1 when fork failed).
pid_t launch_two_ranks(const std::string& args, const std::string& status_file) {
  const pid_t launcher = fork();
  if (launcher == 0) {
    const Result r = xsa(2, args);
    std::ofstream(work_dir() / status_file) << r.status << "\n" << r.err;
    _exit(0);
  }
  return launcher;
}

TEST_F(Distributed, AKilledRankEndsTheJobWithItsCheckpointsIntact) {
  // A run far longer than the test, checkpointing every 5 steps; rank 1 is killed once the first
  // checkpoint is there.
  const std::string args = "train " + kModel +
                           " --steps 100000 --batch 4 --total-batch-tokens 256 " +
                           "--ckpt-every 5 --val-every 0 --out killtest";
  const pid_t launcher = launch_two_ranks(args, "killtest.status");
  ASSERT_GE(launcher, 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  while (!fs::exists(work_dir() / "killtest" / "ckpt_000010") && seconds() < 60)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(fs::exists(work_dir() / "killtest" / "ckpt_000010"));
  const std::vector<pid_t> victims = rank_pids(1);
  ASSERT_EQ(victims.size(), 1u);
  ASSERT_EQ(::kill(victims[0], SIGKILL), 0);
  const auto killed_at = seconds();
  int wstatus = 0;
  ASSERT_EQ(waitpid(launcher, &wstatus, 0), launcher);
  const double took = seconds() - killed_at;
  EXPECT_LT(took, 15.0) << "the job outlived its killed rank";
  const std::string report = read_file(work_dir() / "killtest.status");
  EXPECT_NE(report.substr(0, report.find('\n')), "0") << report;
  EXPECT_NE(report.find("rank 1"), std::string::npos) << report;
  EXPECT_NE(report.substr(0, 3), "124") << "timed out: a rank hung";
  // Every checkpoint reads and resumes (one process, a few steps more).
  std::vector<fs::path> ckpts;
  for (const auto& e : fs::directory_iterator(work_dir() / "killtest"))
    if (e.path().filename().string().rfind("ckpt_", 0) == 0) ckpts.push_back(e.path());
  ASSERT_FALSE(ckpts.empty());
  for (const fs::path& c : ckpts) {
    Result info = xsa(0, "info " + c.string());
    EXPECT_EQ(info.status, 0) << c << info.err;
  }
  std::sort(ckpts.begin(), ckpts.end());
  const std::string last = ckpts.back().filename().string();
  const int64_t step = std::stoll(last.substr(5));
  Result resumed = xsa(0, "train --resume killtest/" + last + " --force --quiet --threads 1 " +
                              "--batch 8 --warmup 0 --steps " + std::to_string(step + 2));
  EXPECT_EQ(resumed.status, 0) << resumed.err;
}

// A scheduler's SIGTERM that reaches one rank only: every rank stops at the same step, the job
// saves a checkpoint there and exits with 128 + SIGTERM, and the run resumes from it.
TEST_F(Distributed, ASignalToOneRankStopsEveryRankAtTheSameStep) {
  const std::string args = "train " + kModel +
                           " --steps 100000 --batch 4 --total-batch-tokens 256 " +
                           "--val-every 0 --out sigtest";
  const pid_t launcher = launch_two_ranks(args, "sigtest.status");
  ASSERT_GE(launcher, 0);
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
    std::ifstream m(work_dir() / "sigtest" / "metrics.jsonl");
    if (std::count(std::istreambuf_iterator<char>(m), {}, '\n') > 5) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::vector<pid_t> rank1 = rank_pids(1, "sigtest");
  ASSERT_EQ(rank1.size(), 1u);
  ASSERT_EQ(::kill(rank1[0], SIGTERM), 0);
  int wstatus = 0;
  ASSERT_EQ(waitpid(launcher, &wstatus, 0), launcher);
  const std::string report = read_file(work_dir() / "sigtest.status");
  EXPECT_EQ(report.substr(0, report.find('\n')), "143") << report;
  const size_t at = report.find("interrupted by SIGTERM: stopped at step ");
  ASSERT_NE(at, std::string::npos) << report;
  const int64_t step = std::stoll(report.substr(at + 40));
  const fs::path ckpt = work_dir() / "sigtest" / fmt::format("ckpt_{:06d}", step);
  EXPECT_TRUE(fs::exists(ckpt / "optimizer.safetensors")) << report;
  EXPECT_EQ(latest_checkpoint(work_dir() / "sigtest"), ckpt);
  Result resumed =
      xsa(0, "train --resume sigtest --quiet --threads 1 --batch 8 --warmup 0 --steps " +
                 std::to_string(step + 2));
  EXPECT_EQ(resumed.status, 0) << resumed.err;
}

TEST_F(Distributed, CompareAndSweepReportAsOneProcessDoes) {
  const std::string args =
      "--data data.txt --layers 2 --heads 2 --embd 32 --seq-len 32 --steps 10 --lr 3e-3 "
      "--val-every 5 --val-batches 2 --seeds 1 --threads 1 --quiet";
  ASSERT_EQ(xsa(0, "compare " + args + " --batch 8 --out cmp_one").status, 0);
  Result r = xsa(2, "compare " + args + " --batch 4 --total-batch-tokens 256 --out cmp_two");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto one = nlohmann::json::parse(read_file(work_dir() / "cmp_one" / "report.json"));
  const auto two = nlohmann::json::parse(read_file(work_dir() / "cmp_two" / "report.json"));
  ASSERT_EQ(one["arms"].size(), two["arms"].size());
  const double bound = 2 * test::chain_error(model_chain().forward, test::kFloatRoundoff);
  for (size_t k = 0; k < one["arms"].size(); k++) {
    const auto &a = one["arms"][k], &b = two["arms"][k];
    EXPECT_EQ(a["variant"], b["variant"]);
    // The same initial weights and the same batches, in the same order, hashed alike.
    EXPECT_EQ(a["init_hash"], b["init_hash"]);
    EXPECT_EQ(a["batches_hash"], b["batches_hash"]);
    // The validation before any step (the same weights, evaluated over one process or two);
    // after ten steps the two arms' trajectories have parted by their roundings (see the top).
    const double v1 = a["val_curve"][0][1].get<double>(), v2 = b["val_curve"][0][1].get<double>();
    EXPECT_EQ(a["val_curve"][0][0], 0);
    EXPECT_NEAR(v2, v1, bound * v1);
  }
  r = xsa(2,
          "sweep " + args + " --batch 4 --total-batch-tokens 256 --param lr=0.003,0.001 --out swp");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(work_dir() / "swp" / "sweep.md"));
  EXPECT_TRUE(fs::exists(work_dir() / "swp" / "lr-0.001" / "report.md"));
}

}  // namespace
}  // namespace xsa
