// After each kernel launch: a bad configuration shows at once (cudaGetLastError); a fault inside
// the kernel (an illegal address, a trap) shows only at the next synchronisation, in whichever
// call makes it. With XSA_CUDA_CHECK=1 in the environment (the GPU tests and scripts/gpu_check.sh
// set it) every launch is followed by a synchronisation, so the error names the kernel that
// faulted and its shape; a training step then runs a few per cent slower.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "xsa/ops/attention.h"

namespace xsa::cuda {

// Whether XSA_CUDA_CHECK is set (and not "0"); read once per process.
bool checked_launches();

// Throws Error: "CUDA error in KERNEL (SHAPE): CUDA's words", and how to name the kernel where the
// check was off.
[[noreturn]] void launch_failed(const char* kernel, const std::string& shape, cudaError_t status);

// "B 2 T 77 C 128 H 2 Hkv 2 D 64, xsa, sinks": an attention call's shape for such a line.
std::string attention_shape(const ops::AttentionArgs<float>& args);

// `shape` is a callable returning the launch's shape as text, called only on failure.
template <typename ShapeText>
void launched(cudaStream_t stream, const char* kernel, ShapeText&& shape) {
  cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess && checked_launches()) status = cudaStreamSynchronize(stream);
  if (status != cudaSuccess) launch_failed(kernel, shape(), status);
}

// Kernels above 48 KiB of dynamic shared memory opt in, once per kernel and device (each GPU of a
// process has its own limit: 227 KiB on Hopper, 163 KiB on A100, 99 KiB on Ada): up to max_bytes,
// or the current device's opt-in limit when lower. Returns that limit.
size_t opt_in_shared_memory(const void* kernel, size_t max_bytes);
// Throws Error: the kernel needs `bytes` for this shape where the device allows `limit`.
[[noreturn]] void shared_memory_refused(const char* kernel, const std::string& shape, size_t bytes,
                                        size_t limit);
// Before a launch of `kernel` with `launch_bytes` of dynamic shared memory.
template <typename ShapeText>
void fit_shared_memory(const void* kernel, size_t max_bytes, size_t launch_bytes, const char* name,
                       ShapeText&& shape) {
  const size_t limit = opt_in_shared_memory(kernel, max_bytes);
  if (launch_bytes > limit) shared_memory_refused(name, shape(), launch_bytes, limit);
}

}  // namespace xsa::cuda
