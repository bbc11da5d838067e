#include "data/text_data.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"
#include "util/files.h"

namespace xsa {

TokenSplit load_byte_text(const std::string& path, double val_fraction, int B, int T) {
  if (!(val_fraction >= 0 && val_fraction < 1))
    fail("--val-fraction {} must be in [0, 1)", val_fraction);
  std::string bytes = read_file(path);
  TokenSplit split;
  split.source = path;
  size_t n = bytes.size();
  size_t n_val = 0;
  if (val_fraction > 0)
    n_val = std::max<size_t>((size_t)std::llround(n * val_fraction), (size_t)T + 1);
  const size_t need = (size_t)B * T + 1;
  if (n_val >= n || n - n_val < need)
    fail(
        "{}: {} bytes leave {} training tokens after the validation tail of {}; one batch needs "
        "--batch {} x --seq-len {} + 1 = {}",
        path, n, n_val >= n ? 0 : n - n_val, n_val, B, T, need);
  split.train.reserve(n - n_val);
  for (size_t i = 0; i < n - n_val; i++) split.train.push_back((unsigned char)bytes[i]);
  for (size_t i = n - n_val; i < n; i++) split.val.push_back((unsigned char)bytes[i]);
  return split;
}

BatchLoader::BatchLoader(const std::vector<int32_t>& tokens, int B, int T)
    : tokens_(tokens), B_(B), T_(T) {}

void BatchLoader::next(int32_t* inputs, int32_t* targets) {
  for (int b = 0; b < B_; b++) {
    if (position_ + T_ + 1 > tokens_.size()) position_ = 0;  // wrap: next epoch
    const int32_t* src = tokens_.data() + position_;
    std::copy(src, src + T_, inputs + (size_t)b * T_);
    std::copy(src + 1, src + T_ + 1, targets + (size_t)b * T_);
    position_ += T_;
  }
}

void BatchLoader::set_position(uint64_t position) {
  if (position + T_ + 1 > tokens_.size() && position != 0)
    fail("data position {} is past the end of the training data ({} tokens)", position,
         tokens_.size());
  position_ = position;
}

int val_batch_count(const std::vector<int32_t>& val, int B, int T, int max_batches) {
  if (val.size() < (size_t)T + 1) return 0;
  size_t windows = (val.size() - 1) / T;
  int batches = (int)((windows + B - 1) / B);
  return std::min(batches, max_batches);
}

void val_batch(const std::vector<int32_t>& val, int index, int B, int T, int32_t* inputs,
               int32_t* targets) {
  size_t windows = (val.size() - 1) / T;
  for (int b = 0; b < B; b++) {
    size_t w = (size_t)index * B + b;
    int32_t* in = inputs + (size_t)b * T;
    int32_t* tg = targets + (size_t)b * T;
    if (w >= windows) {
      std::fill(in, in + T, 0);
      std::fill(tg, tg + T, -1);
      continue;
    }
    const int32_t* src = val.data() + w * T;
    std::copy(src, src + T, in);
    std::copy(src + 1, src + T + 1, tg);
  }
}

}  // namespace xsa
