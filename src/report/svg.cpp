#include "xsa/report/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "xsa/util/files.h"
#include "xsa/util/fmt.h"

namespace xsa {
namespace {

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                   "#9467bd", "#8c564b", "#e377c2", "#17becf"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s)
    out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

// Round tick values covering [lo, hi].
std::vector<double> ticks(double lo, double hi, int target = 6, bool integer = false) {
  double span = hi - lo;
  if (!(span > 0)) span = std::max(std::fabs(hi), 1.0);
  double step = std::pow(10, std::floor(std::log10(span / target)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (span / (step * m) <= target) {
      step *= m;
      break;
    }
  if (integer) step = std::max(step, 1.0);
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + 1e-12 * span; v += step)
    t.push_back(std::fabs(v) < 1e-12 * span ? 0 : v);
  return t;
}

// The opening of a chart: the svg element (W × H, a base font size), a white background and the
// title at (x, y).
std::string svg_open(double W, double H, int font_size, double x, int y, const std::string& title) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"{}\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{}\" y=\"{}\" "
      "font-size=\"15\">{}</text>\n",
      W, H, font_size, x, y, escape(title));
}

}  // namespace

std::string svg_line_chart(const std::string& title, const std::string& x_label,
                           const std::string& y_label, const std::vector<Series>& series,
                           bool zero_line, int first_color,
                           const std::vector<std::string>& x_names) {
  const double W = 760, H = 440, left = 70, right = 170, top = 40, bottom = 50;
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const Series& s : series)
    for (size_t i = 0; i < s.x.size(); i++) {
      x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]);
      double lo = s.y_low.empty() ? s.y[i] : s.y_low[i],
             hi = s.y_high.empty() ? s.y[i] : s.y_high[i];
      if (std::isfinite(lo) && std::isfinite(hi)) y0 = std::min(y0, lo), y1 = std::max(y1, hi);
    }
  if (zero_line) y0 = std::min(y0, 0.0), y1 = std::max(y1, 0.0);
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (!x_names.empty()) x0 = -0.5, x1 = x_names.size() - 0.5;  // room around the first and last
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1e-3, y0 -= 1e-3;
  const double pad = 0.05 * (y1 - y0);
  y0 -= pad, y1 += pad;
  auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * (W - left - right); };
  auto py = [&](double y) { return top + (y1 - y) / (y1 - y0) * (H - top - bottom); };
  std::string svg = svg_open(W, H, 12, left, 22, title);
  bool integer_x = true;  // layers, steps: no ticks between whole numbers
  for (const Series& s : series)
    for (double x : s.x) integer_x &= x == std::floor(x);
  std::vector<std::pair<double, std::string>> x_ticks;
  if (x_names.empty())
    for (double t : ticks(x0, x1, 6, integer_x)) x_ticks.push_back({t, fmt::format("{:g}", t)});
  for (size_t i = 0; i < x_names.size(); i++) x_ticks.push_back({(double)i, escape(x_names[i])});
  for (const auto& [t, name] : x_ticks)
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#eee\"/><text "
        "x=\"{0:.1f}\" y=\"{3}\" "
        "text-anchor=\"middle\">{4}</text>\n",
        px(t), top, H - bottom, H - bottom + 16, name);
  for (double t : ticks(y0, y1))
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#eee\"/><text "
        "x=\"{3}\" y=\"{4:.1f}\" "
        "text-anchor=\"end\">{5:.4g}</text>\n",
        left, py(t), W - right, left - 6, py(t) + 4, t);
  if (zero_line && y0 < 0 && y1 > 0)
    svg += fmt::format(
        "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#888\" "
        "stroke-dasharray=\"4 3\"/>\n",
        left, py(0), W - right, py(0));
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n", left,
      top, W - left - right, H - top - bottom);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                     (left + W - right) / 2, H - 12, escape(x_label));
  svg += fmt::format(
      "<text transform=\"translate(18,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
      (top + H - bottom) / 2, escape(y_label));
  for (size_t k = 0; k < series.size(); k++) {
    const Series& s = series[k];
    const char* color = kColors[(k + first_color) % std::size(kColors)];
    if (!s.y_low.empty() && s.x.size() > 1) {
      std::string band;
      for (size_t i = 0; i < s.x.size(); i++)
        band += fmt::format("{:.1f},{:.1f} ", px(s.x[i]), py(s.y_high[i]));
      for (size_t i = s.x.size(); i-- > 0;)
        band += fmt::format("{:.1f},{:.1f} ", px(s.x[i]), py(s.y_low[i]));
      svg += fmt::format(
          "<polygon points=\"{}\" fill=\"{}\" fill-opacity=\"0.15\" stroke=\"none\"/>\n", band,
          color);
    }
    std::string points;
    for (size_t i = 0; i < s.x.size(); i++)
      if (std::isfinite(s.y[i])) points += fmt::format("{:.1f},{:.1f} ", px(s.x[i]), py(s.y[i]));
    svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                       points, color);
    if (s.x.size() == 1)
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", px(s.x[0]),
                         py(s.y[0]), color);
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\" "
        "stroke-width=\"3\"/><text x=\"{4}\" y=\"{5}\">{6}</text>\n",
        W - right + 12, top + 14 + 18 * k, W - right + 32, color, W - right + 38, top + 18 + 18 * k,
        escape(s.name));
  }
  return svg + "</svg>\n";
}

std::string svg_heatmap(const std::string& title, const std::vector<std::vector<double>>& values,
                        const std::string& row_name, const std::string& col_name, double lo,
                        double hi) {
  const size_t rows = values.size(), cols = rows ? values[0].size() : 0;
  const double cell = std::clamp(480.0 / std::max<size_t>(cols, 1), 18.0, 60.0), left = 80,
               top = 50;
  const double W = left + cell * cols + 120, H = top + cell * rows + 60;
  std::string svg = svg_open(W, H, 11, left, 24, title);
  auto color = [&](double v) {  // white (lo) to dark red (hi)
    double t = std::clamp((v - lo) / (hi - lo), 0.0, 1.0);
    return fmt::format("rgb({},{},{})", (int)(255 - 75 * t), (int)(255 - 230 * t),
                       (int)(255 - 230 * t));
  };
  for (size_t r = 0; r < rows; r++) {
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{} {}</text>\n", left - 6,
                       top + cell * (r + 0.5) + 4, row_name, r);
    for (size_t c = 0; c < cols; c++) {
      double v = values[r][c];
      svg += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" "
          "stroke=\"white\"/>",
          left + cell * c, top + cell * r, cell, cell, std::isfinite(v) ? color(v) : "#ccc");
      if (cell >= 30)
        svg += fmt::format(
            "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"10\">{:.2f}</text>",
            left + cell * (c + 0.5), top + cell * (r + 0.5) + 4, v);
      svg += "\n";
    }
  }
  for (size_t c = 0; c < cols; c++)
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                       left + cell * (c + 0.5), top + cell * rows + 16, c);
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                     left + cell * cols / 2, top + cell * rows + 34, col_name);
  svg += fmt::format(
      "<text x=\"{:.1f}\" y=\"{}\">{:.2f}</text><rect x=\"{:.1f}\" y=\"{}\" width=\"16\" "
      "height=\"16\" fill=\"{}\"/>\n",
      left + cell * cols + 36, top + 12, hi, left + cell * cols + 14, top, color(hi));
  svg += fmt::format(
      "<text x=\"{:.1f}\" y=\"{}\">{:.2f}</text><rect x=\"{:.1f}\" y=\"{}\" width=\"16\" "
      "height=\"16\" fill=\"{}\" stroke=\"#ccc\"/>\n",
      left + cell * cols + 36, top + 36, lo, left + cell * cols + 14, top + 24, color(lo));
  return svg + "</svg>\n";
}

std::vector<std::string> write_plot(const std::string& base, const std::string& svg) {
  std::vector<std::string> files = {base + ".svg"};
  write_file_atomic(files[0], svg);
  if (std::system("command -v rsvg-convert >/dev/null 2>&1") == 0) {
    std::string cmd = "rsvg-convert -f png -o '" + base + ".png' '" + files[0] + "' 2>/dev/null";
    if (std::system(cmd.c_str()) == 0) files.push_back(base + ".png");
  }
  return files;
}

}  // namespace xsa
