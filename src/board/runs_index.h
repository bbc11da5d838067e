// What xsa board shows, read from a folder of runs while they train: the runs (folders with a
// metrics.jsonl: xsa train's, and the arms of xsa compare) and the comparisons (folders with a
// report.json, seed files or arms/), as JSON for the page. Everything here only reads, and only
// regular files below the folder: no symbolic link is followed.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <semaphore>
#include <string>
#include <string_view>
#include <vector>

namespace xsa {

// The board serves only what lies under its folder. A path is inside when, every symbolic link in
// it resolved, it still lies under the folder (itself resolved): every read of every endpoint asks
// inside() first, and a file or folder reached through a link out of the folder is skipped and
// counted (the page shows the count).
class BoardFence {
 public:
  explicit BoardFence(const std::filesystem::path& root);
  bool inside(const std::filesystem::path& path) const;
  int64_t skipped() const { return skipped_; }

 private:
  std::filesystem::path root_;  // resolved
  mutable std::atomic<int64_t> skipped_{0};
};

struct BoardRun {
  std::string id;  // the folder relative to the board's, "/"-separated ("." for the folder itself)
  std::filesystem::path dir;
  std::string comparison;  // an arm's comparison (its id), else empty
};

struct BoardComparison {
  std::string id;
  std::filesystem::path dir;
};

struct BoardIndex {
  std::vector<BoardRun> runs;
  std::vector<BoardComparison> comparisons;
};

// Walks `root` up to kBoardMaxDepth folders down, without entering symbolic links or hidden
// folders; sorted by id.
constexpr int kBoardMaxDepth = 8;
BoardIndex scan_board_folder(const std::filesystem::path& root);

// A regular file's bytes (not a symbolic link: O_NOFOLLOW), or nothing when it is absent, not a
// regular file, unreadable or larger than max_bytes.
std::optional<std::string> read_regular_file(const std::filesystem::path& path, size_t max_bytes);

// metrics.jsonl from byte `from` on: its complete lines' records, at most about max_bytes of the
// file. A last line without its newline is being written: it waits for the next read. A line that
// is not a JSON object is left out and counted. `check` is what the read that ended at `from`
// returned: the file's identity there (device, inode and a hash of the bytes just before `from`).
// `reset`: the file is shorter than `from`, or is another file, or its bytes before `from` changed
// (a run started over or resumed from an earlier checkpoint, and perhaps written past `from`
// already between two reads): the records are from byte 0.
struct MetricsChunk {
  nlohmann::json records = nlohmann::json::array();
  uint64_t next = 0;  // where the next read starts
  std::string check;  // the file's identity at `next`, for the next read
  uint64_t size = 0;  // the file's size when read
  int64_t bad_lines = 0;
  bool more = false;  // more complete lines wait past max_bytes
  bool reset = false;
};
MetricsChunk read_metrics_chunk(const std::filesystem::path& file, uint64_t from, size_t max_bytes,
                                std::string_view check = {});
nlohmann::json to_json(const MetricsChunk& chunk);

// Whether the process named in a folder's .lock (FolderLock) still runs on this host.
bool folder_is_locked_by_live_process(const std::filesystem::path& dir);

// A comparison for the page: report.json (when written), each finished seed's validation curves
// (seed-N.json), the arms still training (ids of their run folders, below `comparison_id`),
// sweep.json beside it, and samples.txt. Static: no live arms (report.html).
nlohmann::json comparison_json(const std::filesystem::path& dir, const std::string& comparison_id,
                               const BoardFence& fence);

// /api/metrics answers with at most this much of a file, and at most this many at a time (the rest
// wait): memory stays a few chunks and their records however many clients read at once.
inline constexpr size_t kMetricsChunkBytes = 1 << 20;
inline constexpr int kConcurrentMetricsReads = 2;

// The board's view of a folder, shared by the server's threads: the index (scanned again at most
// once a second) and each run's summary (read on from where the last read stopped).
class RunsBoard {
 public:
  explicit RunsBoard(std::filesystem::path root);
  // {"root" (the folder's name), "now", "runs": [{id, comparison, variant, seed, state
  // (running, finished, stopped), step, steps, loss, val_loss, tokens_per_s, rss_mb, age_s,
  // bad_lines}], "comparisons": [{id, kind, state, seeds_done, age_s}], "links_outside": the
  // files and folders skipped so far because a link led out of the folder}
  nlohmann::json list();
  // Nothing for an id the index does not hold.
  std::optional<nlohmann::json> metrics(const std::string& id, uint64_t from,
                                        std::string_view check = {});
  std::optional<nlohmann::json> comparison(const std::string& id);
  const std::filesystem::path& root() const { return root_; }

 private:
  struct Summary {
    uint64_t offset = 0;
    std::string check;
    nlohmann::json last_step, last_val;
    int64_t bad_lines = 0;
  };
  void rescan_if_stale();
  nlohmann::json run_row(const BoardRun& run, Summary& summary);

  std::filesystem::path root_;
  BoardFence fence_;
  std::counting_semaphore<> reading_{kConcurrentMetricsReads};
  std::mutex mutex_;
  BoardIndex index_;
  std::map<std::string, BoardRun> runs_by_id_;
  std::map<std::string, BoardComparison> comparisons_by_id_;
  std::map<std::string, Summary> summaries_;
  double scanned_at_ = -1e9;
};

}  // namespace xsa
