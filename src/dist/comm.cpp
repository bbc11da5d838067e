#include "xsa/dist/comm.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "xsa/util/error.h"

#ifdef XSA_WITH_MPI
#define OMPI_SKIP_MPICXX 1  // the C interface only: no link to the deprecated C++ bindings
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace xsa {

ShardRange Comm::shard(size_t n, int r) const {
  const size_t W = (size_t)size();
  const size_t per = (n + W - 1) / W;
  const size_t share = (per + 15) / 16 * 16;
  const size_t begin = std::min(n, share * (size_t)r);
  return {begin, std::min(n, begin + share)};
}

void Comm::all_reduce(float* values, size_t n) {
  reduce_scatter(values, n);
  all_gather(values, n);
}

double Comm::sum(double value) {
  all_reduce(&value, 1);
  return value;
}

std::string Comm::broadcast(std::string text, int root) {
  uint64_t len = text.size();
  broadcast(&len, sizeof len, root);
  text.resize(len);
  broadcast(text.data(), len, root);
  return text;
}

void Comm::scatter_shards(const float* full, float* mine, size_t n, int root) {
  const ShardRange s = my_shard(n);
  std::copy(full + s.begin, full + s.end, mine);
}

void Comm::gather_shards(const float* mine, float* full, size_t n, int root) {
  const ShardRange s = my_shard(n);
  std::copy(mine, mine + s.size(), full + s.begin);
}

namespace {

Comm single_process;
Comm* world = &single_process;

#ifdef XSA_WITH_MPI

int as_count(size_t n) {
  XSA_CHECK(n <= (size_t)INT_MAX, "{} elements exceed one MPI message", n);
  return (int)n;
}

void check_mpi(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  fail("{} failed: {}", what, std::string(text, len));
}

class MpiComm final : public Comm {
 public:
  explicit MpiComm(bool threads_allowed) : background_(threads_allowed) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_size() const override { return local_size_; }
  ~MpiComm() override { stop(); }

  // One thread of ours makes the background sums, in the order they were started; the calling
  // thread makes no MPI call until finish_all_reduces() (MPI_THREAD_SERIALIZED suffices).
  void start_all_reduce(float* values, size_t n) override {
    if (!background_) return Comm::all_reduce(values, n);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
    jobs_.push_back({values, n});
    wake_.notify_all();
  }
  void finish_all_reduces() override {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return jobs_.empty() && !busy_; });
    if (!error_.empty()) {
      const std::string e = error_;
      error_.clear();
      fail("{}", e);
    }
  }
  // Ends the worker (before MPI_Finalize).
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      wake_.notify_all();
    }
    if (worker_.joinable()) worker_.join();
  }

  // Each rank sends shard j of its buffer to rank j (one all-to-all), then adds the parts it
  // received in rank order. The same bytes travel as in a ring reduce-scatter, (W−1)/W of the
  // buffer per rank.
  void reduce_scatter(float* values, size_t n) override {
    const ShardRange mine = my_shard(n);
    std::vector<int> send_counts(size_), send_at(size_), recv_counts(size_), recv_at(size_);
    for (int r = 0; r < size_; r++) {
      const ShardRange s = shard(n, r);
      send_counts[r] = as_count(s.size());
      send_at[r] = as_count(s.begin);
      recv_counts[r] = as_count(mine.size());
      recv_at[r] = as_count(mine.size() * r);
    }
    parts_.resize(mine.size() * size_);
    check_mpi(MPI_Alltoallv(values, send_counts.data(), send_at.data(), MPI_FLOAT, parts_.data(),
                            recv_counts.data(), recv_at.data(), MPI_FLOAT, MPI_COMM_WORLD),
              "the gradient reduce-scatter (MPI_Alltoallv)");
    float* out = values + mine.begin;
    const size_t m = mine.size();
    std::copy(parts_.data(), parts_.data() + m, out);
    for (int r = 1; r < size_; r++) {
      const float* part = parts_.data() + m * r;
#pragma omp parallel for schedule(static) if (m > 65536)
      for (size_t i = 0; i < m; i++) out[i] += part[i];
    }
  }

  void all_gather(float* values, size_t n) override {
    std::vector<int> counts, at;
    shard_layout(n, counts, at);
    check_mpi(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, values, counts.data(), at.data(),
                             MPI_FLOAT, MPI_COMM_WORLD),
              "the all-gather (MPI_Allgatherv)");
  }

  void all_reduce(double* values, size_t n) override {
    std::vector<double> all(n * size_);
    check_mpi(MPI_Allgather(values, as_count(n), MPI_DOUBLE, all.data(), as_count(n), MPI_DOUBLE,
                            MPI_COMM_WORLD),
              "a sum over ranks (MPI_Allgather)");
    for (size_t i = 0; i < n; i++) {
      double s = all[i];
      for (int r = 1; r < size_; r++) s += all[n * r + i];
      values[i] = s;
    }
  }

  void scatter_shards(const float* full, float* mine, size_t n, int root) override {
    std::vector<int> counts, at;
    shard_layout(n, counts, at);
    check_mpi(MPI_Scatterv(full, counts.data(), at.data(), MPI_FLOAT, mine, counts[rank_],
                           MPI_FLOAT, root, MPI_COMM_WORLD),
              "sending optimizer shards (MPI_Scatterv)");
  }

  void gather_shards(const float* mine, float* full, size_t n, int root) override {
    std::vector<int> counts, at;
    shard_layout(n, counts, at);
    check_mpi(MPI_Gatherv(mine, counts[rank_], MPI_FLOAT, full, counts.data(), at.data(), MPI_FLOAT,
                          root, MPI_COMM_WORLD),
              "collecting optimizer shards (MPI_Gatherv)");
  }

  void broadcast(void* data, size_t bytes, int root) override {
    char* p = (char*)data;
    for (size_t done = 0; done < bytes;) {  // in pieces below MPI's int count
      const size_t piece = std::min(bytes - done, (size_t)1 << 30);
      check_mpi(MPI_Bcast(p + done, (int)piece, MPI_BYTE, root, MPI_COMM_WORLD),
                "a broadcast (MPI_Bcast)");
      done += piece;
    }
  }

  std::vector<std::string> all_gather(const std::string& text) override {
    int len = as_count(text.size());
    std::vector<int> lens(size_), at(size_);
    check_mpi(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD),
              "exchanging texts (MPI_Allgather)");
    size_t total = 0;
    for (int r = 0; r < size_; r++) at[r] = as_count(total), total += lens[r];
    std::string all(total, '\0');
    check_mpi(MPI_Allgatherv(text.data(), len, MPI_CHAR, all.data(), lens.data(), at.data(),
                             MPI_CHAR, MPI_COMM_WORLD),
              "exchanging texts (MPI_Allgatherv)");
    std::vector<std::string> out;
    for (int r = 0; r < size_; r++) out.push_back(all.substr(at[r], lens[r]));
    return out;
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping
      const auto [values, n] = jobs_.front();
      jobs_.pop_front();
      busy_ = true;
      lock.unlock();
      try {
        Comm::all_reduce(values, n);
      } catch (const std::exception& e) {
        lock.lock();
        error_ = e.what();
        lock.unlock();
      }
      lock.lock();
      busy_ = false;
      done_.notify_all();
    }
  }

  // Each rank's shard of an n-element buffer as MPI's counts and displacements.
  void shard_layout(size_t n, std::vector<int>& counts, std::vector<int>& at) const {
    counts.resize(size_), at.resize(size_);
    for (int r = 0; r < size_; r++) {
      counts[r] = as_count(shard(n, r).size());
      at[r] = as_count(shard(n, r).begin);
    }
  }

  int rank_ = 0, size_ = 1, local_size_ = 1;
  bool background_ = false;  // MPI allows calls from our worker thread
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<std::pair<float*, size_t>> jobs_;
  bool busy_ = false, stopping_ = false;
  std::string error_;
  std::vector<float> parts_;  // the reduce-scatter's received parts
};

std::unique_ptr<MpiComm> mpi_world;
#endif

// The variables an MPI launcher sets (Open MPI's mpirun, MPICH's mpiexec, srun with a PMI or PMIx
// plugin): how many tasks it started; 0 when none did.
int launched_tasks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* v = std::getenv(name)) return std::max(1, std::atoi(v));
  if (std::getenv("PMIX_RANK") || std::getenv("PMI_RANK")) return 1;  // size unknown: join
  return 0;
}

// srun without an MPI plugin starts every task as a process of its own: each would train alone
// and write the same run folder.
int srun_tasks_without_mpi() {
  const char* v = std::getenv("SLURM_STEP_NUM_TASKS");  // set by srun for the tasks of a step
  return v && std::getenv("SLURM_STEP_ID") && std::getenv("SLURM_PROCID") ? std::atoi(v) : 0;
}

bool joined = false;

}  // namespace

bool stdout_is_interactive() {
  return isatty(STDOUT_FILENO) && launched_tasks() == 0;
}

Comm& world_comm() {
  return *world;
}

void join_launched_job(int* argc, char*** argv) {
  const int tasks = launched_tasks();
  if (tasks == 0 && srun_tasks_without_mpi() > 1)
    fail(
        "srun started {} tasks without an MPI plugin, so each would train alone: use srun "
        "--mpi=pmix (or pmi2)",
        srun_tasks_without_mpi());
  if (tasks == 0 || joined) return;
#ifdef XSA_WITH_MPI
  int provided = 0;
  check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "MPI_Init");
  // Errors come back as codes (and become one line), not as MPI's own abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  joined = true;
  mpi_world = std::make_unique<MpiComm>(provided >= MPI_THREAD_SERIALIZED);
  world = mpi_world.get();
  if (world->size() == 1 && tasks > 1)
    fail(
        "the launcher started {} tasks but MPI sees this one alone: under Slurm use srun "
        "--mpi=pmix (or pmi2), or start xsa with the mpirun of the MPI it was built with",
        tasks);
#else
  if (tasks > 1)
    fail(
        "started as one of {} tasks, but this xsa was built without MPI (install "
        "libopenmpi-dev and rebuild)",
        tasks);
#endif
}

void leave_job() {
#ifdef XSA_WITH_MPI
  if (joined) {
    mpi_world->stop();
    MPI_Finalize();
    joined = false;
    world = &single_process;
  }
#endif
}

void abort_job(int code) {
#ifdef XSA_WITH_MPI
  if (joined && world->size() > 1) {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
  }
#endif
  std::exit(code);
}

bool built_with_mpi() {
#ifdef XSA_WITH_MPI
  return true;
#else
  return false;
#endif
}

std::string mpi_library_version() {
#ifdef XSA_WITH_MPI
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, len);
  return s.substr(0, s.find_first_of(",\n"));
#else
  return "";
#endif
}

}  // namespace xsa
