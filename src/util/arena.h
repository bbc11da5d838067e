// One aligned allocation per kind of memory (parameters, gradients, each AdamW moment,
// activations); tensors are named views (pointer + offset) into it, never separate allocations.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

namespace xsa {

inline constexpr size_t kAlignBytes = 64;
inline constexpr size_t kHugePageBytes = size_t(2) << 20;

// Rounds a count of Real elements up so the next view starts on a 64-byte boundary.
template <typename Real>
constexpr size_t align_elements(size_t n) {
  constexpr size_t per_line = kAlignBytes / sizeof(Real);
  return (n + per_line - 1) / per_line * per_line;
}

// `bytes` zeroed bytes on a 64-byte boundary, released with std::free; throws std::bad_alloc. With
// huge_pages the block starts on a 2 MB boundary and asks for transparent huge pages: decoding
// streams all weights per token, and through 4 kB pages pays a TLB miss every 4 kB
// (docs/perf-log.md #10). Training does not ask: there the pages' slower first touch cost more
// than they gave. Where THP is off, the request is a no-op.
inline void* allocate_zeroed(size_t bytes, bool huge_pages) {
  const size_t align = huge_pages ? kHugePageBytes : kAlignBytes;
  bytes = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, bytes);
  if (!p) throw std::bad_alloc();
  if (huge_pages) madvise(p, bytes, MADV_HUGEPAGE);
  std::memset(p, 0, bytes);
  return p;
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
    size_ = n;
    data_ = n ? static_cast<Real*>(allocate_zeroed(n * sizeof(Real), false)) : nullptr;
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
