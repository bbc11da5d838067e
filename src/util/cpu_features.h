// The instruction-set features behind util/cpu.h's levels, as bits, shared by the load-time check
// (cpu.cpp, compiled for any x86-64) and the record of what the build's own flags use
// (cpu_build.cpp, compiled with them).
#pragma once

namespace xsa::cpu_features {

enum : unsigned {
  kAvx = 1u << 0,
  kAvx2 = 1u << 1,
  kFma = 1u << 2,
  kBmi1 = 1u << 3,
  kBmi2 = 1u << 4,
  kF16c = 1u << 5,
  kLzcnt = 1u << 6,
  kMovbe = 1u << 7,
  kAvx512f = 1u << 8,
  kAvx512bw = 1u << 9,
  kAvx512dq = 1u << 10,
  kAvx512vl = 1u << 11,
  kAvx512cd = 1u << 12,
  kAvx512bf16 = 1u << 13,
  kAmxTile = 1u << 14,
  kAmxBf16 = 1u << 15,
};

// The features the compiler was allowed to use everywhere in this build (its -march), read from
// its own macros; every one of them must be on the CPU before any code of the build runs.
extern const unsigned kBuildFeatures;

}  // namespace xsa::cpu_features
