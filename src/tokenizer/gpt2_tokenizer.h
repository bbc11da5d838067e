// GPT-2 byte-level BPE: pre-tokenization by GPT-2's pattern (contractions, letters, numbers,
// other, whitespace; Unicode letter and number classes; whitespace as Unicode White_Space, as
// tiktoken's Rust regex has it), bytes mapped to tokens, merges applied by rank.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <unordered_map>
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
    int32_t rank;
    int32_t merged;
  };
  std::vector<std::string> id_to_bytes_;
  int32_t byte_token_[256];
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) → rank, merged id
  int32_t end_of_text_ = -1;
  void* regex_ = nullptr;  // pcre2_code_8*
};

}  // namespace xsa
