// SentencePiece vocabularies (BPE or unigram) trained by `xsa tokenizer train`
// (data/tokenizer_training.h) with Debian's libsentencepiece: a folder with tokenizer.model
// (SentencePiece's own file: spm_encode and Python's sentencepiece read it) and tokenizer.json
// (what xsa records: kind, model type, vocabulary size, special ids, checksums). Named on the
// command line as spm:FOLDER. Text is not normalized (identity rule), so decode(encode(x)) == x;
// bytes the vocabulary has no piece for go out as byte pieces (byte fallback).
#pragma once

#include <array>
#include <filesystem>
#include <memory>
#include <string>

#include "xsa/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace xsa {

// Whether this build has SentencePiece; when not, why (one line).
bool sentencepiece_available(std::string* why = nullptr);

class SpmTokenizer final : public Tokenizer {
 public:
  // Throws Error naming the folder or file that is missing, unreadable or not a vocabulary.
  explicit SpmTokenizer(const std::filesystem::path& dir);
  ~SpmTokenizer() override;
  using Tokenizer::decode;
  using Tokenizer::encode;
  void encode(std::string_view text, std::vector<int32_t>& out) const override;
  std::string decode(const int32_t* ids, size_t n) const override;
  int vocab_size() const override { return vocab_size_; }
  int end_of_text() const override { return end_of_text_; }  // SentencePiece's </s>
  TokenizerKind kind() const override { return TokenizerKind::spm; }
  // spm_vocabulary_checksum: what a run records of its vocabulary.
  const std::string& checksum() const { return checksum_; }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  int vocab_size_ = 0, end_of_text_ = -1;
  std::string checksum_;
  std::vector<std::string> surface_;  // each id's text
  std::array<int32_t, 256> byte_piece_{};
};

// FNV-1a of the vocabulary (each piece, its score and type), as 16 hex digits: the same for the
// same vocabulary whatever else the model file records (the thread count it was trained with).
std::string spm_vocabulary_checksum(const sentencepiece::SentencePieceProcessor& sp);

// The files of a vocabulary folder that travel with it (into shards and checkpoints):
// tokenizer.model and, when there is one, tokenizer.json (a model trained elsewhere has none).
std::vector<std::filesystem::path> spm_vocabulary_files(const std::filesystem::path& dir);

// FNV-1a (64 bits) of bytes, as 16 hex digits.
std::string fnv1a_hex(std::string_view bytes);

}  // namespace xsa
