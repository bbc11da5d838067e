// GPT-2 byte-level BPE: pre-tokenization by GPT-2's pattern (contractions, letters, numbers,
// other, whitespace; Unicode letter and number classes; whitespace as Unicode White_Space, as
// tiktoken's Rust regex has it), bytes mapped to tokens, merges applied by rank.
#pragma once

#include <bit>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "xsa/tokenizer/tokenizer.h"

namespace xsa {

class Gpt2Tokenizer final : public Tokenizer {
 public:
  // Loads encoder.json and vocab.bpe from `dir`; errors name the file.
  explicit Gpt2Tokenizer(const std::filesystem::path& dir);
  ~Gpt2Tokenizer() override;

  using Tokenizer::decode;
  using Tokenizer::encode;
  void encode(std::string_view text, std::vector<int32_t>& out) const override;
  std::string decode(const int32_t* ids, size_t n) const override;
  int vocab_size() const override { return (int)id_to_bytes_.size(); }
  int end_of_text() const override { return end_of_text_; }
  TokenizerKind kind() const override { return TokenizerKind::gpt2; }

  // The BPE of one pre-token piece (raw bytes), appended to out.
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

 private:
  struct Merge {
    uint64_t pair;  // left id << 32 | right id; kNoPair in an empty slot
    int32_t rank;
    int32_t merged;
  };
  static constexpr uint64_t kNoPair = ~0ull;
  // The slot where a pair's probe starts: the top bits of a multiplicative hash.
  size_t merge_home(uint64_t pair) const {
    return (pair * 0x9E3779B97F4A7C15ull) >> (64 - std::countr_zero(merge_slots_.size()));
  }
  // The merge of two adjacent tokens, or nullptr.
  const Merge* find_merge(int32_t left, int32_t right) const {
    const uint64_t pair = ((uint64_t)left << 32) | (uint32_t)right;
    const size_t mask = merge_slots_.size() - 1;
    for (size_t i = merge_home(pair);; i = (i + 1) & mask) {
      const Merge& m = merge_slots_[i];
      if (m.pair == pair) return &m;
      if (m.pair == kNoPair) return nullptr;
    }
  }
  void add_merge(const Merge& merge);  // the first of a pair given twice stays
  // Pieces up to this long are cached per thread; longer ones (runs of spaces or digits) are rare.
  static constexpr size_t kLongestCachedPiece = 64;
  // Short pieces: merged in place on the stack (no allocation), scanning for the lowest rank.
  void encode_short_piece(std::string_view piece, std::vector<int32_t>& out) const;

  std::vector<std::string> id_to_bytes_;
  int32_t byte_token_[256];
  // Open addressing over a power of two of slots, at most half full: a merge is one probe, most
  // often, where a node-based map chased pointers.
  std::vector<Merge> merge_slots_;
  size_t merge_count_ = 0;
  int32_t end_of_text_ = -1;
  void* regex_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;       // its JIT-compiled form is there
  uint64_t instance_;      // this tokenizer's serial number, keying the per-thread piece caches
};

}  // namespace xsa
