// OpenBLAS picks its kernels by CPU model number, and older builds (Debian 12's 0.3.21) do not know
// newer CPUs: they fall back to generic SSE3 kernels ("Prescott"), several times slower, silently.
// ensure_fast_blas() checks the choice against the CPU's own feature flags and, when OpenBLAS chose
// kernels older than the CPU supports, restarts the process with OPENBLAS_CORETYPE set (the
// library reads it only when it loads). A user's own OPENBLAS_CORETYPE is always respected.
#pragma once

#include <string>

namespace xsa {

// Call first in main(). May not return (it re-executes the program once).
void ensure_fast_blas(char** argv);

std::string blas_core();  // the kernels OpenBLAS runs, e.g. "SkylakeX"
// The BLAS that runs cblas_sgemm in this process, for reports: "OpenBLAS 0.3.21, Cooperlake kernels
// (OpenBLAS's own detection)", or the file of another library put first (LD_PRELOAD=libblis.so.4,
// as the tests' second BLAS is).
std::string blas_summary();
std::string blas_origin();  // how they were chosen: "OpenBLAS's detection", "set by xsa (...)", ...
// "SkylakeX" (AVX-512 F/BW/DQ/VL), "Haswell" (AVX2 + FMA) or "" (nothing to correct towards).
std::string best_blas_core_for_cpu();
// The kernels to force instead of OpenBLAS's choice `detected` on a CPU whose best is `best`, or ""
// when OpenBLAS's choice is already AVX2-class or better.
std::string blas_core_correction(const std::string& detected, const std::string& best);

// One line for benchmark output when the kernels in use are a class below the CPU's best because
// OPENBLAS_CORETYPE asks for them (AVX2 kernels on an AVX-512 CPU): what runs, why, and what the
// CPU supports; "" otherwise. xsa never overrides the variable. `in_use` and `pinned` are the
// kernel names (pinned: the variable's value, "" when unset), `best` as best_blas_core_for_cpu().
std::string blas_kernels_note(const std::string& in_use, const std::string& pinned,
                              const std::string& best);

}  // namespace xsa
