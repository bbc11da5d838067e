// The CUDA backend is a loadable module (libxsa_cuda.so) so that xsa itself links no CUDA library:
// a CPU run never loads cuBLAS (a third of a second per process), and the same binary runs on a
// machine without CUDA. backend/device.cpp opens the module on --device cuda/auto and calls these
// two functions; the module and the engine are built together (kCudaPluginAbi guards a mismatch).
#pragma once

#include <cstddef>

#include "xsa/backend/backend.h"
#include "xsa/util/precision.h"

namespace xsa {

// 2: peak_flops(), open_collectives(); 3: the rivals' ops; 4: the precision as ops::Precision, fp32
// by default as on the CPU; the kernel table's classifier row.
constexpr int kCudaPluginAbi = 4;

struct CudaOptions {
  int abi = kCudaPluginAbi;
  int device = 0;                         // GPU ordinal
  Precision precision = Precision::fp32;  // bf16: products in bf16 with fp32 accumulation
  bool tf32 = false;                      // fp32 products may use TF32 tensor cores
  bool deterministic = false;  // attention's backward without atomics (all else always is)
};

// What the machine has, for --device auto and for errors: the number of GPUs, or −1 with `why`
// (no driver, a driver older than the runtime, no device) written into why[0 … why_size).
using CudaProbeFn = int (*)(char* why, size_t why_size);
// A backend on options.device, or null with `why` written (the module's errors as one line).
using CudaOpenFn = Backend<float>* (*)(const CudaOptions& options, char* why, size_t why_size);

}  // namespace xsa

extern "C" {
int xsa_cuda_probe(char* why, size_t why_size);
xsa::Backend<float>* xsa_cuda_open(const xsa::CudaOptions& options, char* why, size_t why_size);
}
