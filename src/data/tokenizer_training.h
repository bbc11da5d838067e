// xsa tokenizer train: a SentencePiece vocabulary (BPE or unigram) trained on the inputs xsa
// prepare reads, by Debian's libsentencepiece (not a trainer of ours), into a folder with
// tokenizer.model and tokenizer.json (spm_tokenizer.h). Deterministic: the same inputs, options and
// thread count give the same file, byte for byte; another thread count the same vocabulary (the
// file records the count) (tests/spm_test.cpp).
#pragma once

#include <string>
#include <vector>

#include "xsa/data/prepare.h"

namespace xsa {

struct SpmTrainConfig {
  std::vector<PrepareInput> inputs;
  int vocab = 4096;
  std::string model = "bpe";  // bpe or unigram
  std::string out;
  int threads = 0;     // 0: every core
  bool force = false;  // replace an existing folder
  bool quiet = false;
};

struct SpmTrainResult {
  size_t documents = 0, lines = 0, bytes = 0;
  int vocab = 0;
  std::string model_checksum, corpus_checksum;
  double seconds = 0;
};

// The largest vocabulary: xsa's shards hold token ids as uint16.
constexpr int kMaxSpmVocab = 65536;

// Writes into a temporary folder beside `out` and renames it into place when complete. Throws
// Error (one line) for a bad option, an input that does not exist, an existing `out` without
// force, or SentencePiece's refusal (with its reason).
SpmTrainResult train_spm_tokenizer(const SpmTrainConfig& cfg);

}  // namespace xsa
