// One aligned allocation per kind of memory (parameters, gradients, each AdamW moment,
// activations); tensors are named views (pointer + offset) into it, never separate allocations.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

namespace xsa {

inline constexpr size_t kAlignBytes = 64;

// Rounds a count of Real elements up so the next view starts on a 64-byte boundary.
template <typename Real>
constexpr size_t align_elements(size_t n) {
  constexpr size_t per_line = kAlignBytes / sizeof(Real);
  return (n + per_line - 1) / per_line * per_line;
}

template <typename Real>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n) { reset(n); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept : data_(o.data_), size_(o.size_) {
    o.data_ = nullptr, o.size_ = 0;
  }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  ~AlignedBuffer() { std::free(data_); }

  // Allocates n zeroed elements (previous contents are released).
  void reset(size_t n) {
    std::free(data_);
    data_ = nullptr;
    size_ = n;
    if (n == 0) return;
    size_t bytes = (n * sizeof(Real) + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
    data_ = static_cast<Real*>(std::aligned_alloc(kAlignBytes, bytes));
    if (!data_) throw std::bad_alloc();
    std::memset(data_, 0, bytes);
  }
  void zero() {
    if (data_) std::memset(data_, 0, size_ * sizeof(Real));
  }

  Real* data() { return data_; }
  const Real* data() const { return data_; }
  size_t size() const { return size_; }
  Real& operator[](size_t i) { return data_[i]; }
  const Real& operator[](size_t i) const { return data_[i]; }

 private:
  Real* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace xsa
