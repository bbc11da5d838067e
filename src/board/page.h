// The page of xsa board, and report.html: one HTML file with its style, the chart library (uPlot,
// embedded at build time from the npm package scripts/get_data.sh --web fetches) and its script
// inline. The board's page asks the server for its data; report.html carries it inline, so it
// opens from disk with no server and no network.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace xsa {

// An embedded file by name (board.html, board.js, board.css, uPlot.js, uPlot.css); empty when
// the build had none (cmake/embed_assets.cmake).
std::string_view board_asset(std::string_view name);

// Whether this build has the chart library; when not, why (one line).
bool board_charts_embedded(std::string* why = nullptr);

// The whole page. With `data` (report.html) the page shows it and asks no server.
std::string board_page(const nlohmann::json* data = nullptr);

// report.html's data: one comparison (its folder), or a sweep (its folder, the swept parameter,
// each configuration's comparison folder below it).
nlohmann::json comparison_page_data(const std::filesystem::path& dir);
nlohmann::json sweep_page_data(const std::filesystem::path& dir, const std::string& param);

// Writes DIR/report.html (atomically) with `data` and returns true; when it cannot (no chart
// library in this build, a full disk, a folder in the way) it says why on stderr in one line and
// returns false. The page is a view of report.json: a command whose results are written goes on.
bool write_report_html(const std::filesystem::path& dir, const nlohmann::json& data);

}  // namespace xsa
