// What a comparison is asked for: its variants (names → models and backends), presets, the
// seeds and the rates to tune.
#include <cmath>
#include <optional>

#include "xsa/research/compare_parts.h"
#include "xsa/util/error.h"
#include "xsa/util/fmt.h"
#include "xsa/util/parse.h"

namespace xsa {

Variant parse_variant(const std::string& name, int n_layer) {
  if (name.find(',') != std::string::npos)
    fail("--variants {}: one item per variant (commas separate the variants)", name);
  const std::vector<std::string> parts = split(name, '@');
  Variant v{name, parse_attention(parts[0], n_layer, "--variants"), std::nullopt, std::nullopt,
            parts[0]};
  for (size_t i = 1; i < parts.size(); i++) {
    const std::string& suffix = parts[i];
    if (const auto precision = precision_named(suffix)) {
      if (v.precision) fail("--variants {}: one precision per variant", name);
      v.precision = precision;
      continue;
    }
    const std::optional<double> rate = parse_number(suffix);
    if (!rate || !(*rate > 0) || !std::isfinite(*rate))
      fail("--variants {}: '{}' after @ is neither a precision ({}) nor a positive learning rate",
           name, suffix, kPrecisionChoices);
    if (v.lr) fail("--variants {}: one learning rate per variant", name);
    v.lr = *rate;
  }
  return v;
}

void apply_compare_preset(const std::string& name, ModelConfig& model, RunConfig& run,
                          CompareConfig& cfg) {
  if (name == "demo") {  // about 6 minutes on 2 cores: 4 × 128, context 256, tuned, 3 seeds
    model.n_layer = 4, model.n_head = 4, model.n_embd = 128, model.seq_len = 256;
    run.batch = 16, run.steps = 200, run.lr = 4e-3, run.val_every = 25, run.val_batches = 4;
    cfg.seeds = 3;
    // Best against best: each variant at its own rate from this grid (extended at an edge), on
    // a tuning seed of its own, before the 3 confirmation seeds (--lr or --tune-lr given: not).
    cfg.tune_lrs = {2e-3, 4e-3, 8e-3}, cfg.tune_seeds = 1;
  } else if (name == "recipe") {
    // The demo in the modern small-model recipe (docs/SPEC.md §11: modded-nanogpt's, nanochat's):
    // Muon on the hidden matrices (AdamW on the rest at a tenth of Muon's rate), ReLU², logits
    // soft-capped at 15, QK-norm in every variant. Tuned on Muon's rate, AdamW's moving with it.
    apply_compare_preset("demo", model, run, cfg);
    run.optimizer = "muon", run.muon_lr = 0.02, run.lr = 2e-3;
    model.mlp = MlpActivation::relu2, model.logit_softcap = 15;
    cfg.whole_model.qk_norm = true;
    cfg.tune_lrs = {0.01, 0.02, 0.04};
  } else if (name == "tiny") {  // seconds: for trying the tool
    model.n_layer = 2, model.n_head = 4, model.n_embd = 64, model.seq_len = 64;
    run.batch = 8, run.steps = 60, run.lr = 3e-3, run.val_every = 20, run.val_batches = 4;
    cfg.seeds = 2;
  } else {
    fail("--preset {} is not known (demo, recipe, tiny)", name);
  }
}

namespace comparison {

// The backend of a variant's arms: its own precision, else the run's.
Backend<float>& variant_backend(const RunConfig& run, const Variant& v) {
  BackendOptions options = backend_options(run);
  if (v.precision) options.precision = *v.precision;
  return select_backend(options);
}

ModelConfig variant_model(const ModelConfig& base, const Variant& v) {
  ModelConfig m = base;
  m.attention = v.attention;
  return m;
}

namespace {

// "--qk-norm --value-embed": the whole-model flags that gave `options`.
std::string whole_model_flags(const LayerAttention& options) {
  std::string flags;
  for (const AttentionOption& o : kAttentionOptions)
    if (o.whole_model && options.*o.flag)
      flags += (flags.empty() ? "--" : " --") + std::string(o.name);
  return flags;
}

}  // namespace

std::vector<Variant> parse_variants(const CompareConfig& cfg) {
  if (cfg.variants.empty()) fail("--variants: name at least the baseline (sa)");
  std::vector<Variant> variants;
  for (const std::string& v : cfg.variants) {
    for (const Variant& seen : variants)
      if (seen.name == v) fail("--variants lists {} twice", v);
    variants.push_back(parse_variant(v, cfg.model.n_layer));
    for (const AttentionOption& o : kAttentionOptions)  // every variant's, as the run's precision
      if (o.whole_model && cfg.whole_model.*o.flag)
        for (LayerAttention& layer : variants.back().attention) layer.*o.flag = true;
    if (variants.back().precision == cfg.run.precision)
      fail("--variants {}: the run's --precision is already {}, so it would be a copy of its twin",
           v, to_string(cfg.run.precision));
    if (variants.back().lr && !cfg.tune_lrs.empty())
      fail(
          "--variants {}: --tune-lr chooses each variant's rate; give a rate with @ or tune, not "
          "both",
          v);
    // One model spelled two ways (its options in another order, or +qk-norm beside --qk-norm)
    // would be compared with itself.
    const Variant& added = variants.back();
    for (size_t k = 0; k + 1 < variants.size(); k++) {
      const Variant& seen = variants[k];
      bool same = seen.precision == added.precision && seen.lr == added.lr;
      for (int l = 0; l < cfg.model.n_layer && same; l++)
        same = seen.attention[l] == added.attention[l];
      if (same)
        fail("--variants {} and {} are the same model{}; list it once", seen.name, v,
             cfg.whole_model != LayerAttention{}
                 ? " (" + whole_model_flags(cfg.whole_model) + " gives it to every variant)"
                 : "");
    }
  }
  // The baseline is the first variant, however it is spelled; every other is compared with it. (A
  // tuning comparison beyond the grid's edge runs only the variants chosen there.)
  const Variant& baseline = variants[0];
  for (int l = 0; l < cfg.model.n_layer && !cfg.tuning; l++)
    if (is_exclusive(baseline.attention[l].kind))
      fail(
          "--variants {}: the first variant is the baseline every other is compared with and "
          "must be standard attention (sa, sa+qk-norm, sa@2e-3, ...)",
          baseline.name);
  return variants;
}

// Each variant's peak rate: its own (@RATE), else the run's; empty when every one is the run's.
std::vector<double> variant_rates(const std::vector<Variant>& variants, double run_lr) {
  bool own = false;
  std::vector<double> rates;
  for (const Variant& v : variants) {
    own = own || v.lr.has_value();
    rates.push_back(v.lr.value_or(run_lr));
  }
  return own ? rates : std::vector<double>();
}

}  // namespace comparison

void check_compare_variants(const CompareConfig& cfg) {
  comparison::parse_variants(cfg);
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

std::vector<double> parse_tune_lrs(const std::string& text) {
  std::vector<double> lrs;
  for (const std::string& item : split(text, ',')) {
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

}  // namespace xsa
