#include "xsa/tokenizer/kind.h"

#include "xsa/util/error.h"

namespace xsa {

int vocab_size_of(TokenizerKind kind) {
  if (kind == TokenizerKind::spm)
    fail("a SentencePiece vocabulary's size is its own (the pieces of its tokenizer.model)");
  return kind == TokenizerKind::byte ? 256 : 50257;
}

const char* to_string(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::byte:
      return "byte";
    case TokenizerKind::gpt2:
      return "gpt2";
    case TokenizerKind::spm:
      return "spm";
  }
  return "?";
}

TokenizerKind tokenizer_named(const std::string& name) {
  if (name == "byte") return TokenizerKind::byte;
  if (name == "gpt2") return TokenizerKind::gpt2;
  if (name == "spm") return TokenizerKind::spm;
  fail("tokenizer '{}' is not known (expected byte, gpt2 or spm)", name);
}

TokenizerChoice parse_tokenizer_choice(const std::string& name) {
  if (name.rfind("spm:", 0) == 0) {
    if (name.size() == 4) fail("--tokenizer spm: needs the vocabulary's folder (spm:FOLDER)");
    return {TokenizerKind::spm, name.substr(4)};
  }
  if (name == "byte" || name == "gpt2") return {tokenizer_named(name), {}};
  fail("--tokenizer '{}' is not known (expected byte, gpt2 or spm:FOLDER)", name);
}

TokenizerChoice parse_run_tokenizer(const std::string& name) {
  if (name == "spm") return {TokenizerKind::spm, {}};
  return parse_tokenizer_choice(name);
}

}  // namespace xsa
