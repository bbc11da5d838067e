#include "xsa/util/memory.h"

#include <cstring>
#include <fstream>
#include <string>

namespace xsa {
namespace {
double proc_status_mb(const char* key) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(std::strlen(key))) / 1024.0;
  return 0;
}
}  // namespace

double rss_mb() {
  return proc_status_mb("VmRSS:");
}
double peak_rss_mb() {
  return proc_status_mb("VmHWM:");
}
void reset_peak_rss() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

}  // namespace xsa

namespace xsa {

double available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("MemAvailable:", 0) == 0) return std::stod(line.substr(13)) * 1024.0;
  return 0;
}

}  // namespace xsa
