// Training data: a text file (tokenized on load) or token shards (memory-mapped), as one stream
// of tokens per split, and the loader that cuts B×T windows out of it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "xsa/data/shards.h"
#include "xsa/tokenizer/kind.h"

namespace xsa {

// Several shards (or one in-memory array) read as one stream; windows may cross shard borders.
class TokenStream {
 public:
  void add(std::shared_ptr<const Shard> shard);
  void add(std::vector<uint16_t> tokens, std::string source);
  size_t size() const { return size_; }
  void copy(size_t pos, size_t n, int32_t* out) const;  // tokens [pos, pos+n) as int32
  // Throws Error naming the file and position of the first id ≥ vocab_size.
  void check_vocabulary(int vocab_size, const char* tokenizer) const;
  std::vector<std::string> sources() const;
  // Each part's content: its source (a shard's path, a text file's) with its token count and the
  // XXH3-64 of its tokens, the identity a resumed run checks its data against (not sizes and
  // dates: a file rewritten with other tokens of the same count is other data).
  struct Content {
    std::string source;
    uint64_t tokens = 0, xxh3 = 0;
  };
  std::vector<Content> contents() const;  // hashed once, on the first call

 private:
  struct Segment {
    const uint16_t* data;
    size_t n, start;
    std::string source;
  };
  std::vector<Segment> segments_;
  std::vector<std::shared_ptr<const Shard>> shards_;
  std::vector<std::shared_ptr<const std::vector<uint16_t>>> owned_;
  size_t size_ = 0;
  mutable std::vector<Content> contents_;  // contents(), once hashed
};

struct Dataset {
  TokenStream train, val;
  TokenizerKind tokenizer = TokenizerKind::byte;
  int vocab_size = 0;
  std::string vocab_dir;    // spm: the folder of its tokenizer.model (the shards', or a text
                            // file's --tokenizer spm:FOLDER)
  std::string description;  // what was loaded, for the progress header
};

// `path` is one of:
//  - a text file: tokenized on load (byte tokenizer unless --tokenizer gpt2 or spm, whose folder
//    is then vocab_dir); its last val_fraction is held out for validation;
//  - a folder of shards: every *train*.bin for training, every *val*.bin for validation, and the
//    tokenizer from meta.json (GPT-2 when there is none, as for llm.c's shards);
//  - a glob of shard files (data/fineweb/*train*.bin); validation from the same glob with "train"
//    replaced by "val".
// `tokenizer` is the --tokenizer option when given; it must agree with meta.json. `vocab_dir` is
// GPT-2's vocabulary folder, or a SentencePiece vocabulary's (a text file's tokenizer).
// Errors name the path: missing, unreadable, fewer tokens than one batch of B×T (+1) needs, shards
// with a bad header or ids outside the vocabulary.
// For evaluation only (`evaluation`: compare's --eval-data, eval, analyze), a folder may hold
// validation shards alone (prepare's long/ set), and one window of T + 1 tokens is enough.
Dataset open_dataset(const std::string& path, std::optional<TokenizerKind> tokenizer,
                     double val_fraction, int B, int T, const std::string& vocab_dir = "",
                     bool evaluation = false);

// The data's SentencePiece vocabulary against another copy of one (`folder`: a checkpoint's, or
// the folder --tokenizer spm:FOLDER names): refused in one line when they differ (by their
// vocabulary checksums). Nothing to check for byte and GPT-2 data.
void check_same_vocabulary(const Dataset& data, const std::filesystem::path& folder);

// The tokenizer a shard folder's meta.json (its text) names, GPT-2 when it names none; errors name
// `source`.
TokenizerKind tokenizer_of_meta(const std::string& meta_json, const std::string& source);

// Where the loader stands: epoch and the next window of that epoch's order. Saved in trainer.json.
struct LoaderPosition {
  uint64_t epoch = 0;
  uint64_t cursor = 0;
  bool operator==(const LoaderPosition&) const = default;
};

// Cuts the stream into windows of T+1 tokens at stride T (inputs and the targets shifted by one)
// and hands out B per call. Each epoch visits windows in order, or in a permutation drawn from
// (seed, epoch) when shuffling. With `world` processes, one step takes world·B consecutive windows
// of the order and rank r gets the r-th B of them, so all ranks together cover each window of an
// epoch once (the last world·B − 1 windows of an epoch may be skipped).
class BatchLoader {
 public:
  BatchLoader(const TokenStream& tokens, int B, int T, bool shuffle, uint64_t seed, int rank = 0,
              int world = 1);
  void next(int32_t* inputs, int32_t* targets);  // [B, T] each
  LoaderPosition position() const { return pos_; }
  void set_position(LoaderPosition pos);  // throws Error when outside the data
  uint64_t windows() const { return windows_; }
  uint64_t window_at(uint64_t epoch, uint64_t index) const;  // the order, for tests

 private:
  const TokenStream& tokens_;
  int B_, T_, rank_, world_;
  bool shuffle_;
  uint64_t seed_;
  uint64_t windows_;
  LoaderPosition pos_;
};

// Validation: windows of T + 1 tokens at stride T cut from the whole split (W of them), read in
// passes of n batches of B rows. A pass reads n·B windows drawn evenly across the split: row r of
// the pass (r = batch · B + row in the batch) takes window ⌊r · W / (n·B)⌋, so that a pass of a
// few batches reaches the split's end, not only its first documents. When n·B ≥ W the pass reads
// every window in order, and rows past the last window get target −1 and do not count. The
// windows depend only on the split, T and n·B: the same for every arm, run, resume and process
// count of one comparison (n·B is the same --val-batches of the step's size however the step is
// split).
int val_batch_count(const TokenStream& val, int B, int T, int max_batches);
// Batch `index` of a pass of n_batches batches.
void val_batch(const TokenStream& val, int index, int n_batches, int B, int T, int32_t* inputs,
               int32_t* targets);
// The window row r of such a pass reads (its first token is at window · T); −1 past the last.
int64_t val_window_of_row(const TokenStream& val, int64_t row, int n_batches, int B, int T);

// Positions in a window, counted as the tokens a prediction sees (1 … T: the prediction at index t
// of the window sees t + 1), grouped into buckets 1–16, 17–64, 65–256, … (each 4 times the last)
// up to T; the last bucket ends at T. Loss by position (xsa compare's report) averages each.
struct PositionBucket {
  int first = 1, last = 1;  // inclusive
};
std::vector<PositionBucket> position_buckets(int T);

}  // namespace xsa
