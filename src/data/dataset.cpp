#include "xsa/data/dataset.h"

#define XXH_INLINE_ALL
#include <glob.h>
#include <xxhash.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "xsa/tokenizer/spm_tokenizer.h"
#include "xsa/tokenizer/tokenizer.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"

namespace xsa {

namespace fs = std::filesystem;

void TokenStream::add(std::shared_ptr<const Shard> shard) {
  segments_.push_back({shard->tokens(), shard->size(), size_, shard->path().string()});
  size_ += shard->size();
  shards_.push_back(std::move(shard));
}

void TokenStream::add(std::vector<uint16_t> tokens, std::string source) {
  auto owned = std::make_shared<const std::vector<uint16_t>>(std::move(tokens));
  segments_.push_back({owned->data(), owned->size(), size_, std::move(source)});
  size_ += owned->size();
  owned_.push_back(std::move(owned));
}

void TokenStream::copy(size_t pos, size_t n, int32_t* out) const {
  XSA_CHECK(pos + n <= size_, "window [{}, {}) outside the stream of {}", pos, pos + n, size_);
  // The segment holding pos: the last one starting at or before it.
  auto it = std::upper_bound(segments_.begin(), segments_.end(), pos,
                             [](size_t p, const Segment& s) { return p < s.start; });
  --it;
  while (n > 0) {
    while (pos >= it->start + it->n) ++it;  // skips empty shards too
    size_t take = std::min(n, it->start + it->n - pos);
    const uint16_t* src = it->data + (pos - it->start);
    for (size_t i = 0; i < take; i++) out[i] = src[i];
    out += take, pos += take, n -= take;
  }
}

void TokenStream::check_vocabulary(int vocab_size, const char* tokenizer) const {
  for (const Segment& s : segments_) {
    for (size_t i = 0; i < s.n; i++)
      if (s.data[i] >= vocab_size)
        fail("{}: token id {} at position {} is outside the {} vocabulary ({} ids)", s.source,
             s.data[i], i, tokenizer, vocab_size);
  }
}

std::vector<TokenStream::Content> TokenStream::contents() const {
  if (contents_.size() != segments_.size()) {
    contents_.clear();
    for (const Segment& s : segments_)
      contents_.push_back({s.source, s.n, XXH3_64bits(s.data, s.n * sizeof(uint16_t))});
  }
  return contents_;
}

std::vector<std::string> TokenStream::sources() const {
  std::vector<std::string> out;
  for (const Segment& s : segments_) out.push_back(s.source);
  return out;
}

namespace {

std::vector<std::string> glob_files(const std::string& pattern) {
  glob_t g{};
  std::vector<std::string> out;
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; i++) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  std::sort(out.begin(), out.end());
  return out;
}

std::string replace_last(std::string s, const std::string& from, const std::string& to) {
  size_t p = s.rfind(from);
  if (p != std::string::npos) s.replace(p, from.size(), to);
  return s;
}

TokenizerKind tokenizer_of_shards(const fs::path& dir, std::optional<TokenizerKind> flag) {
  std::error_code ec;
  const fs::path meta_path = dir / "meta.json";
  if (!fs::exists(meta_path, ec))
    return flag.value_or(TokenizerKind::gpt2);  // llm.c's shards are GPT-2
  TokenizerKind kind = tokenizer_of_meta(read_file(meta_path), meta_path.string());
  if (flag && *flag != kind)
    fail(
        "{} says tokenizer {}, which contradicts the {} tokenizer asked for (--tokenizer, or "
        "the checkpoint's)",
        meta_path.string(), to_string(kind), to_string(*flag));
  return kind;
}

void add_shards(TokenStream& stream, const std::vector<std::string>& files) {
  for (const std::string& f : files) stream.add(std::make_shared<const Shard>(f));
}

}  // namespace

TokenizerKind tokenizer_of_meta(const std::string& meta_json, const std::string& source) {
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(meta_json);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON ({})", source, e.what());
  }
  // Checked here: json::value() would throw its own type_error, which names no file.
  if (!meta.is_object()) fail("{}: not a JSON object", source);
  if (!meta.contains("tokenizer")) return TokenizerKind::gpt2;
  if (!meta["tokenizer"].is_string()) fail("{}: 'tokenizer' is not a string", source);
  try {
    return tokenizer_named(meta["tokenizer"].get<std::string>());
  } catch (const Error& e) {
    fail("{}: {}", source, e.what());
  }
}

void check_same_vocabulary(const Dataset& data, const fs::path& folder) {
  if (data.tokenizer != TokenizerKind::spm) return;
  std::error_code ec;
  if (!fs::exists(folder / "tokenizer.model", ec))
    fail("{}: has no tokenizer.model, but the data's vocabulary is SentencePiece's ({})",
         folder.string(), data.vocab_dir);
  const std::string mine = SpmTokenizer(data.vocab_dir).checksum();
  const std::string theirs = SpmTokenizer(folder).checksum();
  if (mine == theirs) return;
  const bool checkpoint = fs::exists(folder / "config.json", ec);
  fail("{}: its vocabulary ({}) is not the one {} {} ({})", data.vocab_dir, mine, folder.string(),
       checkpoint ? "was trained with" : "holds", theirs);
}

Dataset open_dataset(const std::string& path, std::optional<TokenizerKind> tokenizer,
                     double val_fraction, int B, int T, const std::string& vocab_dir,
                     bool evaluation) {
  if (!(val_fraction >= 0 && val_fraction < 1))
    fail("--val-fraction {} must be in [0, 1)", val_fraction);
  Dataset d;
  std::error_code ec;
  const bool is_glob = path.find_first_of("*?[") != std::string::npos;
  const size_t need = (size_t)B * T + 1;
  if (!is_glob && !fs::exists(path, ec)) fail("{}: no such file or folder", path);

  if (!is_glob && fs::is_regular_file(path, ec) && fs::path(path).extension() != ".bin") {
    // A text file, tokenized now; its tail is the validation split.
    d.tokenizer = tokenizer.value_or(TokenizerKind::byte);
    if (d.tokenizer == TokenizerKind::spm && vocab_dir.empty())
      fail("{}: a text file needs the vocabulary's folder (--tokenizer spm:FOLDER)", path);
    std::string text = read_file(path);
    auto tok = make_tokenizer(d.tokenizer, vocab_dir);
    d.vocab_size = tok->vocab_size();
    if (d.vocab_size > 65536)
      fail("{}: {} pieces; xsa holds token ids as uint16 (at most 65 536)", vocab_dir,
           d.vocab_size);
    if (d.tokenizer == TokenizerKind::spm) d.vocab_dir = vocab_dir;
    std::vector<int32_t> ids = tok->encode(text);
    size_t n = ids.size(), n_val = 0;
    if (val_fraction > 0)
      n_val = std::max<size_t>((size_t)std::llround(n * val_fraction), (size_t)T + 1);
    if (n_val >= n || n - n_val < need)
      fail(
          "{}: {} tokens leave {} for training after the validation tail of {}; one batch needs "
          "--batch {} x "
          "--seq-len {} + 1 = {}",
          path, n, n_val >= n ? 0 : n - n_val, n_val, B, T, need);
    d.train.add(std::vector<uint16_t>(ids.begin(), ids.end() - n_val), path);
    d.val.add(std::vector<uint16_t>(ids.end() - n_val, ids.end()), path + " (validation tail)");
    d.description = fmt::format("{} ({} tokenizer, last {:.0f}% held out)", path,
                                to_string(d.tokenizer), val_fraction * 100);
    return d;
  }

  std::vector<std::string> train_files, val_files;
  fs::path meta_dir;
  if (is_glob) {
    train_files = glob_files(path);
    if (train_files.empty()) fail("{}: matches no files", path);
    if (path.find("train") != std::string::npos)
      val_files = glob_files(replace_last(path, "train", "val"));
    meta_dir = fs::path(train_files[0]).parent_path();
  } else if (fs::is_directory(path, ec)) {
    train_files = glob_files((fs::path(path) / "*train*.bin").string());
    val_files = glob_files((fs::path(path) / "*val*.bin").string());
    if (train_files.empty() && !(evaluation && !val_files.empty()))
      fail(
          "{}: holds no token shards (*train*.bin); make them with xsa prepare, or give a text "
          "file",
          path);
    meta_dir = path;
  } else {  // one .bin file; its validation twin when there is one (TinyStories_train.bin →
            // _val.bin)
    train_files = {path};
    std::string twin = replace_last(path, "train", "val");
    if (twin != path && fs::exists(twin, ec)) val_files = {twin};
    meta_dir = fs::path(path).parent_path();
  }
  d.tokenizer = tokenizer_of_shards(meta_dir.empty() ? fs::path(".") : meta_dir, tokenizer);
  add_shards(d.train, train_files);
  add_shards(d.val, val_files);
  int V = 0;
  if (d.tokenizer == TokenizerKind::spm) {  // its size is its own: meta.json's
    const fs::path meta = (meta_dir.empty() ? fs::path(".") : meta_dir) / "meta.json";
    const auto j = nlohmann::json::parse(read_file(meta), nullptr, false);
    if (!j.is_object() || !j.contains("vocab_size") || !j["vocab_size"].is_number_integer() ||
        j["vocab_size"].get<int>() < 1 || j["vocab_size"].get<int>() > 65536)
      fail("{}: an spm vocabulary needs its vocab_size (1 to 65536)", meta.string());
    V = j["vocab_size"].get<int>();
    d.vocab_dir = meta.parent_path().string();
  } else {
    V = vocab_size_of(d.tokenizer);
  }
  d.vocab_size = V;
  d.train.check_vocabulary(V, to_string(d.tokenizer));
  d.val.check_vocabulary(V, to_string(d.tokenizer));
  if (evaluation && std::max(d.train.size(), d.val.size()) < (size_t)T + 1)
    fail("{}: {} tokens; one window needs --seq-len {} + 1 = {}", path,
         std::max(d.train.size(), d.val.size()), T, T + 1);
  if (!evaluation && d.train.size() < need)
    fail("{}: {} training tokens; one batch needs --batch {} x --seq-len {} + 1 = {}", path,
         d.train.size(), B, T, need);
  d.description = fmt::format("{} ({} train / {} val shards, {} tokenizer)", path,
                              train_files.size(), val_files.size(), to_string(d.tokenizer));
  return d;
}

namespace {

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A pseudo-random permutation of [0, n) without storing it: a 4-round Feistel network on the
// smallest even-bit domain 4^h ≥ n, walking the cycle until the value lands inside [0, n).
uint64_t permute(uint64_t i, uint64_t n, uint64_t key) {
  int h = 1;
  while ((1ull << (2 * h)) < n) h++;
  const uint64_t mask = (1ull << h) - 1;
  uint64_t x = i;
  do {
    uint64_t left = x >> h, right = x & mask;
    for (uint64_t round = 0; round < 4; round++) {
      uint64_t f = mix64(right ^ key ^ (round * 0x9E3779B97F4A7C15ull)) & mask;
      uint64_t next_right = left ^ f;
      left = right;
      right = next_right;
    }
    x = (left << h) | right;
  } while (x >= n);
  return x;
}

}  // namespace

BatchLoader::BatchLoader(const TokenStream& tokens, int B, int T, bool shuffle, uint64_t seed,
                         int rank, int world)
    : tokens_(tokens), B_(B), T_(T), rank_(rank), world_(world), shuffle_(shuffle), seed_(seed) {
  XSA_CHECK(world >= 1 && rank >= 0 && rank < world, "rank {} of world {}", rank, world);
  windows_ = tokens.size() > 0 ? (tokens.size() - 1) / T : 0;
  if (windows_ < (uint64_t)B * world)
    fail(
        "{} training tokens make {} windows of --seq-len {} + 1, fewer than one batch of {} per "
        "step",
        tokens.size(), windows_, T, (uint64_t)B * world);
}

uint64_t BatchLoader::window_at(uint64_t epoch, uint64_t index) const {
  return shuffle_ ? permute(index, windows_, mix64(seed_ * 0x9E3779B97F4A7C15ull + epoch)) : index;
}

void BatchLoader::next(int32_t* inputs, int32_t* targets) {
  const uint64_t step_windows = (uint64_t)B_ * world_;
  if (pos_.cursor + step_windows > windows_) pos_.epoch++, pos_.cursor = 0;
  for (int b = 0; b < B_; b++) {
    uint64_t w = window_at(pos_.epoch, pos_.cursor + (uint64_t)rank_ * B_ + b);
    tokens_.copy(w * T_, T_, inputs + (size_t)b * T_);
    tokens_.copy(w * T_ + 1, T_, targets + (size_t)b * T_);
  }
  pos_.cursor += step_windows;
}

void BatchLoader::set_position(LoaderPosition pos) {
  if (pos.cursor > windows_)
    fail("data position {} is past the {} windows of the training data", pos.cursor, windows_);
  pos_ = pos;
}

int val_batch_count(const TokenStream& val, int B, int T, int max_batches) {
  if (val.size() < (size_t)T + 1) return 0;
  size_t windows = (val.size() - 1) / T;
  return (int)std::min<size_t>((windows + B - 1) / B, (size_t)max_batches);
}

int64_t val_window_of_row(const TokenStream& val, int64_t row, int n_batches, int B, int T) {
  if (val.size() < (size_t)T + 1) return -1;
  const int64_t windows = (int64_t)((val.size() - 1) / T);
  const int64_t rows = (int64_t)n_batches * B;
  if (rows >= windows) return row < windows ? row : -1;
  // ⌊r · W / rows⌋ in 128 bits: W · rows can pass 2^63 on a split of billions of tokens.
  return (int64_t)((__int128)row * windows / rows);
}

void val_batch(const TokenStream& val, int index, int n_batches, int B, int T, int32_t* inputs,
               int32_t* targets) {
  for (int b = 0; b < B; b++) {
    const int64_t w = val_window_of_row(val, (int64_t)index * B + b, n_batches, B, T);
    int32_t* in = inputs + (size_t)b * T;
    int32_t* tg = targets + (size_t)b * T;
    if (w < 0) {
      std::fill(in, in + T, 0);
      std::fill(tg, tg + T, -1);
      continue;
    }
    val.copy((size_t)w * T, T, in);
    val.copy((size_t)w * T + 1, T, tg);
  }
}

std::vector<PositionBucket> position_buckets(int T) {
  std::vector<PositionBucket> buckets;
  for (int first = 1, last = 16; first <= T; first = last + 1, last *= 4)
    buckets.push_back({first, std::min(last, T)});
  return buckets;
}

}  // namespace xsa
