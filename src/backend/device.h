// Choosing where a run computes: the CPU (fp32, or bf16 products through oneDNN) or an NVIDIA GPU
// through the CUDA module (backend/cuda/plugin.h), opened on first use.
#pragma once

#include <string>

#include "xsa/backend/backend.h"
#include "xsa/util/precision.h"

namespace xsa {

struct BackendOptions {
  // cpu, cuda, cuda:N (GPU N), auto (a GPU when one works), or isolated (the CPU's kernels on
  // memory host code cannot touch: a test device for the backend seam)
  std::string device = "cpu";
  Precision precision = Precision::fp32;  // util/precision.h
  bool tf32 = false;                      // fp32 products on a GPU may use TF32 tensor cores
  bool deterministic = false;             // a GPU's attention backward without atomics
};

// Throws Error naming a device value that is not one of those above.
void validate_device(const std::string& device);
// --comm, how the ranks of a job on GPUs sum (train/device_comm.h): auto (NCCL where the CUDA
// module has it, else MPI), nccl, or mpi. Throws Error for another value, or nccl off a GPU.
void validate_comm_choice(const std::string& comm, const std::string& device);
// The backend these options ask for, made once per process and kept. Throws Error with one line
// saying what is missing: a build without CUDA, no driver, no GPU, a CPU without bf16 products.
Backend<float>& select_backend(const BackendOptions& options);
// Whether --device cuda can run here (the module, a driver and a GPU); `why` says why not.
bool cuda_available(std::string* why);

}  // namespace xsa
