#include "xsa/train/device_comm.h"

#include <map>
#include <mutex>

#include "xsa/util/error.h"

namespace xsa {

float* DeviceComm::staging(size_t n) {
  if (staging_.size() < n) staging_.resize(n);
  return staging_.data();
}

std::vector<BufferSlice> DeviceComm::shards(size_t n) const {
  std::vector<BufferSlice> all(size());
  for (int r = 0; r < size(); r++) all[r] = {shard(n, r).begin, shard(n, r).end};
  return all;
}

std::string DeviceComm::describe() const {
  return direct_ ? direct_->describe() : "staged through host memory (MPI)";
}

void DeviceComm::reduce_scatter(float* values, size_t n) {
  if (direct_) return direct_->reduce_scatter(values, shards(n));
  float* h = staging(n);
  device_.to_host(h, values, n);
  host_.reduce_scatter(h, n);
  const ShardRange s = my_shard(n);
  device_.from_host(values + s.begin, h + s.begin, s.size());
}

void DeviceComm::all_gather(float* values, size_t n) {
  if (direct_) return direct_->all_gather(values, shards(n));
  float* h = staging(n);
  const ShardRange s = my_shard(n);
  device_.to_host(h + s.begin, values + s.begin, s.size());
  host_.all_gather(h, n);
  device_.from_host(values, h, n);
}

void DeviceComm::start_all_reduce(float* values, size_t n) {
  if (direct_) return direct_->all_reduce(values, n);
  float* h = staging(n);
  device_.to_host(h, values, n);
  host_.all_reduce(h, n);
  device_.from_host(values, h, n);
}

void DeviceComm::scatter_shards(const float* full, float* mine, size_t n, int root) {
  const ShardRange s = my_shard(n);
  float* h = staging(s.size());
  host_.scatter_shards(full, h, n, root);
  device_.from_host(mine, h, s.size());
}

void DeviceComm::gather_shards(const float* mine, float* full, size_t n, int root) {
  const ShardRange s = my_shard(n);
  float* h = staging(s.size());
  device_.to_host(h, mine, s.size());
  host_.gather_shards(h, full, n, root);
}

void DeviceComm::broadcast_device(float* values, size_t n, int root) {
  if (direct_) return direct_->broadcast(values, n, root);
  float* h = staging(n);
  if (rank() == root) device_.to_host(h, values, n);
  host_.broadcast(h, n * sizeof(float), root);
  device_.from_host(values, h, n);
}

DeviceCollectives* device_collectives(Comm& host, Backend<float>& device, const std::string& comm) {
  if (comm == "mpi" || device.host_addressable()) return nullptr;
  // Kept to the end of the process, as the backends are (a communicator's teardown after the
  // device's runtime has gone would be undefined); a device without collectives, with its reason.
  struct Opened {
    std::unique_ptr<DeviceCollectives> collectives;
    std::string why;
  };
  static std::mutex mutex;
  static auto* opened = new std::map<const Backend<float>*, Opened>;
  std::lock_guard lock(mutex);
  auto [at, fresh] = opened->try_emplace(&device);
  if (fresh) {
    const CollectiveJob job{host.rank(), host.size(),
                            [&host](void* data, size_t bytes) { host.broadcast(data, bytes, 0); }};
    at->second.collectives = device.open_collectives(job, &at->second.why);
  }
  if (!at->second.collectives && comm == "nccl") fail("--comm nccl: {}", at->second.why);
  return at->second.collectives.get();
}

}  // namespace xsa
