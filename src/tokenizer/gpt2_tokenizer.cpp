#include "xsa/tokenizer/gpt2_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>
#include <unordered_map>

#include "xsa/tokenizer/byte_tokenizer.h"
#include "xsa/tokenizer/spm_tokenizer.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"

namespace xsa {
namespace {

// GPT-2's pattern with \s spelled out as Unicode White_Space (what tiktoken's regex means by \s):
// 's 't 're 've 'm 'll 'd | ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+
#define XSA_WS                                                                                 \
  "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{" \
  "202F}\\x{205F}\\x{3000}"
constexpr const char* kPattern = "'(?:[sdmt]|ll|ve|re)| ?\\p{L}+| ?\\p{N}+| ?[^" XSA_WS
                                 "\\p{L}\\p{N}]+|[" XSA_WS "]+(?![^" XSA_WS "])|[" XSA_WS "]+";
#undef XSA_WS

// GPT-2's bytes_to_unicode: printable bytes map to themselves, the others to 256 + n in order.
std::vector<int> byte_to_codepoint() {
  std::vector<int> cp(256, -1);
  auto printable = [](int b) {
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  };
  int n = 0;
  for (int b = 0; b < 256; b++) cp[b] = printable(b) ? b : 256 + n++;
  return cp;
}

// The raw bytes a byte-encoded vocabulary string stands for; false when it is not one.
bool unicode_to_bytes(const std::string& s, const std::unordered_map<int, int>& cp_to_byte,
                      std::string& out) {
  out.clear();
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    int cp, len;
    if (c < 0x80)
      cp = c, len = 1;
    else if ((c >> 5) == 6)
      cp = c & 0x1F, len = 2;
    else if ((c >> 4) == 14)
      cp = c & 0x0F, len = 3;
    else
      return false;
    if (i + len > s.size()) return false;
    for (int k = 1; k < len; k++) cp = (cp << 6) | (s[i + k] & 0x3F);
    auto it = cp_to_byte.find(cp);
    if (it == cp_to_byte.end()) return false;
    out.push_back((char)it->second);
    i += len;
  }
  return true;
}

pcre2_code* compile_pattern() {
  int error;
  PCRE2_SIZE offset;
  pcre2_code* re =
      pcre2_compile((PCRE2_SPTR)kPattern, PCRE2_ZERO_TERMINATED,
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  XSA_CHECK(re != nullptr, "GPT-2 pattern does not compile (error {} at {})", error, offset);
  pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is unavailable
  return re;
}

// The last n < 8 bytes of a piece as one word (a loop: memcpy of a variable length is a call).
uint64_t tail_word(const char* p, size_t n) {
  uint64_t word = 0;
  for (size_t k = 0; k < n; k++) word |= (uint64_t)(unsigned char)p[k] << (8 * k);
  return word;
}

// Whether two pieces of n bytes are equal, inline (most are a word or two).
bool same_bytes(const char* a, const char* b, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x, y;
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    if (x != y) return false;
  }
  return tail_word(a + i, n - i) == tail_word(b + i, n - i);
}

// Encoded pieces (most words repeat), one cache per thread: an open-addressing table of 16-byte
// slots over one arena holding each piece's tokens and then its bytes, so a lookup touches a slot
// and one arena entry (a node-based map chased three pointers and was a third of encoding).
class PieceCache {
 public:
  static constexpr size_t kMaxEntries = 1 << 18;  // then it starts over: memory stays bounded

  // The cached tokens of `piece` (hash `h`) and their count, or nullptr.
  const int32_t* find(std::string_view piece, uint64_t h, size_t& n) const {
    if (slots_.empty()) return nullptr;
    const size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& slot = slots_[i];
      if (slot.n_ids == 0) return nullptr;
      const int32_t* entry = arena_.data() + slot.offset;
      if (slot.hash == h && slot.piece_bytes == piece.size() &&
          same_bytes((const char*)(entry + slot.n_ids), piece.data(), piece.size())) {
        n = slot.n_ids;
        return entry;
      }
    }
  }
  void insert(std::string_view piece, uint64_t h, const int32_t* ids, size_t n) {
    if (entries_ >= kMaxEntries) clear();
    if (2 * (entries_ + 1) > slots_.size()) grow();
    const size_t offset = arena_.size();
    arena_.resize(offset + n + (piece.size() + 3) / 4);
    std::memcpy(arena_.data() + offset, ids, n * sizeof(int32_t));
    std::memcpy(arena_.data() + offset + n, piece.data(), piece.size());
    place({h, (uint32_t)offset, (uint16_t)piece.size(), (uint16_t)n});
    entries_++;
  }
  void clear() {
    slots_.clear();
    arena_.clear();
    entries_ = 0;
  }

 private:
  struct Slot {
    uint64_t hash;
    uint32_t offset;  // of the entry in arena_: n_ids tokens, then the piece's bytes
    uint16_t piece_bytes;
    uint16_t n_ids;  // 0: an empty slot (a piece has at least one token)
  };
  void place(const Slot& slot) {
    const size_t mask = slots_.size() - 1;
    size_t i = slot.hash & mask;
    while (slots_[i].n_ids != 0) i = (i + 1) & mask;
    slots_[i] = slot;
  }
  void grow() {
    std::vector<Slot> old(std::max<size_t>(1024, 2 * slots_.size()), Slot{});
    old.swap(slots_);
    for (const Slot& slot : old)
      if (slot.n_ids != 0) place(slot);
  }
  std::vector<Slot> slots_;  // a power of two, at most half full
  std::vector<int32_t> arena_;
  size_t entries_ = 0;
};
// The cache of this thread, tied to one tokenizer instance by its serial number (an address can
// come back for another vocabulary once the first is freed).
std::atomic<uint64_t> g_instances{0};
struct ThreadCache {
  uint64_t owner = 0;
  PieceCache pieces;
};
thread_local ThreadCache t_cache;

}  // namespace

Gpt2Tokenizer::Gpt2Tokenizer(const std::filesystem::path& dir) : instance_(++g_instances) {
  const auto encoder_path = dir / "encoder.json", merges_path = dir / "vocab.bpe";
  std::vector<int> cp = byte_to_codepoint();
  std::unordered_map<int, int> cp_to_byte;
  for (int b = 0; b < 256; b++) cp_to_byte[cp[b]] = b;

  nlohmann::json encoder;
  try {
    encoder = nlohmann::json::parse(read_file(encoder_path));
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON ({})", encoder_path.string(), e.what());
  }
  if (!encoder.is_object() || encoder.size() < 256)
    fail("{}: not a GPT-2 encoder (a JSON object of tokens)", encoder_path.string());
  id_to_bytes_.assign(encoder.size(), std::string());
  std::vector<bool> seen(encoder.size(), false);
  std::unordered_map<std::string, int32_t> bytes_to_id;
  std::string raw;
  for (auto& [key, value] : encoder.items()) {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
        value.get<int64_t>() >= (int64_t)encoder.size())
      fail("{}: token '{}' has an id outside 0..{}", encoder_path.string(), key,
           encoder.size() - 1);
    int32_t id = value.get<int32_t>();
    if (seen[id]) fail("{}: id {} appears twice", encoder_path.string(), id);
    seen[id] = true;
    if (key == "<|endoftext|>") {
      end_of_text_ = id;
      id_to_bytes_[id] = key;
      continue;
    }
    if (!unicode_to_bytes(key, cp_to_byte, raw))
      fail("{}: token '{}' is not byte-encoded text", encoder_path.string(), key);
    id_to_bytes_[id] = raw;
    bytes_to_id[raw] = id;
  }
  for (int b = 0; b < 256; b++) {
    auto it = bytes_to_id.find(std::string(1, (char)b));
    if (it == bytes_to_id.end()) fail("{}: byte {} has no token", encoder_path.string(), b);
    byte_token_[b] = it->second;
  }

  std::istringstream merges(read_file(merges_path));
  std::string line, left, right, left_raw, right_raw;
  int line_no = 0, rank = 0;
  while (std::getline(merges, line)) {
    line_no++;
    if (line_no == 1 && line.rfind("#version", 0) == 0) continue;
    if (line.empty()) continue;
    size_t space = line.find(' ');
    if (space == std::string::npos)
      fail("{}:{}: a merge is two tokens separated by a space", merges_path.string(), line_no);
    left = line.substr(0, space), right = line.substr(space + 1);
    if (!unicode_to_bytes(left, cp_to_byte, left_raw) ||
        !unicode_to_bytes(right, cp_to_byte, right_raw))
      fail("{}:{}: not byte-encoded text", merges_path.string(), line_no);
    auto l = bytes_to_id.find(left_raw), r = bytes_to_id.find(right_raw),
         m = bytes_to_id.find(left_raw + right_raw);
    if (l == bytes_to_id.end() || r == bytes_to_id.end() || m == bytes_to_id.end())
      fail("{}:{}: merge '{}' uses or makes a token that encoder.json lacks", merges_path.string(),
           line_no, line);
    add_merge({((uint64_t)l->second << 32) | (uint32_t)r->second, rank++, m->second});
  }
  if (rank == 0) fail("{}: holds no merges", merges_path.string());
  regex_ = compile_pattern();
  size_t jit_size = 0;
  jit_ = pcre2_pattern_info(static_cast<pcre2_code*>(regex_), PCRE2_INFO_JITSIZE, &jit_size) == 0 &&
         jit_size > 0;
}

Gpt2Tokenizer::~Gpt2Tokenizer() {
  pcre2_code_free(static_cast<pcre2_code*>(regex_));
}

void Gpt2Tokenizer::add_merge(const Merge& merge) {
  if (2 * (merge_count_ + 1) > merge_slots_.size()) {
    std::vector<Merge> old(std::max<size_t>(1024, 2 * merge_slots_.size()), Merge{kNoPair, 0, 0});
    old.swap(merge_slots_);
    merge_count_ = 0;
    for (const Merge& m : old)
      if (m.pair != kNoPair) add_merge(m);
  }
  const size_t mask = merge_slots_.size() - 1;
  for (size_t i = merge_home(merge.pair);; i = (i + 1) & mask) {
    if (merge_slots_[i].pair == merge.pair) return;
    if (merge_slots_[i].pair == kNoPair) {
      merge_slots_[i] = merge;
      merge_count_++;
      return;
    }
  }
}

// Merge the lowest-ranked adjacent pair first; a rank belongs to one pair, and equal pairs merge
// left to right, as GPT-2's reference loop does (tokens made by a merge only take part in merges
// of higher rank, so merging one occurrence at a time is the same as its pass over all of them).
void Gpt2Tokenizer::encode_short_piece(std::string_view piece, std::vector<int32_t>& out) const {
  constexpr int32_t kNone = INT32_MAX;
  int32_t id[kLongestCachedPiece], rank[kLongestCachedPiece], merged[kLongestCachedPiece];
  int n = (int)piece.size();
  for (int i = 0; i < n; i++) id[i] = byte_token_[(unsigned char)piece[i]];
  auto rate = [&](int i) {  // the pair (i, i + 1)
    const Merge* m = find_merge(id[i], id[i + 1]);
    rank[i] = m ? m->rank : kNone, merged[i] = m ? m->merged : -1;
  };
  for (int i = 0; i + 1 < n; i++) rate(i);
  while (n > 1) {
    int best = 0;
    for (int i = 1; i + 1 < n; i++)
      if (rank[i] < rank[best]) best = i;
    if (rank[best] == kNone) break;
    id[best] = merged[best];
    for (int i = best + 1; i + 1 < n; i++)
      id[i] = id[i + 1], rank[i] = rank[i + 1], merged[i] = merged[i + 1];
    n--;
    if (best + 1 < n) rate(best);
    if (best > 0) rate(best - 1);
  }
  out.insert(out.end(), id, id + n);
}

void Gpt2Tokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  const int n = (int)piece.size();
  if (n <= (int)kLongestCachedPiece) return encode_short_piece(piece, out);
  // Long pieces (runs of spaces or digits): the same order of merges, kept by one heap over
  // (rank, position), in O(n log n).
  std::vector<int32_t> id(n), next(n), prev(n);
  for (int i = 0; i < n; i++)
    id[i] = byte_token_[(unsigned char)piece[i]], next[i] = i + 1, prev[i] = i - 1;
  next[n - 1] = -1;
  struct Candidate {
    int32_t rank, pos, left, right, merged;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](int pos) {
    if (pos < 0 || next[pos] < 0) return;
    if (const Merge* m = find_merge(id[pos], id[next[pos]]))
      heap.push({m->rank, pos, id[pos], id[next[pos]], m->merged});
  };
  for (int i = 0; i + 1 < n; i++) consider(i);
  std::vector<bool> alive(n, true);
  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    int r = next[c.pos];
    if (!alive[c.pos] || r < 0 || id[c.pos] != c.left || id[r] != c.right) continue;  // stale
    id[c.pos] = c.merged;
    alive[r] = false;
    next[c.pos] = next[r];
    if (next[r] >= 0) prev[next[r]] = c.pos;
    consider(prev[c.pos]);
    consider(c.pos);
  }
  for (int i = 0; i >= 0; i = next[i]) out.push_back(id[i]);
}

void Gpt2Tokenizer::encode(std::string_view text, std::vector<int32_t>& out) const {
  if (t_cache.owner != instance_) t_cache.owner = instance_, t_cache.pieces.clear();
  auto* re = static_cast<pcre2_code*>(regex_);
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(re, nullptr);
  auto emit = [&](size_t begin, size_t end) {
    const std::string_view piece = text.substr(begin, end - begin);
    if (piece.size() > kLongestCachedPiece) return encode_piece(piece, out);
    const uint64_t h = XXH3_64bits(piece.data(), piece.size());
    size_t n = 0;
    if (const int32_t* ids = t_cache.pieces.find(piece, h, n)) {
      for (size_t k = 0; k < n; k++) out.push_back(ids[k]);  // (most are one or two)
      return;
    }
    const size_t before = out.size();
    encode_piece(piece, out);
    t_cache.pieces.insert(piece, h, out.data() + before, out.size() - before);
  };
  size_t offset = 0;
  while (offset < text.size()) {
    // (pcre2_jit_match skips pcre2_match's checks of its arguments on every call: a few percent
    // of encoding, called once per piece)
    const int rc =
        jit_ ? pcre2_jit_match(re, (PCRE2_SPTR)text.data(), text.size(), offset, 0, match, nullptr)
             : pcre2_match(re, (PCRE2_SPTR)text.data(), text.size(), offset, 0, match, nullptr);
    if (rc < 0) {  // no match: the rest is invalid UTF-8
      emit(offset, text.size());
      break;
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
    // Bytes the pattern skipped are invalid UTF-8 (every valid character matches some branch):
    // they form a piece of their own, encoded byte by byte and merged like any other piece.
    if (ov[0] > offset) emit(offset, ov[0]);
    emit(ov[0], ov[1]);
    offset = ov[1];
  }
  pcre2_match_data_free(match);
}

std::string Gpt2Tokenizer::decode(const int32_t* ids, size_t n) const {
  std::string s;
  for (size_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= (int32_t)id_to_bytes_.size())
      fail("token id {} is outside the GPT-2 vocabulary (0..{})", ids[i], id_to_bytes_.size() - 1);
    s += id_to_bytes_[ids[i]];
  }
  return s;
}

std::filesystem::path find_vocab_dir(const std::string& explicit_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto has_files = [&](const fs::path& d) {
    return fs::exists(d / "encoder.json", ec) && fs::exists(d / "vocab.bpe", ec);
  };
  if (!explicit_dir.empty()) {
    if (!has_files(explicit_dir))
      fail(
          "{}: lacks encoder.json or vocab.bpe (GPT-2's vocabulary; bash scripts/get_data.sh "
          "installs them into data/gpt2)",
          explicit_dir);
    return explicit_dir;
  }
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("XSA_VOCAB_DIR")) candidates.emplace_back(env);
  candidates.emplace_back("data/gpt2");
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path().parent_path() / "data" / "gpt2");
  for (const fs::path& d : candidates)
    if (has_files(d)) return d;
  fail(
      "GPT-2 vocabulary not found (encoder.json and vocab.bpe in --vocab-dir, $XSA_VOCAB_DIR, "
      "./data/gpt2 or "
      "data/gpt2 beside the build folder); run bash scripts/get_data.sh to install it");
}

std::unique_ptr<Tokenizer> make_tokenizer(TokenizerKind kind, const std::string& vocab_dir) {
  if (kind == TokenizerKind::byte) return std::make_unique<ByteTokenizer>();
  if (kind == TokenizerKind::spm) return std::make_unique<SpmTokenizer>(vocab_dir);
  return std::make_unique<Gpt2Tokenizer>(find_vocab_dir(vocab_dir));
}

}  // namespace xsa
