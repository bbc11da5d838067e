// Polite stops. SIGINT (Ctrl-C) and SIGTERM (a cluster's scheduler preempting a job) ask the
// long-running commands to stop where they can keep their work: train saves a checkpoint at the
// step it is on, compare keeps its finished seeds. A second such signal ends the process at once.
#pragma once

#include <stdexcept>
#include <string>

namespace xsa {

// Installs the handlers (idempotent). Only commands that check stop_signal() should call it.
void catch_stop_signals();
// The signal that asked to stop (SIGINT or SIGTERM), or 0.
int stop_signal();
// "SIGINT", "SIGTERM", or "signal N".
std::string signal_name(int signal);

// A command stopped by a signal after keeping its work. what() says where it stopped and how to
// continue; the process's exit status is 128 + signal, as a shell reports a signalled process.
struct Interrupted : std::runtime_error {
  Interrupted(int signal, const std::string& what) : std::runtime_error(what), signal(signal) {}
  int signal;
};

}  // namespace xsa
