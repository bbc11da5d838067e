// A backend that hands every call to another (its inner backend), its table's entries generated
// from the one list of ops (src/ops/op_list.txt): a wrapper overrides only what it changes. The
// isolated device (isolated_backend.cpp) moves every device address back to the inner backend's;
// the tests' one-thread-products backend pins the products to one thread; the op-test table's
// recording backend notes which entries a row calls. A new op in the table reaches all of them with
// no line written here.
//
// `Addresses` maps each argument to the inner backend's: SameAddresses passes everything through;
// a policy that moves addresses (the isolated device's) defines in(x) for each pointer and each
// argument struct the table names, and passes the rest through with passthrough() — which accepts
// only plain values and host data, so an argument type it was not taught fails the build instead
// of reaching the inner backend unmoved.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "xsa/backend/backend.h"

namespace xsa {

// What an Addresses policy may pass through unchanged: numbers, enums, the products' shapes, the
// optimizer's settings, and token ids (host data in every backend).
template <typename T>
constexpr bool kPassesThrough =
    std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_same_v<T, MatmulShape> ||
    std::is_same_v<T, ops::AdamWSettings> || std::is_same_v<T, ops::MuonSettings> ||
    std::is_same_v<T, ops::NewtonSchulzCoefficients> || std::is_same_v<T, const int32_t*>;

// Every argument as it is.
struct SameAddresses {
  template <typename T>
  static T&& in(T&& x) {
    return std::forward<T>(x);
  }
};

template <typename Real, typename Addresses = SameAddresses>
class ForwardingBackend : public Backend<Real> {
 public:
  explicit ForwardingBackend(Backend<Real>& inner) : inner_(inner) {}
  Backend<Real>& inner() const { return inner_; }

  // Every member and entry of the table (generated from src/ops/op_list.txt by
  // scripts/generate_ops.py).
#include "xsa/backend/generated/forwarding_entries.h"

 protected:
  // Called before each kernel entry is handed on (the recording backend notes it).
  virtual void entering(Op family, const char* entry) {
    (void)family, (void)entry;
  }

 private:
  Backend<Real>& inner_;
};

}  // namespace xsa
