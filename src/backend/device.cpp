#include "xsa/backend/device.h"

#include <dlfcn.h>
#include <errno.h>  // program_invocation_name

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "xsa/backend/cuda/plugin.h"
#include "xsa/util/error.h"

namespace xsa {
namespace {

// Whether this machine has an NVIDIA GPU at all, asked of the driver's device files: without one
// the CUDA module (with cuBLAS, cuDNN and NCCL behind it, loaded in about half a second) is not
// opened, so that everything that asks (every GPU test, --device auto) hears no in milliseconds.
bool nvidia_device_present(std::string* why) {
  std::error_code ec;
  // /dev/dxg: WSL 2's GPU, which CUDA reaches without the /dev/nvidia* files.
  if (std::getenv("XSA_CUDA_MODULE") || std::filesystem::exists("/dev/nvidiactl", ec) ||
      std::filesystem::exists("/dev/nvidia0", ec) || std::filesystem::exists("/dev/dxg", ec))
    return true;
  if (why) *why = "no NVIDIA GPU on this machine (no /dev/nvidiactl, /dev/nvidia0 or /dev/dxg)";
  return false;
}

// The CUDA module, looked for beside the binary or library holding this code (the build folder),
// then in its ../lib/xsa (an installation); XSA_CUDA_MODULE names it outright.
struct CudaModule {
  void* handle = nullptr;
  CudaProbeFn probe = nullptr;
  CudaOpenFn open = nullptr;
  std::string error;  // why it could not be opened
};

const CudaModule& cuda_module() {
  static const CudaModule module = [] {
    CudaModule m;
    std::vector<std::string> candidates;
    if (const char* named = std::getenv("XSA_CUDA_MODULE")) {
      candidates.push_back(named);
    } else {
      Dl_info info{};
      if (dladdr(reinterpret_cast<void*>(&cuda_available), &info) && info.dli_fname) {
        // In the main program dladdr gives argv[0] as it was typed ("xsa" when found on the PATH,
        // or relative to a folder since left); the kernel knows where the program really is.
        std::filesystem::path file(info.dli_fname);
        std::error_code ec;
        if (std::strcmp(info.dli_fname, program_invocation_name) == 0) {
          const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
          if (!ec) file = exe;
        }
        std::filesystem::path resolved = std::filesystem::weakly_canonical(file, ec);
        if (ec) resolved = file;
        const std::filesystem::path here = resolved.parent_path();
        candidates.push_back((here / "libxsa_cuda.so").string());
        candidates.push_back((here.parent_path() / "lib" / "xsa" / "libxsa_cuda.so").string());
      }
    }
    if (const char* named = std::getenv("XSA_CUDA_MODULE");
        named && !std::filesystem::exists(named)) {
      m.error = std::string("XSA_CUDA_MODULE names ") + named + ", which does not exist";
      return m;
    }
    std::string tried;
    for (const std::string& path : candidates) {
      if (!std::filesystem::exists(path)) {
        tried += (tried.empty() ? "" : ", ") + path;
        continue;
      }
      m.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!m.handle) {
        m.error = std::string("cannot load ") + path + ": " + dlerror();
        return m;
      }
      m.probe = reinterpret_cast<CudaProbeFn>(dlsym(m.handle, "xsa_cuda_probe"));
      m.open = reinterpret_cast<CudaOpenFn>(dlsym(m.handle, "xsa_cuda_open"));
      if (!m.probe || !m.open) m.error = path + " is not xsa's CUDA module";
      return m;
    }
#ifdef XSA_CUDA_MODULE_CONFIGURED
    m.error = "the CUDA module is not built (scripts/build.sh xsa_cuda builds it; looked for " +
              tried + ")";
#else
    m.error =
        "this xsa was built without its CUDA module (nvcc was not found when it was built; "
        "looked for " +
        tried + ")";
#endif
    return m;
  }();
  return module;
}

// The GPU a process takes when none is named: its rank on this machine under mpirun or srun, so
// one process drives one GPU.
int local_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char* value = std::getenv(name)) return std::atoi(value);
  return 0;
}

// "cuda" → −1 (by local rank), "cuda:N" → N; anything else −2.
int cuda_ordinal(const std::string& device) {
  if (device == "cuda") return -1;
  if (device.rfind("cuda:", 0) != 0 || device.size() == 5) return -2;
  int n = 0;
  for (char c : device.substr(5)) {
    if (c < '0' || c > '9' || n > 1000) return -2;
    n = n * 10 + (c - '0');
  }
  return n;
}

Backend<float>& cuda_backend(const BackendOptions& options) {
  std::string none;
  if (!nvidia_device_present(&none)) fail("--device {}: {}", options.device, none);
  const CudaModule& module = cuda_module();
  if (!module.error.empty()) fail("--device {}: {}", options.device, module.error);
  char why[512] = "";
  const int count = module.probe(why, sizeof why);
  if (count < 0) fail("--device {}: {}", options.device, why);
  // cuda and auto: the process's GPU by its rank on this machine; cuda:N: GPU N.
  int ordinal = options.device == "auto" ? -1 : cuda_ordinal(options.device);
  if (ordinal == -1) ordinal = local_rank() % count;
  if (ordinal >= count)
    fail("--device {}: there {} only {} GPU{} (cuda:0 … cuda:{})", options.device,
         count == 1 ? "is" : "are", count, count == 1 ? "" : "s", count - 1);

  static std::mutex mutex;
  static std::map<std::tuple<int, Precision, bool, bool>, Backend<float>*> opened;  // to the end
  std::lock_guard lock(mutex);
  Backend<float>*& backend =
      opened[{ordinal, options.precision, options.tf32, options.deterministic}];
  if (!backend) {
    CudaOptions cuda;
    cuda.device = ordinal;
    cuda.precision = options.precision;
    cuda.tf32 = options.tf32;
    cuda.deterministic = options.deterministic;
    backend = module.open(cuda, why, sizeof why);
    if (!backend) fail("--device {}: {}", options.device, why);
  }
  return *backend;
}

}  // namespace

void validate_device(const std::string& device) {
  if (device != "cpu" && device != "auto" && device != "isolated" && cuda_ordinal(device) == -2)
    fail("--device {} is not known (cpu, cuda, cuda:N, auto, or isolated: a test device)", device);
}

void validate_comm_choice(const std::string& comm, const std::string& device) {
  if (comm != "auto" && comm != "nccl" && comm != "mpi")
    fail("--comm {} is not known (auto, nccl or mpi)", comm);
  if (comm == "nccl" && (device == "cpu" || device == "isolated"))
    fail("--comm nccl needs --device cuda: NCCL sums GPU memory (the CPU's ranks sum over MPI)");
}

bool cuda_available(std::string* why) {
  if (!nvidia_device_present(why)) return false;
  const CudaModule& module = cuda_module();
  if (!module.error.empty()) {
    if (why) *why = module.error;
    return false;
  }
  char reason[512] = "";
  if (module.probe(reason, sizeof reason) > 0) return true;
  if (why) *why = reason;
  return false;
}

Backend<float>& select_backend(const BackendOptions& options) {
  validate_device(options.device);
  if (options.device == "cuda" || cuda_ordinal(options.device) >= 0 ||
      (options.device == "auto" && cuda_available(nullptr)))
    return cuda_backend(options);
  Backend<float>& cpu = cpu_backend(options.precision);
  return options.device == "isolated" ? isolated_backend(cpu) : cpu;
}

}  // namespace xsa
