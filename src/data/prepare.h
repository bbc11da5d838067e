// xsa prepare: corpora in (text, JSON lines, JSON arrays, the POS-tagged Brown corpus; plain, .gz
// or .zst; files, folders, globs), token shards out: train_NNNNNN.bin, val_NNNNNN.bin and meta.json
// in one folder. It streams: memory stays bounded by the batch size whatever the input's size (a
// reader thread gathers documents into batches of batch_bytes, tokenized in parallel and written
// in order). A document goes to validation by a seeded hash of its text (the same split whatever
// the inputs' order or the thread count; duplicates go together); a set of long documents for
// evaluation can be held out beside the splits (long/). A killed prepare continues on the same
// command from its last finished batch (kept in <out>.partial) to the same shards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "xsa/data/corpus_reader.h"
#include "xsa/tokenizer/kind.h"

namespace xsa {

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
  std::string text_field = "text";  // JSON lines' and arrays' field holding a document
  BadInput on_bad = BadInput::stop;
  size_t max_record_bytes = kMaxRecordBytes;  // a longer JSON line, item or Brown file is bad input
  // Documents are read, tokenized and written in batches of about this many bytes of text. Three
  // batches are held at once (one being read, one waiting, one being tokenized, with its tokens
  // at 4 bytes each): resident memory is about 7 times this, plus the tokenizer and the largest
  // document (a text file's are at most kTextDocumentMaxBytes), whatever the input's size. The
  // first batches are smaller (1, 2, 4 MiB …), so that tokenizing starts at once.
  size_t batch_bytes = 8 << 20;
  // A run saves where it stands (syncing the shards to disk) after its first batch, then after a
  // batch at most this often; a killed run continues from the last save. 0: after every batch.
  double save_every_seconds = 1.0;
  int threads = 0;     // 0: every core
  bool force = false;  // replace an existing output folder
  bool quiet = false;
};

struct PrepareResult {
  size_t train_tokens = 0, val_tokens = 0, train_documents = 0, val_documents = 0, bytes = 0;
  size_t long_tokens = 0, long_documents = 0;
  size_t skipped = 0;  // bad lines, documents or archives left out (on_bad skip)
  int shards = 0;
  bool resumed = false;  // continued an interrupted prepare
  // The whole run, and its streaming part: from the first batch read to the last one written
  // (the tokenizer's loading and the listing of the inputs left out), this run's share.
  double seconds = 0, stream_seconds = 0;
};

// Writes into <out>.partial and renames it into place when complete, so `out` is there whole or
// not at all. An error in the input removes the partial output; an interruption (a signal, a kill,
// a crash) leaves it, and the same command continues it (other inputs or options start over). An
// existing `out` is left as it was until the new one is complete.
PrepareResult prepare(const PrepareConfig& cfg);

// Inputs and output of `xsa prepare --default`: the npm corpora fetched by scripts/get_data.sh
// (nlp-corpus's sentences, the Brown corpus's 500 texts, the 233 State of the Union addresses),
// into data/default (GPT-2), data/default-byte, or data/default-<the vocabulary folder's name>,
// with a long-document set of the addresses of at least kDefaultLongWindows windows of the
// longest context the study trains (4 096 bytes; 1 024 tokens of a vocabulary of pieces).
inline constexpr int kDefaultLongWindows = 3;
PrepareConfig default_corpus_config(TokenizerKind tokenizer, const std::string& spm_dir = "");

}  // namespace xsa
