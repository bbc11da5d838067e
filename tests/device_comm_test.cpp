// Data parallelism on devices host code cannot address (train/device_comm.h), without a GPU: the
// slices DeviceComm hands a device's collectives (NCCL) against Comm::shard, the staged path's
// copies on a world of three simulated in one process, the choice of --comm, and the table of GPU
// peaks (backend/gpu_peaks.h) by device name. NCCL itself runs in cuda_test (one GPU) and in
// scripts/gpu_check.sh.
#include "xsa/train/device_comm.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "xsa/backend/device.h"
#include "xsa/backend/gpu_peaks.h"

namespace xsa {
namespace {

// Rank `rank` of a world of `size` in which every rank holds what this one holds: a sum over
// ranks is `size` times the values, a gather copies nothing new.
class MirrorComm final : public Comm {
 public:
  MirrorComm(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void reduce_scatter(float* values, size_t n) override {
    const ShardRange s = my_shard(n);
    for (size_t i = s.begin; i < s.end; i++) values[i] *= (float)size_;
  }
  void all_gather(float*, size_t) override {}
  void all_reduce(double* values, size_t n) override {
    for (size_t i = 0; i < n; i++) values[i] *= size_;
  }
  void broadcast(void*, size_t bytes, int) override { broadcasts.push_back(bytes); }
  std::vector<size_t> broadcasts;

 private:
  int rank_, size_;
};

// Records what it is asked to do, and changes nothing.
class RecordingCollectives final : public DeviceCollectives {
 public:
  std::string describe() const override { return "recording"; }
  void all_reduce(float*, size_t n) override { calls.push_back("all_reduce " + std::to_string(n)); }
  void reduce_scatter(float*, const std::vector<BufferSlice>& s) override {
    calls.push_back("reduce_scatter"), slices = s;
  }
  void all_gather(float*, const std::vector<BufferSlice>& s) override {
    calls.push_back("all_gather"), slices = s;
  }
  void broadcast(float*, size_t n, int root) override {
    calls.push_back("broadcast " + std::to_string(n) + " from " + std::to_string(root));
  }
  std::vector<std::string> calls;
  std::vector<BufferSlice> slices;
};

// The device's collectives get every rank's shard as Comm::shard makes it (the same slices the
// staged path and ZeRO-1 use), contiguous and covering the buffer; the float sums go to the
// device, everything else to the host.
TEST(DeviceComm, HandsTheDeviceEveryRanksShard) {
  for (size_t n : {size_t(1), size_t(47), size_t(1000003)}) {
    MirrorComm host(1, 3);
    RecordingCollectives device;
    DeviceComm comm(host, cpu_backend<float>(), &device);
    std::vector<float> values(n, 1.0f);
    comm.reduce_scatter(values.data(), n);
    ASSERT_EQ(device.slices.size(), 3u);
    size_t next = 0;
    for (int r = 0; r < 3; r++) {
      EXPECT_EQ(device.slices[r].begin, host.shard(n, r).begin) << n << " rank " << r;
      EXPECT_EQ(device.slices[r].end, host.shard(n, r).end) << n << " rank " << r;
      EXPECT_EQ(device.slices[r].begin, std::min(next, n));
      next = device.slices[r].end;
    }
    EXPECT_EQ(next, n);
    comm.all_gather(values.data(), n);
    comm.start_all_reduce(values.data(), n);
    comm.broadcast_device(values.data(), n, 0);
    EXPECT_EQ(device.calls, (std::vector<std::string>{
                                "reduce_scatter", "all_gather", "all_reduce " + std::to_string(n),
                                "broadcast " + std::to_string(n) + " from 0"}));
    EXPECT_EQ(values, std::vector<float>(n, 1.0f));  // nothing summed on the host
    double loss = 2.0;
    comm.all_reduce(&loss, 1);
    EXPECT_EQ(loss, 6.0);
    EXPECT_EQ(comm.describe(), "recording");
  }
}

// Staged through host memory on a device host code cannot address (the isolated device): the sum
// comes back into this rank's shard only, the gather and broadcast go through the host.
TEST(DeviceComm, StagedPathCopiesThroughTheHost) {
  Backend<float>& device = isolated_backend(cpu_backend<float>());
  MirrorComm host(2, 3);
  DeviceComm comm(host, device);
  const size_t n = 1000;
  std::vector<float> start(n);
  for (size_t i = 0; i < n; i++) start[i] = (float)i;
  DeviceBuffer<float> buffer(device, n, MemoryUse::gradients);
  device.from_host(buffer.data(), start.data(), n);
  comm.reduce_scatter(buffer.data(), n);
  std::vector<float> after(n);
  device.to_host(after.data(), buffer.data(), n);
  const ShardRange mine = host.shard(n, 2);
  for (size_t i = 0; i < n; i++)
    ASSERT_EQ(after[i], i >= mine.begin && i < mine.end ? 3.0f * i : (float)i) << i;
  comm.broadcast_device(buffer.data(), n);
  EXPECT_EQ(host.broadcasts, std::vector<size_t>{n * sizeof(float)});
  EXPECT_EQ(comm.describe(), "staged through host memory (MPI)");
}

TEST(DeviceComm, CommChoiceIsChecked) {
  EXPECT_NO_THROW(validate_comm_choice("auto", "cpu"));
  EXPECT_NO_THROW(validate_comm_choice("mpi", "cuda"));
  EXPECT_NO_THROW(validate_comm_choice("nccl", "cuda:1"));
  EXPECT_THROW(validate_comm_choice("nccl", "cpu"), Error);
  EXPECT_THROW(validate_comm_choice("nccl", "isolated"), Error);
  try {
    validate_comm_choice("gloo", "cuda");
    ADD_FAILURE() << "gloo taken";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--comm gloo is not known (auto, nccl or mpi)");
  }
  // A device without collectives: auto stages through host memory, nccl is refused in one line.
  MirrorComm host(0, 2);
  Backend<float>& isolated = isolated_backend(cpu_backend<float>());
  EXPECT_EQ(device_collectives(host, isolated, "auto"), nullptr);
  EXPECT_EQ(device_collectives(host, isolated, "mpi"), nullptr);
  try {
    device_collectives(host, isolated, "nccl");
    ADD_FAILURE() << "nccl opened on the isolated device";
  } catch (const Error& e) {
    const std::string line = e.what();
    EXPECT_EQ(line.rfind("--comm nccl: ", 0), 0u) << line;
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  }
}

// The row each name picks, and the clock-derived value for a model not in the table.
TEST(GpuPeaks, VendorFiguresByNameElseDerivedFromClocks) {
  struct Case {
    const char* name;
    double bf16_tflops;
    const char* row;
  };
  for (const Case& c :
       {Case{"NVIDIA H200", 989, "H200"}, Case{"NVIDIA H200 NVL", 835, "H200 NVL"},
        Case{"NVIDIA H100 80GB HBM3", 989, "H100"}, Case{"NVIDIA H100 PCIe", 756, "H100 PCIe"},
        Case{"NVIDIA A100-SXM4-80GB", 312, "A100"}, Case{"NVIDIA A100 80GB PCIe", 312, "A100"},
        Case{"NVIDIA L40S", 362, "L40S"}, Case{"NVIDIA L4", 121, "L4"},
        Case{"NVIDIA A10", 125, "A10"}}) {
    const PeakFlops p = gpu_peak_flops(c.name, 1, 1000, 90);
    EXPECT_EQ(p.bf16, c.bf16_tflops * 1e12) << c.name;
    EXPECT_EQ(p.source, std::string("NVIDIA's data sheet for ") + c.row) << c.name;
    EXPECT_GT(p.tf32, 0) << c.name;
    EXPECT_GT(p.fp32, 0) << c.name;
  }
  // Not in the table: 128 SMs × 2.52 GHz × 512 dense bf16 FLOPs per SM and clock (Ada).
  const PeakFlops ada = gpu_peak_flops("NVIDIA GeForce RTX 4090", 128, 2520000, 89);
  EXPECT_DOUBLE_EQ(ada.bf16, 128 * 2.52e9 * 512);
  EXPECT_DOUBLE_EQ(ada.tf32, ada.bf16 / 2);
  EXPECT_DOUBLE_EQ(ada.fp32, 128 * 2.52e9 * 256);
  EXPECT_NE(ada.source.find("derived from 128 SMs at 2520 MHz"), std::string::npos) << ada.source;
}

}  // namespace
}  // namespace xsa
