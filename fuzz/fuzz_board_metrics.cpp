// xsa board's readers of a run folder (src/board/runs_index.*): the input as metrics.jsonl, and
// as run.json, a seed file and report.json of a comparison. The list, the comparison and every
// answer must come out as JSON that can be sent (no exception), every record an object, and the
// metrics read in small chunks must give the records read at once when no line is longer than a
// chunk.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fuzz_common.h"
#include "xsa/board/runs_index.h"

namespace {

namespace fs = std::filesystem;

void write(const fs::path& path, const uint8_t* data, size_t size) {
  std::ofstream(path, std::ios::binary).write((const char*)data, (std::streamsize)size);
}

std::string sendable(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xsa;
  static const fs::path root =
      fs::temp_directory_path() / ("xsa_fuzz_board_" + std::to_string(::getpid()));
  fs::create_directories(root / "cmp" / "arms" / "sa-seed2");
  const fs::path arm = root / "cmp" / "arms" / "sa-seed2";
  write(arm / "metrics.jsonl", data, size);
  write(arm / "run.json", data, size);
  write(root / "cmp" / "seed-1.json", data, size);
  write(root / "cmp" / "report.json", data, size);

  RunsBoard board(root);
  (void)sendable(board.list());
  (void)sendable(board.comparison("cmp").value());
  const MetricsChunk whole = read_metrics_chunk(arm / "metrics.jsonl", 0, 1 << 20);
  for (const nlohmann::json& r : whole.records) XSA_FUZZ_EXPECT(r.is_object());
  XSA_FUZZ_EXPECT(whole.next <= whole.size);
  (void)sendable(to_json(whole));
  constexpr size_t kChunk = 64;
  size_t longest = 0, start = 0;
  const std::string_view text((const char*)data, size);
  for (size_t nl; (nl = text.find('\n', start)) != std::string_view::npos; start = nl + 1)
    longest = std::max(longest, nl - start + 1);
  nlohmann::json chunked = nlohmann::json::array();
  uint64_t from = 0;
  for (int reads = 0; reads < 100000; reads++) {
    const MetricsChunk part = read_metrics_chunk(arm / "metrics.jsonl", from, kChunk);
    XSA_FUZZ_EXPECT(part.next >= from && part.next <= part.size);
    for (const nlohmann::json& r : part.records) chunked.push_back(r);
    if (!part.more || part.next == from) break;
    from = part.next;
  }
  if (longest < kChunk) XSA_FUZZ_EXPECT(chunked == whole.records);
  return 0;
}
