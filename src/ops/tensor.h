// Precision as data: how an activation is stored, carried with its pointer. Every buffer is sized
// for fp32; a bf16 activation fills the first half of its buffer, so that one buffer, planned
// once, serves either storage and the storage can change per call (a decoded row stays fp32).
#pragma once

#include <cstdint>
#include <type_traits>

namespace xsa::ops {

enum class Storage : uint8_t { fp32, bf16 };
inline const char* to_string(Storage storage) {
  switch (storage) {
    case Storage::fp32:
      return "fp32";
    case Storage::bf16:
      return "bf16";
  }
  return "unknown storage";
}

// An activation: where it is and how it is stored. A plain pointer converts to one stored fp32,
// so that fp32 callers write pointers as before.
template <typename T>
struct Tensor {
  T* data = nullptr;
  Storage storage = Storage::fp32;

  Tensor() = default;
  Tensor(T* data, Storage storage = Storage::fp32) : data(data), storage(storage) {}  // NOLINT
  template <typename U, typename = std::enable_if_t<std::is_convertible_v<U*, T*>>>
  Tensor(const Tensor<U>& other) : data(other.data), storage(other.storage) {}  // NOLINT
  bool bf16() const { return storage == Storage::bf16; }
  // The bf16 values of a bf16 tensor.
  auto as_bf16() const {
    using Bits = std::conditional_t<std::is_const_v<T>, const uint16_t, uint16_t>;
    return reinterpret_cast<Bits*>(data);
  }
};

}  // namespace xsa::ops
