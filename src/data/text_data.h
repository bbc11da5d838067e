// Training data for the byte tokenizer: a text file read as bytes (token = byte value), split into
// a training head and a held-out validation tail. The loader hands out B×T windows with targets
// shifted by one; its position is part of the trainer state so resume continues exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xsa {

struct TokenSplit {
  std::string source;  // file path, for messages and the trainer state
  std::vector<int32_t> train;
  std::vector<int32_t> val;
};

// Reads `path` as bytes. The last val_fraction of it (at least one window of T+1 tokens when the
// fraction is positive) is held out for validation. Errors name the file and what is wrong:
// missing, unreadable, too short for one batch of B×T (+1).
TokenSplit load_byte_text(const std::string& path, double val_fraction, int B, int T);

// Sequential B×T windows over a token stream, wrapping at the end.
class BatchLoader {
 public:
  BatchLoader(const std::vector<int32_t>& tokens, int B, int T);
  // inputs, targets: [B, T]; targets are the inputs shifted by one token.
  void next(int32_t* inputs, int32_t* targets);
  uint64_t position() const { return position_; }
  void set_position(uint64_t position);  // throws Error when outside the stream

 private:
  const std::vector<int32_t>& tokens_;
  int B_, T_;
  uint64_t position_ = 0;
};

// Validation: the stream cut into consecutive windows of T+1 tokens (stride T), always the same
// ones, B per batch; rows past the last window get target −1 and do not count.
int val_batch_count(const std::vector<int32_t>& val, int B, int T, int max_batches);
void val_batch(const std::vector<int32_t>& val, int index, int B, int T, int32_t* inputs,
               int32_t* targets);

}  // namespace xsa
