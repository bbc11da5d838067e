#include "xsa/train/trainer.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "xsa/data/dataset.h"
#include "xsa/dist/agree.h"
#include "xsa/eval/evaluate.h"
#include "xsa/io/checkpoint.h"
#include "xsa/model/gpt.h"
#include "xsa/tokenizer/spm_tokenizer.h"
#include "xsa/train/device_comm.h"
#include "xsa/train/metrics_log.h"
#include "xsa/train/training_run.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/fmt.h"
#include "xsa/util/memory.h"
#include "xsa/util/rng.h"
#include "xsa/util/signals.h"
#include "xsa/util/threads.h"

namespace xsa {

std::vector<fs::path> vocabulary_files(const Dataset& data) {
  if (data.tokenizer != TokenizerKind::spm) return {};
  return spm_vocabulary_files(data.vocab_dir);
}

OptimizerSettings optimizer_settings(const RunConfig& run) {
  OptimizerSettings s{run.beta1, run.beta2, run.adam_eps, run.weight_decay, run.grad_clip};
  s.muon = run.muon(), s.muon_lr = run.muon_lr, s.muon_momentum = run.muon_momentum;
  s.peak_lr = run.lr;
  return s;
}

namespace {

// How validation picks its windows, recorded in trainer.json (val_batch in data/dataset.h).
constexpr const char* kValWindows = "evenly across the split";

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "?";
  long s = std::lround(seconds);
  if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

// metrics.jsonl keeps the records up to `step` (the checkpoint a resumed run continues from), so
// a killed run's steps past its last checkpoint are not logged twice.
void truncate_metrics(const fs::path& path, int64_t step) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return;
  std::istringstream in(read_file(path));
  std::string line, kept;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      auto j = nlohmann::json::parse(line);
      if (j.value("step", (int64_t)0) > step) continue;
    } catch (const nlohmann::json::exception&) {
      continue;  // a line torn by a crash
    }
    kept += line + "\n";
  }
  write_file_atomic(path, kept);
}

// The training data's identity by content (TokenStream::contents), as trainer.json records it.
nlohmann::json content_json(const TokenStream& train) {
  nlohmann::json parts = nlohmann::json::array();
  for (const TokenStream::Content& c : train.contents())
    parts.push_back(
        {{"source", c.source}, {"tokens", c.tokens}, {"xxh3", fmt::format("{:016x}", c.xxh3)}});
  return parts;
}

// Resuming on other data is refused, however alike its size: each part's tokens against the
// run's record of them, the first that differs named. (A checkpoint written before the record
// was kept has its token count checked alone.)
void check_same_content(const TokenStream& train, const nlohmann::json& state,
                        const fs::path& ckpt) {
  const nlohmann::json recorded = state.value("/data/train_content"_json_pointer, nlohmann::json());
  if (!recorded.is_array()) return;
  const nlohmann::json now = content_json(train);
  if (recorded.size() != now.size())
    fail(
        "{}: {} part(s) of training data, but the checkpoint {} was trained on {}; resume needs "
        "the same data",
        state.value("/data/source"_json_pointer, std::string("?")), now.size(), ckpt.string(),
        recorded.size());
  for (size_t i = 0; i < now.size(); i++)
    if (!recorded[i].is_object() || recorded[i].value("tokens", (uint64_t)0) != now[i]["tokens"] ||
        recorded[i].value("xxh3", std::string()) != now[i]["xxh3"])
      fail(
          "{}: not the data the checkpoint {} was trained on (its tokens' XXH3 is {}, the run "
          "recorded {}); resume needs the same data",
          now[i]["source"].get<std::string>(), ckpt.string(), now[i]["xxh3"].get<std::string>(),
          recorded[i].is_object() ? recorded[i].value("xxh3", std::string("?")) : "?");
}

// What a run starts from: a fresh folder, or a checkpoint and its trainer state.
struct RunStart {
  fs::path run_dir, resume_ckpt;
  nlohmann::json state;
  std::unique_ptr<FolderLock> lock;  // rank 0: held for the whole run
};

// Checks the folder before anything is written: resuming must not overwrite later checkpoints nor
// switch data; a fresh run must not overwrite another run unless forced (then it clears it).
RunStart open_run_folder(const RunConfig& run, const Dataset& data,
                         const std::string& resume_from) {
  RunStart start{run.out, {}, {}, {}};
  if (!resume_from.empty()) {
    start.resume_ckpt = resolve_checkpoint(resume_from);
    start.run_dir = start.resume_ckpt.parent_path();
  }
  // Before the folder's contents are looked at, so two runs cannot both find it free.
  create_owned_folder(start.run_dir);
  start.lock = std::make_unique<FolderLock>(start.run_dir / ".lock", start.run_dir);
  if (!resume_from.empty()) {
    start.state = load_trainer_state(start.resume_ckpt);
    auto latest = latest_checkpoint(start.run_dir);
    if (latest && *latest != start.resume_ckpt && !run.force)
      fail("{}: resuming from {} would overwrite the later checkpoint {}; pass --force to do so",
           start.run_dir.string(), start.resume_ckpt.filename().string(),
           latest->filename().string());
    check_same_vocabulary(data, start.resume_ckpt);
    auto tokens = start.state.value("/data/train_tokens"_json_pointer, (int64_t)-1);
    if (tokens != (int64_t)data.train.size())
      fail(
          "{}: {} training tokens, but the checkpoint was trained on {} (from {}); resume needs "
          "the same data",
          run.data, data.train.size(), tokens,
          start.state.value("/data/source"_json_pointer, std::string("?")));
    check_same_content(data.train, start.state, start.resume_ckpt);
  } else if (auto existing = latest_checkpoint(start.run_dir)) {
    if (!run.force)
      fail("{}: already holds a run ({}); use --resume {} to continue it, or --force to start over",
           start.run_dir.string(), existing->filename().string(), start.run_dir.string());
    for (const fs::path& p : list_checkpoints(start.run_dir)) remove_owned(p);
    remove_owned(start.run_dir / "metrics.jsonl");
  }
  return start;
}

// Creates the run folder and its metrics.jsonl as the run at `step` continues it; returns its path.
fs::path prepare_metrics(const RunStart& start, int64_t step) {
  create_owned_folder(start.run_dir);
  const fs::path path = start.run_dir / "metrics.jsonl";
  if (!start.resume_ckpt.empty())
    truncate_metrics(path, step);
  else  // a fresh run: records of an earlier attempt without checkpoints go
    write_file_atomic(path, "");
  return path;
}

// Where the loop stands; saved in trainer.json and restored on resume.
struct LoopState {
  int64_t step = 0;
  double elapsed_before = 0;
};

LoopState restore_loop(const RunStart& start, BatchLoader& loader, Rng& rng) {
  LoopState s;
  try {
    s.step = start.state.at("step").get<int64_t>();
    loader.set_position({start.state.at("/data_position/epoch"_json_pointer).get<uint64_t>(),
                         start.state.at("/data_position/cursor"_json_pointer).get<uint64_t>()});
    rng.state = start.state.at("rng_state").get<uint64_t>();
    s.elapsed_before = start.state.value("elapsed_s", 0.0);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: trainer state is incomplete ({})", (start.resume_ckpt / "trainer.json").string(),
         e.what());
  }
  return s;
}

void print_header(const ModelConfig& m, const RunConfig& run, const Dataset& data,
                  const RunStart& start, int64_t step, int threads, const StepShape& shape) {
  std::printf(
      "xsa train: %s attention, %d layers, %d heads, %d embd, seq %d, %s tokenizer, %lld params, "
      "%s\n",
      attention_string(m).c_str(), m.n_layer, m.n_head, m.n_embd, m.seq_len, to_string(m.tokenizer),
      (long long)parameter_count(m),
      run.precision == Precision::bf16 ? "bf16 products (fp32 master weights)" : "fp32");
  std::printf("%s\n", describe_step(shape, run, threads).c_str());
  {  // where it runs (the CPU's kernel level and product libraries), and why auto chose the CPU
    std::string why;
    const bool cpu_by_choice = run.device == "auto" && !cuda_available(&why);
    std::printf("device: %s%s\n", backend_for(run).describe().c_str(),
                cpu_by_choice ? fmt::format(" (auto: {})", why).c_str() : "");
  }
  std::printf("data: %s: %zu train / %zu val tokens; run folder %s%s\n", data.description.c_str(),
              data.train.size(), data.val.size(), start.run_dir.string().c_str(),
              start.resume_ckpt.empty() ? "" : fmt::format(" (resuming at step {})", step).c_str());
  // A run started before validation drew its windows across the split validated on the split's
  // first windows: its curve changes at the resume, and says so.
  if (!start.resume_ckpt.empty() &&
      start.state.value("/data/val_windows"_json_pointer, std::string()) != kValWindows)
    std::printf(
        "note: this run validated on the validation split's first windows until step %lld; from "
        "here on it validates on windows drawn across the whole split, so its validation curve "
        "changes at this step\n",
        (long long)step);
  std::fflush(stdout);
}

// --skip-bad-steps: more bad steps than this in a row mean the run has diverged, not met a bad
// batch, and it stops as without the option.
constexpr int64_t kMaxSkippedInARow = 16;

// Every rank sees the same loss and norm, so every rank stops here alike.
// "; last checkpoint RUN/ckpt_N is intact", or nothing when the run has none yet.
std::string intact_checkpoint_note(const fs::path& run_dir) {
  const auto last = latest_checkpoint(run_dir);
  return last ? "; last checkpoint " + last->string() + " is intact" : "";
}

[[noreturn]] void fail_not_finite(const StepResult& r, int64_t step, double lr,
                                  const fs::path& run_dir) {
  const bool loss_ok = std::isfinite(r.loss);
  const double bad = loss_ok ? r.grad_norm : r.loss;
  throw AgreedError(fmt::format("{} became {} at step {} (lr {:.3g}); stopped without saving{}",
                                loss_ok ? "gradient norm" : "loss",
                                std::isnan(bad) ? "NaN" : "infinite", step, lr,
                                intact_checkpoint_note(run_dir)));
}

// Where a run stands when it saves: the loader, the RNG, the step, the time spent, and what
// --skip-bad-steps has seen.
struct RunPosition {
  LoaderPosition position;
  const Rng& rng;
  int64_t step;
  double elapsed;
  const BadStepFilter* filter;
  int64_t skipped;
};

nlohmann::json trainer_state(const RunConfig& run, const Dataset& data, const StepShape& shape,
                             const RunPosition& at) {
  const int64_t tokens_per_step = shape.tokens(), step = at.step;
  const LoaderPosition position = at.position;
  nlohmann::json state = {
      {"step", step},
      {"world_size", shape.world},
      {"accumulation_steps", shape.accumulation},
      {"data_position", {{"epoch", position.epoch}, {"cursor", position.cursor}}},
      {"rng_state", at.rng.state},
      {"elapsed_s", at.elapsed},
      {"tokens_seen", step * tokens_per_step},
      {"data",
       {{"source", run.data},
        {"train_tokens", data.train.size()},
        {"train_content", content_json(data.train)},
        {"val_tokens", data.val.size()},
        {"val_windows", kValWindows}}},
      {"run", run_config_to_json(run)}};
  if (at.filter) state["bad_steps"] = {{"skipped", at.skipped}, {"filter", at.filter->to_json()}};
  return state;
}

void print_progress(int64_t done, int64_t steps, const StepResult& r, double lr, double ms,
                    double tok_s, double seconds_per_step, bool tty) {
  std::printf(
      "%sstep %lld/%lld | loss %.4f | lr %.2e | norm %.3f | %.1f ms | %.0f tok/s | ETA %s%s",
      tty ? "\r\033[K" : "", (long long)done, (long long)steps, r.loss, lr, r.grad_norm, ms, tok_s,
      format_duration(seconds_per_step * (steps - done)).c_str(), tty ? "" : "\n");
  std::fflush(stdout);
}

}  // namespace

BackendOptions backend_options(const RunConfig& run) {
  return BackendOptions{run.device, run.precision, run.tf32, run.deterministic};
}

Backend<float>& backend_for(const RunConfig& run) {
  return select_backend(backend_options(run));
}

std::string describe_step(const StepShape& shape, const RunConfig& run, int threads) {
  return fmt::format("step: {} tokens = {} rows x {} accumulation x {} process{}{}; {} thread{}{}",
                     shape.tokens(), shape.batch, shape.accumulation, shape.world,
                     shape.world == 1 ? "" : "es", run.zero && shape.world > 1 ? ", ZeRO-1" : "",
                     threads, threads == 1 ? "" : "s", shape.world > 1 ? " per process" : "");
}

StepShape step_shape(const RunConfig& run, int T, int world) {
  return {run.batch, run.accumulation_steps(T, world), world, T};
}

// The parameters and moments of a checkpoint, read by rank 0 and sent to every rank: the
// parameters whole, the moments whole or (ZeRO-1) as each rank's shard. On a device the host
// cannot address, through its collectives or host memory as `comm_choice` says (DeviceComm).
void load_training_state(Comm& comm, const fs::path& ckpt, ParamArena<float>& arena,
                         const std::string& comm_choice) {
  const size_t n = arena.params.size();
  const bool sharded = arena.adam_m.size() != n;
  Backend<float>& be = *arena.params.backend();
  std::vector<float> full_m, full_v;
  agree_on(comm, [&] {
    if (!comm.is_root()) return;
    if (!sharded) return load_checkpoint_weights(ckpt, arena, /*with_optimizer=*/true);
    full_m.resize(n), full_v.resize(n);
    HostView<float> params(arena.params, /*write_back=*/true), muon_m(arena.muon_m, true);
    load_checkpoint_tensors(ckpt, {arena.layout, params.data(), full_m.data(), full_v.data(),
                                   arena.muon_m.size() ? muon_m.data() : nullptr});
  });
  if (comm.size() == 1) return;
  be.weights_changed(arena.params.data(), arena.params.size());
  const bool on_host = be.host_addressable();
  DeviceComm staged(comm, be, on_host ? nullptr : device_collectives(comm, be, comm_choice));
  auto broadcast = [&](float* values) {
    if (on_host)
      comm.broadcast(values, n * sizeof(float));
    else
      staged.broadcast_device(values, n);
  };
  Comm& shards = on_host ? comm : staged;  // `mine` is device memory
  broadcast(arena.params.data());
  if (arena.muon_m.size()) broadcast(arena.muon_m.data());  // Muon's momentum: whole on every rank
  if (sharded) {
    shards.scatter_shards(full_m.data(), arena.adam_m.data(), n);
    shards.scatter_shards(full_v.data(), arena.adam_v.data(), n);
  } else {
    broadcast(arena.adam_m.data());
    broadcast(arena.adam_v.data());
  }
}

// Writes a checkpoint from rank 0, the moments gathered from every rank's shard under ZeRO-1
// (rank 0 then holds them whole for the moment of writing). Every rank must call it.
fs::path save_training_state(Comm& comm, const fs::path& run_dir, int64_t step,
                             const ModelConfig& cfg, const ParamArena<float>& arena,
                             const nlohmann::json& state, bool replace,
                             const std::vector<fs::path>& extra_files) {
  const size_t n = arena.params.size();
  if (arena.adam_m.size() == n)
    return comm.is_root() ? save_checkpoint(run_dir, step, cfg, arena, state, replace, extra_files)
                          : fs::path();
  std::vector<float> full_m(comm.is_root() ? n : 0), full_v(comm.is_root() ? n : 0);
  Backend<float>& be = *arena.params.backend();
  DeviceComm staged(comm, be);  // (the root's host memory: through host memory)
  Comm& gather = be.host_addressable() ? comm : staged;  // the moments' shards are device memory
  gather.gather_shards(arena.adam_m.data(), full_m.data(), n);
  gather.gather_shards(arena.adam_v.data(), full_v.data(), n);
  if (!comm.is_root()) return {};
  const HostView<float> params(arena.params), muon_m(arena.muon_m);
  return save_checkpoint(run_dir, step, cfg,
                         {arena.layout, params.data(), full_m.data(), full_v.data(),
                          arena.muon_m.size() ? muon_m.data() : nullptr},
                         state, replace, extra_files);
}

namespace {

// Everything xsa train does around the loop: metrics.jsonl, progress lines, validation records,
// checkpoints, --skip-bad-steps and the stop at a non-finite step or a signal.
class TrainObserver : public RunObserver {
 public:
  struct Context {
    const RunConfig& run;
    const ModelConfig& model_cfg;
    const RunInputs& in;
    Comm& comm;
    Gpt<float>& model;
    BatchLoader& loader;
    Rng& rng;
    const fs::path& run_dir;
    MetricsLog* metrics;  // rank 0's
    BadStepFilter* filter;
    double elapsed_before;
    int64_t first_step;
  };
  TrainObserver(Context c, int64_t skipped, TrainResult& result)
      : c_(c),
        root_(c.comm.is_root()),
        speak_(root_ && !c.run.quiet),
        tty_(speak_ && stdout_is_interactive()),
        skipped_(skipped),
        result_(result) {}

  void arm_stepped(const ArmStep& s) override {
    const StepResult& r = *s.result;
    if (!r.skipped.empty()) {
      skipped_++;
      if (++skipped_in_a_row_ > kMaxSkippedInARow)
        throw AgreedError(fmt::format(
            "{} steps in a row skipped as bad (the last at step {}: {}); the run has diverged{}",
            skipped_in_a_row_, s.done, r.skipped, intact_checkpoint_note(c_.run_dir)));
      if (speak_)
        std::printf("%sstep %lld: update skipped: %s\n", tty_ ? "\r\033[K" : "", (long long)s.done,
                    r.skipped.c_str());
    } else {
      skipped_in_a_row_ = 0;
      if (!r.finite) fail_not_finite(r, s.done, s.lr, c_.run_dir);
    }
    result_.final_loss = r.loss;
    const double tok_s = c_.in.shape.tokens() / (s.ms / 1000.0);
    if (root_) {
      c_.metrics->write(step_record(s, c_.in.shape.tokens()));
    }
    if (speak_ && (tty_ || s.done % c_.run.log_every == 0 || s.done == c_.run.steps)) {
      const double spent = seconds_since(start_);
      print_progress(s.done, c_.run.steps, r, s.lr, s.ms, tok_s, spent / (s.done - c_.first_step),
                     tty_);
    }
  }

  void validated(int64_t step, const std::vector<double>& losses) override {
    if (c_.in.val_batches == 0) return;
    result_.final_val_loss = losses[0];
    if (!root_) return;
    const double bpt = c_.in.val_bytes_per_token;
    c_.metrics->write(val_record(step, losses[0], bpt));
    if (!speak_) return;
    std::string bpb;
    if (std::isfinite(bpt))
      bpb = fmt::format(" | {:.4f} bits per byte", bits_per_byte(losses[0], bpt));
    std::printf("%sstep %lld | val loss %.4f%s\n", tty_ ? "\r\033[K" : "", (long long)step,
                losses[0], bpb.c_str());
  }

  void step_finished(int64_t done, bool) override {
    result_.steps_done = done;
    if ((c_.run.ckpt_every > 0 && done % c_.run.ckpt_every == 0) || done == c_.run.steps)
      save(done);
  }

  std::string stopping(int64_t done) override {
    if (saved_at_ != done) save(done);
    if (tty_) std::printf("\n");
    return fmt::format(
        "stopped at step {} of {}; checkpoint {} saved; continue with xsa train --resume {}", done,
        c_.run.steps, result_.last_checkpoint, c_.run_dir.string());
  }

  void save(int64_t at_step) {
    const nlohmann::json st =
        trainer_state(c_.run, c_.in.data, c_.in.shape,
                      {c_.loader.position(), c_.rng, at_step,
                       c_.elapsed_before + seconds_since(start_), c_.filter, skipped_});
    fs::path saved;
    try {
      saved = save_training_state(c_.comm, c_.run_dir, at_step, c_.model_cfg, c_.model.params(), st,
                                  c_.run.force, vocabulary_files(c_.in.data));
    } catch (const Error& e) {
      const auto newest = latest_checkpoint(c_.run_dir);
      fail("{}; the newest complete checkpoint is {}", e.what(),
           newest ? newest->string() : std::string("none"));
    }
    if (root_) result_.last_checkpoint = saved.string();
    saved_at_ = at_step;
  }

  void finish() {
    if (tty_) std::printf("\n");
    if (speak_ && skipped_ > 0)
      std::printf("%lld update(s) skipped as bad (--skip-bad-steps); see \"skipped\" in %s\n",
                  (long long)skipped_, (c_.run_dir / "metrics.jsonl").string().c_str());
    if (speak_ && !result_.last_checkpoint.empty())
      std::printf("checkpoint: %s\n", result_.last_checkpoint.c_str());
  }

 private:
  using clock = std::chrono::steady_clock;
  static double seconds_since(clock::time_point t) {
    return std::chrono::duration<double>(clock::now() - t).count();
  }

  Context c_;
  const bool root_, speak_, tty_;
  int64_t skipped_, skipped_in_a_row_ = 0, saved_at_ = -1;
  TrainResult& result_;
  const clock::time_point start_ = clock::now();
};

// Rank 0 owns the run folder (and its lock); the others learn where the run starts from it.
RunStart open_run_folder_on_every_rank(Comm& comm, const RunConfig& run, const Dataset& data,
                                       const std::string& resume_from) {
  RunStart start{run.out, {}, {}, {}};
  agree_on(comm, [&] {
    if (comm.is_root()) start = open_run_folder(run, data, resume_from);
  });
  if (comm.size() > 1) {
    start.resume_ckpt = comm.broadcast(start.resume_ckpt.string());
    start.run_dir = comm.broadcast(start.run_dir.string());
    start.state = nlohmann::json::parse(comm.broadcast(start.state.dump()));
  }
  return start;
}

// A resumed run's loop position, data position, random state and skipped-step record.
LoopState resume_from_checkpoint(Comm& comm, const RunStart& start, const RunConfig& run,
                                 ParamArena<float>& params, BatchLoader& loader, Rng& rng,
                                 BadStepFilter* filter, int64_t& skipped) {
  load_training_state(comm, start.resume_ckpt, params, run.comm);
  LoopState loop;
  agree_on(comm, [&] {
    loop = restore_loop(start, loader, rng);
    if (filter && start.state.contains("bad_steps")) {
      const std::string where = (start.resume_ckpt / "trainer.json").string();
      try {
        skipped = start.state.at("/bad_steps/skipped"_json_pointer).get<int64_t>();
        filter->from_json(start.state.at("/bad_steps/filter"_json_pointer));
      } catch (const std::exception& e) {
        fail("{}: bad_steps is malformed: {}", where, e.what());
      }
    }
    if (loop.step > run.steps)
      fail("--steps {} is below the checkpoint's step {}", run.steps, loop.step);
  });
  return loop;
}

// A fresh run's weights: the seeded draw (the same on every rank), then --init-from's.
void initialize_weights(Comm& comm, const RunConfig& run, const ModelConfig& cfg,
                        ParamArena<float>& params, std::optional<InitialWeights>& init_weights) {
  params.init(cfg, run.seed);
  if (!init_weights) return;
  agree_on(comm, [&] {
    const auto fresh = init_weights->load(params);
    init_weights.reset();  // its bytes are no longer needed
    if (comm.is_root() && !run.quiet)
      std::printf("initial weights: %s%s\n", run.init_from.c_str(),
                  fresh.empty() ? ""
                                : fmt::format(" ({} new tensor(s) at their initial values: {})",
                                              fresh.size(), fmt::join(fresh, ", "))
                                      .c_str());
  });
}

}  // namespace

TrainResult train(const ModelConfig& requested_model, const RunConfig& requested_run,
                  const std::string& resume_from) {
  Comm& comm = world_comm();
  const bool root = comm.is_root();
  // Every rank must have been started alike before any collective depends on sizes.
  check_ranks_agree(comm, {{"model", requested_model},
                           {"run", run_config_to_json(requested_run)},
                           {"resume", resume_from}});
  RunConfig run = requested_run;
  RunInputs in;
  std::optional<InitialWeights> init_weights;  // --init-from: read once, checked, then loaded
  // Everything that can fail on bad input is checked before anything is written; each rank
  // checks what it reads itself (its data), and the ranks stop together.
  agree_on(comm, [&] {
    in = prepare_run(requested_model, run, comm);
    run.total_batch_tokens = in.shape.tokens();  // saved resolved: a resume keeps the step's size
    // --init-from is checked whole before the run folder is touched (--force clears it).
    if (!run.init_from.empty()) {
      init_weights.emplace(run.init_from, run.out, run.force && resume_from.empty());
      init_weights->check(param_layout(in.model));
    }
  });
  check_ranks_agree(comm,
                    {{"train_tokens", in.data.train.size()}, {"val_tokens", in.data.val.size()}});
  Backend<float>* backend = nullptr;
  agree_on(comm, [&] {
    backend = &backend_for(run);
    check_fits_in_memory(in.model, run.batch, in.model.seq_len, 1, in.data.train.size() * 2.0);
  });
  if (run.dry_run) {  // the model and its optimizer built, nothing written
    const int T = in.model.seq_len;
    Gpt<float> model(in.model, run.batch, T, GptMode::training, *backend);
    TrainStep trainer(model, optimizer_settings(run),
                      {&comm, run.zero == 1, run.overlap, run.comm});
    if (root && !run.quiet)
      std::printf("dry run: %lld parameters, %s; %s; would train %lld steps into %s\n",
                  (long long)parameter_count(in.model), attention_string(in.model).c_str(),
                  describe_step(in.shape, run, in.threads).c_str(), (long long)run.steps,
                  run.out.c_str());
    return {};
  }
  RunStart start = open_run_folder_on_every_rank(comm, run, in.data, resume_from);

  const int T = in.model.seq_len;
  Gpt<float> model(in.model, run.batch, T, GptMode::training, *backend);
  TrainStep trainer(model, optimizer_settings(run), {&comm, run.zero == 1, run.overlap, run.comm});
  BatchLoader loader(in.data.train, in.shape.rows_per_process(), T, run.shuffle, run.seed,
                     comm.rank(), comm.size());
  Rng rng(run.seed);
  std::optional<BadStepFilter> filter;
  if (run.skip_bad_steps) trainer.set_bad_step_filter(&filter.emplace());
  int64_t skipped = 0;
  LoopState loop;
  if (!start.resume_ckpt.empty())
    loop = resume_from_checkpoint(comm, start, run, model.params(), loader, rng,
                                  filter ? &*filter : nullptr, skipped);
  else
    initialize_weights(comm, run, in.model, model.params(), init_weights);
  std::optional<MetricsLog> metrics;
  agree_on(comm, [&] {
    if (!root) return;
    metrics.emplace(prepare_metrics(start, loop.step));
    write_run_description(start.run_dir,
                          {{"command", "train"},
                           {"attention", attention_string(in.model)},
                           {"seq_len", in.model.seq_len},
                           {"tokens_per_step", in.shape.tokens()}},
                          run.steps, in.data);
  });

  const bool speak = root && !run.quiet;
  if (speak) print_header(in.model, run, in.data, start, loop.step, in.threads, in.shape);
  if (const auto* device_comm = dynamic_cast<const DeviceComm*>(&trainer.comm());
      device_comm && speak)
    std::printf("gradient sums: %s\n", device_comm->describe().c_str());
  if (loop.step >= run.steps && speak)
    std::printf("nothing to train: the run is at step %lld of --steps %lld\n", (long long)loop.step,
                (long long)run.steps);
  TrainResult result;
  result.steps_done = loop.step;
  result.final_loss = NAN;
  TrainObserver observer(
      {run, in.model, in, comm, model, loader, rng, start.run_dir, metrics ? &*metrics : nullptr,
       filter ? &*filter : nullptr, loop.elapsed_before, loop.step},
      skipped, result);
  TrainingRun training(run, in.shape, comm, in.data.val, in.val_batches);
  training.add_arm({&trainer, &loader});
  training.add_observer(&observer);
  training.run({loop.step, /*validate_first=*/true, /*rotate=*/false});
  observer.finish();
  return result;
}

}  // namespace xsa
