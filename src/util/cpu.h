// The CPU's instruction sets, and the level xsa's own kernels run at.
//
// The portable build's code is compiled for x86-64-v3 (AVX2 and FMA: Intel since Haswell, AMD
// since Zen 1); the kernels of ops/ are compiled a second time for AVX-512 and chosen at run time
// (ops/kernel_level.h). A CPU below the build's baseline is refused with one line when the program
// or library loads, before any of that code runs. XSA_CPU=avx2|avx512|avx512_bf16|amx lowers the
// level for checking: xsa's kernels and oneDNN's products then run as on a CPU of that level
// (OpenBLAS picks its own kernels; OPENBLAS_CORETYPE sets them).
#pragma once

#include <string>

namespace xsa {

// Each level includes the ones below it.
//   baseline     a CPU that is not x86-64: the build's own flags
//   avx2         AVX2, FMA, BMI1/2, F16C, LZCNT, MOVBE (x86-64-v3)
//   avx512       + AVX-512 F, BW, DQ, VL, CD (x86-64-v4): xsa's AVX-512 kernels
//   avx512_bf16  + AVX512_BF16: bf16 dot products and conversions (--precision bf16)
//   amx          + AMX-BF16 tiles, used by oneDNN's bf16 products
enum class CpuLevel { baseline, avx2, avx512, avx512_bf16, amx };

const char* level_name(CpuLevel level);
// The highest level this CPU and its operating system support.
CpuLevel cpu_best_level();
// The level xsa's kernels run at: the best one, or XSA_CPU's (never above the best; a value above
// it, or not a level, stops the program at load with one line).
CpuLevel cpu_level();
// Runs xsa's own kernels at `level` from now on, in this process (tests compare levels this way).
// oneDNN keeps the instruction sets it chose when it was first used. Throws xsa::Error above
// cpu_best_level().
void set_cpu_level(CpuLevel level);
// The CPU's name as it reports it, with its family and model: "AMD EPYC (family 25, model 17)".
std::string cpu_name();
// One line for run headers and benchmarks: "avx512_bf16 (AMD EPYC, family 25, model 17)", with
// "; XSA_CPU caps this CPU's <best>" when the level was lowered.
std::string cpu_summary();

}  // namespace xsa
