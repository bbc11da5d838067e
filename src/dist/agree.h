// Agreement between the ranks of a job before they work together: errors that every rank must act
// on alike, and the check that every rank was started with the same binary and settings.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "xsa/dist/comm.h"
#include "xsa/util/error.h"
#include "xsa/util/signals.h"

namespace xsa {

// An error that every rank of the job holds (see agree_on): rank 0 reports it, the others end
// quietly with the same exit code.
struct AgreedError : Error {
  using Error::Error;
};

// Runs `check` on every rank, then shares the verdicts: when any rank failed, every rank throws
// AgreedError with the message of the lowest failing rank (prefixed "rank r: " unless every rank
// failed alike or rank 0 alone failed), so the CLI prints it once. Every rank must reach it. In a
// world of one, check's own exception passes through.
void agree_on_error(Comm& comm, const std::string& local_error);  // empty: this rank succeeded

template <typename Fn>
void agree_on(Comm& comm, Fn&& check) {
  std::string error;
  try {
    check();
  } catch (const std::exception& e) {
    if (comm.size() == 1) throw;
    error = e.what();
    if (error.empty()) error = "unknown error";
  }
  agree_on_error(comm, error);
}

// Every rank's `identity` (what it was started with: the model and run settings) against rank
// 0's, together with a fingerprint of each rank's executable: when any differs, every rank throws
// AgreedError naming the first rank and setting that differ ("rank 1 was started with run.lr =
// 0.002, rank 0 with 0.001"). The texts themselves are exchanged, not only their hashes, so the
// message can say what differs.
void check_ranks_agree(Comm& comm, const nlohmann::json& identity);

// The signal that asked this job to stop (util/signals.h), agreed by every rank: a signal reaches
// the ranks at different moments (or only some of them), so each step every rank shares what it
// has seen and all stop at the same step. 0 when none has. Every rank must call it.
int agreed_stop_signal(Comm& comm);

// A 64-bit FNV-1a hash of this process's executable file (/proc/self/exe), as 16 hex digits.
std::string executable_fingerprint();

}  // namespace xsa
