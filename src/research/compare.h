// xsa compare: twin models that differ only in their attention, trained side by side in one process
// from identical initial weights on the identical sequence of batches, for several seeds; then a
// report folder with tables, machine-readable results and plots.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "xsa/model/model_config.h"
#include "xsa/report/compare_report.h"
#include "xsa/train/trainer.h"
#include "xsa/util/sequential.h"

namespace xsa {

// An attention variant: a name and every layer's attention, in --attn's grammar
// (parse_attention, model/attention.h), one item for every layer:
//   sa, xsa            every layer
//   xsa-lastN          XSA on the last N layers, SA below
//   xsa-firstN         XSA on the first N layers
//   xsa-layers-0.2.5   XSA on the listed layers
//   xsa-gated          gated XSA on every layer
//   gated-attn, value-residual, no-self
//                      XSA's rivals (docs/SPEC.md §8) on SA
//   <any>+sink, +gated-attn, +value-residual, +no-self
//                      options on every layer, in any order: xsa+gated-attn, xsa-last2+no-self
//   <any>@bf16, @fp32  the same in another precision than --precision's (sa@bf16, xsa+sink@bf16):
//                      a twin of <any> from the same weights on the same batches
//   <any>@RATE         the same at its own peak learning rate (sa@4e-3, xsa@4e-3, xsa@bf16@4e-3):
//                      best against best when each arm's rate is known, or SA at two rates
// (A per-layer list would need commas, which separate the variants.) The first variant is the
// baseline every other is compared with, whatever its spelling (sa, sa+qk-norm, sa@2e-3): its
// layers must all be standard attention.
struct Variant {
  std::string name;
  AttentionLayers attention{};         // parse_attention's (model/attention.h)
  std::optional<Precision> precision;  // none: the run's --precision
  std::optional<double> lr;            // none: the run's --lr (or --tune-lr's choice)
  std::string model_name;              // name without its @ suffixes: the model it trains
};
Variant parse_variant(const std::string& name, int n_layer);  // throws Error naming the variant

// --score-tokens' default: 2^19 tokens, the whole validation split of the default corpus.
inline constexpr int64_t kDefaultScoreTokens = 524288;

struct CompareConfig {
  ModelConfig model;  // the shape; attention comes from each variant
  RunConfig run;      // data, optimizer, schedule; run.out is the report folder
  std::vector<std::string> variants = {"sa", "xsa"};
  // --qk-norm, --value-embed: whole-model options in every variant (their names stay as given).
  LayerAttention whole_model;
  int seeds = 1;  // seeds run.seed, run.seed + 1, ...
  // --seeds auto: `seeds` is the cap; after each seed from the third on, stop once every variant's
  // answer is clear (seed_answer).
  bool seeds_auto = false;
  std::vector<std::string> eval_data;  // further evaluation sets, reported separately
  std::string eval_suite;   // a folder of the paper's task files: each arm scored at the end
  int analyze_batches = 2;  // batches for the similarity-bias chart (0: none)
  // --tune-lr: each variant is first trained at each of these peak learning rates on tune_seeds
  // tuning seeds (run.seed + kTuningSeedOffset, ...) into <out>/tune/lr-<rate>/, then compared
  // at the rate with its lowest validation loss on fresh seeds.
  std::vector<double> tune_lrs;
  int tune_seeds = 1;
  // Each variant's peak learning rate (empty: run.lr for every one); --tune-lr sets it.
  std::vector<double> variant_lrs;
  // The final score of each arm (the primary measure): every window of the validation split and of
  // each --eval-data set, the same for every arm; a set of more than this many tokens is scored on
  // an even sample of whole windows of about this many tokens (0: every window, whatever the size).
  int64_t score_tokens = kDefaultScoreTokens;
  // A tuning comparison (no analysis, no further evaluation: its rate is all it is for). In any
  // comparison an arm whose loss or gradient becomes NaN or infinite stops there and is recorded
  // as diverged, while the others go on.
  bool tuning = false;
  LrTuning tuned;  // what the tuning found, for the report
};

// The tuning seeds of --tune-lr are run.seed + kTuningSeedOffset, ...: never a confirmation seed.
inline constexpr uint64_t kTuningSeedOffset = 1000;
// Parses --tune-lr's list: at least two distinct positive rates, in rising order.
std::vector<double> parse_tune_lrs(const std::string& comma_separated);

CompareResult compare(const CompareConfig& cfg);

// --seeds auto's design for a comparison of `variants` (SA among them) with at most `cap` seeds:
// a group-sequential paired t-test (util/sequential.h) with looks after 3, 4, ..., cap seeds, at
// α = 0.05 / (variants − 1) per variant (Bonferroni), so that the chance of any false finding is
// at most 0.05.
inline constexpr int kFirstLook = 3;
inline constexpr int kMaxSeedsCap = 100;  // the design's calibration holds 100 000 paths × looks
SequentialDesign auto_seeds_design(int variants, int cap);
// The decision after `done` seeds, with deltas[k] variant k's differences to SA so far (k ≥ 1;
// deltas[0], SA's, is ignored): at a look of the design, each variant not yet found to differ is
// looked at again (a futility stop is non-binding: a later look may still find a difference), and
// looks[k] keeps its answer. True when the comparison stops here: every variant found to differ
// or stopped for futility, or the last look. xsa compare runs exactly this after each seed.
bool seeds_stop_here(const SequentialDesign& design, const std::vector<std::vector<double>>& deltas,
                     int done, std::vector<SequentialLook>& looks);
// Parses --seeds: a count, or "auto" (then `cap` seeds at most, at least kFirstLook).
void parse_seeds(const std::string& text, int cap, CompareConfig& cfg);
// The checks compare makes of cfg.variants (names, sa first, no repeats, precisions), alone.
void check_compare_variants(const CompareConfig& cfg);

// Named presets of model and run settings ("demo": the README's main job).
void apply_compare_preset(const std::string& name, ModelConfig& model, RunConfig& run,
                          CompareConfig& cfg);

}  // namespace xsa
