// Which tokenizer a model and its data use. Below the model layer: a model's configuration names
// its tokenizer, and the tokenizers, datasets and shards name theirs without knowing of models.
#pragma once

#include <cstdint>
#include <string>

namespace xsa {

// spm: a SentencePiece vocabulary of one's own (spm_tokenizer.h), named spm:FOLDER.
enum class TokenizerKind : uint8_t { byte, gpt2, spm };

int vocab_size_of(TokenizerKind kind);  // 256 or 50257; spm: throws (its size is its own)
const char* to_string(TokenizerKind kind);
// --tokenizer where SentencePiece vocabularies are taken too: byte, gpt2 or spm:FOLDER.
struct TokenizerChoice {
  TokenizerKind kind = TokenizerKind::byte;
  std::string spm_dir;  // spm: the vocabulary's folder
};
TokenizerChoice parse_tokenizer_choice(const std::string& name);
// --tokenizer of train, compare and sweep, as a run records it too: byte, gpt2, spm:FOLDER, or spm
// alone (the vocabulary the shards hold, or a resumed checkpoint's).
TokenizerChoice parse_run_tokenizer(const std::string& name);
// A tokenizer's name as files record it (meta.json, config.json, a resumed run's settings): byte,
// gpt2 or spm (whose vocabulary the data's folder or the checkpoint holds).
TokenizerKind tokenizer_named(const std::string& name);

}  // namespace xsa
