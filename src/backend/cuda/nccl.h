// Data parallelism on GPU memory: DeviceCollectives (backend.h) through NCCL, one communicator
// per process and GPU, bootstrapped as llm.c does it: rank 0 makes NCCL's unique id and the host
// communicator (MPI) sends it to every rank. Built where nccl.h was found (XSA_NCCL); else
// open_nccl says so.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "xsa/backend/backend.h"

namespace xsa::cuda {

// Every rank of `job` calls it at the same point. Null with `why` where this module was built
// without NCCL; a failing NCCL call throws Error.
std::unique_ptr<DeviceCollectives> open_nccl(const CollectiveJob& job, int device,
                                             cudaStream_t stream, std::string* why);

}  // namespace xsa::cuda
