#include "train/trainer.h"

#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "data/dataset.h"
#include "io/checkpoint.h"
#include "model/gpt.h"
#include "ops/ops.h"
#include "train/schedule.h"
#include "util/error.h"
#include "util/files.h"
#include "util/rng.h"

extern "C" void openblas_set_num_threads(int);

namespace xsa {

void RunConfig::validate() const {
  if (data.empty()) fail("--data is required: a text file to train on");
  if (batch <= 0) fail("--batch {} must be positive", batch);
  if (steps <= 0) fail("--steps {} must be positive", steps);
  if (!(lr > 0) || !std::isfinite(lr)) fail("--lr {} must be a positive number", lr);
  if (!(min_lr_fraction >= 0 && min_lr_fraction <= 1))
    fail("--min-lr-fraction {} must be in [0, 1]", min_lr_fraction);
  if (warmup < -1 || warmup > steps)
    fail("--warmup {} must be between 0 and --steps {}", warmup, steps);
  if (!(weight_decay >= 0)) fail("--weight-decay {} must be non-negative", weight_decay);
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    fail("--beta1/--beta2 must be in [0, 1)");
  if (!(grad_clip >= 0)) fail("--grad-clip {} must be non-negative", grad_clip);
  if (threads < 0) fail("--threads {} must be 0 (every core) or positive", threads);
  if (ckpt_every < 0) fail("--ckpt-every {} must be non-negative", ckpt_every);
  if (val_every < 0) fail("--val-every {} must be non-negative", val_every);
  if (val_batches < 0) fail("--val-batches {} must be non-negative", val_batches);
  if (log_every <= 0) fail("--log-every {} must be positive", log_every);
}

nlohmann::json run_config_to_json(const RunConfig& r) {
  return {{"data", r.data},
          {"out", r.out},
          {"batch", r.batch},
          {"steps", r.steps},
          {"lr", r.lr},
          {"min_lr_fraction", r.min_lr_fraction},
          {"warmup", r.warmup_steps()},
          {"weight_decay", r.weight_decay},
          {"beta1", r.beta1},
          {"beta2", r.beta2},
          {"adam_eps", r.adam_eps},
          {"grad_clip", r.grad_clip},
          {"seed", r.seed},
          {"threads", r.threads},
          {"ckpt_every", r.ckpt_every},
          {"val_every", r.val_every},
          {"val_batches", r.val_batches},
          {"val_fraction", r.val_fraction},
          {"log_every", r.log_every}};
}

void run_config_update_from_json(RunConfig& r, const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) fail("{}: run settings are not a JSON object", source);
  try {
    auto set = [&](const char* key, auto& field) {
      if (j.contains(key)) field = j[key].get<std::decay_t<decltype(field)>>();
    };
    set("data", r.data), set("out", r.out), set("batch", r.batch), set("steps", r.steps);
    set("tokenizer", r.tokenizer), set("shuffle", r.shuffle);
    set("lr", r.lr), set("min_lr_fraction", r.min_lr_fraction), set("warmup", r.warmup);
    set("weight_decay", r.weight_decay), set("beta1", r.beta1), set("beta2", r.beta2);
    set("adam_eps", r.adam_eps), set("grad_clip", r.grad_clip), set("seed", r.seed);
    set("threads", r.threads), set("ckpt_every", r.ckpt_every), set("val_every", r.val_every);
    set("val_batches", r.val_batches), set("val_fraction", r.val_fraction),
        set("log_every", r.log_every);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: a run setting has the wrong type ({})", source, e.what());
  }
}

double gradient_norm(const ParamArena<float>& arena) {
  return std::sqrt(ops::sum_of_squares(arena.grads.data(), arena.grads.size()));
}

void optimizer_step(ParamArena<float>& arena, const RunConfig& run, double lr, int64_t step,
                    double grad_norm) {
  ops::AdamWSettings adam{lr, run.beta1, run.beta2, run.adam_eps, 0.0, 1.0, step};
  if (run.grad_clip > 0 && grad_norm > run.grad_clip) adam.grad_scale = run.grad_clip / grad_norm;
  for (const TensorInfo& t : arena.layout) {
    adam.weight_decay = t.decay ? run.weight_decay : 0.0;  // 2-D matrices only
    ops::adamw_update(arena.params.data() + t.offset, arena.grads.data() + t.offset,
                      arena.adam_m.data() + t.offset, arena.adam_v.data() + t.offset, t.numel,
                      adam);
  }
}

int set_thread_count(int threads) {
  int n = threads > 0 ? threads : omp_get_num_procs();
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
  return n;
}

namespace {

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

class MetricsLog {
 public:
  explicit MetricsLog(const fs::path& path) : path_(path), out_(path, std::ios::app) {
    if (!out_) fail("{}: cannot open for appending", path.string());
  }
  void write(const nlohmann::json& record) {
    out_ << record.dump() << '\n';
    out_.flush();
    if (!out_) fail("{}: write failed", path_.string());
  }

 private:
  fs::path path_;
  std::ofstream out_;
};

}  // namespace

double evaluate_loss(Gpt<float>& model, const TokenStream& stream, int n_batches,
                     const std::function<void(const int32_t* targets)>& on_batch) {
  const int B = model.batch_size(), T = model.seq_len();
  std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
  double weighted = 0;
  int64_t count = 0;
  for (int i = 0; i < n_batches; i++) {
    val_batch(stream, i, B, T, inputs.data(), targets.data());
    double loss = model.forward(inputs.data(), targets.data());
    if (on_batch) on_batch(targets.data());
    weighted += loss * model.target_count();
    count += model.target_count();
  }
  return count ? weighted / count : NAN;
}

TrainResult train(const ModelConfig& requested_model, const RunConfig& run,
                  const std::string& resume_from) {
  requested_model.validate();
  run.validate();
  const int B = run.batch, T = requested_model.seq_len;
  const int threads = set_thread_count(run.threads);
  const bool tty = !run.quiet && isatty(STDOUT_FILENO);

  // Everything that can fail on bad input is checked before anything is written.
  std::optional<TokenizerKind> tokenizer;
  if (!run.tokenizer.empty()) tokenizer = parse_tokenizer(run.tokenizer);
  Dataset data = open_dataset(run.data, tokenizer, run.val_fraction, B, T, run.vocab_dir);
  ModelConfig model_cfg = requested_model;  // the vocabulary is the data's
  model_cfg.tokenizer = data.tokenizer;
  model_cfg.vocab_size = vocab_size_of(data.tokenizer);
  model_cfg.padded_vocab = pad_vocab(model_cfg.vocab_size);
  const int n_val_batches =
      run.val_batches > 0 ? val_batch_count(data.val, B, T, run.val_batches) : 0;

  fs::path run_dir = run.out;
  fs::path resume_ckpt;
  nlohmann::json state;
  if (!resume_from.empty()) {
    resume_ckpt = resolve_checkpoint(resume_from);
    run_dir = resume_ckpt.parent_path();
    state = load_trainer_state(resume_ckpt);
    auto latest = latest_checkpoint(run_dir);
    if (latest && *latest != resume_ckpt && !run.force)
      fail("{}: resuming from {} would overwrite the later checkpoint {}; pass --force to do so",
           run_dir.string(), resume_ckpt.filename().string(), latest->filename().string());
    auto tokens = state.value("/data/train_tokens"_json_pointer, (int64_t)-1);
    if (tokens != (int64_t)data.train.size())
      fail(
          "{}: {} training tokens, but the checkpoint was trained on {} (from {}); resume needs "
          "the same data",
          run.data, data.train.size(), tokens,
          state.value("/data/source"_json_pointer, std::string("?")));
  } else if (auto existing = latest_checkpoint(run_dir)) {
    if (!run.force)
      fail("{}: already holds a run ({}); use --resume {} to continue it, or --force to start over",
           run_dir.string(), existing->filename().string(), run_dir.string());
    for (const fs::path& p : list_checkpoints(run_dir)) fs::remove_all(p);
    fs::remove(run_dir / "metrics.jsonl");
  }

  Gpt<float> model(model_cfg, B, T);
  ParamArena<float>& arena = model.params();
  BatchLoader loader(data.train, B, T, run.shuffle, run.seed);
  Rng rng(run.seed);
  int64_t step = 0;
  double elapsed_before = 0;
  if (!resume_ckpt.empty()) {
    load_checkpoint_weights(resume_ckpt, arena, /*with_optimizer=*/true);
    try {
      step = state.at("step").get<int64_t>();
      loader.set_position({state.at("/data_position/epoch"_json_pointer).get<uint64_t>(),
                           state.at("/data_position/cursor"_json_pointer).get<uint64_t>()});
      rng.state = state.at("rng_state").get<uint64_t>();
      elapsed_before = state.value("elapsed_s", 0.0);
    } catch (const nlohmann::json::exception& e) {
      fail("{}: trainer state is incomplete ({})", (resume_ckpt / "trainer.json").string(),
           e.what());
    }
    if (step > run.steps) fail("--steps {} is below the checkpoint's step {}", run.steps, step);
  } else {
    arena.init(model_cfg, run.seed);
  }

  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) fail("{}: cannot create the run folder: {}", run_dir.string(), ec.message());
  const fs::path metrics_path = run_dir / "metrics.jsonl";
  if (!resume_ckpt.empty())
    truncate_metrics(metrics_path, step);
  else
    write_file_atomic(metrics_path,
                      "");  // a fresh run: records of an earlier attempt without checkpoints go
  MetricsLog metrics(metrics_path);

  LrSchedule schedule{run.lr, run.min_lr_fraction, run.warmup_steps(), run.steps};
  std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
  TrainResult result;

  auto save = [&](int64_t at_step, double elapsed) {
    nlohmann::json st = {
        {"step", at_step},
        {"data_position",
         {{"epoch", loader.position().epoch}, {"cursor", loader.position().cursor}}},
        {"rng_state", rng.state},
        {"elapsed_s", elapsed},
        {"tokens_seen", at_step * (int64_t)B * T},
        {"data",
         {{"source", run.data},
          {"train_tokens", data.train.size()},
          {"val_tokens", data.val.size()}}},
        {"run", run_config_to_json(run)}};
    result.last_checkpoint =
        save_checkpoint(run_dir, at_step, model_cfg, arena, st, run.force).string();
  };
  auto validate_now = [&](int64_t at_step) {
    if (n_val_batches == 0) return;
    double val = evaluate_loss(model, data.val, n_val_batches);
    metrics.write({{"split", "val"}, {"step", at_step}, {"loss", val}});
    result.final_val_loss = val;
    if (!run.quiet)
      std::printf("%sstep %lld | val loss %.4f\n", tty ? "\r\033[K" : "", (long long)at_step, val);
  };

  if (!run.quiet) {
    std::printf(
        "xsa train: %s attention, %d layers, %d heads, %d embd, seq %d, batch %d, %s tokenizer, "
        "%lld "
        "params, %d threads\n",
        layer_attn_string(model_cfg).c_str(), model_cfg.n_layer, model_cfg.n_head, model_cfg.n_embd,
        T, B, to_string(model_cfg.tokenizer), (long long)parameter_count(model_cfg), threads);
    std::printf("data: %s: %zu train / %zu val tokens; run folder %s%s\n", data.description.c_str(),
                data.train.size(), data.val.size(), run_dir.string().c_str(),
                resume_ckpt.empty() ? "" : fmt::format(" (resuming at step {})", step).c_str());
    std::fflush(stdout);
  }
  if (step == 0) validate_now(0);
  if (step >= run.steps && !run.quiet)
    std::printf("nothing to train: the run is at step %lld of --steps %lld\n", (long long)step,
                (long long)run.steps);

  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const int64_t first_step = step;
  double loss = NAN;
  for (; step < run.steps; step++) {
    const auto t0 = clock::now();
    loader.next(inputs.data(), targets.data());
    loss = model.forward_backward(inputs.data(), targets.data());
    double grad_norm = gradient_norm(arena);
    if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
      auto last = latest_checkpoint(run_dir);
      double bad = std::isfinite(loss) ? grad_norm : loss;
      fail("{} became {} at step {} (lr {:.3g}); stopped without saving{}",
           std::isfinite(loss) ? "gradient norm" : "loss", std::isnan(bad) ? "NaN" : "infinite",
           step + 1, schedule.at(step),
           last ? "; last checkpoint " + last->string() + " is intact" : "");
    }
    const double lr = schedule.at(step);
    optimizer_step(arena, run, lr, step + 1, grad_norm);
    const double ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    const double tok_s = B * T / (ms / 1000.0);
    const int64_t done = step + 1;
    metrics.write({{"step", done},
                   {"loss", loss},
                   {"lr", lr},
                   {"grad_norm", grad_norm},
                   {"ms", ms},
                   {"tokens_per_s", tok_s}});

    if (!run.quiet && (tty || done % run.log_every == 0 || done == run.steps)) {
      double spent = std::chrono::duration<double>(clock::now() - start).count();
      double eta = spent / (done - first_step) * (run.steps - done);
      std::printf(
          "%sstep %lld/%lld | loss %.4f | lr %.2e | norm %.3f | %.1f ms | %.0f tok/s | ETA %s%s",
          tty ? "\r\033[K" : "", (long long)done, (long long)run.steps, loss, lr, grad_norm, ms,
          tok_s, format_duration(eta).c_str(), tty ? "" : "\n");
      std::fflush(stdout);
    }
    if ((run.val_every > 0 && done % run.val_every == 0) || done == run.steps) validate_now(done);
    if ((run.ckpt_every > 0 && done % run.ckpt_every == 0) || done == run.steps) {
      double elapsed = elapsed_before + std::chrono::duration<double>(clock::now() - start).count();
      save(done, elapsed);
    }
  }
  if (tty) std::printf("\n");
  if (!run.quiet && !result.last_checkpoint.empty())
    std::printf("checkpoint: %s\n", result.last_checkpoint.c_str());
  result.steps_done = step;
  result.final_loss = loss;
  return result;
}

}  // namespace xsa
