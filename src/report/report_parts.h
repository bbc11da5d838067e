// What the report's files share (report_json.cpp, report_markdown.cpp, report_plots.cpp): the
// small helpers every renderer uses. Private to src/report/.
#pragma once

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "xsa/data/dataset.h"
#include "xsa/report/compare_report.h"
#include "xsa/tokenizer/tokenizer.h"
#include "xsa/util/fmt.h"

namespace xsa::report {

using nlohmann::json;

inline json nan_to_null(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}
inline json nan_to_null(const std::vector<double>& v) {
  json out = json::array();
  for (double x : v) out.push_back(nan_to_null(x));
  return out;
}
inline json nan_to_null(const std::vector<std::vector<double>>& v) {
  json out = json::array();
  for (const auto& x : v) out.push_back(nan_to_null(x));
  return out;
}

// The baseline every variant is compared with: the first variant, however it is spelled.
inline const std::string& baseline_of(const CompareResult& result) {
  return result.summary.at(0).variant;
}

// A mean validation loss (nats per token) in bits per byte; NaN when the bytes are not known.
inline double val_bpb(const CompareReport& r, double val_loss) {
  return bits_per_byte(val_loss, r.val_bytes_per_token);
}

inline std::string fmt_or_dash(const char* f, double v) {
  return std::isfinite(v) ? fmt::vformat(f, fmt::make_format_args(v)) : "–";
}

// "+0.0123 [−0.0040, +0.0286]": a mean difference and its 95 % interval.
inline std::string with_interval(const PairedDifferences& d, const char* f = "{:+.4f}") {
  if (!std::isfinite(d.mean)) return "–";
  std::string s = fmt::vformat(f, fmt::make_format_args(d.mean));
  if (std::isfinite(d.ci_low))
    s += " [" + fmt::vformat(f, fmt::make_format_args(d.ci_low)) + ", " +
         fmt::vformat(f, fmt::make_format_args(d.ci_high)) + "]";
  return s;
}

// "gain > 0.0230, loss > 0.0120": what a difference's 95 % interval rules out.
inline std::string rules_out_text(const RulesOut& r) {
  if (!std::isfinite(r.gain_above)) return "–";
  const auto part = [](const char* what, double above) {
    return above > 0 ? fmt::format("{} > {:.4f}", what, above) : fmt::format("any {}", what);
  };
  return part("gain", r.gain_above) + ", " + part("loss", r.loss_above);
}

// The same differences in bits per byte (a difference of losses scales like the losses).
inline PairedDifferences in_bits_per_byte(const CompareReport& r, PairedDifferences d) {
  for (double* x : {&d.mean, &d.sd, &d.ci_low, &d.ci_high}) *x = val_bpb(r, *x);
  return d;
}

// "every window (435 200 tokens)" or "an even sample of whole windows (524 288 tokens, ...)".
inline std::string score_extent(const CompareReport& r, size_t set, int64_t scored) {
  const bool sampled = set < r.score_sampled.size() && r.score_sampled[set];
  return fmt::format("{} ({} tokens{})",
                     sampled ? "an even sample of whole windows" : "every window", scored,
                     sampled ? fmt::format(", --score-tokens {}", r.score_tokens) : "");
}

// The sets of loss by position: the validation split, then --eval-data's.
inline std::vector<std::string> position_set_names(const CompareReport& r) {
  std::vector<std::string> names = {"validation"};
  for (const std::string& e : r.eval_data) names.push_back(e);
  return names;
}

inline std::string bucket_name(const PositionBucket& b) {
  return fmt::format("{}–{}", b.first, b.last);
}

// JSON of the statistics' types (report_json.cpp).
json differences_to_json(const PairedDifferences& d);

}  // namespace xsa::report
