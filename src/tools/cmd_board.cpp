// xsa board FOLDER: a local web page of the runs and comparisons below FOLDER, live while they
// train (src/board/).
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <thread>

#include "xsa/board/page.h"
#include "xsa/board/runs_index.h"
#include "xsa/tools/commands.h"
#include "xsa/util/error.h"
#ifdef XSA_WITH_BOARD_SERVER
#include "xsa/board/server/board_server.h"
#endif

namespace xsa::cli {

namespace {

struct BoardArgs {
  std::string folder;
  std::string host = "127.0.0.1";
  int port = 0;
  int threads = 16;
};

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1";
}

void run_board(const BoardArgs& a) {
  std::error_code ec;
  const bool exists = fs::exists(a.folder, ec);
  if (exists && !fs::is_directory(a.folder, ec)) fail("{}: not a folder", a.folder);
  if (a.port < 0 || a.port > 65535) fail("--port {}: expected 0 (any free port) to 65535", a.port);
  if (a.threads < 1 || a.threads > 256) fail("--threads {}: expected 1 to 256", a.threads);
  std::string why;
  if (!board_charts_embedded(&why)) fail("xsa board: {}", why);
#ifdef XSA_WITH_BOARD_SERVER
  // Ctrl-C and SIGTERM end the server from a thread of their own (sigwait); every other thread
  // starts with both blocked.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  BoardServer server({fs::path(a.folder), a.host, a.port, a.threads});
  const BoardIndex index = scan_board_folder(a.folder);
  if (!is_loopback(a.host))
    std::fprintf(stderr,
                 "xsa board: warning: listening on %s: anyone who can reach this machine's port "
                 "%d can read the runs below %s (read-only; no other file)\n",
                 a.host.c_str(), server.port(), a.folder.c_str());
  if (exists)
    std::printf("xsa board: %s (%zu runs, %zu comparisons) at %s  (Ctrl-C stops)\n",
                a.folder.c_str(), index.runs.size(), index.comparisons.size(),
                server.url().c_str());
  else  // a run about to start there (scripts/run.sh) shows up once it does
    std::printf("xsa board: %s (no such folder yet: watching for it) at %s  (Ctrl-C stops)\n",
                a.folder.c_str(), server.url().c_str());
  std::fflush(stdout);
  std::thread waiter([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    server.stop();
  });
  server.serve();
  pthread_kill(waiter.native_handle(), SIGTERM);  // the server ended otherwise: end the waiter
  waiter.join();
#else
  fail(
      "xsa board: this build has no web server (cpp-httplib); install libcpp-httplib-dev "
      "(bash scripts/setup.sh) and build again");
#endif
}

}  // namespace

void add_board_command(CLI::App& root) {
  auto* cmd = root.add_subcommand(
      "board",
      "Serve a live web page of the runs and comparisons below a folder (read-only, local)");
  auto a = std::make_shared<BoardArgs>();
  cmd->add_option("folder", a->folder, "The folder of runs (e.g. runs)")->required();
  cmd->add_option("--port", a->port, "Port (0: any free one; the URL is printed)")
      ->capture_default_str()
      ->check(within(0, 65535));
  cmd->add_option("--host", a->host,
                  "Address to listen on; beyond loopback (e.g. 0.0.0.0) anyone who can reach "
                  "the port can read the runs")
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "Connections served at once")
      ->capture_default_str()
      ->check(within(1, 256));
  cmd->callback([a] { run_board(*a); });
}

}  // namespace xsa::cli
