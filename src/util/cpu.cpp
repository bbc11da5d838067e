// CPU features from CPUID and XGETBV, the kernel level, and the check at load. This file is
// compiled for any x86-64 (CMakeLists.txt): its check must run on a CPU that lacks what the rest of
// the build was compiled for.
#include "xsa/util/cpu.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "xsa/util/cpu_features.h"
#include "xsa/util/error.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace xsa {

namespace {

using namespace cpu_features;

struct Cpu {
  unsigned features = 0;
  unsigned family = 0, model = 0;
  char brand[49] = {};
};

#if defined(__x86_64__)
unsigned long long xgetbv0() {
  unsigned eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return ((unsigned long long)edx << 32) | eax;
}
#endif

Cpu read_cpu() {
  Cpu cpu;
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return cpu;
  const unsigned base_family = (a >> 8) & 0xf, ext_family = (a >> 20) & 0xff;
  cpu.family = base_family == 0xf ? base_family + ext_family : base_family;
  cpu.model = (a >> 4) & 0xf;
  if (base_family == 0x6 || base_family == 0xf) cpu.model |= ((a >> 16) & 0xf) << 4;
  // The operating system must save the wider registers (XCR0) before a CPU's AVX or AVX-512 bits
  // mean anything: YMM state for AVX, opmask and both halves of ZMM for AVX-512, the tile state
  // for AMX.
  const bool osxsave = c & (1u << 27);
  const unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6, os_avx512 = (xcr0 & 0xe6) == 0xe6,
             os_amx = (xcr0 & 0x60000) == 0x60000;
  unsigned f = 0;
  if (os_avx && (c & (1u << 28))) f |= kAvx;
  if (os_avx && (c & (1u << 12))) f |= kFma;
  if (c & (1u << 29)) f |= kF16c;
  if (c & (1u << 22)) f |= kMovbe;
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    if (b & (1u << 3)) f |= kBmi1;
    if (b & (1u << 8)) f |= kBmi2;
    if (os_avx && (b & (1u << 5))) f |= kAvx2;
    if (os_avx512) {
      if (b & (1u << 16)) f |= kAvx512f;
      if (b & (1u << 17)) f |= kAvx512dq;
      if (b & (1u << 28)) f |= kAvx512cd;
      if (b & (1u << 30)) f |= kAvx512bw;
      if (b & (1u << 31)) f |= kAvx512vl;
    }
    if (os_amx && (d & (1u << 24))) f |= kAmxTile;
    if (os_amx && (d & (1u << 22))) f |= kAmxBf16;
    const unsigned leaf7_subleaves = a;
    if (leaf7_subleaves >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      if (os_avx512 && (a & (1u << 5))) f |= kAvx512bf16;
    }
  }
  if (__get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 5))) f |= kLzcnt;
  cpu.features = f;
  if ((unsigned)__get_cpuid_max(0x80000000, nullptr) >= 0x80000004u) {
    unsigned* words = reinterpret_cast<unsigned*>(cpu.brand);
    for (unsigned leaf = 0; leaf < 3; leaf++)
      __get_cpuid(0x80000002 + leaf, &words[4 * leaf], &words[4 * leaf + 1], &words[4 * leaf + 2],
                  &words[4 * leaf + 3]);
  }
#endif
  return cpu;
}

const Cpu& this_cpu() {
  static const Cpu cpu = read_cpu();
  return cpu;
}

constexpr unsigned kAvx2Set = kAvx | kAvx2 | kFma | kBmi1 | kBmi2 | kF16c | kLzcnt | kMovbe;
constexpr unsigned kAvx512Set = kAvx2Set | kAvx512f | kAvx512bw | kAvx512dq | kAvx512vl | kAvx512cd;

CpuLevel best_level_of(unsigned f) {
#if defined(__x86_64__)
  if ((f & kAvx512Set) != kAvx512Set) return CpuLevel::avx2;  // (below avx2: refused at load)
  if (!(f & kAvx512bf16)) return CpuLevel::avx512;
  return (f & kAmxTile) && (f & kAmxBf16) ? CpuLevel::amx : CpuLevel::avx512_bf16;
#else
  (void)f;
  return CpuLevel::baseline;
#endif
}

constexpr CpuLevel kLevels[] = {CpuLevel::baseline, CpuLevel::avx2, CpuLevel::avx512,
                                CpuLevel::avx512_bf16, CpuLevel::amx};

// XSA_CPU's level; "" when the variable is unset or valid, else why it is not.
CpuLevel requested_level(const char* value, CpuLevel best, std::string* problem) {
  for (CpuLevel level : kLevels) {
    if (std::strcmp(value, level_name(level)) != 0) continue;
    if (level > best)
      *problem = fmt::format("XSA_CPU={}: this CPU ({}) supports at most {}", value, cpu_name(),
                             level_name(best));
    else if (level == CpuLevel::baseline && best != CpuLevel::baseline)
      *problem = fmt::format("XSA_CPU={}: the lowest level on x86-64 is avx2", value);
    return level;
  }
  *problem = fmt::format("XSA_CPU={}: not a level (avx2, avx512, avx512_bf16 or amx)", value);
  return best;
}

// What the CPU lacks of the build's own instruction sets, as names; "" when nothing.
std::string missing_for_build(unsigned have) {
  static constexpr struct {
    unsigned bit;
    const char* name;
  } names[] = {{kAvx, "AVX"},           {kAvx2, "AVX2"},
               {kFma, "FMA"},           {kBmi1, "BMI1"},
               {kBmi2, "BMI2"},         {kF16c, "F16C"},
               {kLzcnt, "LZCNT"},       {kMovbe, "MOVBE"},
               {kAvx512f, "AVX512F"},   {kAvx512bw, "AVX512BW"},
               {kAvx512dq, "AVX512DQ"}, {kAvx512vl, "AVX512VL"},
               {kAvx512cd, "AVX512CD"}, {kAvx512bf16, "AVX512_BF16"},
               {kAmxTile, "AMX-TILE"},  {kAmxBf16, "AMX-BF16"}};
  std::string missing;
  for (const auto& n : names)
    if ((kBuildFeatures & n.bit) && !(have & n.bit))
      missing += std::string(missing.empty() ? "" : ", ") + n.name;
  return missing;
}

std::atomic<int> current_level{-1};

[[noreturn]] void refuse(const std::string& why) {
  std::fprintf(stderr, "xsa: error: %s\n", why.c_str());
  std::fflush(stderr);
  std::exit(1);
}

// The level at first use: the best, or XSA_CPU's; a CPU without the build's instruction sets, or a
// bad XSA_CPU, ends the process with one line (this runs when the program loads, below).
int initial_level() {
  const Cpu& cpu = this_cpu();
  if (const std::string missing = missing_for_build(cpu.features); !missing.empty()) {
    const bool portable = (kBuildFeatures & ~kAvx2Set) == 0;  // nothing beyond x86-64-v3
    refuse(fmt::format(
        "this CPU ({}) lacks {}: {}", cpu_name(), missing,
        portable ? "this xsa is built for x86-64-v3 (AVX2 and FMA: Intel since Haswell, AMD since "
                   "Zen 1) and cannot run here"
                 : "this xsa was built with -DXSA_NATIVE=ON for the CPU that built it; build it "
                   "again without XSA_NATIVE (bash scripts/build.sh) to run here"));
  }
  const CpuLevel best = best_level_of(cpu.features);
  const char* value = std::getenv("XSA_CPU");
  if (!value || !*value) return (int)best;
  std::string problem;
  const CpuLevel level = requested_level(value, best, &problem);
  if (!problem.empty()) refuse(problem);
  return (int)level;
}

// Before any other code of the program or library runs (priority 101 comes before every
// constructor without one): code compiled for AVX2 would otherwise stop at its first such
// instruction with SIGILL and no word of why.
__attribute__((constructor(101))) void check_cpu_at_load() {
  int expected = -1;
  current_level.compare_exchange_strong(expected, initial_level());
}

}  // namespace

}  // namespace xsa

// Named by every program that links the static library (CMakeLists.txt: --undefined), so that this
// file, with its check at load, is part of each of them, even one that calls nothing here.
extern "C" const int xsa_cpu_check_at_load = 1;

namespace xsa {

const char* level_name(CpuLevel level) {
  switch (level) {
    case CpuLevel::baseline:
      return "baseline";
    case CpuLevel::avx2:
      return "avx2";
    case CpuLevel::avx512:
      return "avx512";
    case CpuLevel::avx512_bf16:
      return "avx512_bf16";
    case CpuLevel::amx:
      return "amx";
  }
  return "?";
}

CpuLevel cpu_best_level() {
  return best_level_of(this_cpu().features);
}

CpuLevel cpu_level() {
  int level = current_level.load(std::memory_order_relaxed);
  if (level < 0) {  // used before the load-time check ran (another library's constructor)
    int expected = -1;
    current_level.compare_exchange_strong(expected, initial_level());
    level = current_level.load();
  }
  return (CpuLevel)level;
}

void set_cpu_level(CpuLevel level) {
  if (level > cpu_best_level())
    fail("cpu level {}: this CPU ({}) supports at most {}", level_name(level), cpu_name(),
         level_name(cpu_best_level()));
  current_level.store((int)level);
}

std::string cpu_name() {
  const Cpu& cpu = this_cpu();
  std::string brand = cpu.brand;
  const size_t first = brand.find_first_not_of(' '), last = brand.find_last_not_of(' ');
  brand = first == std::string::npos ? "unknown CPU" : brand.substr(first, last - first + 1);
#if defined(__x86_64__)
  return fmt::format("{}, family {}, model {}", brand, cpu.family, cpu.model);
#else
  return brand;
#endif
}

std::string cpu_summary() {
  const CpuLevel level = cpu_level(), best = cpu_best_level();
  std::string line = fmt::format("{} ({})", level_name(level), cpu_name());
  if (level != best) line += fmt::format("; XSA_CPU caps this CPU's {}", level_name(best));
  return line;
}

}  // namespace xsa
