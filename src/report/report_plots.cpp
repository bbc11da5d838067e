// A comparison's charts as a list, each drawn from the figures the statistics computed
// (compare_statistics.cpp: the curves' means and spreads, the differences by position), in the
// order report.md shows them.
#include <cmath>

#include "xsa/report/report_parts.h"
#include "xsa/report/svg.h"
#include "xsa/util/fmt.h"

namespace xsa {

namespace fs = std::filesystem;
using namespace report;

namespace {

struct PlotInputs {
  const CompareReport& r;
  const CompareResult& result;
};

// The files of one chart, appended to `plots`.
void add_plot(std::vector<std::string>& plots, const std::vector<std::string>& files) {
  plots.insert(plots.end(), files.begin(), files.end());
}

// The same curves against each arm's own training time (the equal-loss view).
void time_plot(const fs::path& out, const PlotInputs& in, std::vector<std::string>& plots) {
  std::vector<Series> by_time;
  for (const VariantSummary& s : in.result.summary) {
    Series c{s.variant, {}, {}, {}, {}};
    for (size_t p = 1; p < s.curve.size(); p++)
      c.x.push_back(s.curve[p].seconds_mean), c.y.push_back(s.curve[p].mean);
    by_time.push_back(c);
  }
  add_plot(plots,
           write_plot((out / "val_loss_by_time").string(),
                      svg_line_chart("Validation loss against each arm's own training time (mean "
                                     "over seeds)",
                                     "seconds of training", "validation loss", by_time)));
}

// Validation curves by step (mean over seeds, ± sd band, from the first evaluation on: step 0 is
// the initialisation), and each variant's difference to SA along the run.
void curve_plots(const fs::path& out, const PlotInputs& in, std::vector<std::string>& plots) {
  const CompareReport& r = in.r;
  std::vector<Series> curves, deltas;
  for (size_t k = 0; k < in.result.summary.size(); k++) {
    const VariantSummary& s = in.result.summary[k];
    Series c{s.variant, {}, {}, {}, {}}, d = c;
    for (const CurveStat& p : s.curve) {
      c.x.push_back((double)p.step), c.y.push_back(p.mean);
      d.x.push_back((double)p.step), d.y.push_back(p.delta_mean);
      if (std::isfinite(p.sd)) {
        c.y_low.push_back(p.mean - p.sd), c.y_high.push_back(p.mean + p.sd);
        d.y_low.push_back(p.delta_mean - p.delta_sd), d.y_high.push_back(p.delta_mean + p.delta_sd);
      }
    }
    if (c.y_low.size() != c.y.size())
      c.y_low.clear(), c.y_high.clear(), d.y_low.clear(), d.y_high.clear();
    curves.push_back(c);
    if (k > 0) deltas.push_back(d);
  }
  for (Series& c : curves)
    if (c.x.size() > 2) {
      c.x.erase(c.x.begin()), c.y.erase(c.y.begin());
      if (!c.y_low.empty()) c.y_low.erase(c.y_low.begin()), c.y_high.erase(c.y_high.begin());
    }
  add_plot(plots, write_plot((out / "val_loss").string(),
                             svg_line_chart(fmt::format("Validation loss ({} seed{}, band: ± sd)",
                                                        r.seeds, r.seeds > 1 ? "s" : ""),
                                            "step", "validation loss", curves)));
  // (the time chart's place in the report's order)
  time_plot(out, in, plots);
  if (!deltas.empty())
    add_plot(plots,
             write_plot((out / "delta_vs_sa").string(),
                        svg_line_chart("Validation loss minus SA's (below 0: better than SA)",
                                       "step", "Δ validation loss", deltas, true)));
}

// Loss by position: each variant's difference to SA per bucket, one chart per set.
void position_plots(const fs::path& out, const PlotInputs& in, std::vector<std::string>& plots) {
  const CompareReport& r = in.r;
  const CompareResult& result = in.result;
  const std::vector<PositionBucket> buckets = position_buckets(r.model.seq_len);
  std::vector<std::string> bucket_names;
  for (const PositionBucket& b : buckets) bucket_names.push_back(bucket_name(b));
  const std::vector<std::string> sets = position_set_names(r);
  for (size_t set = 0; set < sets.size(); set++) {
    std::vector<Series> by_position;
    for (size_t k = 1; k < result.summary.size(); k++) {
      const VariantSummary& s = result.summary[k];
      if (set >= s.position_delta.size()) continue;
      Series se{s.variant, {}, {}, {}, {}};
      for (size_t b = 0; b < buckets.size() && b < s.position_delta[set].size(); b++) {
        const PairedDifferences& d = s.position_delta[set][b];
        se.x.push_back((double)b), se.y.push_back(d.mean);
        if (std::isfinite(d.ci_low)) se.y_low.push_back(d.ci_low), se.y_high.push_back(d.ci_high);
      }
      if (se.y_low.size() != se.y.size()) se.y_low.clear(), se.y_high.clear();
      by_position.push_back(se);
    }
    if (by_position.empty()) continue;
    add_plot(plots,
             write_plot((out / (set == 0 ? "loss_by_position"
                                         : fmt::format("loss_by_position-eval{}", set)))
                            .string(),
                        svg_line_chart(fmt::format("Loss by position minus SA's, {} (band: 95 % "
                                                   "interval)",
                                                   set == 0 ? "validation set" : sets[set]),
                                       "positions in the window", "Δ loss vs SA", by_position, true,
                                       1, bucket_names)));
  }
}

// --tune-lr: validation loss against the learning rate, per variant.
void tuning_plot(const fs::path& out, const PlotInputs& in, std::vector<std::string>& plots) {
  const CompareReport& r = in.r;
  if (r.tuning.empty()) return;
  std::vector<Series> lr_curves;
  std::vector<std::string> lr_names;
  for (double lr : r.tuning.lrs) lr_names.push_back(fmt::format("{:g}", lr));
  for (size_t k = 0; k < r.variants.size() && k < r.tuning.val_loss.size(); k++) {
    Series se{r.variants[k], {}, {}, {}, {}};
    for (size_t i = 0; i < r.tuning.lrs.size(); i++)
      se.x.push_back((double)i), se.y.push_back(r.tuning.val_loss[k][i]);
    lr_curves.push_back(se);
  }
  add_plot(plots, write_plot((out / "lr_tuning").string(),
                             svg_line_chart("Validation loss against the peak learning rate "
                                            "(tuning seeds; gaps: diverged)",
                                            "peak learning rate", "validation loss", lr_curves,
                                            false, 0, lr_names)));
}

// The similarity bias: mean cos(y_i, v_i) per layer, per variant (seed 1).
void bias_plot(const fs::path& out, const PlotInputs& in, std::vector<std::string>& plots) {
  const CompareReport& r = in.r;
  if (r.bias.empty() || r.bias[0].empty()) return;
  std::vector<Series> per_layer;
  for (size_t k = 0; k < r.variants.size(); k++) {
    if (r.bias[k].empty()) continue;  // diverged: no final weights
    Series s{r.variants[k] + " cos(y,v)", {}, {}, {}, {}};
    Series lean{r.variants[k] + " own lean", {}, {}, {}, {}};
    for (int l = 0; l < r.model.n_layer; l++) {
      double sum = 0, lean_sum = 0;
      for (int h = 0; h < r.model.n_head; h++) {
        const HeadBias& head = r.bias[k][l * r.model.n_head + h];
        sum += head.cos_yv, lean_sum += head.own_lean();
      }
      s.x.push_back(l), s.y.push_back(sum / r.model.n_head);
      lean.x.push_back(l), lean.y.push_back(lean_sum / r.model.n_head);
    }
    per_layer.push_back(s);
    per_layer.push_back(lean);
  }
  add_plot(plots, write_plot((out / "similarity_bias").string(),
                             svg_line_chart("Attention similarity bias per layer (seed 1): mean "
                                            "cos(y_i, v_i), and its own lean (less cos(y_i, v_j), "
                                            "j < i)",
                                            "layer", "cosine", per_layer, true)));
}

// The charts, in report.md's order (the time chart is drawn between the two curve charts).
const std::vector<void (*)(const fs::path&, const PlotInputs&, std::vector<std::string>&)> kPlots =
    {curve_plots, position_plots, tuning_plot, bias_plot};

}  // namespace

std::vector<std::string> write_compare_plots(const fs::path& out, const CompareReport& r,
                                             const CompareResult& result) {
  const PlotInputs in{r, result};
  std::vector<std::string> plots;
  for (const auto& plot : kPlots) plot(out, in, plots);
  return plots;
}

}  // namespace xsa
