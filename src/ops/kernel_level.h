// The CPU level a kernel file is compiled for. Each kernel file of ops/ (CMakeLists.txt's
// XSA_KERNEL_FILES) is compiled twice: once with the build's own flags into xsa::ops::baseline
// (x86-64-v3 in the portable build: AVX2 and FMA), once with XSA_KERNEL_LEVEL_AVX512 defined into
// xsa::ops::avx512; the CPU backend is built once per level on them, and xsa::ops's functions pick
// one per call from util/cpu.h's level (ops/ops.h). Functions that
// need more than their file's level (AVX512_BF16's dot products) carry their own target attribute
// and are reached only after a check of cpu_level().
//
// A kernel file includes this header after every other include, defines its kernels inside
// `namespace xsa::ops::XSA_LEVEL`, and ends with XSA_LEVEL_END. Only what is defined between the
// two is compiled for the level: the inline functions and templates of the headers included before
// (the standard library's among them) keep the build's baseline wherever they are emitted on their
// own, so the linker can never hand an AVX-512 copy of such a shared function to code running on
// an AVX2 CPU. Inlined into a kernel of the level, they become part of it. GCC gives the level's
// target to the functions OpenMP outlines from a kernel's parallel regions too; clang 14 (the
// sanitizer build) does not, so there those regions run AVX2 code at either level.
#include "xsa/ops/ops.h"

#if defined(XSA_KERNEL_LEVEL_AVX512)
#define XSA_LEVEL avx512
#define XSA_LEVEL_IS_AVX512 1
#if defined(__clang__)
#pragma clang attribute push( \
    __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512cd"))), apply_to = function)
#define XSA_LEVEL_END _Pragma("clang attribute pop")
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512cd")
#define XSA_LEVEL_END _Pragma("GCC pop_options")
#endif
#else
#define XSA_LEVEL baseline
#define XSA_LEVEL_IS_AVX512 0
#define XSA_LEVEL_END
#endif

// The level's own declarations (ops/ops.h, from src/ops/op_list.txt), so that a kernel calling
// another unqualified (attention calls xsa_forward) calls the same level's directly.
