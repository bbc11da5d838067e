// Data parallelism on a device whose memory host code cannot address (a GPU, --device isolated).
// Two ways to sum the training step's float buffers across ranks:
//  - through the device's own collectives (DeviceCollectives: NCCL on GPUs, --comm nccl), on
//    device memory, queued in order with the step's kernels;
//  - staged through host memory (--comm mpi): copy the device range to the host, run the process
//    communicator's collective there (MPI, in rank order as always), copy the result back. The
//    same sums, so the same bits as on the CPU; a GPU pays two copies over PCIe per collective.
// Everything else (sums of doubles, texts, checkpoint shards read or written by the root) goes
// through the host communicator either way.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "xsa/backend/backend.h"
#include "xsa/dist/comm.h"

namespace xsa {

class DeviceComm final : public Comm {
 public:
  // `direct`: the device's collectives, or null to stage through host memory.
  DeviceComm(Comm& host, Backend<float>& device, DeviceCollectives* direct = nullptr)
      : host_(host), device_(device), direct_(direct) {}

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  int local_size() const override { return host_.local_size(); }

  // `values` on the device.
  void reduce_scatter(float* values, size_t n) override;
  void all_gather(float* values, size_t n) override;
  // Queued on the device's stream (NCCL) or summed at once (staged): complete, for every later
  // kernel and copy, when it returns.
  void start_all_reduce(float* values, size_t n) override;
  // `full` on the host (the root's), `mine` on the device: staged through host memory.
  void scatter_shards(const float* full, float* mine, size_t n, int root = 0) override;
  void gather_shards(const float* mine, float* full, size_t n, int root = 0) override;
  // Host memory, as the host communicator's (sums, texts, bytes).
  void all_reduce(double* values, size_t n) override { host_.all_reduce(values, n); }
  void broadcast(void* data, size_t bytes, int root = 0) override {
    host_.broadcast(data, bytes, root);
  }
  std::vector<std::string> all_gather(const std::string& text) override {
    return host_.all_gather(text);
  }
  // The root's n device floats to every rank's `values` (on the device).
  void broadcast_device(float* values, size_t n, int root = 0);

  // "NCCL 2.28.3, 2 ranks" or "staged through host memory (MPI)".
  std::string describe() const;

 private:
  float* staging(size_t n);
  std::vector<BufferSlice> shards(size_t n) const;

  Comm& host_;
  Backend<float>& device_;
  DeviceCollectives* direct_;
  std::vector<float> staging_;
};

// The device's collectives for a job on `device` as --comm asks: opened once per process (every
// rank calls it at the same point) and kept; null for staging through host memory (--comm mpi, a
// world of one, or auto where the device has none). --comm nccl where the device has none throws
// Error with the reason.
DeviceCollectives* device_collectives(Comm& host, Backend<float>& device, const std::string& comm);

}  // namespace xsa
