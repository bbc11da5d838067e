// The processes of one data-parallel run and the collectives training needs: over MPI when a
// launcher (mpirun, mpiexec, srun) started xsa, else a world of one process in which every
// collective is a no-op. Every sum adds the ranks' contributions in rank order (the ranks exchange
// their parts, then each adds them up itself), so a run's numbers depend neither on timing nor on
// the algorithms the MPI library picks, and every rank gets the same bits.
// Buffers are host memory (the CPU backend's); a device's buffers go through train/device_comm.h
// (NCCL on GPUs, or staged through host memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace xsa {

// A contiguous slice [begin, end) of an n-element buffer.
struct ShardRange {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const { return 0; }
  virtual int size() const { return 1; }
  // Ranks of the job on this machine (that share its cores).
  virtual int local_size() const { return 1; }
  bool is_root() const { return rank() == 0; }

  // The slice of an n-element buffer that rank r owns: equal shares rounded up to 16 elements (64
  // bytes, so every shard but the first starts cache-line aligned); the last ones may be shorter
  // or empty.
  ShardRange shard(size_t n, int r) const;
  ShardRange my_shard(size_t n) const { return shard(n, rank()); }

  // In place: afterwards this rank's shard of `values` holds the sum over ranks (in rank order);
  // the rest of `values` is unchanged.
  virtual void reduce_scatter(float* values, size_t n) {}
  // In place: every rank's shard of `values` to every rank.
  virtual void all_gather(float* values, size_t n) {}
  // Both: every rank gets the sum of `values` over ranks.
  void all_reduce(float* values, size_t n);
  // all_reduce in the background: the sum starts now and is complete once finish_all_reduces()
  // returns; until then neither `values` nor another collective may be touched. Sums started one
  // after the other run in that order (every rank must start the same ones), each element's in
  // rank order as above, so the bits equal one all_reduce over the whole buffer. The base class
  // sums at once.
  virtual void start_all_reduce(float* values, size_t n) { all_reduce(values, n); }
  virtual void finish_all_reduces() {}
  // Element-wise sums over ranks, added in rank order, on every rank.
  virtual void all_reduce(double* values, size_t n) {}
  double sum(double value);
  // The root's `shard`-sized slices to the ranks: rank r's shard of the root's `full` into r's
  // `mine` (full is read on the root only).
  virtual void scatter_shards(const float* full, float* mine, size_t n, int root = 0);
  // The opposite: every rank's `mine` into its shard of `full` on the root.
  virtual void gather_shards(const float* mine, float* full, size_t n, int root = 0);
  // The root's bytes to every rank.
  virtual void broadcast(void* data, size_t bytes, int root = 0) {}
  // The root's text to every rank (returned; `text` is read on the root only).
  std::string broadcast(std::string text, int root = 0);
  // Every rank's text, in rank order, on every rank.
  virtual std::vector<std::string> all_gather(const std::string& text) { return {text}; }
};

// The process's communicator: MPI's world once join_launched_job() found a launcher, else a world
// of one.
Comm& world_comm();

// Joins the job when a launcher started this process (the variables mpirun, mpiexec and srun set);
// otherwise does nothing. Call once, first thing in main. Fails when a launcher started several
// tasks but xsa was built without MPI, or srun started tasks without an MPI plugin.
void join_launched_job(int* argc, char*** argv);
// Leaves the job (every rank must call it, after its last collective).
void leave_job();
// Ends every process of the job with `code` at once (after an error on one rank).
[[noreturn]] void abort_job(int code);
// Whether stdout is a terminal someone watches, so progress may redraw one line with '\r': not
// under a launcher, which hands each rank a pseudo-terminal even when its output goes to a file.
bool stdout_is_interactive();
// Whether this build speaks MPI, and the library's version line.
bool built_with_mpi();
std::string mpi_library_version();

}  // namespace xsa
