// A comparison's report written: its charts, report.md and report.json (the last, since it marks a
// finished comparison), from the renderers of report_plots.cpp, report_markdown.cpp and
// report_json.cpp; and the small functions of an arm's results they and compare share.
#include "xsa/report/compare_report.h"

#include <cmath>

#include "xsa/report/report_parts.h"
#include "xsa/util/files.h"
#include "xsa/util/stats.h"

namespace xsa {

namespace fs = std::filesystem;
using nlohmann::json;

void set_robust_timing(ArmResult& a, int64_t step_tokens) {
  a.ms_per_step = median(a.step_ms);
  a.tokens_per_s = step_tokens / (a.ms_per_step / 1000);
  a.slow_steps = 0;
  for (double ms : a.step_ms) a.slow_steps += ms > kSlowStep * a.ms_per_step;
  a.val_seconds.clear();
  for (const auto& point : a.val_curve) a.val_seconds.push_back(point.first * a.ms_per_step / 1000);
}

std::vector<CurvePoint> curve_of(const ArmResult& arm) {
  std::vector<CurvePoint> curve;
  const bool timed = arm.val_seconds.size() == arm.val_curve.size();
  for (size_t i = 0; i < arm.val_curve.size(); i++) {
    const auto& [step, loss] = arm.val_curve[i];
    curve.push_back(
        {(double)step, timed ? arm.val_seconds[i] : step * arm.ms_per_step / 1000, loss});
  }
  return curve;
}

std::vector<const ArmResult*> arms_of(const CompareResult& result, const std::string& variant) {
  std::vector<const ArmResult*> r;
  for (const ArmResult& a : result.arms)
    if (a.variant == variant) r.push_back(&a);
  return r;
}

const char* to_string(Settled s) {
  switch (s) {
    case Settled::settled:
      return "settled";
    case Settled::moving:
      return "still moving";
    default:
      return "not judged";
  }
}

RulesOut rules_out(const PairedDifferences& d) {
  RulesOut r;
  if (!std::isfinite(d.ci_low) || !std::isfinite(d.ci_high)) return r;
  r.gain_above = std::max(0.0, -d.ci_low), r.loss_above = std::max(0.0, d.ci_high);
  return r;
}

WrittenReport write_compare_report(const fs::path& out, const CompareReport& r,
                                   const CompareResult& result) {
  const std::vector<std::string> plots =
      r.plots ? write_compare_plots(out, r, result) : std::vector<std::string>();
  WrittenReport written{compare_report_markdown(r, result, plots), compare_report_json(r, result)};
  write_file_atomic(out / "report.md", written.markdown);
  // Last: report.json marks a finished comparison (compare refuses to overwrite one), so a write
  // that fails before it leaves a folder the same command completes from the seed files.
  write_file_atomic(out / "report.json", written.json.dump(2) + "\n");
  return written;
}

json comparison_page_json(const std::string& id, const CompareResult& result) {
  json seeds = json::array();
  for (const ArmResult& a : result.arms) {
    const std::string file = fmt::format("seed-{}.json", a.seed);
    if (seeds.empty() || seeds.back()["file"] != file)
      seeds.push_back({{"file", file}, {"arms", json::array()}});
    json curve = json::array();
    for (const auto& [step, loss] : a.val_curve) curve.push_back({step, report::nan_to_null(loss)});
    seeds.back()["arms"].push_back({{"variant", a.variant},
                                    {"seed", a.seed},
                                    {"val_curve", curve},
                                    {"val_seconds", a.val_seconds}});
  }
  return {
      {"id", id},         {"seeds", seeds},    {"live", json::array()}, {"report", result.report},
      {"sweep", nullptr}, {"samples", nullptr}};
}

}  // namespace xsa
