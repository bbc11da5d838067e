// The arms of a comparison: prepared once, one seed's trained interleaved, finished, saved and
// taken back after an interruption.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string_view>

#include "xsa/analysis/similarity_bias.h"
#include "xsa/board/page.h"
#include "xsa/dist/agree.h"
#include "xsa/dist/comm.h"
#include "xsa/eval/evaluate.h"
#include "xsa/eval/suite.h"
#include "xsa/io/checkpoint.h"
#include "xsa/research/compare_parts.h"
#include "xsa/tokenizer/spm_tokenizer.h"
#include "xsa/tokenizer/tokenizer.h"
#include "xsa/train/metrics_log.h"
#include "xsa/train/training_run.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/fmt.h"
#include "xsa/util/memory.h"
#include "xsa/util/parse.h"
#include "xsa/util/stats.h"
#include "xsa/util/threads.h"

namespace xsa::comparison {

using nlohmann::json;

namespace {

constexpr uint64_t kFnvBasis = 1469598103934665603ull;

uint64_t fnv1a(const void* data, size_t bytes, uint64_t h) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace

// Every arm of a seed lives in memory at once: refuse a run that cannot fit.
void check_memory(const Setup& s, int B, int T) {
  check_fits_in_memory(variant_model(s.model, s.variants.back()), B, T, (int)s.variants.size(),
                       s.data.train.size() * 2.0);
}

// Every rank prepares its own copy (its data); rank 0 alone checks and clears the report folder.
void prepare(const CompareConfig& cfg, Comm& comm, Setup& s) {
  const RunConfig& run = cfg.run;
  run.validate();
  cfg.model.validate();
  if (cfg.seeds < 1) fail("--seeds {} must be at least 1", cfg.seeds);
  s.comm = &comm;
  s.variants = parse_variants(cfg);
  const fs::path out = run.out;
  std::error_code ec;
  if (!run.init_from.empty()) {  // every arm's model against the checkpoint, before anything goes
    s.init_weights.emplace(run.init_from, out, run.force);
    for (const Variant& v : s.variants)
      s.init_weights->check(param_layout(variant_model(cfg.model, v)));
  }
  if (comm.is_root() && run.force && !run.dry_run)  // start over: finished seeds go too
    for (int k = 0; k < 1000; k++) fs::remove(out / fmt::format("seed-{}.json", run.seed + k), ec);

  // --precision bf16 (or @bf16) where the CPU cannot: said before anything runs.
  for (const Variant& v : s.variants) variant_backend(run, v);
  static_cast<RunInputs&>(s) = prepare_run(cfg.model, run, comm);
  const int B = run.batch, T = cfg.model.seq_len;
  check_memory(s, B, T);
  // Only the options that change the numbers: threads, the output folder or logging do not. The
  // step's size is counted in tokens, so the same comparison on other process counts resumes.
  RunConfig resolved = run;
  resolved.total_batch_tokens = s.shape.tokens();
  json result_options = run_config_to_json(resolved, kSaved | kResult);
  result_options.erase("batch");
  // The validation windows are drawn evenly across the split since they stopped being its first
  // ones, and the final score reads every window (up to --score-tokens): seeds validated or
  // scored another way belong to another comparison.
  s.identity = {{"model", json(s.model)},
                {"run", result_options},
                {"variants", cfg.variants},
                {"eval_data", cfg.eval_data},
                {"validation", "windows drawn evenly across the split"},
                {"final_score", {{"windows", "every one"}, {"score_tokens", cfg.score_tokens}}}};
  if (!cfg.variant_lrs.empty()) s.identity["variant_lrs"] = cfg.variant_lrs;
  if (cfg.tuning) s.identity["tuning"] = true;
  for (const AttentionOption& o : kAttentionOptions)  // not in the variants' names
    if (o.whole_model && cfg.whole_model.*o.flag) s.identity[o.key] = true;
  // A vocabulary retrained under the same folder name makes another comparison.
  if (s.data.tokenizer == TokenizerKind::spm)
    s.identity["vocabulary_checksum"] = SpmTokenizer(s.data.vocab_dir).checksum();
  // A report is replaced only by the same comparison: its first seed's file must carry this
  // identity (more seeds extend it, an interrupted sweep re-reports it), else --force.
  if (comm.is_root() && fs::exists(out / "report.json", ec) && !run.force) {
    const fs::path first_seed = out / fmt::format("seed-{}.json", run.seed);
    const json done =
        fs::exists(first_seed, ec) ? json::parse(read_file(first_seed), nullptr, false) : json();
    if (!done.is_object() || done.value("identity", json()) != s.identity)
      fail(
          "{}: already holds a report of another comparison; pass --force to replace it, or "
          "choose another --out",
          out.string());
  }
  // The tokenizer of the training data tokenizes the evaluation data and the task files too.
  const std::string vocab_dir =
      s.data.tokenizer == TokenizerKind::spm ? s.data.vocab_dir : run.vocab_dir;
  for (const std::string& path : cfg.eval_data) {
    s.evals.push_back(
        open_dataset(path, s.data.tokenizer, 0, B, T, vocab_dir, /*evaluation=*/true));
    check_same_vocabulary(s.evals.back(), s.data.vocab_dir);
  }
  if (!cfg.eval_suite.empty()) {
    s.suite = find_suite_files(cfg.eval_suite, /*skip_bad_lines=*/true);
    const auto tokenizer = make_tokenizer(s.model.tokenizer, vocab_dir);
    for (TaskFile& f : s.suite.files) {
      s.suite_items.push_back(tokenize_task(s.model, *tokenizer, f, /*skip_bad_lines=*/true));
      if (f.skipped)
        s.suite.notes.push_back(fmt::format("{}: {} example(s) left out; the first: {}", f.path,
                                            f.skipped, f.first_skipped));
    }
  }
}

void print_header(const CompareConfig& cfg, const Setup& s) {
  const RunConfig& run = cfg.run;
  std::printf("xsa compare: %s | %d layers, %d heads, %d embd, seq %d, %lld steps, %d seed(s)\n",
              fmt::format("{}", fmt::join(cfg.variants, " vs ")).c_str(), s.model.n_layer,
              s.model.n_head, s.model.n_embd, s.model.seq_len, (long long)run.steps, cfg.seeds);
  std::printf("%s\n", describe_step(s.shape, run, s.threads).c_str());
  std::printf("data: %s: %zu train / %zu val tokens; report folder %s\n",
              s.data.description.c_str(), s.data.train.size(), s.data.val.size(), run.out.c_str());
  std::fflush(stdout);
}

// Peak memory of each variant alone: a fresh model and one step.
std::vector<double> measure_peaks(const CompareConfig& cfg, const Setup& s) {
  const RunConfig& run = cfg.run;
  const int B = run.batch, T = s.model.seq_len;
  std::vector<double> peak(s.variants.size());
  std::vector<int32_t> in((size_t)B * T), tg((size_t)B * T);
  BatchLoader probe(s.data.train, B, T, run.shuffle, run.seed);
  probe.next(in.data(), tg.data());
  for (size_t k = 0; k < s.variants.size(); k++) {
    reset_peak_rss();
    const ModelConfig m = variant_model(s.model, s.variants[k]);
    Gpt<float> model(m, B, T, GptMode::training, variant_backend(run, s.variants[k]));
    model.params().init(m, run.seed);
    TrainStep(model, optimizer_settings(run)).run(in.data(), tg.data(), run.lr, 1);
    peak[k] = peak_rss_mb();
  }
  return peak;
}

// The arms of one seed: the same initial weights where they share tensors, and the same batches.
std::vector<Arm> make_arms(const CompareConfig& cfg, const Setup& s, uint64_t seed) {
  const int B = cfg.run.batch, T = s.model.seq_len;
  std::vector<Arm> arms(s.variants.size());
  for (size_t k = 0; k < s.variants.size(); k++) {
    Arm& a = arms[k];
    const ModelConfig m = variant_model(s.model, s.variants[k]);
    a.variant = s.variants[k];
    a.model = std::make_unique<Gpt<float>>(m, B, T, GptMode::training,
                                           variant_backend(cfg.run, s.variants[k]));
    a.model->params().init(m, seed);
    if (s.init_weights)  // the same pretrained weights for every arm and seed, read once
      s.init_weights->load(a.model->params());
    a.step = std::make_unique<TrainStep>(
        *a.model, optimizer_settings(cfg.run),
        Parallelism{s.comm, cfg.run.zero == 1, cfg.run.overlap, cfg.run.comm});
    a.loader = std::make_unique<BatchLoader>(s.data.train, s.shape.rows_per_process(), T,
                                             cfg.run.shuffle, seed, s.comm->rank(), s.comm->size());
    a.result.variant = s.variants[k].name, a.result.seed = seed;
    a.result.lr = cfg.variant_lrs.empty() ? cfg.run.tuned_rate() : cfg.variant_lrs[k];
    // Over the tensors every variant has: the same model's with plain SA on every layer (a
    // variant's own, XSA's gates, sinks, the rivals' and the whole-model options' tensors, start
    // their own way).
    ModelConfig plain = m;
    plain.attention = AttentionLayers{};
    std::set<std::string> shared;
    for (const TensorInfo& t : param_layout(plain)) shared.insert(t.name);
    a.result.init_hash = kFnvBasis;
    const HostView<float> weights(a.model->params().params);
    for (const TensorInfo& t : a.model->params().layout)
      if (shared.count(t.name))
        a.result.init_hash =
            fnv1a(weights.data() + t.offset, t.numel * sizeof(float), a.result.init_hash);
    a.result.batches_hash = kFnvBasis;
  }
  return arms;
}

fs::path arm_folder(const fs::path& out, const std::string& variant, uint64_t seed) {
  return out / "arms" / fmt::format("{}-seed{}", variant, seed);
}

// What compare does around the loop for one seed's arms: each arm's fingerprint of the batches
// it saw, its step times, losses and validation curve, the step time of each arm over SA's, the
// progress line and the stop at a non-finite step or a signal.
class CompareObserver : public RunObserver {
 public:
  CompareObserver(const CompareConfig& cfg, const Setup& s, std::vector<Arm>& arms, uint64_t seed,
                  int seed_index, std::vector<std::vector<double>>& overhead,
                  clock_type::time_point start)
      : cfg_(cfg),
        s_(s),
        arms_(arms),
        seed_(seed),
        seed_index_(seed_index),
        overhead_(overhead),
        start_(start),
        tty_(!cfg.run.quiet && stdout_is_interactive()),
        ms_this_(arms.size()) {
    if (s.comm->is_root())
      for (const Arm& a : arms) logs_.push_back(open_arm_log(a.variant.name));
  }

  void batch_read(size_t k, std::span<const int32_t> inputs) override {
    // Over the whole step's batch, every process's share in rank order: the bytes one process
    // would hash.
    Arm& a = arms_[k];
    const std::string mine((const char*)inputs.data(), inputs.size() * sizeof(int32_t));
    for (const std::string& share :
         s_.comm->size() > 1 ? s_.comm->all_gather(mine) : std::vector<std::string>{mine})
      a.result.batches_hash = fnv1a(share.data(), share.size(), a.result.batches_hash);
  }

  void arm_stepped(const ArmStep& st) override {
    Arm& a = arms_[st.arm];
    const StepResult& r = *st.result;
    if (!r.finite) {  // this rate is too high for this arm: it stops here, the others go on
      a.stopped = true, a.result.diverged_at = st.done;
      if (!cfg_.run.quiet)
        std::printf(
            "%s%s (seed %llu): loss or gradient norm became %s at step %lld (lr %.3g); "
            "it stops there, the other arms go on\n",
            tty_ ? "\r\033[K" : "", a.variant.name.c_str(), (unsigned long long)seed_,
            std::isnan(r.loss) || std::isnan(r.grad_norm) ? "NaN" : "infinite", (long long)st.done,
            st.lr);
      return;
    }
    ms_this_[st.arm] = st.ms;
    a.ms.push_back(st.ms);
    a.losses.push_back(r.loss);
    a.result.train_curve.push_back({st.done, r.loss});
    if (!logs_.empty()) logs_[st.arm]->write(step_record(st, s_.shape.tokens()));
  }

  void stepped(int64_t, double) override {
    for (size_t k = 1; k < arms_.size(); k++)
      if (!arms_[k].stopped && !arms_[0].stopped) overhead_[k].push_back(ms_this_[k] / ms_this_[0]);
    last_stepped_ = clock_type::now();
  }

  void validated(int64_t step, const std::vector<double>& losses) override {
    for (size_t k = 0; k < arms_.size(); k++) {
      arms_[k].result.val_curve.push_back({step, losses[k]});
      if (!logs_.empty()) logs_[k]->write(val_record(step, losses[k], s_.val_bytes_per_token));
    }
    validation_seconds_ += std::chrono::duration<double>(clock_type::now() - last_stepped_).count();
  }

  // Wall-clock spent in validation passes (every arm's), since this seed's first.
  double validation_seconds() const { return validation_seconds_; }

  void step_finished(int64_t done, bool val_now) override {
    const RunConfig& run = cfg_.run;
    if (run.quiet || !(tty_ || val_now || done % run.log_every == 0)) return;
    const double spent = std::chrono::duration<double>(clock_type::now() - start_).count();
    const double total = (double)run.steps * cfg_.seeds,
                 so_far = (double)seed_index_ * run.steps + done;
    std::string line = fmt::format("seed {} step {}/{}", seed_, done, run.steps);
    for (const Arm& a : arms_) {
      if (a.stopped) {
        line += fmt::format(" | {} diverged", a.variant.name);
        continue;
      }
      line += fmt::format(" | {} {:.4f}", a.variant.name, a.losses.back());
      if (val_now && std::isfinite(a.result.val_curve.back().second))
        line += fmt::format(" (val {:.4f})", a.result.val_curve.back().second);
    }
    line += fmt::format(" | ETA {:.0f}s", spent / so_far * (total - so_far));
    std::printf("%s%s%s", tty_ ? "\r\033[K" : "", line.c_str(), tty_ && !val_now ? "" : "\n");
    std::fflush(stdout);
  }

  // The arm's folder with a fresh metrics.jsonl and its run.json, as xsa train's (xsa board
  // follows the arms as they train); a seed started again starts its records over.
  std::unique_ptr<MetricsLog> open_arm_log(const std::string& variant) const {
    const fs::path dir = arm_folder(cfg_.run.out, variant, seed_);
    create_owned_folder(dir);
    write_file_atomic(dir / "metrics.jsonl", "");
    write_run_description(dir, {{"command", "compare"}, {"variant", variant}, {"seed", seed_}},
                          cfg_.run.steps, s_.data);
    return std::make_unique<MetricsLog>(dir / "metrics.jsonl");
  }

  std::string stopping(int64_t done) override {
    if (tty_) std::printf("\n");
    return fmt::format(
        "stopped at seed {}, step {} of {}; the seeds finished before it are kept in {}; run the "
        "same command again to continue from seed {}",
        seed_, done, cfg_.run.steps, cfg_.run.out, seed_);
  }

 private:
  const CompareConfig& cfg_;
  const Setup& s_;
  std::vector<Arm>& arms_;
  const uint64_t seed_;
  const int seed_index_;
  std::vector<std::vector<double>>& overhead_;
  const clock_type::time_point start_;
  const bool tty_;
  std::vector<double> ms_this_;
  std::vector<std::unique_ptr<MetricsLog>> logs_;  // rank 0's: each arm's metrics.jsonl
  clock_type::time_point last_stepped_ = clock_type::now();
  double validation_seconds_ = 0;
};

// Steps every arm of a seed interleaved, rotating who goes first so the timing stays fair;
// appends each step's ms / ms(SA) per variant to overhead. Returns the seconds spent validating.
double train_arms(const CompareConfig& cfg, const Setup& s, std::vector<Arm>& arms, uint64_t seed,
                  int seed_index, std::vector<std::vector<double>>& overhead,
                  clock_type::time_point start) {
  TrainingRun training(cfg.run, s.shape, *s.comm, s.data.val, s.val_batches);
  for (Arm& a : arms)
    training.add_arm(
        {a.step.get(), a.loader.get(), a.result.lr / cfg.run.tuned_rate(), &a.stopped});
  CompareObserver observer(cfg, s, arms, seed, seed_index, overhead, start);
  training.add_observer(&observer);
  training.run({0, /*validate_first=*/true, /*rotate=*/true});
  return observer.validation_seconds();
}

// The final score's batches of `stream`: every window of T + 1 tokens, or of a larger set an even
// sample of whole windows of about score_tokens tokens (val_batch draws them evenly).
int score_batches(const CompareConfig& cfg, const Setup& s, const TokenStream& stream,
                  int64_t& tokens) {
  const int T = s.model.seq_len, B = s.shape.batch;
  const int64_t windows = stream.size() > (size_t)T ? (int64_t)((stream.size() - 1) / T) : 0;
  int64_t rows = windows;
  if (cfg.score_tokens > 0) rows = std::min(rows, std::max<int64_t>(1, cfg.score_tokens / T));
  const int64_t batches = (rows + B - 1) / B;
  tokens = std::min(windows, batches * B) * T;
  return (int)batches;
}

// After the last step: each arm's summary figures, its final score on every window of each set,
// its further evaluations and its checkpoint.
void finish_arms(const CompareConfig& cfg, const Setup& s, std::vector<Arm>& arms,
                 const std::vector<double>& peak) {
  const RunConfig& run = cfg.run;
  for (size_t k = 0; k < arms.size(); k++) {
    Arm& a = arms[k];
    const size_t tail = std::max<size_t>(1, a.losses.size() / 10);
    a.result.train_loss =
        a.losses.empty() ? NAN : mean(std::vector<double>(a.losses.end() - tail, a.losses.end()));
    a.result.step_ms.clear();
    for (double ms : a.ms) a.result.step_ms.push_back(std::round(ms * 100) / 100);
    set_robust_timing(a.result, s.shape.tokens());
    a.result.peak_mb = peak[k];
    if (a.stopped) {  // diverged while tuning: no figures of its weights, no checkpoint
      a.result.val_loss = NAN;
      a.result.eval_losses.assign(s.evals.size(), NAN);
      continue;
    }
    // The final score with the final weights, the same windows for every arm: the whole
    // validation split, then each --eval-data set (their validation split, else all of it), each
    // with its loss by position.
    int64_t tokens = 0;
    const LossByPosition val = shared_loss_by_position(*s.comm, *a.model, s.data.val,
                                                       score_batches(cfg, s, s.data.val, tokens));
    a.result.val_loss = val.loss;
    a.result.position_loss.push_back(val.buckets);
    a.result.scored_tokens.push_back(tokens);
    for (const Dataset& e : s.evals) {
      const TokenStream& st = e.val.size() > (size_t)s.model.seq_len ? e.val : e.train;
      const LossByPosition l =
          shared_loss_by_position(*s.comm, *a.model, st, score_batches(cfg, s, st, tokens));
      a.result.eval_losses.push_back(l.loss);
      a.result.position_loss.push_back(l.buckets);
      a.result.scored_tokens.push_back(tokens);
    }
    if (s.comm->is_root())
      for (size_t t = 0; t < s.suite.files.size(); t++)
        a.suite.push_back(evaluate_task(a.model->config(), a.model->params().w, s.suite.files[t],
                                        s.suite_items[t], nullptr, 1024, a.model->backend()));
    // The final weights, as a checkpoint xsa analyze, eval and sample can read (a tuning arm's
    // are not kept: its final score is all it is for).
    if (!cfg.tuning)
      save_training_state(*s.comm, arm_folder(run.out, a.variant.name, a.result.seed), run.steps,
                          a.model->config(), a.model->params(),
                          json{{"step", run.steps},
                               {"compare_variant", a.variant.name},
                               {"data", {{"source", run.data}}}},
                          true, vocabulary_files(s.data));
  }
}

// A seed finished before an interruption: its results, when it belongs to this comparison.
// Rank 0 reads the file and every rank takes its verdict.
bool take_finished_seed(const fs::path& seed_file, const Setup& s, const RunConfig& run,
                        CompareResult& result, std::vector<std::vector<double>>& overhead,
                        double& validation_seconds) {
  std::error_code ec;
  const bool root = s.comm->is_root();
  const std::string text =
      s.comm->broadcast(root && fs::exists(seed_file, ec) ? read_file(seed_file) : std::string());
  if (text.empty()) return false;
  json done = json::parse(text, nullptr, false);
  if (done.is_discarded() || done.value("identity", json()) != s.identity)
    fail(
        "{}: comes from a different comparison (other data, model, settings or variants); pass "
        "--force to start over",
        seed_file.string());  // (alike on every rank: they hold the same text)
  for (const auto& a : done["arms"]) result.arms.push_back(arm_from_json(a));
  validation_seconds += done.value("validation_seconds", 0.0);
  for (size_t k = 1; k < s.variants.size(); k++)
    for (const auto& r : done["overhead"][k]) overhead[k].push_back(r.get<double>());
  if (!run.quiet && root)
    std::printf("seed %s: finished earlier, results taken from %s\n",
                seed_file.stem().string().substr(5).c_str(), seed_file.string().c_str());
  return true;
}

// This seed is done: its results survive an interruption (Ctrl-C) of the later ones.
void save_finished_seed(const fs::path& seed_file, const Setup& s, const std::vector<Arm>& arms,
                        const std::vector<std::vector<double>>& overhead, size_t first_overhead,
                        double validation_seconds) {
  json done = {{"identity", s.identity},
               {"arms", json::array()},
               {"overhead", json::array()},
               {"validation_seconds", validation_seconds}};
  for (const Arm& a : arms) done["arms"].push_back(arm_to_json(a.result));
  for (size_t k = 0; k < s.variants.size(); k++)
    done["overhead"].push_back(
        k ? std::vector<double>(overhead[k].begin() + first_overhead, overhead[k].end())
          : std::vector<double>());
  write_file_atomic(seed_file, done.dump() + "\n");
}

// The similarity bias of every variant, from the first seed's saved final weights.
std::vector<std::vector<HeadBias>> analyze_arms(const CompareConfig& cfg, const Setup& s) {
  std::vector<std::vector<HeadBias>> bias(s.variants.size());
  if (cfg.analyze_batches <= 0 || s.val_batches <= 0) return bias;
  for (size_t k = 0; k < s.variants.size(); k++) {
    // An arm that diverged left no final weights to analyze.
    const fs::path arm = arm_folder(cfg.run.out, s.variants[k].name, cfg.run.seed);
    std::error_code ec;
    const bool weights = fs::exists(arm / "model.safetensors", ec) || latest_checkpoint(arm);
    if (!weights) continue;
    const fs::path ckpt = resolve_checkpoint(arm);
    ModelConfig m = load_checkpoint_config(ckpt);
    Gpt<float> model(m, cfg.run.batch, s.model.seq_len, GptMode::inference);
    load_checkpoint_weights(ckpt, model.params(), false);
    bias[k] =
        attention_similarity_bias(model, s.data.val, std::min(cfg.analyze_batches, s.val_batches));
  }
  return bias;
}

// The --eval-suite tasks on an arm's saved checkpoint (a seed finished before an interruption).
// Scored in the arm's precision, as its live twin would have been.
std::vector<TaskResult> score_suite_from_checkpoint(const Setup& s, const fs::path& arm,
                                                    Backend<float>& backend) {
  std::vector<TaskResult> out;
  if (s.suite.files.empty()) return out;
  const fs::path ckpt = resolve_checkpoint(arm);
  const ModelConfig cfg = load_checkpoint_config(ckpt);
  ParamArena<float> weights(cfg, /*training_state=*/false, backend);
  load_checkpoint_weights(ckpt, weights, false);
  for (size_t t = 0; t < s.suite.files.size(); t++)
    out.push_back(
        evaluate_task(cfg, weights.w, s.suite.files[t], s.suite_items[t], nullptr, 1024, backend));
  return out;
}

}  // namespace xsa::comparison
