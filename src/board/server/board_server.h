// xsa board's web server (cpp-httplib): the page and three read-only JSON endpoints over a folder
// of runs. Nothing else is served: a request names a run or a comparison by the id the index
// gave it, never by a path, so no request reaches a file outside the folder or one the index did
// not list. GET and HEAD only.
//   /                        the page (page.h)
//   /api/runs                RunsBoard::list()
//   /api/metrics?id=&from=   a run's metrics.jsonl from byte `from` (read_metrics_chunk)
//   /api/comparison?id=      comparison_json()
#pragma once

#include <filesystem>
#include <memory>
#include <string>

namespace xsa {

struct BoardOptions {
  std::filesystem::path root;
  std::string host = "127.0.0.1";
  int port = 0;  // 0: a free one
  int threads = 16;
};

class BoardServer {
 public:
  // Binds the port; throws Error naming the host and port when it cannot.
  explicit BoardServer(const BoardOptions& options);
  ~BoardServer();
  BoardServer(const BoardServer&) = delete;
  BoardServer& operator=(const BoardServer&) = delete;

  int port() const;
  std::string url() const;
  void serve();  // until stop(), from another thread or a signal handler's thread
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace xsa
