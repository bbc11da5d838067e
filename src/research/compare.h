// xsa compare: twin models that differ only in their attention, trained side by side in one process
// from identical initial weights on the identical sequence of batches, for several seeds; then a
// report folder with tables, machine-readable results and plots.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "xsa/model/config.h"
#include "xsa/report/compare_report.h"
#include "xsa/train/trainer.h"

namespace xsa {

// An attention variant: a name and the attention kind of every layer.
//   sa, xsa            every layer
//   xsa-lastN          XSA on the last N layers, SA below
//   xsa-firstN         XSA on the first N layers
//   xsa-layers-0.2.5   XSA on the listed layers
//   xsa-gated          gated XSA on every layer
//   <any>+sink         the same with a learned attention sink on every layer (sa+sink, xsa+sink)
//   gated-attn, value-residual, no-self
//                      XSA's rivals (docs/SPEC.md §8) on SA; <any>+gated-attn (+value-residual,
//                      +no-self) adds one to any variant: xsa+gated-attn, xsa-last2+no-self
//   <any>@bf16, @fp32  the same in another precision than --precision's (sa@bf16, xsa+sink@bf16):
//                      a twin of <any> from the same weights on the same batches
struct Variant {
  std::string name;
  std::array<AttnKind, kMaxLayers> layers{};
  std::array<bool, kMaxLayers> sinks{};
  AttentionRivals rivals;
  std::string precision;  // empty: the run's --precision
};
Variant parse_variant(const std::string& name, int n_layer);  // throws Error naming the variant

struct CompareConfig {
  ModelConfig model;  // the shape; attention comes from each variant
  RunConfig run;      // data, optimizer, schedule; run.out is the report folder
  std::vector<std::string> variants = {"sa", "xsa"};
  int seeds = 1;  // seeds run.seed, run.seed + 1, ...
  // --seeds auto: `seeds` is the cap; after each seed from the third on, stop once every variant's
  // answer is clear (seed_answer).
  bool seeds_auto = false;
  std::vector<std::string> eval_data;  // further evaluation sets, reported separately
  std::string eval_suite;   // a folder of the paper's task files: each arm scored at the end
  int analyze_batches = 2;  // batches for the similarity-bias chart (0: none)
};

CompareResult compare(const CompareConfig& cfg);

// --seeds auto: what a variant's paired differences to SA (one per seed) answer so far. `differs`:
// p < 0.05 (paired t); `too_small`: the observed difference would need more than `cap` seeds at 80
// % power to be found, were it the true one; else, or with fewer than 3 seeds, `unclear`.
enum class SeedAnswer : uint8_t { unclear, differs, too_small };
SeedAnswer seed_answer(const std::vector<double>& deltas, int cap);
const char* to_string(SeedAnswer answer);
// Parses --seeds: a count, or "auto" (then `cap` seeds at most).
void parse_seeds(const std::string& text, int cap, CompareConfig& cfg);
// The checks compare makes of cfg.variants (names, sa first, no repeats, precisions), alone.
void check_compare_variants(const CompareConfig& cfg);

std::vector<std::string> split_list(const std::string& comma_separated);

// Named presets of model and run settings ("demo": the README's main job).
void apply_compare_preset(const std::string& name, ModelConfig& model, RunConfig& run,
                          CompareConfig& cfg);

}  // namespace xsa
