#include "xsa/board/server/board_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <cstdlib>

#include "xsa/board/page.h"
#include "xsa/board/runs_index.h"
#include "xsa/util/error.h"
#include "xsa/util/fmt.h"

namespace xsa {

using json = nlohmann::json;

// A browser sends about a dozen; many more is no browser (each line is limited to 8 KB by
// cpp-httplib, the request to the read timeout).
constexpr size_t kMaxHeaders = 100;

struct BoardServer::Impl {
  BoardOptions options;
  RunsBoard board;
  httplib::Server http;
  std::string page;
  int port = 0;
  int listen_fd = -1;

  explicit Impl(const BoardOptions& o) : options(o), board(o.root), page(board_page()) {}

  // Served on loopback, the page answers only to its own host names: another site's page in the
  // same browser cannot read it through a DNS name of its own that points at 127.0.0.1.
  bool host_allowed(const httplib::Request& req) const {
    if (options.host != "127.0.0.1" && options.host != "localhost" && options.host != "::1")
      return true;
    const std::string host = req.get_header_value("Host");
    for (const char* name : {"127.0.0.1", "localhost", "[::1]"})
      if (host == fmt::format("{}:{}", name, port)) return true;
    return false;
  }

  // Invalid UTF-8 (a garbled record's string) goes out replaced, not as an error.
  void send_json(httplib::Response& res, const json& body) {
    res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
  }

  void routes() {
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      res.set_header("Cache-Control", "no-store");
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_header("Referrer-Policy", "no-referrer");
      if (req.method != "GET" && req.method != "HEAD") {
        res.status = 405;
        res.set_content("xsa board serves GET and HEAD only\n", "text/plain");
        return httplib::Server::HandlerResponse::Handled;
      }
      if (req.headers.size() > kMaxHeaders) {
        res.status = 431;
        res.set_content("too many header fields\n", "text/plain");
        return httplib::Server::HandlerResponse::Handled;
      }
      if (!host_allowed(req)) {
        res.status = 403;
        res.set_content("unknown Host header\n", "text/plain");
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    http.Get("/", [this](const httplib::Request&, httplib::Response& res) {
      res.set_header("Content-Security-Policy",
                     "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                     "connect-src 'self'; img-src data:");
      res.set_content(page, "text/html; charset=utf-8");
    });
    http.Get("/api/runs", [this](const httplib::Request&, httplib::Response& res) {
      send_json(res, board.list());
    });
    http.Get("/api/metrics", [this](const httplib::Request& req, httplib::Response& res) {
      const std::string from_text = req.get_param_value("from");
      char* end = nullptr;
      const unsigned long long from = std::strtoull(from_text.c_str(), &end, 10);
      if (!from_text.empty() && *end != '\0') {
        res.status = 400;
        return res.set_content("from: not a byte offset\n", "text/plain");
      }
      auto chunk = board.metrics(req.get_param_value("id"), from, req.get_param_value("check"));
      if (!chunk) {
        res.status = 404;
        return res.set_content("no such run\n", "text/plain");
      }
      send_json(res, *chunk);
    });
    http.Get("/api/comparison", [this](const httplib::Request& req, httplib::Response& res) {
      auto c = board.comparison(req.get_param_value("id"));
      if (!c) {
        res.status = 404;
        return res.set_content("no such comparison\n", "text/plain");
      }
      send_json(res, *c);
    });
    http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
      if (res.body.empty()) res.set_content("not found\n", "text/plain");
    });
  }
};

BoardServer::BoardServer(const BoardOptions& options) : impl_(std::make_unique<Impl>(options)) {
  Impl& s = *impl_;
  const int threads = options.threads;
  s.http.new_task_queue = [threads] { return new httplib::ThreadPool((size_t)threads); };
  // A client that stops sending or reading holds a thread for these at most.
  s.http.set_read_timeout(5, 0);
  s.http.set_write_timeout(5, 0);
  s.http.set_keep_alive_timeout(2);
  s.http.set_keep_alive_max_count(100);
  s.http.set_payload_max_length(4096);
  s.routes();
  // cpp-httplib 0.11 listens with a backlog of 5: a burst of connections beyond it waits for the
  // client's SYN retries, seconds each. The listening socket, kept here, gets a larger one below.
  s.http.set_socket_options([&s](socket_t fd) {
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    s.listen_fd = fd;
  });
  if (options.port == 0)
    s.port = s.http.bind_to_any_port(options.host);
  else
    s.port = s.http.bind_to_port(options.host, options.port) ? options.port : -1;
  if (s.port > 0 && s.listen_fd >= 0) ::listen(s.listen_fd, SOMAXCONN);
  if (s.port <= 0)
    fail("xsa board: cannot listen on {}:{} (in use, or not an address of this machine)",
         options.host, options.port);
}

BoardServer::~BoardServer() = default;

int BoardServer::port() const {
  return impl_->port;
}

std::string BoardServer::url() const {
  const std::string& h = impl_->options.host;
  const std::string shown = h == "0.0.0.0" || h == "::" ? "127.0.0.1" : h;
  if (shown.find(':') != std::string::npos)
    return fmt::format("http://[{}]:{}/", shown, impl_->port);
  return fmt::format("http://{}:{}/", shown, impl_->port);
}

void BoardServer::serve() {
  impl_->http.listen_after_bind();
}

void BoardServer::stop() {
  impl_->http.stop();
}

}  // namespace xsa
