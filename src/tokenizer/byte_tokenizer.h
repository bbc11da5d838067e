#pragma once

#include "xsa/tokenizer/tokenizer.h"

namespace xsa {

class ByteTokenizer final : public Tokenizer {
 public:
  using Tokenizer::decode;
  using Tokenizer::encode;
  void encode(std::string_view text, std::vector<int32_t>& out) const override;
  std::string decode(const int32_t* ids, size_t n) const override;
  int vocab_size() const override { return 256; }
  int end_of_text() const override { return -1; }
  TokenizerKind kind() const override { return TokenizerKind::byte; }
};

}  // namespace xsa
