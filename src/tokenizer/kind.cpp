#include "xsa/tokenizer/kind.h"

#include "xsa/util/error.h"

namespace xsa {

int vocab_size_of(TokenizerKind kind) {
  return kind == TokenizerKind::byte ? 256 : 50257;
}

const char* to_string(TokenizerKind kind) {
  return kind == TokenizerKind::byte ? "byte" : "gpt2";
}

TokenizerKind parse_tokenizer(const std::string& name) {
  if (name == "byte") return TokenizerKind::byte;
  if (name == "gpt2") return TokenizerKind::gpt2;
  fail("--tokenizer '{}' is not known (expected byte or gpt2)", name);
}

}  // namespace xsa
