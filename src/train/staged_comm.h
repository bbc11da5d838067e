// Data parallelism on a device whose memory host code cannot address (a GPU, --device isolated):
// the float collectives of the training step copy the device range to host memory, run the
// process communicator's collective there (MPI, in rank order as always) and copy the result
// back. The same sums, so the same bits as on the CPU; a GPU pays two copies over PCIe per
// collective, which NCCL (not built yet) would avoid.
#pragma once

#include <vector>

#include "xsa/backend/backend.h"
#include "xsa/dist/comm.h"

namespace xsa {

class StagedComm final : public Comm {
 public:
  StagedComm(Comm& host, Backend<float>& device) : host_(host), device_(device) {}

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  int local_size() const override { return host_.local_size(); }

  // `values` on the device.
  void reduce_scatter(float* values, size_t n) override;
  void all_gather(float* values, size_t n) override;
  // Summed at once (no overlap): complete when it returns.
  void start_all_reduce(float* values, size_t n) override;
  // `full` on the host (the root's), `mine` on the device.
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

 private:
  float* staging(size_t n);

  Comm& host_;
  Backend<float>& device_;
  std::vector<float> staging_;
};

}  // namespace xsa
