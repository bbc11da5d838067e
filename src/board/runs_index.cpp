#include "xsa/board/runs_index.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <ctime>

namespace xsa {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A regular file that is not a symbolic link (lstat).
bool is_plain_file(const fs::path& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_comparison_folder(const fs::path& dir) {
  std::error_code ec;
  if (is_plain_file(dir / "report.json") || is_plain_file(dir / "sweep.json")) return true;
  if (fs::is_directory(fs::symlink_status(dir / "arms", ec))) return true;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with("seed-") && name.ends_with(".json")) return true;
  }
  return false;
}

std::string relative_id(const fs::path& dir, const fs::path& root) {
  const std::string id = dir.lexically_relative(root).generic_string();
  return id.empty() ? "." : id;
}

std::optional<json> read_json_file(const fs::path& path, size_t max_bytes = 16 << 20) {
  auto text = read_regular_file(path, max_bytes);
  if (!text) return std::nullopt;
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// j[key] when j is an object that has it, else null: files written by hand or garbled may hold
// anything.
json field(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() ? json(nullptr) : *it;
}

json string_field(const json& j, const char* key) {
  json v = field(j, key);
  return v.is_string() ? v : json("");
}

double unix_now() {
  return (double)std::time(nullptr);
}

// The step count a run aims at: run.json's, else its latest checkpoint's (runs from before
// run.json was written).
json target_steps(const fs::path& dir, const BoardFence& fence) {
  if (auto run = read_json_file(dir / "run.json", 1 << 16);
      run && fence.inside(dir / "run.json") && field(*run, "steps").is_number())
    return field(*run, "steps");
  std::string latest;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with("ckpt_") && name > latest) latest = name;
  }
  if (latest.empty() || !fence.inside(dir / latest / "trainer.json")) return nullptr;
  auto trainer = read_json_file(dir / latest / "trainer.json", 1 << 20);
  if (!trainer) return nullptr;
  return field(field(*trainer, "run"), "steps");
}

}  // namespace

BoardFence::BoardFence(const fs::path& root) {
  std::error_code ec;
  root_ = fs::weakly_canonical(fs::absolute(root, ec), ec);
}

bool BoardFence::inside(const fs::path& path) const {
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(fs::absolute(path, ec), ec);
  const fs::path rel = ec ? fs::path() : resolved.lexically_relative(root_);
  const bool in = !rel.empty() && *rel.begin() != "..";
  if (!in) skipped_++;
  return in;
}

std::optional<std::string> read_regular_file(const fs::path& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat st;
  std::optional<std::string> out;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size <= max_bytes) {
    std::string bytes((size_t)st.st_size, '\0');
    size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
      if (n <= 0) break;
      got += (size_t)n;
    }
    bytes.resize(got);
    out = std::move(bytes);
  }
  ::close(fd);
  return out;
}

BoardIndex scan_board_folder(const fs::path& root) {
  BoardIndex index;
  std::error_code ec;
  auto visit = [&](const fs::path& dir) {
    if (is_plain_file(dir / "metrics.jsonl")) {
      BoardRun run{relative_id(dir, root), dir, {}};
      const fs::path parent = dir.parent_path();
      if (parent.filename() == "arms" && dir != root && parent != root &&
          is_comparison_folder(parent.parent_path()))
        run.comparison = relative_id(parent.parent_path(), root);
      index.runs.push_back(std::move(run));
    }
    if (is_comparison_folder(dir)) index.comparisons.push_back({relative_id(dir, root), dir});
  };
  visit(root);
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  for (fs::recursive_directory_iterator end; !ec && it != end; it.increment(ec)) {
    const fs::directory_entry& entry = *it;
    const std::string name = entry.path().filename().string();
    // Symbolic links are not followed (the iterator's default); nor are hidden folders or a
    // checkpoint's, which hold no records, entered.
    if (!entry.is_directory(ec) || entry.is_symlink(ec)) continue;
    if (name.starts_with(".") || name.starts_with("ckpt_") || it.depth() >= kBoardMaxDepth) {
      it.disable_recursion_pending();
      if (name.starts_with(".") || name.starts_with("ckpt_")) continue;
    }
    visit(entry.path());
  }
  auto by_id = [](const auto& a, const auto& b) { return a.id < b.id; };
  std::sort(index.runs.begin(), index.runs.end(), by_id);
  std::sort(index.comparisons.begin(), index.comparisons.end(), by_id);
  return index;
}

namespace {

// A metrics file's identity at `offset`: its device and inode, and an FNV-1a hash of the up to 64
// bytes before `offset`. A file replaced, or truncated and written again, gives another (unless it
// wrote the same bytes there, when reading on from `offset` is right).
std::string identity_at(int fd, const struct stat& st, uint64_t offset) {
  char tail[64];
  const size_t n = (size_t)std::min<uint64_t>(offset, sizeof tail);
  const ssize_t got = ::pread(fd, tail, n, (off_t)(offset - n));
  uint64_t hash = 1469598103934665603ull;
  for (ssize_t i = 0; i < got; i++) hash = (hash ^ (unsigned char)tail[i]) * 1099511628211ull;
  char text[64];
  std::snprintf(text, sizeof text, "%llx-%llx-%016llx", (unsigned long long)st.st_dev,
                (unsigned long long)st.st_ino, (unsigned long long)hash);
  return text;
}

}  // namespace

MetricsChunk read_metrics_chunk(const fs::path& file, uint64_t from, size_t max_bytes,
                                std::string_view check) {
  MetricsChunk chunk;
  const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return chunk;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return chunk;
  }
  chunk.size = (uint64_t)st.st_size;
  if (from > chunk.size || (from > 0 && !check.empty() && identity_at(fd, st, from) != check))
    chunk.reset = true, from = 0;
  std::string bytes(std::min<uint64_t>(chunk.size - from, max_bytes), '\0');
  const ssize_t n = ::pread(fd, bytes.data(), bytes.size(), (off_t)from);
  bytes.resize(n > 0 ? (size_t)n : 0);
  size_t end = bytes.rfind('\n');
  if (end == std::string::npos) {
    chunk.next = from;
    // A line longer than a whole chunk is no record: skip it so the reader moves on.
    if (bytes.size() == max_bytes && max_bytes > 0) chunk.next += bytes.size(), chunk.bad_lines++;
    chunk.more = chunk.next < chunk.size && bytes.size() == max_bytes;
    chunk.check = identity_at(fd, st, chunk.next);
    ::close(fd);
    return chunk;
  }
  chunk.next = from + end + 1;
  chunk.check = identity_at(fd, st, chunk.next);
  ::close(fd);
  chunk.more = from + bytes.size() < chunk.size;
  for (size_t start = 0; start <= end;) {
    const size_t stop = bytes.find('\n', start);
    const std::string_view line(bytes.data() + start, stop - start);
    start = stop + 1;
    if (line.empty()) continue;
    json record = json::parse(line, nullptr, false);
    if (record.is_object())
      chunk.records.push_back(std::move(record));
    else
      chunk.bad_lines++;
  }
  return chunk;
}

json to_json(const MetricsChunk& c) {
  return {{"records", c.records},     {"next", c.next}, {"check", c.check}, {"size", c.size},
          {"bad_lines", c.bad_lines}, {"more", c.more}, {"reset", c.reset}};
}

bool folder_is_locked_by_live_process(const fs::path& dir) {
  auto text = read_regular_file(dir / ".lock", 4096);
  if (!text) return false;
  // "process 1234 (xsa train --out runs/a) on host since 2026-12-01 07:40:00 UTC"; empty while
  // the holder is writing it.
  long pid = 0;
  if (std::sscanf(text->c_str(), "process %ld (", &pid) != 1 || pid <= 0) return text->empty();
  const size_t since = text->rfind(" since "), on = text->rfind(" on ", since);
  if (since != std::string::npos && on != std::string::npos) {
    char host[256] = "";
    ::gethostname(host, sizeof host - 1);
    if (text->substr(on + 4, since - on - 4) != host) return true;  // cannot tell: say running
  }
  return ::kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

json comparison_json(const fs::path& dir, const std::string& comparison_id,
                     const BoardFence& fence) {
  json j = {{"id", comparison_id}, {"seeds", json::array()}, {"live", json::array()},
            {"report", nullptr},   {"sweep", nullptr},       {"samples", nullptr}};
  if (!fence.inside(dir)) return j;
  // (each file's own name is opened without following a link; inside() covers the folders)
  j["report"] = read_json_file(dir / "report.json").value_or(json(nullptr));
  j["sweep"] = read_json_file(dir / "sweep.json").value_or(json(nullptr));
  auto samples = read_regular_file(dir / "samples.txt", 1 << 16);
  j["samples"] = samples ? json(*samples) : json(nullptr);
  std::vector<int64_t> finished;
  std::error_code ec;
  std::vector<fs::path> seed_files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with("seed-") && name.ends_with(".json")) seed_files.push_back(it->path());
  }
  std::sort(seed_files.begin(), seed_files.end());
  for (const fs::path& file : seed_files) {
    auto seed = read_json_file(file);
    if (!seed || !field(*seed, "arms").is_array()) continue;
    json arms = json::array();
    for (const json& a : (*seed)["arms"]) {
      if (!a.is_object() || !field(a, "val_curve").is_array()) continue;
      arms.push_back({{"variant", string_field(a, "variant")},
                      {"seed", field(a, "seed")},
                      {"val_curve", field(a, "val_curve")},
                      {"val_seconds", field(a, "val_seconds")}});
      if (field(a, "seed").is_number_integer()) finished.push_back(a["seed"].get<int64_t>());
    }
    j["seeds"].push_back({{"file", file.filename().string()}, {"arms", arms}});
  }
  const std::string prefix = comparison_id == "." ? "" : comparison_id + "/";
  std::vector<fs::path> arm_dirs;
  if (fence.inside(dir / "arms"))
    for (fs::directory_iterator it(dir / "arms", ec), end; !ec && it != end; it.increment(ec))
      if (fence.inside(it->path()) && is_plain_file(it->path() / "metrics.jsonl"))
        arm_dirs.push_back(it->path());
  std::sort(arm_dirs.begin(), arm_dirs.end());
  for (const fs::path& arm : arm_dirs) {
    auto run = read_json_file(arm / "run.json", 1 << 16);
    if (!run || !field(*run, "seed").is_number_integer()) continue;
    const int64_t seed = field(*run, "seed").get<int64_t>();
    if (std::find(finished.begin(), finished.end(), seed) != finished.end()) continue;
    j["live"].push_back({{"id", prefix + "arms/" + arm.filename().string()},
                         {"variant", string_field(*run, "variant")},
                         {"seed", seed}});
  }
  return j;
}

RunsBoard::RunsBoard(fs::path root) : root_(std::move(root)), fence_(root_) {}

void RunsBoard::rescan_if_stale() {
  if (unix_now() - scanned_at_ < 1) return;
  index_ = scan_board_folder(root_);
  runs_by_id_.clear();
  comparisons_by_id_.clear();
  for (const BoardRun& r : index_.runs) runs_by_id_[r.id] = r;
  for (const BoardComparison& c : index_.comparisons) comparisons_by_id_[c.id] = c;
  scanned_at_ = unix_now();
}

json RunsBoard::run_row(const BoardRun& run, Summary& s) {
  for (int reads = 0; reads < 64; reads++) {  // 64 × 4 MB: a first look at a huge file stops
    MetricsChunk chunk = read_metrics_chunk(run.dir / "metrics.jsonl", s.offset, 4 << 20, s.check);
    if (chunk.reset) s = Summary{};
    for (const json& r : chunk.records)
      (r.contains("split") && r["split"] == "val" ? s.last_val : s.last_step) = r;
    s.bad_lines += chunk.bad_lines;
    s.offset = chunk.next;
    s.check = chunk.check;
    if (!chunk.more) break;
  }
  // Fields of records as written by hand or garbled may be of any type: numbers or null.
  auto number = [](const json& record, const char* key) {
    const auto it = record.find(key);
    return it != record.end() && it->is_number() ? *it : json(nullptr);
  };
  const json steps = target_steps(run.dir, fence_);
  const json run_json = read_json_file(run.dir / "run.json", 1 << 16).value_or(json::object());
  const json step_field = number(s.last_step, "step");
  const int64_t step = step_field.is_number_integer() ? step_field.get<int64_t>() : 0;
  const bool comparison_live = !run.comparison.empty() && folder_is_locked_by_live_process(
                                                              run.dir.parent_path().parent_path());
  std::string state = "stopped";
  if (folder_is_locked_by_live_process(run.dir) || comparison_live)
    state = "running";
  else if (steps.is_number_integer() && step >= steps.get<int64_t>())
    state = "finished";
  struct stat st;
  const double age =
      ::stat((run.dir / "metrics.jsonl").c_str(), &st) == 0 ? unix_now() - (double)st.st_mtime : 0;
  const json variant = field(run_json, "variant").is_string() ? field(run_json, "variant")
                                                              : string_field(run_json, "attention");
  return {{"id", run.id},
          {"comparison", run.comparison},
          {"variant", variant},
          {"seed", number(run_json, "seed")},
          {"state", state},
          {"step", step},
          {"steps", steps},
          {"loss", number(s.last_step, "loss")},
          {"val_loss", number(s.last_val, "loss")},
          {"tokens_per_s", number(s.last_step, "tokens_per_s")},
          {"rss_mb", number(s.last_step, "rss_mb")},
          {"age_s", std::max(0.0, age)},
          {"bad_lines", s.bad_lines}};
}

json RunsBoard::list() {
  // The index and the summaries so far are copied under the lock and the files read without it:
  // a slow disk under one run stalls this request, not every other one.
  BoardIndex index;
  std::map<std::string, Summary> summaries;
  {
    std::lock_guard<std::mutex> hold(mutex_);
    rescan_if_stale();
    index = index_;
    for (const BoardRun& r : index.runs)
      if (auto it = summaries_.find(r.id); it != summaries_.end()) summaries[r.id] = it->second;
  }
  // The folder by its name only: the page has no use for where it lies on this machine.
  const std::string name = fs::absolute(root_).lexically_normal().filename().string();
  json out = {{"root", name.empty() ? root_.lexically_normal().string() : name},
              {"now", unix_now()},
              {"runs", json::array()},
              {"comparisons", json::array()},
              {"links_outside", 0}};
  for (const BoardRun& r : index.runs)
    if (fence_.inside(r.dir)) out["runs"].push_back(run_row(r, summaries[r.id]));
  {
    std::lock_guard<std::mutex> hold(mutex_);
    for (auto& [id, summary] : summaries) summaries_[id] = std::move(summary);
  }
  std::error_code ec;
  for (const BoardComparison& c : index.comparisons) {
    if (!fence_.inside(c.dir)) continue;
    int seeds_done = 0;
    // Its age: that of the newest of its results (a report, a sweep, a finished seed), else of the
    // folder; the page opens the newest comparison first.
    struct stat st;
    double modified = ::stat(c.dir.c_str(), &st) == 0 ? (double)st.st_mtime : 0;
    bool has_result = false;
    for (fs::directory_iterator it(c.dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      const bool seed = name.starts_with("seed-") && name.ends_with(".json");
      seeds_done += seed;
      if ((seed || name == "report.json" || name == "sweep.json") &&
          ::stat(it->path().c_str(), &st) == 0) {
        modified = has_result ? std::max(modified, (double)st.st_mtime) : (double)st.st_mtime;
        has_result = true;
      }
    }
    const bool sweep = is_plain_file(c.dir / "sweep.json");
    std::string state = "stopped";
    if (folder_is_locked_by_live_process(c.dir))
      state = "running";
    else if (is_plain_file(c.dir / (sweep ? "sweep.json" : "report.json")))
      state = "finished";
    out["comparisons"].push_back({{"id", c.id},
                                  {"kind", sweep ? "sweep" : "comparison"},
                                  {"state", state},
                                  {"seeds_done", seeds_done},
                                  {"age_s", std::max(0.0, unix_now() - modified)}});
  }
  out["links_outside"] = fence_.skipped();
  return out;
}

std::optional<json> RunsBoard::metrics(const std::string& id, uint64_t from,
                                       std::string_view check) {
  fs::path file;
  {
    std::lock_guard<std::mutex> hold(mutex_);
    rescan_if_stale();
    auto it = runs_by_id_.find(id);
    if (it == runs_by_id_.end()) return std::nullopt;
    file = it->second.dir / "metrics.jsonl";
  }
  if (!fence_.inside(file)) return std::nullopt;
  // A few reads at a time, a chunk each (the page reads on while `more`): many clients reading
  // a large file at once hold a few chunks and their records, not one per client.
  reading_.acquire();
  struct Release {
    std::counting_semaphore<>& s;
    ~Release() { s.release(); }
  } release{reading_};
  return to_json(read_metrics_chunk(file, from, kMetricsChunkBytes, check));
}

std::optional<json> RunsBoard::comparison(const std::string& id) {
  fs::path dir;
  {
    std::lock_guard<std::mutex> hold(mutex_);
    rescan_if_stale();
    auto it = comparisons_by_id_.find(id);
    if (it == comparisons_by_id_.end()) return std::nullopt;
    dir = it->second.dir;
  }
  return comparison_json(dir, id, fence_);
}

}  // namespace xsa
