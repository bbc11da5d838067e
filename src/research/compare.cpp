#include "xsa/research/compare.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string_view>

#include "xsa/analysis/similarity_bias.h"
#include "xsa/board/page.h"
#include "xsa/dist/agree.h"
#include "xsa/dist/comm.h"
#include "xsa/eval/evaluate.h"
#include "xsa/eval/suite.h"
#include "xsa/io/checkpoint.h"
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

namespace xsa {

namespace fs = std::filesystem;
using nlohmann::json;

Variant parse_variant(const std::string& name, int n_layer) {
  if (const size_t at = name.rfind('@'); at != std::string::npos) {
    const std::string suffix = name.substr(at + 1);
    const auto precision = precision_named(suffix);
    if (!precision)
      fail("--variants {}: '{}' after @ is not a precision ({})", name, suffix,
           kPrecisionChoices);
    if (name.find('@') != at) fail("--variants {}: one precision per variant", name);
    Variant v = parse_variant(name.substr(0, at), n_layer);
    v.name = name, v.precision = precision;
    return v;
  }
  for (const auto& [rival, flag] : {std::pair{"gated-attn", &AttentionRivals::gated_attn},
                                    std::pair{"value-residual", &AttentionRivals::value_residual},
                                    std::pair{"no-self", &AttentionRivals::no_self}}) {
    const std::string suffix = std::string("+") + rival;
    if (name == rival) {  // alone: on SA
      Variant v = parse_variant("sa", n_layer);
      v.name = name, v.rivals.*flag = true;
      return v;
    }
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      Variant v = parse_variant(name.substr(0, name.size() - suffix.size()), n_layer);
      if (v.rivals.*flag) fail("--variants {}: {} twice", name, rival);
      v.name = name, v.rivals.*flag = true;
      return v;
    }
  }
  if (name.size() > 5 && name.compare(name.size() - 5, 5, "+sink") == 0) {
    Variant v = parse_variant(name.substr(0, name.size() - 5), n_layer);
    v.name = name;
    std::fill(v.sinks.begin(), v.sinks.end(), true);
    return v;
  }
  Variant v{name, {}, {}, {}, {}};
  auto set_all = [&](AttnKind k) { std::fill(v.layers.begin(), v.layers.end(), k); };
  auto count_after = [&](const std::string& prefix) {
    int n = 0;
    try {
      size_t used = 0;
      n = std::stoi(name.substr(prefix.size()), &used);
      if (used != name.size() - prefix.size()) n = -1;
    } catch (const std::exception&) {
      n = -1;
    }
    if (n < 1 || n > n_layer)
      fail("--variants {}: needs a layer count between 1 and {} (--layers)", name, n_layer);
    return n;
  };
  if (name == "sa") {
    set_all(AttnKind::sa);
  } else if (name == "xsa") {
    set_all(AttnKind::xsa);
  } else if (name == "xsa-gated") {
    set_all(AttnKind::xsa_gated);
  } else if (name == "xsa-gated-one") {
    set_all(AttnKind::xsa_gated_one);
  } else if (name.rfind("xsa-last", 0) == 0) {
    set_all(AttnKind::sa);
    for (int l = n_layer - count_after("xsa-last"); l < n_layer; l++) v.layers[l] = AttnKind::xsa;
  } else if (name.rfind("xsa-first", 0) == 0) {
    set_all(AttnKind::sa);
    for (int l = 0, n = count_after("xsa-first"); l < n; l++) v.layers[l] = AttnKind::xsa;
  } else if (name.rfind("xsa-layers-", 0) == 0) {
    set_all(AttnKind::sa);
    std::string list = name.substr(11);
    size_t pos = 0;
    while (pos <= list.size()) {
      size_t dot = list.find('.', pos);
      std::string item = list.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
      int l = -1;
      try {
        l = std::stoi(item);
      } catch (const std::exception&) {
      }
      if (l < 0 || l >= n_layer || item.find_first_not_of("0123456789") != std::string::npos)
        fail("--variants {}: '{}' is not a layer index between 0 and {}", name, item, n_layer - 1);
      v.layers[l] = AttnKind::xsa;
      if (dot == std::string::npos) break;
      pos = dot + 1;
    }
  } else {
    fail(
        "--variants {} is not known (sa, xsa, xsa-gated, xsa-lastN, xsa-firstN, xsa-layers-0.2.5, "
        "gated-attn, value-residual, no-self; +sink, +gated-attn, +value-residual, +no-self; @bf16 "
        "or @fp32)",
        name);
  }
  return v;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos <= s.size();) {
    size_t comma = s.find(',', pos);
    out.push_back(s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

void apply_compare_preset(const std::string& name, ModelConfig& model, RunConfig& run,
                          CompareConfig& cfg) {
  if (name == "demo") {  // about 9 minutes on 2 cores: 4 × 128, context 256, 3 seeds
    model.n_layer = 4, model.n_head = 4, model.n_embd = 128, model.seq_len = 256;
    run.batch = 16, run.steps = 300, run.lr = 2e-3, run.val_every = 50, run.val_batches = 8;
    cfg.seeds = 3;
  } else if (name == "tiny") {  // seconds: for trying the tool
    model.n_layer = 2, model.n_head = 4, model.n_embd = 64, model.seq_len = 64;
    run.batch = 8, run.steps = 60, run.lr = 3e-3, run.val_every = 20, run.val_batches = 4;
    cfg.seeds = 2;
  } else {
    fail("--preset {} is not known (demo, tiny)", name);
  }
}

namespace {

using clock_type = std::chrono::steady_clock;

struct Arm {
  std::vector<TaskResult> suite;  // --eval-suite's results
  Variant variant;
  std::unique_ptr<Gpt<float>> model;
  std::unique_ptr<TrainStep> step;
  std::unique_ptr<BatchLoader> loader;
  std::vector<double> ms, losses;
  double seconds = 0;    // training time so far (its steps' wall-clock)
  bool stopped = false;  // diverged in a tuning comparison: no more steps
  ArmResult result;
};

constexpr uint64_t kFnvBasis = 1469598103934665603ull;

uint64_t fnv1a(const void* data, size_t bytes, uint64_t h) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Everything a comparison needs before its first step, checked before anything is written: what
// every training run needs (the step's shape, threads, data, the model with the data's
// vocabulary, the validation batches), and a comparison's own.
struct Setup : RunInputs {
  std::vector<Variant> variants;
  std::vector<Dataset> evals;
  nlohmann::json identity;  // finished seeds of an interrupted run with the same one resume
  Comm* comm = nullptr;
  SuiteFiles suite;  // --eval-suite's tasks, tokenized once
  std::vector<std::vector<ScoringItem>> suite_items;
  std::optional<InitialWeights> init_weights;  // --init-from's checkpoint
};

// The backend of a variant's arms: its own precision, else the run's.
Backend<float>& variant_backend(const RunConfig& run, const Variant& v) {
  BackendOptions options = backend_options(run);
  if (v.precision) options.precision = *v.precision;
  return select_backend(options);
}

ModelConfig variant_model(const ModelConfig& base, const Variant& v) {
  ModelConfig m = base;
  m.layer_attn = v.layers, m.layer_sink = v.sinks, m.rivals = v.rivals;
  return m;
}

std::vector<Variant> parse_variants(const CompareConfig& cfg) {
  if (cfg.variants.empty() || cfg.variants[0] != "sa")
    fail("--variants must start with sa, the baseline every other variant is compared with");
  std::vector<Variant> variants;
  for (const std::string& v : cfg.variants) {
    for (const Variant& seen : variants)
      if (seen.name == v) fail("--variants lists {} twice", v);
    variants.push_back(parse_variant(v, cfg.model.n_layer));
    if (variants.back().precision == cfg.run.precision)
      fail("--variants {}: the run's --precision is already {}, so it would be a copy of its twin",
           v, to_string(cfg.run.precision));
  }
  return variants;
}

// Every arm of a seed lives in memory at once: refuse a run that cannot fit.
void check_memory(const Setup& s, int B, int T) {
  const ModelConfig m = variant_model(s.model, s.variants.back());
  const double need =
      (double)s.variants.size() * Gpt<float>::memory_bytes(m, B, T) + s.data.train.size() * 2.0;
  const double available = available_memory_bytes();
  if (available > 0 && need > 0.9 * available)
    fail(
        "{} arms of this model need about {:.1f} GB at --batch {} and --seq-len {}, but {:.1f} GB "
        "are available; use fewer variants, a smaller model or batch",
        s.variants.size(), need / 1e9, B, T, available / 1e9);
}

// Batches of --batch rows that make --val-batches batches of the step's size, however the step is
// split over micro-batches and processes.
int validation_batches(const Setup& s, const TokenStream& stream, int step_batches) {
  return val_batch_count(stream, s.shape.batch, s.shape.T,
                         step_batches * s.shape.accumulation * s.shape.world);
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
  if (comm.is_root() && run.force)  // start over: finished seeds of an interrupted run go too
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
  // ones: seeds validated the old way belong to another comparison.
  s.identity = {{"model", json(s.model)},
                {"run", result_options},
                {"variants", cfg.variants},
                {"eval_data", cfg.eval_data},
                {"validation", "windows drawn evenly across the split"}};
  if (!cfg.eval_data.empty()) s.identity["eval_batches"] = cfg.eval_batches;
  if (!cfg.variant_lrs.empty()) s.identity["variant_lrs"] = cfg.variant_lrs;
  if (cfg.tuning) s.identity["tuning"] = true;
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
    a.result.lr = cfg.variant_lrs.empty() ? cfg.run.lr : cfg.variant_lrs[k];
    // Over the tensors every variant has (a gated variant's extra gates start at zero, as SA;
    // the rivals' W_g and λ are theirs alone).
    a.result.init_hash = kFnvBasis;
    const HostView<float> weights(a.model->params().params);
    for (const TensorInfo& t : a.model->params().layout)
      if (t.name.find("xsa_gate") == std::string::npos &&
          t.name.find("attn.sink") == std::string::npos &&
          t.name.find("attn.c_gate") == std::string::npos &&
          t.name.find("attn.value_lambda") == std::string::npos)
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
    a.seconds += st.ms / 1000;
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
      arms_[k].result.val_seconds.push_back(arms_[k].seconds);
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
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) fail("{}: cannot create the arm's folder: {}", dir.string(), ec.message());
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
    training.add_arm({a.step.get(), a.loader.get(), a.result.lr / cfg.run.lr, &a.stopped});
  CompareObserver observer(cfg, s, arms, seed, seed_index, overhead, start);
  training.add_observer(&observer);
  training.run({0, /*validate_first=*/true, /*rotate=*/true});
  return observer.validation_seconds();
}

// After the last step: each arm's summary figures, its further evaluations and its checkpoint.
void finish_arms(const CompareConfig& cfg, const Setup& s, std::vector<Arm>& arms,
                 const std::vector<double>& peak) {
  const RunConfig& run = cfg.run;
  const int T = s.model.seq_len;
  for (size_t k = 0; k < arms.size(); k++) {
    Arm& a = arms[k];
    const size_t tail = std::max<size_t>(1, a.losses.size() / 10);
    a.result.train_loss =
        a.losses.empty() ? NAN : mean(std::vector<double>(a.losses.end() - tail, a.losses.end()));
    a.result.val_loss = a.result.val_curve.back().second;
    a.result.ms_per_step = median(a.ms);
    a.result.tokens_per_s = s.shape.tokens() / (a.result.ms_per_step / 1000);
    a.result.peak_mb = peak[k];
    if (a.stopped) {  // diverged while tuning: no figures of its weights, no checkpoint
      a.result.eval_losses.assign(s.evals.size(), NAN);
      continue;
    }
    // Loss by position with the final weights: on the validation windows of its last validation,
    // then on each --eval-data set (whose mean loss comes with it).
    const size_t buckets = position_buckets(T).size();
    a.result.position_loss.push_back(
        s.val_batches > 0
            ? shared_loss_by_position(*s.comm, *a.model, s.data.val, s.val_batches).buckets
            : std::vector<double>(buckets, NAN));
    for (const Dataset& e : s.evals) {
      const TokenStream& st = e.val.size() > (size_t)T ? e.val : e.train;
      const LossByPosition l = shared_loss_by_position(
          *s.comm, *a.model, st,
          validation_batches(s, st, cfg.eval_batches > 0 ? cfg.eval_batches : run.val_batches));
      a.result.eval_losses.push_back(l.loss);
      a.result.position_loss.push_back(l.buckets);
    }
    if (s.comm->is_root())
      for (size_t t = 0; t < s.suite.files.size(); t++)
        a.suite.push_back(evaluate_task(a.model->config(), a.model->params().w, s.suite.files[t],
                                        s.suite_items[t], nullptr, 1024, a.model->backend()));
    // The final weights, as a checkpoint xsa analyze, eval and sample can read.
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

// Arm `name` against arm `reference`, paired by seed; an empty result when either is missing.
PairedDelta paired_delta(const CompareResult& result, const std::string& name,
                         const std::string& reference) {
  PairedDelta d;
  const auto mine = arms_of(result, name), theirs = arms_of(result, reference);
  if (mine.empty() || mine.size() != theirs.size()) return d;
  std::vector<double> delta, ref_val, ms, ref_ms;
  for (size_t i = 0; i < mine.size(); i++) {
    delta.push_back(mine[i]->val_loss - theirs[i]->val_loss);
    ref_val.push_back(theirs[i]->val_loss);
    ms.push_back(mine[i]->ms_per_step), ref_ms.push_back(theirs[i]->ms_per_step);
  }
  d.reference = reference;
  d.mean = mean(delta), d.sd = sample_sd(delta), d.p_value = paired_t_test_p(delta);
  d.reference_sd = sample_sd(ref_val);
  d.time_ratio = mean(ms) / mean(ref_ms);
  return d;
}

// Each seed's validation loss of `variant` minus SA's.
std::vector<double> deltas_vs_sa(const CompareResult& result, const std::string& variant) {
  const auto mine = arms_of(result, variant), sa = arms_of(result, "sa");
  std::vector<double> d;
  for (size_t i = 0; i < mine.size() && i < sa.size(); i++)
    d.push_back(mine[i]->val_loss - sa[i]->val_loss);
  return d;
}

// --seeds auto after `done` seeds: the note for the report once it stops (seeds_stop_here), else
// empty.
std::string auto_seeds_verdict(const CompareConfig& cfg, const SequentialDesign& design,
                               const CompareResult& result, int done,
                               std::vector<SequentialLook>& looks) {
  std::vector<std::vector<double>> deltas(cfg.variants.size());
  for (size_t k = 1; k < cfg.variants.size(); k++)
    deltas[k] = deltas_vs_sa(result, cfg.variants[k]);
  if (!seeds_stop_here(design, deltas, done, looks)) return "";
  std::string answers;
  for (size_t k = 1; k < cfg.variants.size(); k++)
    answers +=
        fmt::format("{}{}: {}", k > 1 ? ", " : "", cfg.variants[k], to_string(looks[k].answer));
  return fmt::format("--seeds auto (at most {}): stopped after {} seeds ({})", cfg.seeds, done,
                     answers);
}

// Differences to SA paired by seed: intervals, effect sizes and tests, Holm across the variants;
// a verdict that never calls a single seed a win.
std::vector<VariantSummary> summarize(const CompareResult& result, const Setup& s,
                                      const CompareConfig& cfg,
                                      const std::vector<std::vector<double>>& overhead,
                                      const std::vector<SequentialLook>& looks) {
  std::vector<VariantSummary> out;
  const auto sa_arms = arms_of(result, "sa");
  for (size_t k = 0; k < s.variants.size(); k++) {
    VariantSummary sm;
    sm.variant = s.variants[k].name;
    sm.lr = cfg.variant_lrs.empty() ? cfg.run.lr : cfg.variant_lrs[k];
    const auto mine = arms_of(result, sm.variant);
    std::vector<double> val, train, delta;
    for (size_t i = 0; i < mine.size(); i++) {
      val.push_back(mine[i]->val_loss), train.push_back(mine[i]->train_loss);
      delta.push_back(mine[i]->val_loss - sa_arms[i]->val_loss);
    }
    sm.n_seeds = (int)mine.size();
    sm.train_loss_mean = mean(train), sm.val_loss_mean = mean(val), sm.val_loss_sd = sample_sd(val);
    for (size_t e = 0; e < s.evals.size(); e++) {
      std::vector<double> el, ed;
      for (size_t i = 0; i < mine.size(); i++)
        el.push_back(mine[i]->eval_losses[e]),
            ed.push_back(mine[i]->eval_losses[e] - sa_arms[i]->eval_losses[e]);
      sm.eval_loss_mean.push_back(mean(el)), sm.eval_delta_vs_sa_mean.push_back(mean(ed));
      sm.eval_delta.push_back(describe_paired(ed));
    }
    // Loss by position: per set and bucket, over the seeds whose arms have it.
    const size_t sets = mine.empty() ? 0 : mine[0]->position_loss.size();
    for (size_t set = 0; set < sets; set++) {
      const size_t buckets = mine[0]->position_loss[set].size();
      std::vector<double> means;
      std::vector<PairedDifferences> deltas;
      for (size_t b = 0; b < buckets; b++) {
        std::vector<double> loss, d;
        for (size_t i = 0; i < mine.size(); i++) {
          const auto &mp = mine[i]->position_loss, &sp = sa_arms[i]->position_loss;
          if (set >= mp.size() || set >= sp.size() || b >= mp[set].size() || b >= sp[set].size())
            continue;
          loss.push_back(mp[set][b]), d.push_back(mp[set][b] - sp[set][b]);
        }
        means.push_back(mean(loss)), deltas.push_back(describe_paired(d));
      }
      sm.position_loss_mean.push_back(means), sm.position_delta.push_back(deltas);
    }
    const Variant& v = s.variants[k];
    if (v.precision) {
      const std::string twin = v.name.substr(0, v.name.rfind('@'));
      const std::string precision_sa = std::string("sa@") + to_string(*v.precision);
      sm.vs_twin = paired_delta(result, v.name, twin);
      if (v.name != precision_sa) sm.vs_precision_sa = paired_delta(result, v.name, precision_sa);
    }
    if (k == 0) {
      sm.p_value = NAN, sm.verdict = "baseline";
    } else {
      sm.delta = describe_paired(delta);
      sm.delta_vs_sa_mean = sm.delta.mean, sm.delta_vs_sa_sd = sample_sd(delta),
      sm.p_value = paired_t_test_p(delta);
      sm.overhead_vs_sa = median(overhead[k]) - 1;
      std::vector<std::vector<CurvePoint>> sa_curves, curves;
      for (size_t i = 0; i < mine.size(); i++)
        sa_curves.push_back(curve_of(*sa_arms[i])), curves.push_back(curve_of(*mine[i]));
      sm.equal_loss = equal_loss(sa_curves, curves);
      const int needed = seeds_for_power(mean(delta), sample_sd(delta));
      sm.seeds_for_power = delta.size() >= 2 && sample_sd(delta) > 0 ? needed : 0;
      if (cfg.seeds_auto && k < looks.size()) {
        sm.sequential = looks[k];
        sm.seeds_answer = to_string(looks[k].answer);
      }
    }
    out.push_back(sm);
  }
  // Holm across the variants tested against SA; the verdict is the corrected test's, or with
  // --seeds auto the sequential test's.
  std::vector<double> raw;
  for (size_t k = 1; k < out.size(); k++) raw.push_back(out[k].p_value);
  const std::vector<double> holm = holm_adjusted(raw);
  for (size_t k = 1; k < out.size(); k++) {
    VariantSummary& sm = out[k];
    sm.p_holm = holm[k - 1];
    const char* direction = sm.delta_vs_sa_mean < 0 ? "lower" : "higher";
    if (sm.n_seeds < 2)
      sm.verdict = "one seed: no spread to judge a difference";
    else if (!std::isfinite(sm.delta_vs_sa_mean))
      sm.verdict = "no figure: an arm diverged";
    else if (cfg.seeds_auto)
      sm.verdict = sm.sequential.answer == SequentialAnswer::differs
                       ? fmt::format("{} val loss than SA (sequential test)", direction)
                       : "no difference found by the sequential test";
    else if (sm.p_holm < 0.05)
      sm.verdict =
          fmt::format("{} val loss than SA ({}p < 0.05)", direction, out.size() > 2 ? "Holm " : "");
    else
      sm.verdict = "no difference beyond the seed-to-seed spread";
  }
  return out;
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

// --eval-suite: the paper's table of every arm, and each variant against SA of the same seed
// (the average's paired bootstrap), appended to report.md and written to eval_suite.json.
void append_suite_report(const fs::path& out, const Setup& s, const std::vector<std::string>& names,
                         const std::vector<std::vector<TaskResult>>& results, bool quiet) {
  if (results.empty()) return;
  std::string md =
      "\n## Downstream tasks (--eval-suite)\n\nEach arm's final weights on the "
      "paper's tasks found in the folder, scored as lm-evaluation-harness v0.4 "
      "does (%, acc_norm where the harness reports it, else acc).\n\n" +
      suite_table(names, results);
  json j = {{"arms", json::array()}, {"against_sa", json::array()}};
  for (size_t k = 0; k < results.size(); k++) {
    json arm = {{"arm", names[k]}, {"tasks", json::object()}};
    for (const TaskResult& r : results[k]) arm["tasks"][r.task] = suite_metric(r);
    j["arms"].push_back(arm);
  }
  md +=
      "\n| arm | against | Δ average (points) | 95 % interval | p (paired bootstrap) |\n"
      "|---|---|---|---|---|\n";
  const size_t per_seed = s.variants.size();
  for (size_t k = 0; k < results.size(); k++) {
    if (k % per_seed == 0) continue;  // SA itself
    const size_t sa = k - k % per_seed;
    const SuiteComparison avg = compare_suite(results[sa], results[k]).back();
    md += fmt::format("| {} | {} | {:+.2f} | [{:+.2f}, {:+.2f}] | {:.3g} |\n", names[k], names[sa],
                      100 * avg.delta, 100 * avg.low, 100 * avg.high, avg.p);
    j["against_sa"].push_back({{"arm", names[k]},
                               {"against", names[sa]},
                               {"delta", avg.delta},
                               {"ci95", {avg.low, avg.high}},
                               {"p_bootstrap", avg.p}});
  }
  for (const std::string& note : s.suite.notes) md += "\n- " + note;
  std::string report = read_file(out / "report.md");
  write_file_atomic(out / "report.md", report + md + "\n");
  write_file_atomic(out / "eval_suite.json", j.dump(2) + "\n");
  if (!quiet) std::printf("%s\n", md.c_str());
}

}  // namespace

void check_compare_variants(const CompareConfig& cfg) {
  parse_variants(cfg);
}

SequentialDesign auto_seeds_design(int variants, int cap) {
  return group_sequential_design(looks_from(kFirstLook, cap), 0.05 / std::max(1, variants - 1));
}

bool seeds_stop_here(const SequentialDesign& design, const std::vector<std::vector<double>>& deltas,
                     int done, std::vector<SequentialLook>& looks) {
  looks.resize(deltas.size());
  if (std::find(design.looks.begin(), design.looks.end(), done) == design.looks.end()) return false;
  bool all_decided = true;  // every variant found to differ, or stopped for futility
  for (size_t k = 1; k < deltas.size(); k++) {
    if (looks[k].answer != SequentialAnswer::differs) looks[k] = sequential_look(design, deltas[k]);
    all_decided = all_decided && (looks[k].answer == SequentialAnswer::differs ||
                                  looks[k].answer == SequentialAnswer::futile);
  }
  return all_decided || done == design.looks.back();
}

void parse_seeds(const std::string& text, int cap, CompareConfig& cfg) {
  if (cap < 1 || cap > kMaxSeedsCap)
    fail("--max-seeds {} must be between 1 and {}", cap, kMaxSeedsCap);
  if (text == "auto") {
    if (cap < kFirstLook)
      fail("--max-seeds {}: --seeds auto looks after {} seeds first; give at least {}", cap,
           kFirstLook, kFirstLook);
    cfg.seeds_auto = true, cfg.seeds = cap;
    return;
  }
  const std::optional<double> n = parse_number(text);
  if (!n || *n < 1 || *n != std::floor(*n) || *n > 1e9)
    fail(
        "--seeds {} must be a positive count or auto (seeds until the answer is clear, at most "
        "--max-seeds)",
        text);
  cfg.seeds_auto = false, cfg.seeds = (int)*n;
}

namespace {

// What the report holds beside the arms' results: the settings, the similarity bias of each
// variant, the peaks, validation's share of the wall-clock, the parameter counts. Sets each
// variant's summary cos_yv_mean from the bias.
CompareReport make_report(const CompareConfig& cfg, const Setup& s, CompareResult& result,
                          int seeds_run, const std::vector<double>& peak, double validation_seconds,
                          const std::string& seeds_note,
                          const std::optional<SequentialDesign>& design) {
  double training_seconds = 0;
  for (const ArmResult& a : result.arms)
    training_seconds += a.val_seconds.empty() ? 0 : a.val_seconds.back();
  std::vector<int64_t> parameters;
  std::vector<AttentionRivals> rivals;
  for (const Variant& v : s.variants)
    parameters.push_back(parameter_count(variant_model(s.model, v))), rivals.push_back(v.rivals);
  CompareReport report;
  report.variants = cfg.variants, report.eval_data = cfg.eval_data;
  report.model = s.model, report.run = cfg.run, report.seeds = seeds_run;
  report.bias = analyze_arms(cfg, s), report.peak_mb = peak;
  report.validation_share = validation_seconds / (validation_seconds + training_seconds);
  report.seeds_note = seeds_note, report.parameters = parameters, report.rivals = rivals;
  report.val_bytes_per_token = s.val_bytes_per_token;
  report.design = design;
  report.tuning = cfg.tuned;
  report.eval_batches = cfg.eval_batches > 0 ? cfg.eval_batches : cfg.run.val_batches;
  for (size_t k = 0; k < report.bias.size() && k < result.summary.size(); k++)
    result.summary[k].cos_yv_mean = mean_cos_yv(report.bias[k]);
  return report;
}

// The terminal's view of report.md: the main table with its timing note, then the loss by
// position, equal-loss, seeds, learning-rate and precision sections, each up to what follows it.
void print_report_summary(const std::string& md, const fs::path& out) {
  const size_t table = md.find("| variant");
  const size_t note = md.find(kTimingNote, table);
  const size_t shown_end = note + std::string_view(kTimingNote).size() - 1;
  std::string shown = md.substr(table, shown_end - table);
  for (const char* section :
       {"## Loss by position", "## Equal loss", "## Seeds", "## Learning rates", "## Precision"})
    if (const size_t at = md.find(section); at != std::string::npos)
      shown += "\n\n" + md.substr(at, std::min(md.find("\n\n## ", at), md.find("\n\n![", at)) - at);
  std::printf("\n%s\nreport: %s (report.md, report.html, report.json, plot files)\n", shown.c_str(),
              out.string().c_str());
}

}  // namespace

namespace {

// One comparison: every variant at its rate (cfg.variant_lrs, else run.lr) over the seeds.
CompareResult run_comparison(const CompareConfig& requested) {
  Comm& comm = world_comm();
  const bool root = comm.is_root();
  check_ranks_agree(comm, {{"model", requested.model},
                           {"run", run_config_to_json(requested.run)},
                           {"variants", requested.variants},
                           {"seeds", requested.seeds},
                           {"eval_data", requested.eval_data},
                           {"eval_suite", requested.eval_suite},
                           {"eval_batches", requested.eval_batches},
                           {"variant_lrs", requested.variant_lrs},
                           {"analyze_batches", requested.analyze_batches}});
  CompareConfig cfg = requested;
  cfg.run.quiet = cfg.run.quiet || !root;  // rank 0 speaks for the job
  const RunConfig& run = cfg.run;
  Setup s;
  // One live comparison per report folder: locked before it is looked at when it exists, else
  // as soon as it is created.
  std::unique_ptr<FolderLock> lock;
  const auto lock_out = [&] {
    std::error_code ec;
    if (root && !lock && fs::is_directory(run.out, ec))
      lock = std::make_unique<FolderLock>(fs::path(run.out) / ".lock", run.out);
  };
  agree_on(comm, lock_out);
  agree_on(comm, [&] { prepare(cfg, comm, s); });
  check_ranks_agree(comm,
                    {{"train_tokens", s.data.train.size()}, {"val_tokens", s.data.val.size()}});
  const fs::path out = run.out;
  if (!run.quiet) print_header(cfg, s);
  const std::vector<double> peak = measure_peaks(cfg, s);

  CompareResult result;
  result.report_dir = out.string();
  agree_on(comm, [&] {
    std::error_code ec;
    if (root) fs::create_directories(out, ec);
    if (ec) fail("{}: cannot create the report folder: {}", out.string(), ec.message());
    lock_out();
  });
  // Per variant: ms / ms(SA), step by step.
  std::vector<std::vector<double>> overhead(s.variants.size());
  std::vector<std::string> suite_names;  // an arm per row of the suite's table
  std::vector<std::vector<TaskResult>> suite_results;
  const auto start = clock_type::now();
  double validation_seconds = 0;  // every seed's, this run's and those taken from seed files
  std::string seeds_note;
  std::optional<SequentialDesign> design;  // --seeds auto's, fixed before the first seed
  std::vector<SequentialLook> looks;       // its answers so far, per variant
  if (cfg.seeds_auto) design = auto_seeds_design((int)s.variants.size(), cfg.seeds);
  for (int k = 0; k < cfg.seeds && seeds_note.empty(); k++) {
    if (k > 0 && design) {  // a look after the seeds so far: is every answer final?
      seeds_note = auto_seeds_verdict(cfg, *design, result, k, looks);
      if (!seeds_note.empty()) break;
    }
    const uint64_t seed = run.seed + k;
    const fs::path seed_file = out / fmt::format("seed-{}.json", seed);
    if (take_finished_seed(seed_file, s, run, result, overhead, validation_seconds)) {
      if (root && !s.suite.files.empty())  // its arms' saved final weights take the suite
        for (const Variant& v : s.variants) {
          suite_names.push_back(fmt::format("{} seed {}", v.name, seed));
          suite_results.push_back(score_suite_from_checkpoint(s, arm_folder(out, v.name, seed),
                                                              variant_backend(run, v)));
        }
      continue;
    }
    const size_t first_overhead = overhead.size() > 1 ? overhead[1].size() : 0;
    std::vector<Arm> arms = make_arms(cfg, s, seed);
    const double validated = train_arms(cfg, s, arms, seed, k, overhead, start);
    validation_seconds += validated;
    finish_arms(cfg, s, arms, peak);
    for (const Arm& a : arms) result.arms.push_back(a.result);
    for (const Arm& a : arms)
      if (!a.suite.empty())
        suite_names.push_back(fmt::format("{} seed {}", a.variant.name, seed)),
            suite_results.push_back(a.suite);
    if (root) save_finished_seed(seed_file, s, arms, overhead, first_overhead, validated);
  }
  const int seeds_run = (int)arms_of(result, "sa").size();
  if (design && seeds_note.empty())
    seeds_note = auto_seeds_verdict(cfg, *design, result, seeds_run, looks);
  result.summary = summarize(result, s, cfg, overhead, looks);
  if (!root) return result;  // the report is rank 0's

  if (!run.quiet && !seeds_note.empty()) std::printf("%s\n", seeds_note.c_str());
  const CompareReport report =
      make_report(cfg, s, result, seeds_run, peak, validation_seconds, seeds_note, design);
  result.val_bytes_per_token = s.val_bytes_per_token, result.tuning = cfg.tuned;
  std::string md = write_compare_report(out, report, result);
  if (!s.suite.files.empty()) append_suite_report(out, s, suite_names, suite_results, run.quiet);
  std::string why;
  if (!write_report_html(out, comparison_page_data(out), &why) && !run.quiet)
    std::printf("report.html not written: %s\n", why.c_str());
  if (!run.quiet) print_report_summary(md, out);
  return result;
}

// The shortest text that reads back as the same rate: two rates never share a folder.
std::string rate_folder_name(double lr) {
  return fmt::format("lr-{}", lr);
}

// --tune-lr: every variant at every rate on the tuning seeds, each rate a comparison of its own
// (resumable like any), and each variant's rate with the lowest mean validation loss.
LrTuning tune_rates(const CompareConfig& cfg) {
  LrTuning t;
  t.lrs = cfg.tune_lrs;
  t.folder = (fs::path(cfg.run.out) / "tune").string();
  for (int i = 0; i < cfg.tune_seeds; i++) t.seeds.push_back(cfg.run.seed + kTuningSeedOffset + i);
  const size_t V = cfg.variants.size();
  t.val_loss.assign(V, std::vector<double>(t.lrs.size(), NAN));
  t.diverged.assign(V, std::vector<int>(t.lrs.size(), 0));
  const bool root = world_comm().is_root();
  for (size_t i = 0; i < t.lrs.size(); i++) {
    CompareConfig sub = cfg;
    sub.tune_lrs.clear(), sub.variant_lrs.clear();
    sub.run.lr = t.lrs[i];
    sub.run.seed = t.seeds[0];
    sub.seeds = cfg.tune_seeds, sub.seeds_auto = false;
    sub.tuning = true;
    sub.analyze_batches = 0, sub.eval_suite.clear(), sub.eval_data.clear();
    sub.run.out = (fs::path(t.folder) / rate_folder_name(t.lrs[i])).string();
    if (!cfg.run.quiet && root)
      std::printf("\n== tuning: peak lr %g (%zu of %zu), tuning seed(s) %s\n", t.lrs[i], i + 1,
                  t.lrs.size(), fmt::format("{}", fmt::join(t.seeds, ", ")).c_str());
    const CompareResult r = run_comparison(sub);
    for (size_t k = 0; k < V; k++) {
      std::vector<double> losses;
      for (const ArmResult* a : arms_of(r, cfg.variants[k])) {
        losses.push_back(a->val_loss);
        t.diverged[k][i] += a->diverged_at > 0 || !std::isfinite(a->val_loss);
      }
      t.val_loss[k][i] = t.diverged[k][i] ? NAN : mean(losses);
    }
  }
  for (size_t k = 0; k < V; k++) {
    size_t best = t.lrs.size();  // ties: the lower rate (listed first)
    for (size_t i = 0; i < t.lrs.size(); i++)
      if (std::isfinite(t.val_loss[k][i]) &&
          (best == t.lrs.size() || t.val_loss[k][i] < t.val_loss[k][best]))
        best = i;
    if (best == t.lrs.size())
      fail("--tune-lr: {} diverged at every rate ({}); try lower rates", cfg.variants[k],
           fmt::join(t.lrs, ", "));
    t.chosen.push_back(t.lrs[best]);
  }
  if (!cfg.run.quiet && root) {
    std::string chosen;
    for (size_t k = 0; k < V; k++)
      chosen += fmt::format("{}{} {:g}", k ? ", " : "", cfg.variants[k], t.chosen[k]);
    std::printf("\n== tuned: %s; the comparison runs on fresh seeds at these rates\n",
                chosen.c_str());
  }
  return t;
}

}  // namespace

std::vector<double> parse_tune_lrs(const std::string& text) {
  std::vector<double> lrs;
  for (const std::string& item : split_list(text)) {
    const std::optional<double> rate = parse_number(item);
    const double v = rate.value_or(NAN);
    if (!(v > 0) || !std::isfinite(v))
      fail("--tune-lr {}: '{}' is not a positive learning rate", text, item);
    if (!lrs.empty() && !(v > lrs.back()))
      fail("--tune-lr {}: list the rates once each, rising", text);
    lrs.push_back(v);
  }
  if (lrs.size() < 2) fail("--tune-lr {}: give at least two rates to choose between", text);
  return lrs;
}

// Before hours of tuning: a finished report in the output folder must come from this very tuning
// (the same rates and tuning seeds), else it is another comparison and --force is needed.
void check_tuned_report(const CompareConfig& cfg) {
  const fs::path report = fs::path(cfg.run.out) / "report.json";
  std::error_code ec;
  if (cfg.run.force || !world_comm().is_root() || !fs::exists(report, ec)) return;
  const json done = json::parse(read_file(report), nullptr, false);
  const json tuning = done.is_object() ? done.value("lr_tuning", json()) : json();
  const bool same = tuning.is_object() && tuning.value("lrs", json()) == json(cfg.tune_lrs) &&
                    tuning.value("seeds", json()).size() == (size_t)cfg.tune_seeds;
  if (!same)
    fail(
        "{}: already holds a report of another comparison (not of this --tune-lr); pass --force "
        "to replace it, or choose another --out",
        cfg.run.out);
}

CompareResult compare(const CompareConfig& requested) {
  if (requested.tune_lrs.empty()) return run_comparison(requested);
  if (requested.tune_seeds < 1) fail("--tune-seeds {} must be at least 1", requested.tune_seeds);
  if (!requested.variant_lrs.empty())
    fail("--tune-lr chooses each variant's rate; it does not combine with rates given per variant");
  check_compare_variants(requested);
  agree_on(world_comm(), [&] { check_tuned_report(requested); });
  CompareConfig confirm = requested;
  confirm.tuned = tune_rates(requested);
  confirm.variant_lrs = confirm.tuned.chosen;
  confirm.run.lr = confirm.tuned.chosen[0];  // SA's: the run's schedule is SA's own
  return run_comparison(confirm);
}

}  // namespace xsa
