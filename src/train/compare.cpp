#include "train/compare.h"

#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "train/analyze.h"
#include "train/schedule.h"
#include "util/error.h"
#include "util/files.h"
#include "util/memory.h"
#include "util/stats.h"
#include "util/svg.h"

namespace xsa {

namespace fs = std::filesystem;
using nlohmann::json;

Variant parse_variant(const std::string& name, int n_layer) {
  if (name.size() > 5 && name.compare(name.size() - 5, 5, "+sink") == 0) {
    Variant v = parse_variant(name.substr(0, name.size() - 5), n_layer);
    v.name = name;
    std::fill(v.sinks.begin(), v.sinks.end(), true);
    return v;
  }
  Variant v{name, {}, {}};
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
        "--variants {} is not known (sa, xsa, xsa-gated, xsa-lastN, xsa-firstN, xsa-layers-0.2.5; "
        "+sink)",
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
  Variant variant;
  std::unique_ptr<Gpt<float>> model;
  std::unique_ptr<BatchLoader> loader;
  std::vector<double> ms, losses;
  ArmResult result;
};

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = 1469598103934665603ull) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

json arm_to_json(const ArmResult& a) {
  json curve = json::array(), evals = json::array();
  for (auto& [st, v] : a.val_curve)
    curve.push_back({st, std::isfinite(v) ? json(v) : json(nullptr)});
  for (double v : a.eval_losses) evals.push_back(std::isfinite(v) ? json(v) : json(nullptr));
  return {{"variant", a.variant},
          {"seed", a.seed},
          {"train_loss", a.train_loss},
          {"val_loss", std::isfinite(a.val_loss) ? json(a.val_loss) : json(nullptr)},
          {"eval_losses", evals},
          {"ms_per_step", a.ms_per_step},
          {"tokens_per_s", a.tokens_per_s},
          {"peak_mb", a.peak_mb},
          {"val_curve", curve},
          {"init_hash", fmt::format("{:016x}", a.init_hash)},
          {"batches_hash", fmt::format("{:016x}", a.batches_hash)}};
}

ArmResult arm_from_json(const json& j) {
  auto num = [](const json& v) { return v.is_null() ? NAN : v.get<double>(); };
  ArmResult a;
  a.variant = j.at("variant"), a.seed = j.at("seed");
  a.train_loss = num(j.at("train_loss")), a.val_loss = num(j.at("val_loss"));
  for (const auto& v : j.at("eval_losses")) a.eval_losses.push_back(num(v));
  a.ms_per_step = j.at("ms_per_step"), a.tokens_per_s = j.at("tokens_per_s"),
  a.peak_mb = j.at("peak_mb");
  for (const auto& p : j.at("val_curve")) a.val_curve.push_back({p[0].get<int64_t>(), num(p[1])});
  a.init_hash = std::stoull(j.at("init_hash").get<std::string>(), nullptr, 16);
  a.batches_hash = std::stoull(j.at("batches_hash").get<std::string>(), nullptr, 16);
  return a;
}

json nan_to_null(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

std::string fmt_or_dash(const char* f, double v) {
  return std::isfinite(v) ? fmt::vformat(f, fmt::make_format_args(v)) : "–";
}

}  // namespace

CompareResult compare(const CompareConfig& cfg) {
  const RunConfig& run = cfg.run;
  run.validate();
  cfg.model.validate();
  if (cfg.seeds < 1) fail("--seeds {} must be at least 1", cfg.seeds);
  if (cfg.variants.empty() || cfg.variants[0] != "sa")
    fail("--variants must start with sa, the baseline every other variant is compared with");
  std::vector<Variant> variants;
  for (const std::string& v : cfg.variants) {
    for (const Variant& seen : variants)
      if (seen.name == v) fail("--variants lists {} twice", v);
    variants.push_back(parse_variant(v, cfg.model.n_layer));
  }
  const fs::path out = run.out;
  std::error_code ec;
  if (fs::exists(out / "report.json", ec) && !run.force)
    fail("{}: already holds a report; pass --force to replace it, or choose another --out",
         out.string());
  if (run.force) {  // start over: finished seeds of an earlier, interrupted run go too
    for (int s = 0; s < 1000; s++) fs::remove(out / fmt::format("seed-{}.json", run.seed + s), ec);
  }

  const int B = run.batch, T = cfg.model.seq_len;
  const int threads = set_thread_count(run.threads);
  std::optional<TokenizerKind> tokenizer;
  if (!run.tokenizer.empty()) tokenizer = parse_tokenizer(run.tokenizer);
  Dataset data = open_dataset(run.data, tokenizer, run.val_fraction, B, T, run.vocab_dir);
  ModelConfig base = cfg.model;
  base.tokenizer = data.tokenizer;
  base.vocab_size = vocab_size_of(data.tokenizer);
  base.padded_vocab = pad_vocab(base.vocab_size);
  {  // Every arm of a seed lives in memory at once: refuse a run that cannot fit.
    ModelConfig m = base;
    m.layer_attn = variants.back().layers, m.layer_sink = variants.back().sinks;
    const double need =
        (double)variants.size() * Gpt<float>::memory_bytes(m, B, T) + data.train.size() * 2.0;
    const double available = available_memory_bytes();
    if (available > 0 && need > 0.9 * available)
      fail(
          "{} arms of this model need about {:.1f} GB at --batch {} and --seq-len {}, but {:.1f} "
          "GB are available; "
          "use fewer variants, a smaller model or batch",
          variants.size(), need / 1e9, B, T, available / 1e9);
  }
  // The fingerprint of this comparison: finished seeds of an interrupted run with the same one
  // resume.
  nlohmann::json identity = {{"data", run.data},
                             {"model", json(base)},
                             {"run", run_config_to_json(run)},
                             {"variants", cfg.variants},
                             {"eval_data", cfg.eval_data}};
  identity["run"].erase("threads"), identity["run"].erase("out");
  std::vector<Dataset> evals;
  for (const std::string& path : cfg.eval_data)
    evals.push_back(open_dataset(path, data.tokenizer, 0, B, T, run.vocab_dir));
  auto eval_stream = [&](const Dataset& d) -> const TokenStream& {
    return d.val.size() > (size_t)T ? d.val : d.train;
  };
  const int n_val = val_batch_count(data.val, B, T, run.val_batches);
  const bool tty = !run.quiet && isatty(STDOUT_FILENO);
  if (!run.quiet) {
    std::printf(
        "xsa compare: %s | %d layers, %d heads, %d embd, seq %d, batch %d, %lld steps, %d seed(s), "
        "%d threads\n",
        fmt::format("{}", fmt::join(cfg.variants, " vs ")).c_str(), base.n_layer, base.n_head,
        base.n_embd, T, B, (long long)run.steps, cfg.seeds, threads);
    std::printf("data: %s: %zu train / %zu val tokens; report folder %s\n",
                data.description.c_str(), data.train.size(), data.val.size(), out.string().c_str());
    std::fflush(stdout);
  }

  // Peak memory of each variant alone: a fresh model and one step.
  std::vector<double> peak(variants.size());
  {
    std::vector<int32_t> in((size_t)B * T), tg((size_t)B * T);
    BatchLoader probe(data.train, B, T, run.shuffle, run.seed);
    probe.next(in.data(), tg.data());
    for (size_t k = 0; k < variants.size(); k++) {
      reset_peak_rss();
      ModelConfig m = base;
      m.layer_attn = variants[k].layers, m.layer_sink = variants[k].sinks;
      Gpt<float> model(m, B, T);
      model.params().init(m, run.seed);
      model.forward_backward(in.data(), tg.data());
      optimizer_step(model.params(), run, run.lr, 1, gradient_norm(model.params()));
      peak[k] = peak_rss_mb();
    }
  }

  CompareResult result;
  result.report_dir = out.string();
  fs::create_directories(out, ec);
  if (ec) fail("{}: cannot create the report folder: {}", out.string(), ec.message());
  const LrSchedule schedule{run.lr, run.min_lr_fraction, run.warmup_steps(), run.steps};
  std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
  std::vector<std::vector<HeadBias>> bias(variants.size());
  std::vector<std::vector<double>> overhead_ratios(
      variants.size());  // per variant: ms / ms(SA), step by step
  const auto start = clock_type::now();

  for (int s = 0; s < cfg.seeds; s++) {
    const uint64_t seed = run.seed + s;
    const fs::path seed_file = out / fmt::format("seed-{}.json", seed);
    if (fs::exists(seed_file, ec)) {  // finished before an interruption: take its results
      json done = json::parse(read_file(seed_file), nullptr, false);
      if (!done.is_discarded() && done.value("identity", json()) == identity) {
        for (const auto& a : done["arms"]) result.arms.push_back(arm_from_json(a));
        for (size_t k = 1; k < variants.size(); k++)
          for (const auto& r : done["overhead"][k]) overhead_ratios[k].push_back(r.get<double>());
        if (!run.quiet)
          std::printf("seed %llu: finished earlier, results taken from %s\n",
                      (unsigned long long)seed, seed_file.string().c_str());
        continue;
      }
      fail(
          "{}: comes from a different comparison (other data, model, settings or variants); pass "
          "--force to "
          "start over",
          seed_file.string());
    }
    const size_t first_overhead = overhead_ratios.size() > 1 ? overhead_ratios[1].size() : 0;
    std::vector<Arm> arms(variants.size());
    for (size_t k = 0; k < variants.size(); k++) {
      Arm& a = arms[k];
      ModelConfig m = base;
      m.layer_attn = variants[k].layers, m.layer_sink = variants[k].sinks;
      a.variant = variants[k];
      a.model = std::make_unique<Gpt<float>>(m, B, T);
      a.model->params().init(m,
                             seed);  // XSA adds no parameters: every arm starts from these weights
      a.loader = std::make_unique<BatchLoader>(data.train, B, T, run.shuffle,
                                               seed);  // and sees these batches
      a.result.variant = variants[k].name, a.result.seed = seed;
      // Over the tensors every variant has (a gated variant's extra gates start at zero, as SA).
      a.result.init_hash = 1469598103934665603ull;
      for (const TensorInfo& t : a.model->params().layout)
        if (t.name.find("xsa_gate") == std::string::npos &&
            t.name.find("attn.sink") == std::string::npos)
          a.result.init_hash = fnv1a(a.model->params().params.data() + t.offset,
                                     t.numel * sizeof(float), a.result.init_hash);
      a.result.batches_hash = 1469598103934665603ull;
    }
    auto validate_all = [&](int64_t step) {
      for (Arm& a : arms)
        a.result.val_curve.push_back(
            {step, n_val ? evaluate_loss(*a.model, data.val, n_val) : NAN});
    };
    validate_all(0);
    for (int64_t step = 0; step < run.steps; step++) {
      const double lr = schedule.at(step);
      std::vector<double> ms_this(arms.size());
      for (size_t i = 0; i < arms.size(); i++) {
        const size_t k = (i + step) % arms.size();  // rotate who goes first: timing stays fair
        Arm& a = arms[k];
        const auto t0 = clock_type::now();
        a.loader->next(inputs.data(), targets.data());
        a.result.batches_hash =
            fnv1a(inputs.data(), inputs.size() * sizeof(int32_t), a.result.batches_hash);
        const double loss = a.model->forward_backward(inputs.data(), targets.data());
        const double norm = gradient_norm(a.model->params());
        if (!std::isfinite(loss) || !std::isfinite(norm))
          fail("{} (seed {}): loss or gradient norm became {} at step {} (lr {:.3g})",
               a.variant.name, seed, std::isnan(loss) || std::isnan(norm) ? "NaN" : "infinite",
               step + 1, lr);
        optimizer_step(a.model->params(), run, lr, step + 1, norm);
        ms_this[k] = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
        a.ms.push_back(ms_this[k]);
        a.losses.push_back(loss);
        a.result.train_curve.push_back({step + 1, loss});
      }
      for (size_t k = 1; k < arms.size(); k++)
        overhead_ratios[k].push_back(ms_this[k] / ms_this[0]);
      const int64_t done = step + 1;
      const bool val_now = (run.val_every > 0 && done % run.val_every == 0) || done == run.steps;
      if (val_now) validate_all(done);
      if (!run.quiet && (tty || val_now || done % run.log_every == 0)) {
        const double spent = std::chrono::duration<double>(clock_type::now() - start).count();
        const double total = (double)run.steps * cfg.seeds, so_far = (double)s * run.steps + done;
        std::string line = fmt::format("seed {} step {}/{}", seed, done, run.steps);
        for (const Arm& a : arms) {
          line += fmt::format(" | {} {:.4f}", a.variant.name, a.losses.back());
          if (val_now && std::isfinite(a.result.val_curve.back().second))
            line += fmt::format(" (val {:.4f})", a.result.val_curve.back().second);
        }
        line += fmt::format(" | ETA {:.0f}s", spent / so_far * (total - so_far));
        std::printf("%s%s%s", tty ? "\r\033[K" : "", line.c_str(), tty && !val_now ? "" : "\n");
        std::fflush(stdout);
      }
    }
    for (size_t k = 0; k < arms.size(); k++) {
      Arm& a = arms[k];
      const size_t tail = std::max<size_t>(1, a.losses.size() / 10);
      a.result.train_loss = mean(std::vector<double>(a.losses.end() - tail, a.losses.end()));
      a.result.val_loss = a.result.val_curve.back().second;
      for (const Dataset& e : evals) {
        const TokenStream& st = eval_stream(e);
        a.result.eval_losses.push_back(
            evaluate_loss(*a.model, st, val_batch_count(st, B, T, run.val_batches)));
      }
      a.result.ms_per_step = median(a.ms);
      a.result.tokens_per_s = B * T / (a.result.ms_per_step / 1000);
      a.result.peak_mb = peak[k];
      // The final weights, as a checkpoint xsa analyze (and later eval/sample) can read.
      save_checkpoint(out / "arms" / fmt::format("{}-seed{}", a.variant.name, seed), run.steps,
                      a.model->config(), a.model->params(),
                      json{{"step", run.steps},
                           {"compare_variant", a.variant.name},
                           {"data", {{"source", run.data}}}},
                      true);
      result.arms.push_back(a.result);
    }
    // This seed is done: its results survive an interruption (Ctrl-C) of the later ones.
    json done = {{"identity", identity}, {"arms", json::array()}, {"overhead", json::array()}};
    for (const Arm& a : arms) done["arms"].push_back(arm_to_json(a.result));
    for (size_t k = 0; k < variants.size(); k++)
      done["overhead"].push_back(
          k ? std::vector<double>(overhead_ratios[k].begin() + first_overhead,
                                  overhead_ratios[k].end())
            : std::vector<double>());
    write_file_atomic(seed_file, done.dump() + "\n");
  }
  // The similarity bias of every variant, from the first seed's saved final weights.
  if (cfg.analyze_batches > 0 && n_val > 0) {
    for (size_t k = 0; k < variants.size(); k++) {
      const fs::path ckpt =
          resolve_checkpoint(out / "arms" / fmt::format("{}-seed{}", variants[k].name, run.seed));
      ModelConfig m = load_checkpoint_config(ckpt);
      Gpt<float> model(m, B, T, GptMode::inference);
      load_checkpoint_weights(ckpt, model.params(), false);
      bias[k] = attention_similarity_bias(model, data.val, std::min(cfg.analyze_batches, n_val));
    }
  }

  // Summaries: differences to SA paired by seed.
  auto arms_of = [&](const std::string& v) {
    std::vector<const ArmResult*> r;
    for (const ArmResult& a : result.arms)
      if (a.variant == v) r.push_back(&a);
    return r;
  };
  const auto sa_arms = arms_of("sa");
  for (size_t k = 0; k < variants.size(); k++) {
    VariantSummary sm;
    sm.variant = variants[k].name;
    const auto mine = arms_of(sm.variant);
    std::vector<double> val, train, delta;
    for (size_t i = 0; i < mine.size(); i++) {
      val.push_back(mine[i]->val_loss), train.push_back(mine[i]->train_loss);
      delta.push_back(mine[i]->val_loss - sa_arms[i]->val_loss);
    }
    sm.n_seeds = (int)mine.size();
    sm.train_loss_mean = mean(train), sm.val_loss_mean = mean(val), sm.val_loss_sd = sample_sd(val);
    for (size_t e = 0; e < evals.size(); e++) {
      std::vector<double> el, ed;
      for (size_t i = 0; i < mine.size(); i++)
        el.push_back(mine[i]->eval_losses[e]),
            ed.push_back(mine[i]->eval_losses[e] - sa_arms[i]->eval_losses[e]);
      sm.eval_loss_mean.push_back(mean(el)), sm.eval_delta_vs_sa_mean.push_back(mean(ed));
    }
    if (k == 0) {
      sm.delta_vs_sa_mean = 0, sm.delta_vs_sa_sd = 0, sm.p_value = NAN, sm.overhead_vs_sa = 0,
      sm.verdict = "baseline";
    } else {
      sm.delta_vs_sa_mean = mean(delta), sm.delta_vs_sa_sd = sample_sd(delta),
      sm.p_value = paired_t_test_p(delta);
      sm.overhead_vs_sa = median(overhead_ratios[k]) - 1;
      // Never a win without a spread to judge it against.
      if (sm.n_seeds < 2)
        sm.verdict = "one seed: no spread to judge a difference";
      else if (sm.p_value < 0.05)
        sm.verdict = sm.delta_vs_sa_mean < 0 ? "lower val loss than SA (p < 0.05)"
                                             : "higher val loss than SA (p < 0.05)";
      else
        sm.verdict = "no difference beyond the seed-to-seed spread";
    }
    result.summary.push_back(sm);
  }

  // Plots: validation curves (mean over seeds, ± sd band), their difference to SA, the bias.
  std::vector<std::string> plots;
  {
    std::vector<Series> curves, deltas;
    for (size_t k = 0; k < variants.size(); k++) {
      const auto mine = arms_of(variants[k].name);
      Series c{variants[k].name, {}, {}, {}, {}}, d = c;
      for (size_t p = 0; p < mine[0]->val_curve.size(); p++) {
        std::vector<double> v, dv;
        for (size_t i = 0; i < mine.size(); i++)
          v.push_back(mine[i]->val_curve[p].second),
              dv.push_back(mine[i]->val_curve[p].second - sa_arms[i]->val_curve[p].second);
        const double x = (double)mine[0]->val_curve[p].first;
        c.x.push_back(x), c.y.push_back(mean(v));
        d.x.push_back(x), d.y.push_back(mean(dv));
        if (mine.size() > 1) {
          c.y_low.push_back(mean(v) - sample_sd(v)), c.y_high.push_back(mean(v) + sample_sd(v));
          d.y_low.push_back(mean(dv) - sample_sd(dv)), d.y_high.push_back(mean(dv) + sample_sd(dv));
        }
      }
      // The first point (step 0) is at initialisation: show the curve from the first evaluation on.
      curves.push_back(c);
      if (k > 0) deltas.push_back(d);
    }
    for (Series& c : curves)
      if (c.x.size() > 2) {
        c.x.erase(c.x.begin()), c.y.erase(c.y.begin());
        if (!c.y_low.empty()) c.y_low.erase(c.y_low.begin()), c.y_high.erase(c.y_high.begin());
      }
    auto add = [&](const std::vector<std::string>& files) {
      plots.insert(plots.end(), files.begin(), files.end());
    };
    add(write_plot((out / "val_loss").string(),
                   svg_line_chart(fmt::format("Validation loss ({} seed{}, band: ± sd)", cfg.seeds,
                                              cfg.seeds > 1 ? "s" : ""),
                                  "step", "validation loss", curves)));
    if (!deltas.empty())
      add(write_plot((out / "delta_vs_sa").string(),
                     svg_line_chart("Validation loss minus SA's (below 0: better than SA)", "step",
                                    "Δ validation loss", deltas, true)));
    if (!bias[0].empty()) {
      std::vector<Series> per_layer;
      for (size_t k = 0; k < variants.size(); k++) {
        Series s{variants[k].name + " cos(y,v)", {}, {}, {}, {}};
        for (int l = 0; l < base.n_layer; l++) {
          double sum = 0;
          for (int h = 0; h < base.n_head; h++) sum += bias[k][l * base.n_head + h].cos_yv;
          s.x.push_back(l), s.y.push_back(sum / base.n_head);
        }
        per_layer.push_back(s);
      }
      add(write_plot(
          (out / "similarity_bias").string(),
          svg_line_chart("Attention similarity bias: mean cos(y_i, v_i) per layer (seed 1)",
                         "layer", "cos(y, v)", per_layer, true)));
    }
  }

  // report.json and report.md.
  json j_arms = json::array(), j_summary = json::array();
  for (const ArmResult& a : result.arms) j_arms.push_back(arm_to_json(a));
  for (const VariantSummary& s : result.summary)
    j_summary.push_back({{"variant", s.variant},
                         {"n_seeds", s.n_seeds},
                         {"train_loss_mean", s.train_loss_mean},
                         {"val_loss_mean", nan_to_null(s.val_loss_mean)},
                         {"val_loss_sd", nan_to_null(s.val_loss_sd)},
                         {"delta_vs_sa_mean", nan_to_null(s.delta_vs_sa_mean)},
                         {"delta_vs_sa_sd", nan_to_null(s.delta_vs_sa_sd)},
                         {"p_value", nan_to_null(s.p_value)},
                         {"overhead_vs_sa", s.overhead_vs_sa},
                         {"eval_loss_mean", s.eval_loss_mean},
                         {"eval_delta_vs_sa_mean", s.eval_delta_vs_sa_mean},
                         {"verdict", s.verdict}});
  json j_bias = json::array();
  for (size_t k = 0; k < variants.size(); k++)
    for (const HeadBias& h : bias[k])
      j_bias.push_back({{"variant", variants[k].name},
                        {"layer", h.layer},
                        {"head", h.head},
                        {"cos_yv", h.cos_yv},
                        {"cos_zv", nan_to_null(h.cos_zv)},
                        {"self_weight", h.self_weight},
                        {"cos_vv", h.cos_vv}});
  nlohmann::json model_json = base;
  json report = {{"data", run.data},         {"eval_data", cfg.eval_data},
                 {"model", model_json},      {"run", run_config_to_json(run)},
                 {"variants", cfg.variants}, {"seeds", cfg.seeds},
                 {"arms", j_arms},           {"summary", j_summary},
                 {"similarity_bias", j_bias}};
  write_file_atomic(out / "report.json", report.dump(2) + "\n");

  std::string md = fmt::format(
      "# xsa compare\n\n{} on `{}`: {} layers, {} heads, width {}, context {}, batch {}, {} steps, "
      "peak lr {}, "
      "{} seed(s) ({}…).\nEvery arm of a seed starts from the same weights and sees the same "
      "batches; steps run "
      "interleaved, so the timing columns compare like with like.\n\n",
      fmt::join(cfg.variants, ", "), run.data, base.n_layer, base.n_head, base.n_embd, T, B,
      run.steps, run.lr, cfg.seeds, run.seed);
  md +=
      "| variant | seeds | train loss | val loss | Δ val vs SA (mean ± sd) | p (paired t) | "
      "verdict | ms/step | overhead vs SA | tokens/s | peak MB |\n";
  md += "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const VariantSummary& s : result.summary) {
    const auto mine = arms_of(s.variant);
    std::vector<double> ms, tok;
    for (auto* a : mine) ms.push_back(a->ms_per_step), tok.push_back(a->tokens_per_s);
    md += fmt::format(
        "| {} | {} | {:.4f} | {} | {} | {} | {} | {:.1f} | {:+.1f}% | {:.0f} | {:.0f} |\n",
        s.variant, s.n_seeds, s.train_loss_mean,
        fmt_or_dash("{:.4f}", s.val_loss_mean) +
            (s.n_seeds > 1 ? " ± " + fmt_or_dash("{:.4f}", s.val_loss_sd) : ""),
        s.variant == "sa" ? "–"
                          : fmt::format("{:+.4f} ± {:.4f}", s.delta_vs_sa_mean, s.delta_vs_sa_sd),
        fmt_or_dash("{:.3f}", s.p_value), s.verdict, mean(ms), 100 * s.overhead_vs_sa, mean(tok),
        peak[&s - &result.summary[0]]);
  }
  if (!evals.empty()) {
    md +=
        "\nFurther evaluation sets (mean loss over seeds; Δ to SA). The sign of an effect can "
        "differ between "
        "in-domain and shifted text.\n\n| variant |";
    for (const std::string& e : cfg.eval_data) md += fmt::format(" {} | Δ |", e);
    md += "\n|---|";
    for (size_t e = 0; e < evals.size(); e++) md += "---|---|";
    md += "\n";
    for (const VariantSummary& s : result.summary) {
      md += "| " + s.variant + " |";
      for (size_t e = 0; e < evals.size(); e++)
        md += fmt::format(
            " {} | {} |", fmt_or_dash("{:.4f}", s.eval_loss_mean[e]),
            s.variant == "sa" ? "–" : fmt_or_dash("{:+.4f}", s.eval_delta_vs_sa_mean[e]));
      md += "\n";
    }
  }
  md += "\n";
  for (const std::string& p : plots)
    if (p.size() > 4 && p.substr(p.size() - 4) == ".svg")
      md += fmt::format("![{0}]({0})\n\n", fs::path(p).filename().string());
  md +=
      "Final weights of every arm: `arms/<variant>-seed<seed>/` (inspect with `xsa analyze "
      "--ckpt`).\n";
  write_file_atomic(out / "report.md", md);

  if (!run.quiet) {
    std::printf("\n%s\nreport: %s (report.md, report.json, %zu plot files)\n",
                md.substr(md.find("| variant"),
                          md.find("\n\n", md.find("| variant")) - md.find("| variant"))
                    .c_str(),
                out.string().c_str(), plots.size());
  }
  return result;
}

}  // namespace xsa
