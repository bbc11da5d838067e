// Which tokenizer a model and its data use. Below the model layer: a model's configuration names
// its tokenizer, and the tokenizers, datasets and shards name theirs without knowing of models.
#pragma once

#include <cstdint>
#include <string>

namespace xsa {

enum class TokenizerKind : uint8_t { byte, gpt2 };

int vocab_size_of(TokenizerKind kind);  // 256 or 50257
const char* to_string(TokenizerKind kind);
TokenizerKind parse_tokenizer(const std::string& name);  // throws Error naming the bad name

}  // namespace xsa
