// A comparison's report as data: the arms' records (also the seed files' form), the list of a
// variant's summary fields behind report.json's summary records and sweep.json's rows, and
// report.json whole, built in memory (written by compare_report.cpp, read by report.html).
#include <cmath>

#include "xsa/report/report_parts.h"
#include "xsa/util/fmt.h"
#include "xsa/util/stats.h"

namespace xsa {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace report;

json arm_to_json(const ArmResult& a) {
  json curve = json::array(), evals = json::array();
  for (auto& [st, v] : a.val_curve)
    curve.push_back({st, std::isfinite(v) ? json(v) : json(nullptr)});
  for (double v : a.eval_losses) evals.push_back(std::isfinite(v) ? json(v) : json(nullptr));
  return {{"variant", a.variant},
          {"seed", a.seed},
          {"train_loss", nan_to_null(a.train_loss)},
          {"val_loss", std::isfinite(a.val_loss) ? json(a.val_loss) : json(nullptr)},
          {"eval_losses", evals},
          {"scored_tokens", a.scored_tokens},
          {"ms_per_step", nan_to_null(a.ms_per_step)},
          {"tokens_per_s", nan_to_null(a.tokens_per_s)},
          {"slow_steps", a.slow_steps},
          {"step_ms", a.step_ms},
          {"peak_mb", nan_to_null(a.peak_mb)},
          {"val_curve", curve},
          {"val_seconds", a.val_seconds},
          {"init_hash", fmt::format("{:016x}", a.init_hash)},
          {"batches_hash", fmt::format("{:016x}", a.batches_hash)},
          {"lr", a.lr},
          {"diverged_at", a.diverged_at},
          {"position_loss", nan_to_null(a.position_loss)}};
}

ArmResult arm_from_json(const json& j) {
  auto num = [](const json& v) { return v.is_null() ? NAN : v.get<double>(); };
  ArmResult a;
  a.variant = j.at("variant"), a.seed = j.at("seed");
  a.train_loss = num(j.at("train_loss")), a.val_loss = num(j.at("val_loss"));
  for (const auto& v : j.at("eval_losses")) a.eval_losses.push_back(num(v));
  a.ms_per_step = num(j.at("ms_per_step")), a.tokens_per_s = num(j.at("tokens_per_s")),
  a.peak_mb = num(j.at("peak_mb"));
  a.slow_steps = j.value("slow_steps", 0);
  if (j.contains("step_ms")) a.step_ms = j.at("step_ms").get<std::vector<double>>();
  if (j.contains("scored_tokens"))
    a.scored_tokens = j.at("scored_tokens").get<std::vector<int64_t>>();
  for (const auto& p : j.at("val_curve")) a.val_curve.push_back({p[0].get<int64_t>(), num(p[1])});
  if (j.contains("val_seconds")) a.val_seconds = j.at("val_seconds").get<std::vector<double>>();
  a.init_hash = std::stoull(j.at("init_hash").get<std::string>(), nullptr, 16);
  a.batches_hash = std::stoull(j.at("batches_hash").get<std::string>(), nullptr, 16);
  a.lr = j.value("lr", 0.0);
  a.diverged_at = j.value("diverged_at", (int64_t)0);
  if (j.contains("position_loss"))
    for (const auto& set : j.at("position_loss")) {
      a.position_loss.emplace_back();
      for (const auto& v : set) a.position_loss.back().push_back(num(v));
    }
  return a;
}

namespace report {

json differences_to_json(const PairedDifferences& d) {
  return {{"n", d.n},
          {"mean", nan_to_null(d.mean)},
          {"sd", nan_to_null(d.sd)},
          {"ci95", {nan_to_null(d.ci_low), nan_to_null(d.ci_high)}},
          {"d_z", nan_to_null(d.d_z)},
          {"p_t", nan_to_null(d.p_t)},
          {"p_wilcoxon", nan_to_null(d.p_wilcoxon)},
          {"p_sign", nan_to_null(d.p_sign)}};
}

}  // namespace report

namespace {

json paired_to_json(const PairedDelta& d) {
  if (d.reference.empty()) return nullptr;
  return {{"against", d.reference},
          {"delta_mean", nan_to_null(d.mean)},
          {"delta_sd", nan_to_null(d.sd)},
          {"p_value", nan_to_null(d.p_value)},
          {"ci95", {nan_to_null(d.ci_low), nan_to_null(d.ci_high)}},
          {"against_val_loss_sd", nan_to_null(d.reference_sd)},
          {"time_ratio", nan_to_null(d.time_ratio)}};
}

json equal_loss_to_json(const EqualLoss& e) {
  json seeds = json::array();
  for (const SeedCrossing& s : e.per_seed)
    seeds.push_back({{"target", nan_to_null(s.target)},
                     {"reached", s.reached},
                     {"step", nan_to_null(s.step)},
                     {"seconds", nan_to_null(s.seconds)},
                     {"end_step", s.end_step},
                     {"end_seconds", s.end_seconds},
                     {"sa_step", s.sa_step},
                     {"sa_seconds", s.sa_seconds}});
  return {{"seeds", e.seeds},
          {"seeds_reached", e.reached},
          {"target", "each seed's SA final validation loss"},
          {"per_seed", seeds},
          {"median_steps", nan_to_null(e.median_steps)},
          {"median_seconds", nan_to_null(e.median_seconds)},
          {"step_speedup", nan_to_null(e.step_speedup)},
          {"time_speedup", nan_to_null(e.time_speedup)},
          {"median",
           "Kaplan-Meier over every seed, a seed that did not reach it censored at the "
           "end of its run"},
          {"mean_curve_steps", nan_to_null(e.mean_curve_steps)},
          {"mean_curve_seconds", nan_to_null(e.mean_curve_seconds)},
          {"mean_curve_step_speedup", nan_to_null(e.mean_curve_step_speedup)},
          {"mean_curve_time_speedup", nan_to_null(e.mean_curve_time_speedup)},
          {"val_loss_at_sa_time_mean", nan_to_null(e.loss_at_sa_time_mean)},
          {"val_loss_at_sa_time_sd", nan_to_null(e.loss_at_sa_time_sd)},
          {"delta_at_sa_time_mean", nan_to_null(e.delta_at_sa_time_mean)},
          {"delta_at_sa_time_sd", nan_to_null(e.delta_at_sa_time_sd)},
          {"delta_at_sa_time_ci95",
           {nan_to_null(e.delta_at_sa_time_ci_low), nan_to_null(e.delta_at_sa_time_ci_high)}},
          {"finished_before_sa_time", e.beyond_own_run}};
}

// Per variant: its parameter count, its rivals of XSA and its whole-model options (QK-norm, value
// embeddings: a key each, only where on, so that other reports read as before).
nlohmann::json parameters_json(const CompareReport& r) {
  nlohmann::json j = nlohmann::json::object();
  for (size_t k = 0; k < r.variants.size() && k < r.parameters.size(); k++) {
    j[r.variants[k]] = {{"count", r.parameters[k]},
                        {"vs_sa", r.parameters[k] - r.parameters[0]},
                        {"rivals", k < r.rivals.size() ? rivals_string(r.rivals[k]) : ""}};
    for (const AttentionOption& o : kAttentionOptions)
      if (o.whole_model && k < r.rivals.size() && r.rivals[k].*o.flag)
        j[r.variants[k]][o.key] = true;
  }
  return j;
}

// The similarity bias of every variant's heads.
json bias_to_json(const CompareReport& r) {
  json j_bias = json::array();
  for (size_t k = 0; k < r.variants.size(); k++)
    for (const HeadBias& h : r.bias[k])
      j_bias.push_back({{"variant", r.variants[k]},
                        {"layer", h.layer},
                        {"head", h.head},
                        {"cos_yv", h.cos_yv},
                        {"cos_zv", nan_to_null(h.cos_zv)},
                        {"self_weight", h.self_weight},
                        {"cos_vv", h.cos_vv},
                        {"cos_y_vj", h.cos_y_vj},
                        {"own_lean", h.own_lean()}});
  return j_bias;
}

// --tune-lr's rates and losses (null without it).
json tuning_to_json(const CompareReport& r) {
  if (r.tuning.empty()) return nullptr;
  json seed_losses = json::array(), margins = json::array();
  for (const auto& per_rate : r.tuning.seed_val_loss) seed_losses.push_back(nan_to_null(per_rate));
  for (const PairedDifferences& m : r.tuning.margin)
    margins.push_back({{"n", m.n},
                       {"mean", nan_to_null(m.mean)},
                       {"sd", nan_to_null(m.sd)},
                       {"ci95", {nan_to_null(m.ci_low), nan_to_null(m.ci_high)}}});
  return {{"grid", r.tuning.grid},
          {"lrs", r.tuning.lrs},
          {"extended_down", r.tuning.extended_down},
          {"extended_up", r.tuning.extended_up},
          {"seeds", r.tuning.seeds},
          {"val_loss", nan_to_null(r.tuning.val_loss)},
          {"diverged_seeds", r.tuning.diverged},
          {"seed_val_loss", seed_losses},
          {"chosen", r.tuning.chosen},
          {"runner_up", nan_to_null(r.tuning.runner_up)},
          {"margin", margins},
          {"folder", r.tuning.folder}};
}

// --seeds auto's group-sequential design (null without it).
json design_to_json(const CompareReport& r) {
  if (!r.design) return nullptr;
  return {{"looks", r.design->looks},
          {"alpha", r.design->alpha},
          {"spent_alpha", r.design->spent_alpha},
          {"simulated_alpha", r.design->simulated_alpha},
          {"nominal_p", r.design->nominal_p},
          {"z_bound", r.design->z_bound},
          {"futility_power", r.design->futility_power},
          {"spending", "O'Brien-Fleming-type (Lan-DeMets)"}};
}

// A field's value from the variant's summary (baseline: the comparison's first variant, which has
// no difference of its own), the validation set's bytes per token (bits per byte) and --seeds
// auto's design (its looks).
struct FieldInputs {
  const VariantSummary& s;
  bool baseline;
  double bytes_per_token;
  const SequentialDesign* design;
};

struct SummaryField {
  SummaryFieldInfo info;
  json (*value)(const FieldInputs&);
};

json differences_or_null(const FieldInputs& f, const PairedDifferences& d) {
  return f.baseline ? json(nullptr) : differences_to_json(d);
}

// The one list of a variant's summary figures: report.json's summary records (kInReport) and
// sweep.json's rows (kInSweep) are these, in this order, named and computed here alone; the
// board reads them by these names (a test holds board.js to the list).
const SummaryField kSummaryFields[] = {
    {{"variant", "", "the variant's name, as --variants gave it", kInReport | kInSweep},
     [](const FieldInputs& f) { return json(f.s.variant); }},
    {{"n_seeds", "seeds", "seeds whose arms it has", kInReport},
     [](const FieldInputs& f) { return json(f.s.n_seeds); }},
    {{"lr", "", "its peak learning rate (its own: @RATE or --tune-lr's choice)",
      kInReport | kInSweep},
     [](const FieldInputs& f) { return json(f.s.lr); }},
    {{"train_loss_mean", "nats per token", "the mean over seeds of each arm's last 10 % of steps",
      kInReport},
     [](const FieldInputs& f) { return nan_to_null(f.s.train_loss_mean); }},
    {{"val_loss_mean", "nats per token",
      "the final score (every window of the validation split), mean over seeds", kInReport},
     [](const FieldInputs& f) { return nan_to_null(f.s.val_loss_mean); }},
    {{"val_loss_sd", "nats per token", "its sd over seeds", kInReport},
     [](const FieldInputs& f) { return nan_to_null(f.s.val_loss_sd); }},
    {{"val_bpb_mean", "bits per byte", "val_loss_mean / ln 2 / the split's bytes per token",
      kInReport},
     [](const FieldInputs& f) {
       return nan_to_null(bits_per_byte(f.s.val_loss_mean, f.bytes_per_token));
     }},
    {{"delta_vs_sa_mean", "nats per token",
      "the variant's final score minus its seed's baseline arm's, mean over seeds",
      kInReport | kInSweep},
     [](const FieldInputs& f) { return nan_to_null(f.s.delta_vs_sa_mean); }},
    {{"delta_vs_sa_sd", "nats per token", "their sd over seeds", kInReport | kInSweep},
     [](const FieldInputs& f) { return nan_to_null(f.s.delta_vs_sa_sd); }},
    {{"delta_vs_sa", "nats per token",
      "those differences: n, mean, sd, 95 % t-interval, d_z, p of the t, Wilcoxon and sign tests",
      kInReport},
     [](const FieldInputs& f) { return differences_or_null(f, f.s.delta); }},
    {{"delta_ci95", "nats per token", "delta_vs_sa's 95 % interval", kInSweep},
     [](const FieldInputs& f) {
       return json{nan_to_null(f.s.delta.ci_low), nan_to_null(f.s.delta.ci_high)};
     }},
    {{"delta_bpb_vs_sa", "bits per byte", "delta_vs_sa in bits per byte", kInReport},
     [](const FieldInputs& f) {
       PairedDifferences d = f.s.delta;
       for (double* x : {&d.mean, &d.sd, &d.ci_low, &d.ci_high})
         *x = bits_per_byte(*x, f.bytes_per_token);
       return differences_or_null(f, d);
     }},
    {{"delta_bpb_mean", "bits per byte", "delta_vs_sa_mean in bits per byte", kInSweep},
     [](const FieldInputs& f) {
       return nan_to_null(bits_per_byte(f.s.delta.mean, f.bytes_per_token));
     }},
    {{"delta_bpb_ci95", "bits per byte", "delta_ci95 in bits per byte", kInSweep},
     [](const FieldInputs& f) {
       return json{nan_to_null(bits_per_byte(f.s.delta.ci_low, f.bytes_per_token)),
                   nan_to_null(bits_per_byte(f.s.delta.ci_high, f.bytes_per_token))};
     }},
    {{"d_z", "", "Cohen's d_z: the differences' mean over their sd", kInSweep},
     [](const FieldInputs& f) { return nan_to_null(f.s.delta.d_z); }},
    {{"p_value", "", "the paired t-test's two-sided p", kInReport | kInSweep},
     [](const FieldInputs& f) { return nan_to_null(f.s.p_value); }},
    {{"p_holm", "", "p Holm-corrected across the comparison's variants (a missing p counts as 1)",
      kInReport},
     [](const FieldInputs& f) { return nan_to_null(f.s.p_holm); }},
    {{"p_wilcoxon", "", "the exact Wilcoxon signed-rank test's two-sided p", kInSweep},
     [](const FieldInputs& f) { return nan_to_null(f.s.delta.p_wilcoxon); }},
    {{"rules_out", "nats per token",
      "what the 95 % interval excludes: a gain above gain_above, a loss above loss_above",
      kInReport},
     [](const FieldInputs& f) {
       return f.baseline ? json(nullptr)
                         : json{{"gain_above", nan_to_null(f.s.rules_out.gain_above)},
                                {"loss_above", nan_to_null(f.s.rules_out.loss_above)}};
     }},
    {{"settled", "",
      "whether Δ stopped moving: per seed its slope over the last quarter times a quarter, mean "
      "and interval over seeds; moving when it excludes 0",
      kInReport},
     [](const FieldInputs& f) {
       return f.baseline ? json(nullptr)
                         : json{{"answer", to_string(f.s.settled)},
                                {"points", f.s.drift_points},
                                {"change_over_last_quarter", differences_to_json(f.s.drift)}};
     }},
    {{"overhead_vs_sa", "fraction",
      "the median over interleaved steps of the step's time over the baseline's, minus 1",
      kInReport | kInSweep},
     [](const FieldInputs& f) { return nan_to_null(f.s.overhead_vs_sa); }},
    {{"ms_per_step_mean", "ms", "its arms' median steps, mean over seeds", kInReport},
     [](const FieldInputs& f) { return nan_to_null(f.s.ms_per_step_mean); }},
    {{"tokens_per_s_mean", "tokens per second", "at its arms' median steps, mean over seeds",
      kInReport},
     [](const FieldInputs& f) { return nan_to_null(f.s.tokens_per_s_mean); }},
    {{"slow_steps", "steps", "steps over 3 times their arm's median, over the seeds", kInReport},
     [](const FieldInputs& f) { return json(f.s.slow_steps); }},
    {{"cos_yv_mean", "", "the similarity bias: mean cos(y_i, v_i) over layers and heads, seed 1",
      kInReport | kInSweep},
     [](const FieldInputs& f) { return nan_to_null(f.s.cos_yv_mean); }},
    {{"equal_loss", "",
      "the race to the baseline's final loss: seeds that reached it, Kaplan-Meier medians, "
      "speed-ups, the loss at the baseline's time",
      kInReport},
     [](const FieldInputs& f) {
       return f.baseline ? json(nullptr) : equal_loss_to_json(f.s.equal_loss);
     }},
    {{"equal_loss_reached", "seeds", "equal_loss's seeds that reached the baseline's loss",
      kInSweep},
     [](const FieldInputs& f) { return json(f.s.equal_loss.reached); }},
    {{"step_speedup", "", "equal_loss's speed-up in steps (Kaplan-Meier median)", kInSweep},
     [](const FieldInputs& f) { return nan_to_null(f.s.equal_loss.step_speedup); }},
    {{"time_speedup", "", "equal_loss's speed-up in training time", kInSweep},
     [](const FieldInputs& f) { return nan_to_null(f.s.equal_loss.time_speedup); }},
    {{"mean_curve_step_speedup", "", "the speed-up in steps of the seed-mean curves", kInSweep},
     [](const FieldInputs& f) { return nan_to_null(f.s.equal_loss.mean_curve_step_speedup); }},
    {{"mean_curve_time_speedup", "", "the same in training time", kInSweep},
     [](const FieldInputs& f) { return nan_to_null(f.s.equal_loss.mean_curve_time_speedup); }},
    {{"delta_at_sa_time_mean", "nats per token",
      "the validation loss at the baseline's training time minus its final loss, mean over seeds",
      kInSweep},
     [](const FieldInputs& f) { return nan_to_null(f.s.equal_loss.delta_at_sa_time_mean); }},
    {{"seeds_for_80pct_power", "seeds",
      "the seeds a paired t-test needs to find this difference with 80 % power", kInReport},
     [](const FieldInputs& f) {
       return f.baseline || f.s.seeds_for_power == 0 ? json(nullptr) : json(f.s.seeds_for_power);
     }},
    {{"seeds_answer", "", "--seeds auto: the sequential test's answer", kInReport},
     [](const FieldInputs& f) {
       return f.baseline || f.s.seeds_answer.empty() ? json(nullptr) : json(f.s.seeds_answer);
     }},
    {{"sequential", "", "--seeds auto: its last look (answer, seeds, p, level, power)", kInReport},
     [](const FieldInputs& f) {
       if (!f.design || f.baseline) return json(nullptr);
       return json{{"answer", f.s.seeds_answer},
                   {"seeds", f.design->looks[f.s.sequential.look]},
                   {"p", nan_to_null(f.s.sequential.p)},
                   {"level", f.s.sequential.nominal_p},
                   {"conditional_power", nan_to_null(f.s.sequential.conditional_power)}};
     }},
    {{"eval_loss_mean", "nats per token", "each --eval-data set's final score, mean over seeds",
      kInReport},
     [](const FieldInputs& f) { return nan_to_null(f.s.eval_loss_mean); }},
    {{"eval_delta_vs_sa_mean", "nats per token", "its difference to the baseline, mean", kInReport},
     [](const FieldInputs& f) { return nan_to_null(f.s.eval_delta_vs_sa_mean); }},
    {{"eval_delta_vs_sa", "nats per token", "those differences as delta_vs_sa, per set", kInReport},
     [](const FieldInputs& f) {
       if (f.baseline) return json(nullptr);
       json sets = json::array();
       for (const PairedDifferences& d : f.s.eval_delta) sets.push_back(differences_to_json(d));
       return sets;
     }},
    {{"loss_by_position", "nats per token",
      "per set: each bucket's mean loss, its difference to the baseline, the context contrast",
      kInReport},
     [](const FieldInputs& f) {
       json sets = json::array();
       for (size_t set = 0; set < f.s.position_loss_mean.size(); set++) {
         json deltas = json::array();
         if (!f.baseline)
           for (const PairedDifferences& d : f.s.position_delta[set])
             deltas.push_back(differences_to_json(d));
         sets.push_back({{"loss_mean", nan_to_null(f.s.position_loss_mean[set])},
                         {"delta_vs_sa", deltas},
                         {"context_contrast", set < f.s.context_contrast.size()
                                                  ? differences_to_json(f.s.context_contrast[set])
                                                  : json(nullptr)}});
       }
       return sets;
     }},
    {{"per_seed", "nats per token", "each seed's final score and its difference to the baseline",
      kInReport},
     [](const FieldInputs& f) {
       json seeds = json::array();
       for (const SeedFigure& x : f.s.per_seed)
         seeds.push_back({{"seed", x.seed},
                          {"val_loss", nan_to_null(x.val_loss)},
                          {"delta", f.baseline ? json(nullptr) : nan_to_null(x.delta)}});
       return seeds;
     }},
    {{"verdict", "", "the verdict the table prints", kInReport},
     [](const FieldInputs& f) { return json(f.s.verdict); }},
    {{"vs_twin", "", "an arm in another precision against its twin in the run's", kInReport},
     [](const FieldInputs& f) { return paired_to_json(f.s.vs_twin); }},
    {{"vs_precision_sa", "",
      "an arm in its own precision or at its own rate against the baseline's model in the same",
      kInReport},
     [](const FieldInputs& f) { return paired_to_json(f.s.vs_precision_sa); }},
};

json fields_json(unsigned where) {
  json fields = json::array();
  for (const SummaryField& f : kSummaryFields)
    if (f.info.where & where)
      fields.push_back({{"name", f.info.name}, {"unit", f.info.unit}, {"how", f.info.how}});
  return fields;
}

}  // namespace

std::vector<SummaryFieldInfo> summary_fields() {
  std::vector<SummaryFieldInfo> out;
  for (const SummaryField& f : kSummaryFields) out.push_back(f.info);
  return out;
}

json summary_record(const VariantSummary& s, bool baseline, double bytes_per_token,
                    const std::optional<SequentialDesign>& design, unsigned where) {
  const FieldInputs in{s, baseline, bytes_per_token, design ? &*design : nullptr};
  json record = json::object();
  for (const SummaryField& f : kSummaryFields)
    if (f.info.where & where) record[f.info.name] = f.value(in);
  return record;
}

json compare_report_json(const CompareReport& r, const CompareResult& result) {
  json j_arms = json::array(), j_summary = json::array();
  for (const ArmResult& a : result.arms) j_arms.push_back(arm_to_json(a));
  for (const VariantSummary& s : result.summary)
    j_summary.push_back(
        summary_record(s, &s == &result.summary[0], r.val_bytes_per_token, r.design, kInReport));
  json buckets = json::array();
  for (const PositionBucket& b : position_buckets(r.model.seq_len))
    buckets.push_back({b.first, b.last});
  nlohmann::json model_json = r.model;
  return {{"data", r.run.data},
          {"eval_data", r.eval_data},
          {"model", model_json},
          {"run", run_config_to_json(r.run)},
          {"variants", r.variants},
          {"seeds", r.seeds},
          {"arms", j_arms},
          {"summary", j_summary},
          {"fields", fields_json(kInReport)},
          {"similarity_bias", bias_to_json(r)},
          {"seeds_note", r.seeds_note},
          {"sequential_design", design_to_json(r)},
          {"lr_tuning", tuning_to_json(r)},
          {"parameters", parameters_json(r)},
          {"loss_by_position", {{"buckets", buckets}, {"sets", position_set_names(r)}}},
          {"multiple_comparisons", "Holm across the variants tested against SA"},
          {"validation",
           {{"every_steps", r.run.val_every},
            {"batches", r.run.val_batches},
            {"score_tokens", r.score_tokens},
            {"windows", "drawn evenly across the whole validation split"},
            {"share_of_wall_clock", r.validation_share}}}};
}

}  // namespace xsa
