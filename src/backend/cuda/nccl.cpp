#include "xsa/backend/cuda/nccl.h"

#include "xsa/util/error.h"

#if XSA_NCCL
#include <nccl.h>
#endif

namespace xsa::cuda {

#if XSA_NCCL
namespace {

void check(ncclResult_t status, const char* call) {
  if (status != ncclSuccess)
    throw Error(std::string("NCCL error in ") + call + ": " + ncclGetErrorString(status) +
                " (NCCL_DEBUG=WARN says more)");
}
#define XSA_NCCL_CALL(call) check((call), #call)

// Uneven shards (Comm::shard rounds to 16 floats, the last ones shorter or empty) go as one
// grouped reduce or broadcast per rank, in place: NCCL's reduce-scatter and all-gather take equal
// counts only.
class NcclCollectives final : public DeviceCollectives {
 public:
  NcclCollectives(const CollectiveJob& job, int device, cudaStream_t stream) : stream_(stream) {
    ncclUniqueId id{};
    if (job.rank == 0) XSA_NCCL_CALL(ncclGetUniqueId(&id));
    job.broadcast_from_root(&id, sizeof id);
    if (cudaSetDevice(device) != cudaSuccess)
      throw Error("NCCL: cannot select GPU " + std::to_string(device));
    XSA_NCCL_CALL(ncclCommInitRank(&comm_, job.size, id, job.rank));
    int version = 0;
    ncclGetVersion(&version);
    describe_ = "NCCL " + std::to_string(version / 10000) + "." +
                std::to_string(version / 100 % 100) + "." + std::to_string(version % 100) + ", " +
                std::to_string(job.size) + " rank" + (job.size == 1 ? "" : "s");
  }
  ~NcclCollectives() override {
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
  }
  std::string describe() const override { return describe_; }

  void all_reduce(float* values, size_t n) override {
    if (n == 0) return;
    XSA_NCCL_CALL(ncclAllReduce(values, values, n, ncclFloat, ncclSum, comm_, stream_));
  }
  void reduce_scatter(float* values, const std::vector<BufferSlice>& shards) override {
    XSA_NCCL_CALL(ncclGroupStart());
    for (int r = 0; r < (int)shards.size(); r++)
      if (shards[r].size() > 0)
        XSA_NCCL_CALL(ncclReduce(values + shards[r].begin, values + shards[r].begin,
                                 shards[r].size(), ncclFloat, ncclSum, r, comm_, stream_));
    XSA_NCCL_CALL(ncclGroupEnd());
  }
  void all_gather(float* values, const std::vector<BufferSlice>& shards) override {
    XSA_NCCL_CALL(ncclGroupStart());
    for (int r = 0; r < (int)shards.size(); r++)
      if (shards[r].size() > 0)
        XSA_NCCL_CALL(ncclBroadcast(values + shards[r].begin, values + shards[r].begin,
                                    shards[r].size(), ncclFloat, r, comm_, stream_));
    XSA_NCCL_CALL(ncclGroupEnd());
  }
  void broadcast(float* values, size_t n, int root) override {
    if (n == 0) return;
    XSA_NCCL_CALL(ncclBroadcast(values, values, n, ncclFloat, root, comm_, stream_));
  }

 private:
  cudaStream_t stream_;
  ncclComm_t comm_ = nullptr;
  std::string describe_;
};

}  // namespace

std::unique_ptr<DeviceCollectives> open_nccl(const CollectiveJob& job, int device,
                                             cudaStream_t stream, std::string* why) {
  (void)why;
  return std::make_unique<NcclCollectives>(job, device, stream);
}
#else
std::unique_ptr<DeviceCollectives> open_nccl(const CollectiveJob&, int, cudaStream_t,
                                             std::string* why) {
  if (why)
    *why = "this libxsa_cuda.so was built without NCCL (nccl.h was not found when it was built)";
  return nullptr;
}
#endif

}  // namespace xsa::cuda
