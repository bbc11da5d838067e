#include "xsa/board/page.h"

#include <algorithm>
#include <cstdio>

#include "xsa/board/runs_index.h"
#include "xsa/util/files.h"

namespace xsa {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Replaces the one `marker` of `page` with `text`.
void put(std::string& page, std::string_view marker, std::string_view text) {
  const size_t at = page.find(marker);
  if (at != std::string::npos) page.replace(at, marker.size(), text);
}

// JSON inside <script>: "</" would end the element early and "<!--" change how it is read; every
// '<' written as \u003c is the same string to JSON.
std::string script_safe_json(const json& data) {
  std::string text = data.dump();
  std::string out;
  out.reserve(text.size());
  for (char c : text) {  // '<' occurs only inside JSON strings, where \u003c is the same text
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  }
  return out;
}

}  // namespace

bool board_charts_embedded(std::string* why) {
  if (!board_asset("uPlot.js").empty()) return true;
  if (why)
    *why =
        "this build has no chart library (uPlot): run `bash scripts/get_data.sh --web`, then "
        "build again";
  return false;
}

std::string board_page(const json* data) {
  std::string page(board_asset("board.html"));
  put(page, "/*UPLOT_CSS*/", board_asset("uPlot.css"));
  put(page, "/*BOARD_CSS*/", board_asset("board.css"));
  put(page, "/*UPLOT_JS*/", board_asset("uPlot.js"));
  // The data last: its text (a sample, a path) may hold a marker of its own.
  put(page, "/*BOARD_JS*/", board_asset("board.js"));
  put(page, "/*DATA*/", data ? "window.XSA_STATIC = " + script_safe_json(*data) + ";" : "");
  return page;
}

json comparison_page_data(const fs::path& dir) {
  return {{"kind", "comparison"},
          {"title", dir.filename().string()},
          {"comparisons",
           json::array({comparison_json(dir, dir.filename().string(), BoardFence(dir))})}};
}

json sweep_page_data(const fs::path& dir, const std::string& param) {
  json data = {{"kind", "sweep"},
               {"title", dir.filename().string()},
               {"param", param},
               {"comparisons", json::array()}};
  std::vector<fs::path> configs;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec) && !it->is_symlink(ec) && fs::exists(it->path() / "report.json", ec))
      configs.push_back(it->path());
  std::sort(configs.begin(), configs.end());
  const BoardFence fence(dir);
  json sweep = comparison_json(dir, dir.filename().string(), fence);
  data["sweep"] = sweep["sweep"];
  for (const fs::path& c : configs)
    data["comparisons"].push_back(comparison_json(c, c.filename().string(), fence));
  return data;
}

bool write_report_html(const fs::path& dir, const json& data) {
  const fs::path path = dir / "report.html";
  std::string why;
  if (board_charts_embedded(&why)) {
    try {
      write_file_atomic(path, board_page(&data));
      return true;
    } catch (const std::exception& e) {
      why = e.what();
    }
  }
  std::fprintf(stderr,
               "xsa: warning: %s not written (%s); the results are in report.json and report.md, "
               "and the same command again writes it\n",
               path.string().c_str(), why.c_str());
  return false;
}

}  // namespace xsa
