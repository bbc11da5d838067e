// Plots as self-contained SVG files, drawn by hand (no plotting library in Debian's C++ world
// fits): line charts of curves and heat maps of a matrix. PNG copies come from rsvg-convert when
// present.
#pragma once

#include <string>
#include <vector>

namespace xsa {

struct Series {
  std::string name;
  std::vector<double> x, y;
  std::vector<double> y_low, y_high;  // optional band (e.g. mean ± sd over seeds)
};

// x_names: the x axis is categories, named x_names[0], x_names[1], … at x = 0, 1, ….
std::string svg_line_chart(const std::string& title, const std::string& x_label,
                           const std::string& y_label, const std::vector<Series>& series,
                           bool zero_line = false, int first_color = 0,
                           const std::vector<std::string>& x_names = {});
// values[row][col]; row_label(i), col_label(j) name the axes' ticks.
std::string svg_heatmap(const std::string& title, const std::vector<std::vector<double>>& values,
                        const std::string& row_name, const std::string& col_name, double lo,
                        double hi);

// Writes `svg` to path.svg and, when rsvg-convert is installed, path.png; returns the files
// written.
std::vector<std::string> write_plot(const std::string& path_without_extension,
                                    const std::string& svg);

}  // namespace xsa
