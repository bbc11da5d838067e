// Run settings, kept apart from the model's shape (ModelConfig), and the one table of them: every
// option's JSON key, command-line flag, help and role, read by the code that writes trainer.json,
// reads it back on resume, fingerprints a comparison and declares the command-line options, so a
// new option cannot be forgotten by any of them.
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

#include "xsa/util/precision.h"

namespace xsa {

struct RunConfig {
  std::string data;  // text file, shard folder or glob (see open_dataset)
  std::string
      tokenizer;  // byte, gpt2, spm:FOLDER; empty: the data's (text: byte, shards: meta.json)
  std::string vocab_dir;  // GPT-2 vocabulary folder; empty: the default places
  bool shuffle = true;    // visit windows in a seeded random order each epoch
  std::string out = "runs/run";
  int batch = 16;  // B: sequences per forward pass on each process (a micro-batch)
  // Tokens per optimizer step over every micro-batch and process; 0: one micro-batch of one
  // process (batch × seq-len). The gradient-accumulation steps follow from it (accumulation_steps).
  int64_t total_batch_tokens = 0;
  Precision precision = Precision::fp32;  // util/precision.h
  std::string device = "cpu";             // cpu, cuda, cuda:N or auto (backend/device.h)
  bool tf32 = false;                      // a GPU's fp32 products may use TF32
  bool deterministic = false;             // a GPU's attention backward without atomics
  std::string init_from;  // a checkpoint whose weights the run starts from (empty: random)
  bool overlap = false;   // sum each layer's gradients during the backward (several processes)
  int zero = 0;  // ZeRO stage: 0 (every rank keeps all AdamW moments) or 1 (each keeps its shard)
  std::string comm = "auto";  // how ranks on GPUs sum: auto, nccl or mpi (train/device_comm.h)
  int64_t steps = 500;
  double lr = 1e-3;  // peak learning rate
  double min_lr_fraction = 0.1;
  int64_t warmup = -1;  // steps; −1: 5 % of steps
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double adam_eps = 1e-8;
  double grad_clip = 1.0;  // global norm; 0 disables
  // adamw, or muon: Muon on the blocks' hidden matrices, AdamW (at lr) on the rest (SPEC §11).
  std::string optimizer = "adamw";
  double muon_lr = 0.02;  // Muon's peak rate, on lr's schedule
  double muon_momentum = 0.95;
  bool skip_bad_steps = false;  // leave out non-finite and outlier updates (BadStepFilter)
  uint64_t seed = 1;
  int threads = 0;          // 0: every core
  int64_t ckpt_every = 0;   // steps between checkpoints; 0: only at the end
  int64_t val_every = 100;  // steps between validation passes; 0: only at the end
  int val_batches = 8;
  double val_fraction = 0.1;
  int64_t log_every = 10;  // progress lines when stdout is not a terminal
  bool force = false;      // start over in (or resume into) a folder with later checkpoints
  bool quiet = false;      // no progress output (tests)
  bool dry_run = false;    // check every option, open the data, build the model(s), then stop

  int64_t warmup_steps() const { return warmup >= 0 ? warmup : steps / 20; }
  bool muon() const { return optimizer == "muon"; }
  // The rate a comparison tunes and a variant's @RATE names: Muon's with --optimizer muon (AdamW's
  // moves with it, in the ratio lr / muon_lr given), else the peak lr.
  double tuned_rate() const { return muon() ? muon_lr : lr; }
  void set_tuned_rate(double rate) {
    if (muon()) {
      lr *= rate / muon_lr;
      muon_lr = rate;
    } else {
      lr = rate;
    }
  }
  // Tokens per optimizer step for sequences of T tokens on `world` processes: total_batch_tokens,
  // or one pass of every process (batch × T × world), as `mpirun -np N` users expect.
  int64_t step_tokens(int T, int world) const {
    return total_batch_tokens > 0 ? total_batch_tokens : (int64_t)batch * T * world;
  }
  // Micro-batches each of `world` processes runs per step; throws Error, with the values that
  // would divide, when the step's tokens are not a multiple of world × batch × T.
  int accumulation_steps(int T, int world) const;
  // The micro-batch (--batch) that makes `tokens` per step for sequences of T tokens on `world`
  // processes with the fewest micro-batches: the largest divisor of tokens / (T × world) not above
  // max_batch. Throws Error, naming what would divide, when T × world does not divide tokens.
  static int batch_for_step_tokens(int64_t tokens, int T, int world, int max_batch);
  void validate() const;  // throws Error naming the bad value
};

// An option's roles.
enum RunOptionRole : unsigned {
  kSaved = 1,   // written to trainer.json and read back on resume
  kResult = 2,  // changes the numbers a run produces: part of a comparison's fingerprint
  kShared = 4,  // declared by the option group train, compare and sweep share (tools/options.cpp)
  kOmittedAtDefault = 8,  // in JSON only when set otherwise: the files (and the fingerprints) of
                          // runs that do not use it stay as they were before it existed
};

struct RunOption {
  const char* key;   // JSON key
  const char* flag;  // command-line flag(s) in CLI11's syntax; its first name is the option's
  const char* help;
  unsigned roles;
  // The values a number may take, checked where it enters (the command line, --config): counts
  // that size memory or loops have a stated maximum, so no later code meets an absurd one.
  double least = -HUGE_VAL, most = HUGE_VAL;
};
// The largest step count, batch and the like a command takes: far past any run, small enough that
// no product of them overflows.
inline constexpr double kMostSteps = 1e12, kMostRows = 1 << 20;

// The table, in four groups (for_each_run_option below walks them in order).
namespace run_options {

// The data and the step's batch.
template <typename Run, typename Fn>
void data_and_batch(Run& r, Fn& fn) {
  constexpr unsigned all = kSaved | kResult | kShared;
  fn(
      RunOption{
          "data", "--data",
          "A text file, a folder of token shards (xsa prepare, llm.c), or a glob of shard files",
          all},
      r.data);
  fn(
      RunOption{
          "tokenizer", "--tokenizer",
          "byte, gpt2 or spm:FOLDER (default: byte for a text file, the shards' meta.json, else "
          "gpt2)",
          all},
      r.tokenizer);
  fn(RunOption{"vocab_dir", "--vocab-dir",
               "Folder with GPT-2's encoder.json and vocab.bpe (default: data/gpt2)", kShared},
     r.vocab_dir);
  fn(RunOption{"shuffle", "--shuffle,!--no-shuffle",
               "Visit training windows in a seeded random order (default) or in order", all},
     r.shuffle);
  fn(RunOption{"out", "--out", "Output folder", kSaved}, r.out);
  fn(RunOption{"batch", "--batch",
               "Sequences per forward pass on each process (B); the step's size is "
               "--total-batch-tokens",
               all, 1, kMostRows},
     r.batch);
  fn(RunOption{"total_batch_tokens", "--total-batch-tokens",
               "Tokens per optimizer step over all micro-batches and processes (0: --batch × "
               "--seq-len × processes); gradient accumulation makes up the rest",
               all, 0, kMostSteps},
     r.total_batch_tokens);
}

// The schedule, AdamW and the seed.
template <typename Run, typename Fn>
void optimization(Run& r, Fn& fn) {
  constexpr unsigned all = kSaved | kResult | kShared;
  fn(RunOption{"steps", "--steps", "Optimizer steps (per model)", all, 1, kMostSteps}, r.steps);
  fn(RunOption{"lr", "--lr", "Peak learning rate", all}, r.lr);
  fn(RunOption{"min_lr_fraction", "--min-lr-fraction",
               "Final learning rate as a fraction of the peak", all},
     r.min_lr_fraction);
  fn(RunOption{"warmup", "--warmup", "Linear warm-up steps (-1: 5% of --steps)", all, -1,
               kMostSteps},
     r.warmup);
  fn(RunOption{"weight_decay", "--weight-decay", "AdamW decoupled weight decay (2-D weights only)",
               all},
     r.weight_decay);
  fn(RunOption{"beta1", "--beta1", "AdamW beta1", all}, r.beta1);
  fn(RunOption{"beta2", "--beta2", "AdamW beta2", all}, r.beta2);
  fn(RunOption{"adam_eps", "--adam-eps", "AdamW epsilon", all}, r.adam_eps);
  fn(RunOption{"grad_clip", "--grad-clip", "Global gradient-norm clip (0: off)", all}, r.grad_clip);
  fn(RunOption{"optimizer", "--optimizer",
               "adamw, or muon: Muon (momentum orthogonalised by Newton-Schulz, docs/SPEC.md §11) "
               "on the blocks' hidden matrices, AdamW at --lr on the embeddings, gains and the "
               "rest",
               all | kOmittedAtDefault},
     r.optimizer);
  fn(RunOption{"muon_lr", "--muon-lr",
               "Muon's peak learning rate (on --lr's warm-up and decay); with --tune-lr the rate "
               "tuned, --lr moving with it",
               all | kOmittedAtDefault, 1e-12, 1e6},
     r.muon_lr);
  fn(RunOption{"muon_momentum", "--muon-momentum", "Muon's (Nesterov) momentum",
               all | kOmittedAtDefault, 0, 0.999999},
     r.muon_momentum);
  fn(RunOption{"skip_bad_steps", "--skip-bad-steps,!--no-skip-bad-steps",
               "Leave out an update whose loss or gradient norm is not finite or more than 5 sd "
               "above the last 128 steps' (counted in metrics.jsonl) instead of stopping",
               kSaved | kResult},
     r.skip_bad_steps);
  fn(RunOption{"seed", "--seed", "Seed of the initial weights and of the batch order", all},
     r.seed);
}

// Threads, precision, devices and processes.
template <typename Run, typename Fn>
void devices(Run& r, Fn& fn) {
  constexpr unsigned all = kSaved | kResult | kShared;
  fn(RunOption{"threads", "--threads",
               "Threads per process (0: OMP_NUM_THREADS, else the cores the process may use, "
               "shared among the ranks on one machine)",
               kSaved | kShared, 0, 4096},
     r.threads);
  fn(RunOption{"precision", "--precision",
               "fp32, or bf16: matrix products in bf16 with fp32 accumulation, master weights, "
               "gradients and optimizer in fp32 (needs AVX512_BF16 or AMX)",
               all},
     r.precision);
  fn(RunOption{"device", "--device",
               "cpu, cuda (the process's GPU: its local rank under mpirun), cuda:N, auto (a "
               "GPU when one works, else the CPU), or isolated (a test device: the CPU's kernels "
               "on memory only the backend may touch)",
               all},
     r.device);
  fn(RunOption{"tf32", "--tf32,!--no-tf32",
               "On a GPU with --precision fp32: let the products use TF32 tensor cores", all},
     r.tf32);
  fn(RunOption{"deterministic", "--deterministic,!--no-deterministic",
               "On a GPU: attention's backward without atomics, so a run repeats bit for bit "
               "(the CPU always does)",
               kSaved | kShared},
     r.deterministic);
  fn(RunOption{"init_from", "--init-from",
               "Start from this run's or checkpoint's weights (e.g. GPT-2 from xsa import) "
               "instead of random ones; the model's shape is the checkpoint's, its attention "
               "--attn's",
               all},
     r.init_from);
  fn(RunOption{"overlap", "--overlap",
               "Under mpirun: sum each layer's gradients while the backward runs the layers "
               "below it (a communication thread; not with --zero 1)",
               kSaved | kShared},
     r.overlap);
  fn(RunOption{"zero", "--zero",
               "ZeRO stage under mpirun: 1 shards the AdamW moments across ranks (0: off)",
               kSaved | kShared, 0, 1},
     r.zero);
  fn(RunOption{"comm", "--comm",
               "Under mpirun with --device cuda: nccl sums the gradients on the GPUs, mpi "
               "through host memory (rank order, the CPU's bits); auto: nccl where the CUDA "
               "module has it",
               kSaved | kShared},
     r.comm);
}

// Checkpoints, validation, progress and the output folder.
template <typename Run, typename Fn>
void run_control(Run& r, Fn& fn) {
  constexpr unsigned all = kSaved | kResult | kShared;
  fn(RunOption{"ckpt_every", "--ckpt-every", "Steps between checkpoints (0: only at the end)",
               kSaved, 0, kMostSteps},
     r.ckpt_every);
  fn(RunOption{"val_every", "--val-every", "Steps between validation passes (0: only at the end)",
               all, 0, kMostSteps},
     r.val_every);
  fn(RunOption{"val_batches", "--val-batches",
               "Batches of the step's size (--total-batch-tokens) per validation pass", all, 0,
               kMostRows},
     r.val_batches);
  fn(RunOption{"val_fraction", "--val-fraction",
               "Share of a text file held out (its tail) for validation", all},
     r.val_fraction);
  fn(RunOption{"log_every", "--log-every",
               "Steps between progress lines when output is not a terminal", kSaved | kShared, 1,
               kMostSteps},
     r.log_every);
  fn(RunOption{"force", "--force", "Start over, or replace what the output folder holds", 0},
     r.force);
  fn(RunOption{"quiet", "--quiet", "No progress output", kShared}, r.quiet);
  fn(RunOption{"dry_run", "--dry-run",
               "Check every option, open the data and build the model and its optimizer, say "
               "what would run, then stop before the first step: nothing is written",
               kShared},
     r.dry_run);
}

}  // namespace run_options

// Calls fn(option, field) for every RunConfig member, in one order. Run is RunConfig or const
// RunConfig.
template <typename Run, typename Fn>
void for_each_run_option(Run& r, Fn&& fn) {
  static_assert(std::is_same_v<std::remove_const_t<Run>, RunConfig>);
  run_options::data_and_batch(r, fn);
  run_options::optimization(r, fn);
  run_options::devices(r, fn);
  run_options::run_control(r, fn);
}

// The options with all of `roles`, as JSON (the warm-up as resolved: a resumed run keeps it when
// --steps changes).
nlohmann::json run_config_to_json(const RunConfig& run, unsigned roles = kSaved);
// Overlays the saved options present in j onto `run`; `source` names the file in errors.
void run_config_update_from_json(RunConfig& run, const nlohmann::json& j,
                                 const std::string& source);

}  // namespace xsa
