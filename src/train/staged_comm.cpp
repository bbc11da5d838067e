#include "xsa/train/staged_comm.h"

namespace xsa {

float* StagedComm::staging(size_t n) {
  if (staging_.size() < n) staging_.resize(n);
  return staging_.data();
}

void StagedComm::reduce_scatter(float* values, size_t n) {
  float* h = staging(n);
  device_.to_host(h, values, n);
  host_.reduce_scatter(h, n);
  const ShardRange s = my_shard(n);
  device_.from_host(values + s.begin, h + s.begin, s.size());
}

void StagedComm::all_gather(float* values, size_t n) {
  float* h = staging(n);
  const ShardRange s = my_shard(n);
  device_.to_host(h + s.begin, values + s.begin, s.size());
  host_.all_gather(h, n);
  device_.from_host(values, h, n);
}

void StagedComm::start_all_reduce(float* values, size_t n) {
  float* h = staging(n);
  device_.to_host(h, values, n);
  host_.all_reduce(h, n);
  device_.from_host(values, h, n);
}

void StagedComm::scatter_shards(const float* full, float* mine, size_t n, int root) {
  const ShardRange s = my_shard(n);
  float* h = staging(s.size());
  host_.scatter_shards(full, h, n, root);
  device_.from_host(mine, h, s.size());
}

void StagedComm::gather_shards(const float* mine, float* full, size_t n, int root) {
  const ShardRange s = my_shard(n);
  float* h = staging(s.size());
  device_.to_host(h, mine, s.size());
  host_.gather_shards(h, full, n, root);
}

void StagedComm::broadcast_device(float* values, size_t n, int root) {
  float* h = staging(n);
  if (rank() == root) device_.to_host(h, values, n);
  host_.broadcast(h, n * sizeof(float), root);
  device_.from_host(values, h, n);
}

}  // namespace xsa
