// A run's precision, one type parsed once where the user names it (the command line, a config
// file, a saved run, a variant's @ suffix, a sweep's value) and carried as data to the backend that
// computes in it. A new precision (fp16 storage, say) is a value here, its name in kPrecisions,
// the Storage its product inputs take (ops/tensor.h), and its kernels behind the backends'
// supports() (docs/architecture.md, "Adding a precision").
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace xsa {

// fp32 everywhere, or bf16 matrix products (and attention tiles) with fp32 accumulation, the
// master weights, gradients and optimizer staying fp32.
enum class Precision : uint8_t { fp32, bf16 };

struct PrecisionName {
  Precision precision;
  const char* name;
};
inline constexpr PrecisionName kPrecisions[] = {{Precision::fp32, "fp32"},
                                                {Precision::bf16, "bf16"}};
// For messages: "fp32 or bf16".
inline constexpr const char* kPrecisionChoices = "fp32 or bf16";

inline const char* to_string(Precision precision) {
  for (const PrecisionName& p : kPrecisions)
    if (p.precision == precision) return p.name;
  return "unknown precision";
}
// The precision of that name, or none.
inline std::optional<Precision> precision_named(std::string_view name) {
  for (const PrecisionName& p : kPrecisions)
    if (name == p.name) return p.precision;
  return std::nullopt;
}
}  // namespace xsa
