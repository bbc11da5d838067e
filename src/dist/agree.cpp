#include "xsa/dist/agree.h"

#include <fstream>
#include <vector>

namespace xsa {

void agree_on_error(Comm& comm, const std::string& local_error) {
  if (comm.size() == 1) {
    if (!local_error.empty()) throw AgreedError(local_error);
    return;
  }
  const std::vector<std::string> verdicts = comm.all_gather(local_error);
  int first = -1, failed = 0;
  bool alike = true;
  for (int r = 0; r < (int)verdicts.size(); r++) {
    if (verdicts[r].empty()) continue;
    failed++;
    if (first < 0) first = r;
    alike = alike && verdicts[r] == verdicts[first];
  }
  if (first < 0) return;
  // Alike on every rank, or rank 0's alone (the work only rank 0 does: the run folder, files).
  if ((failed == comm.size() && alike) || (failed == 1 && first == 0))
    throw AgreedError(verdicts[first]);
  throw AgreedError(fmt::format("rank {}: {}", first, verdicts[first]));
}

std::string executable_fingerprint() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  uint64_t h = 0xcbf29ce484222325ull;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), (std::streamsize)buf.size());
    for (std::streamsize i = 0; i < in.gcount(); i++) h = (h ^ (uint8_t)buf[i]) * 0x100000001b3ull;
  }
  return fmt::format("{:016x}", h);
}

namespace {

// The first leaf where a and b differ, as "path = value" for each; empty when equal.
bool first_difference(const nlohmann::json& a, const nlohmann::json& b, const std::string& path,
                      std::string& here, std::string& there) {
  if (a.is_object() && b.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      const std::string p = path.empty() ? it.key() : path + "." + it.key();
      if (!b.contains(it.key())) {
        here = p + " = " + it.value().dump(), there = p + " unset";
        return true;
      }
      if (first_difference(it.value(), b[it.key()], p, here, there)) return true;
    }
    for (auto it = b.begin(); it != b.end(); ++it)
      if (!a.contains(it.key())) {
        const std::string p = path.empty() ? it.key() : path + "." + it.key();
        here = p + " unset", there = p + " = " + it.value().dump();
        return true;
      }
    return false;
  }
  if (a == b) return false;
  here = path + " = " + a.dump(), there = path + " = " + b.dump();
  return true;
}

}  // namespace

void check_ranks_agree(Comm& comm, const nlohmann::json& identity) {
  if (comm.size() == 1) return;
  const nlohmann::json mine = {{"executable", executable_fingerprint()}, {"settings", identity}};
  const std::vector<std::string> all = comm.all_gather(mine.dump());
  const nlohmann::json root = nlohmann::json::parse(all[0]);
  for (int r = 1; r < (int)all.size(); r++) {
    const nlohmann::json other = nlohmann::json::parse(all[r]);
    if (other["executable"] != root["executable"])
      throw AgreedError(fmt::format(
          "rank {} runs a different xsa executable than rank 0 (fingerprints {} and {}); every "
          "rank must run the same build",
          r, other["executable"].get<std::string>(), root["executable"].get<std::string>()));
    std::string here, there;
    if (first_difference(other["settings"], root["settings"], "", here, there))
      throw AgreedError(fmt::format(
          "rank {} was started with {}, rank 0 with {}; every rank must be given the same "
          "options",
          r, here, there));
  }
}

int agreed_stop_signal(Comm& comm) {
  const int mine = stop_signal();
  if (comm.size() == 1) return mine;
  double seen[2] = {mine != 0 ? 1.0 : 0.0, (double)mine};  // ranks signalled, their signals' sum
  comm.all_reduce(seen, 2);
  if (seen[0] == 0) return 0;
  return mine != 0 ? mine : (int)(seen[1] / seen[0]);
}

}  // namespace xsa
