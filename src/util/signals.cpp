#include "xsa/util/signals.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>

#include "xsa/util/fmt.h"

namespace xsa {
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

// Async-signal-safe: only write(2) and _exit(2).
void on_stop_signal(int signal) {
  if (g_stop_signal != 0) {
    static const char now[] = "\nxsa: second signal: stopping now, without saving\n";
    (void)!::write(STDERR_FILENO, now, sizeof now - 1);
    ::_exit(128 + signal);
  }
  g_stop_signal = signal;
  static const char later[] =
      "\nxsa: stopping after this step to save the run (signal again to stop at once)\n";
  (void)!::write(STDERR_FILENO, later, sizeof later - 1);
}

}  // namespace

void catch_stop_signals() {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // reads and writes in flight complete instead of failing EINTR
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int stop_signal() {
  return g_stop_signal;
}

std::string signal_name(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  return fmt::format("signal {}", signal);
}

}  // namespace xsa
