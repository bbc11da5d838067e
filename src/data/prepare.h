// xsa prepare: text in (plain files, folders of them, JSON-lines with a `text` field, JSON arrays
// of strings, the POS-tagged Brown corpus), token shards out: train_NNNNNN.bin, val_NNNNNN.bin and
// meta.json in one folder. Documents are tokenized in parallel; validation documents are drawn
// deterministically at random (by seed) from all inputs, never the tail of the concatenation; a
// set of long documents for evaluation can be held out beside them (long/).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "xsa/tokenizer/kind.h"

namespace xsa {

struct PrepareInput {
  std::string path;  // a file or a folder (searched recursively, hidden files skipped)
  std::string format =
      "auto";  // auto (by extension: .jsonl, .json, else text), text, jsonl, json, brown
};

struct PrepareConfig {
  std::vector<PrepareInput> inputs;
  TokenizerKind tokenizer = TokenizerKind::gpt2;
  std::string vocab_dir;  // GPT-2's files; for spm, the vocabulary's folder (copied to the output)
  std::string out;
  double val_fraction = 0.02;  // share of documents held out
  uint64_t seed = 1;           // draws the validation documents
  // A long-document evaluation set in <out>/long/: of the documents of at least long_min_tokens
  // tokens that validation did not draw, long_fraction (drawn by seed) are held out there, in
  // neither split (0: none). Compare's --eval-data takes the folder.
  size_t long_min_tokens = 0;
  double long_fraction = 0.1;
  size_t shard_tokens = 100'000'000;
  int threads = 0;     // 0: every core
  bool force = false;  // replace an existing output folder
  bool quiet = false;
};

struct PrepareResult {
  size_t train_tokens = 0, val_tokens = 0, train_documents = 0, val_documents = 0, bytes = 0;
  size_t long_tokens = 0, long_documents = 0;
  int shards = 0;
  double seconds = 0;
};

// Every file of the inputs, folders walked in sorted order, each with its format resolved; throws
// Error naming an input that does not exist.
std::vector<PrepareInput> list_input_files(const std::vector<PrepareInput>& inputs);
// Splits one file into documents (by its format), appending them to `docs`.
void read_input_documents(const PrepareInput& file, std::vector<std::string>& docs);

// Writes into a temporary folder beside `out` and renames it into place when complete; on any
// error the partial output is removed and an existing `out` is left as it was.
PrepareResult prepare(const PrepareConfig& cfg);

// Inputs and output of `xsa prepare --default`: the npm corpora fetched by scripts/get_data.sh
// (nlp-corpus's sentences, the Brown corpus's 500 texts, the 233 State of the Union addresses),
// into data/default (GPT-2), data/default-byte, or data/default-<the vocabulary folder's name>,
// with a long-document set of the addresses of at least kDefaultLongWindows windows of the
// longest context the study trains (4 096 bytes; 1 024 tokens of a vocabulary of pieces).
inline constexpr int kDefaultLongWindows = 3;
PrepareConfig default_corpus_config(TokenizerKind tokenizer, const std::string& spm_dir = "");

// The Brown corpus's "word/tag word/tag" lines back to plain text.
std::string strip_brown_tags(const std::string& tagged);

}  // namespace xsa
