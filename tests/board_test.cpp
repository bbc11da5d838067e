// xsa board: the folder index and its readers (runs_index.h), and the server under bad requests
// (board_server.h): traversal, symbolic links that leave the folder, oversized requests, 200
// connections at once, a client that stops reading, a metrics file torn or garbled while served.
// Nothing outside the folder may ever come back, the server must go on serving, and no file below
// the folder may change (hashes before and after). The page in a real browser:
// tests/browser/board_test.sh.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "test_util.h"
#include "xsa/board/page.h"
#include "xsa/board/runs_index.h"
#include "xsa/report/compare_report.h"
#ifdef XSA_WITH_BOARD_SERVER
#include "xsa/board/server/board_server.h"
#endif

namespace xsa {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kSecret = "TOP-SECRET-OUTSIDE-THE-FOLDER";

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// n training records and a validation record every 10 steps, as xsa train writes them.
std::string metrics_lines(int n) {
  std::string text = json({{"split", "val"}, {"step", 0}, {"loss", 5.5}}).dump() + "\n";
  for (int s = 1; s <= n; s++) {
    text += json({{"step", s},
                  {"loss", 5.0 - 0.01 * s},
                  {"lr", 1e-3},
                  {"grad_norm", 1.0},
                  {"ms", 2.0},
                  {"tokens_per_s", 1000.0 + s},
                  {"rss_mb", 50.0}})
                .dump() +
            "\n";
    if (s % 10 == 0)
      text += json({{"split", "val"}, {"step", s}, {"loss", 6.0 - 0.01 * s}}).dump() + "\n";
  }
  return text;
}

// Every file below `dir` (symbolic links as links: not followed) and a hash of its bytes.
std::map<std::string, uint64_t> hashes(const fs::path& dir) {
  std::map<std::string, uint64_t> out;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator();
       ++it) {
    if (it->is_symlink()) {
      out[it->path().string()] = std::hash<std::string>()(fs::read_symlink(it->path()).string());
      continue;
    }
    if (it->is_regular_file())
      out[it->path().string()] = std::hash<std::string>()(slurp(it->path()));
  }
  return out;
}

// A folder of runs beside a folder the board must never show.
struct BoardFolder {
  fs::path base, root, outside;
  BoardFolder() {
    base = test::temp_dir("board");
    root = base / "runs", outside = base / "outside";
    write(outside / "secret.txt", kSecret);
    write(outside / "metrics.jsonl",
          std::string("{\"step\": 1, \"loss\": 1, \"note\": \"") + kSecret + "\"}\n");
    write(root / "a" / "metrics.jsonl", metrics_lines(50));
    write(root / "a" / "run.json", json({{"command", "train"}, {"steps", 50}}).dump());
    write(root / "b" / "metrics.jsonl", metrics_lines(20));
    write(root / "b" / "run.json", json({{"command", "train"}, {"steps", 100}}).dump());
    write(root / "cmp" / "seed-1.json",
          json({{"arms",
                 {{{"variant", "sa"}, {"seed", 1}, {"val_curve", {{0, 5.5}, {10, 4.0}}}},
                  {{"variant", "xsa"}, {"seed", 1}, {"val_curve", {{0, 5.5}, {10, 3.9}}}}}}})
              .dump());
    write(root / "cmp" / "arms" / "sa-seed2" / "metrics.jsonl", metrics_lines(10));
    write(root / "cmp" / "arms" / "sa-seed2" / "run.json",
          json({{"command", "compare"}, {"variant", "sa"}, {"seed", 2}, {"steps", 30}}).dump());
    write(root / "big" / "metrics.jsonl", metrics_lines(40000));  // about 6 MB
    write(root / "torn" / "metrics.jsonl", metrics_lines(5));
    // Links that leave the folder: a folder and a metrics file.
    fs::create_directory_symlink(outside, root / "escape");
    fs::create_directories(root / "linked");
    fs::create_symlink(outside / "metrics.jsonl", root / "linked" / "metrics.jsonl");
  }
  ~BoardFolder() { fs::remove_all(base); }
};

TEST(BoardIndex, ListsRunsAndComparisonsButNoLinkOutOfTheFolder) {
  BoardFolder f;
  const BoardIndex index = scan_board_folder(f.root);
  std::vector<std::string> runs, comparisons;
  for (const BoardRun& r : index.runs) runs.push_back(r.id);
  for (const BoardComparison& c : index.comparisons) comparisons.push_back(c.id);
  EXPECT_EQ(runs, (std::vector<std::string>{"a", "b", "big", "cmp/arms/sa-seed2", "torn"}));
  EXPECT_EQ(comparisons, (std::vector<std::string>{"cmp"}));
  EXPECT_EQ(index.runs[3].comparison, "cmp");
  EXPECT_FALSE(read_regular_file(f.root / "linked" / "metrics.jsonl", 1 << 20));
}

// Links inside the folder that lead out of it, met by the endpoints rather than the scan: a
// comparison's arms/ folder and a run's checkpoint. Neither is read; both are counted.
TEST(BoardIndex, EveryEndpointStaysUnderTheFolder) {
  BoardFolder f;
  // Outside: a comparison's arms (a live arm with a secret variant name) and a checkpoint whose
  // trainer.json would say 999 steps.
  write(f.outside / "arms" / "xsa-seed3" / "metrics.jsonl", metrics_lines(5));
  write(f.outside / "arms" / "xsa-seed3" / "run.json",
        json({{"command", "compare"}, {"variant", kSecret}, {"seed", 3}}).dump());
  write(f.outside / "ckpt_999" / "trainer.json", json({{"run", {{"steps", 999}}}}).dump());
  write(f.root / "cmp2" / "seed-1.json", read_file(f.root / "cmp" / "seed-1.json"));
  fs::create_directory_symlink(f.outside / "arms", f.root / "cmp2" / "arms");
  write(f.root / "norun" / "metrics.jsonl", metrics_lines(5));  // no run.json: steps from ckpt_
  fs::create_directory_symlink(f.outside / "ckpt_999", f.root / "norun" / "ckpt_999");
  RunsBoard board(f.root);
  const json list = board.list();
  for (const json& r : list["runs"]) {
    if (r["id"] == "norun") EXPECT_TRUE(r["steps"].is_null()) << "ckpt_999 lies outside";
    EXPECT_EQ(r.dump().find(kSecret), std::string::npos);
  }
  const auto cmp = board.comparison("cmp2");
  ASSERT_TRUE(cmp);
  EXPECT_TRUE((*cmp)["live"].empty()) << cmp->dump();
  EXPECT_EQ(cmp->dump().find(kSecret), std::string::npos);
  EXPECT_GE(board.list()["links_outside"].get<int64_t>(), 2);
  // The same comparison for report.html (a fence at its own folder).
  EXPECT_EQ(
      comparison_json(f.root / "cmp2", "cmp2", BoardFence(f.root / "cmp2")).dump().find(kSecret),
      std::string::npos);
}

// board.js reads a comparison's summary records and a sweep's rows by the names of the one list
// of summary fields (report/compare_report.h: summary_fields), which writes them: every name its
// summary table reads there is a field (or one of a sweep row's own, or an older file's name).
TEST(BoardPage, ReadsTheSummaryByTheFieldList) {
  const std::string js = read_file(fs::path(XSA_TEST_DATA_DIR) / "../../src/board/assets/board.js");
  const size_t begin = js.find("function summaryTable(c) {");
  ASSERT_NE(begin, std::string::npos);
  const std::string table = js.substr(begin, js.find("\n  function ", begin + 1) - begin);
  std::set<std::string> known = {"p_holm_sweep", "report", "sa_cos_yv_mean", "batch",
                                 "tokens_per_step",
                                 // older files' names, still read
                                 "step_speedup_mean", "time_speedup_mean"};
  for (const SummaryFieldInfo& f : summary_fields()) known.insert(f.name);
  // s.<name>, not run.s.<name> (a run's own series)
  const std::regex use(R"((?:^|[^.\w])s\.([a-z_0-9]+))");
  int uses = 0;
  for (auto it = std::sregex_iterator(table.begin(), table.end(), use);
       it != std::sregex_iterator(); ++it, uses++)
    EXPECT_TRUE(known.count((*it)[1].str()))
        << "board.js reads s." << (*it)[1].str() << ", which no summary field is";
  EXPECT_GT(uses, 10);
}

TEST(BoardIndex, RunRowsAgreeWithTheRecordsWritten) {
  BoardFolder f;
  RunsBoard board(f.root);
  const json list = board.list();
  std::map<std::string, json> rows;
  for (const json& r : list["runs"]) rows[r["id"]] = r;
  // a: 50 of 50 steps; the last record's loss 5.0 − 0.5, the last validation's 6.0 − 0.5.
  EXPECT_EQ(rows["a"]["state"], "finished");
  EXPECT_EQ(rows["a"]["step"], 50);
  EXPECT_EQ(rows["a"]["steps"], 50);
  EXPECT_DOUBLE_EQ(rows["a"]["loss"].get<double>(), 5.0 - 0.01 * 50);
  EXPECT_DOUBLE_EQ(rows["a"]["val_loss"].get<double>(), 6.0 - 0.01 * 50);
  EXPECT_DOUBLE_EQ(rows["a"]["tokens_per_s"].get<double>(), 1050.0);
  EXPECT_EQ(rows["b"]["state"], "stopped");  // 20 of 100, no process holds it
  EXPECT_EQ(rows["cmp/arms/sa-seed2"]["variant"], "sa");
  EXPECT_EQ(rows["cmp/arms/sa-seed2"]["seed"], 2);
  // A comparison still training: seed 1 finished, seed 2's arm live.
  const json c = board.comparison("cmp").value();
  EXPECT_EQ(c["seeds"].size(), 1u);
  ASSERT_EQ(c["live"].size(), 1u);
  EXPECT_EQ(c["live"][0]["id"], "cmp/arms/sa-seed2");
  EXPECT_FALSE(board.comparison("../outside"));
  EXPECT_FALSE(board.metrics("escape", 0));
  EXPECT_FALSE(board.metrics("linked", 0));
}

TEST(BoardIndex, LockedByALiveProcessIsRunning) {
  BoardFolder f;
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  const fs::path dir = f.root / "b";
  write(dir / ".lock", fmt::format("process {} (xsa train) on {} since now", ::getpid(), host));
  EXPECT_TRUE(folder_is_locked_by_live_process(dir));
  // A process that has ended (a child reaped), as after kill -9.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  write(dir / ".lock", fmt::format("process {} (xsa train) on {} since now", child, host));
  EXPECT_FALSE(folder_is_locked_by_live_process(dir));
  write(dir / ".lock", fmt::format("process {} (xsa train) on other-host since now", child));
  EXPECT_TRUE(folder_is_locked_by_live_process(dir));  // cannot tell: running
  fs::remove(dir / ".lock");
  EXPECT_FALSE(folder_is_locked_by_live_process(dir));
}

TEST(BoardIndex, MetricsChunksWaitForATornLineAndSkipGarbage) {
  BoardFolder f;
  const fs::path file = f.root / "torn" / "metrics.jsonl";
  const std::string whole = slurp(file);
  MetricsChunk c = read_metrics_chunk(file, 0, 1 << 20);
  EXPECT_EQ(c.records.size(), 6u);  // val at 0, steps 1..5
  EXPECT_EQ(c.next, whole.size());
  // A line being written: not returned until its newline comes.
  write(file, whole + "{\"step\": 6, \"lo");
  c = read_metrics_chunk(file, whole.size(), 1 << 20);
  EXPECT_EQ(c.records.size(), 0u);
  EXPECT_EQ(c.next, whole.size());
  write(file, whole + "{\"step\": 6, \"loss\": 4.9}\nnot json\n[1, 2]\n{\"step\": 7}\n");
  c = read_metrics_chunk(file, whole.size(), 1 << 20);
  ASSERT_EQ(c.records.size(), 2u);
  EXPECT_EQ(c.records[0]["step"], 6);
  EXPECT_EQ(c.records[1]["step"], 7);
  EXPECT_EQ(c.bad_lines, 2);
  // Started over (shorter than where the reader was): from the start again, said so.
  write(file, metrics_lines(1));
  c = read_metrics_chunk(file, whole.size() + 40, 1 << 20);
  EXPECT_TRUE(c.reset);
  EXPECT_EQ(c.records.size(), 2u);
  // Read in chunks: the same records as at once.
  const fs::path big = f.root / "big" / "metrics.jsonl";
  size_t chunked = 0;
  for (uint64_t from = 0;;) {
    MetricsChunk part = read_metrics_chunk(big, from, 100000);
    chunked += part.records.size();
    from = part.next;
    if (!part.more) break;
  }
  EXPECT_EQ(chunked, 40000u + 4001u);
  // A line longer than a chunk is skipped, not waited for forever.
  write(file, std::string(300, 'x') + "\n{\"step\": 1}\n");
  c = read_metrics_chunk(file, 0, 100);
  EXPECT_EQ(c.bad_lines, 1);
  EXPECT_EQ(c.next, 100u);
}

// A run started over whose new metrics.jsonl has already grown past where the page's last read
// ended (two polls apart): read from its start (reset), not from the middle of the new file.
TEST(BoardIndex, AMetricsFileStartedOverAndGrownPastTheReaderIsReadFromItsStart) {
  BoardFolder f;
  const fs::path file = f.root / "b" / "metrics.jsonl";
  const MetricsChunk first = read_metrics_chunk(file, 0, 1 << 20);
  ASSERT_EQ(first.records.size(), 23u);  // 20 steps, validation at 0, 10 and 20
  // Appended: read on from where the last read ended.
  std::ofstream(file, std::ios::binary | std::ios::app) << "{\"step\": 21, \"loss\": 4.7}\n";
  const MetricsChunk appended = read_metrics_chunk(file, first.next, 1 << 20, first.check);
  EXPECT_FALSE(appended.reset);
  ASSERT_EQ(appended.records.size(), 1u);
  EXPECT_EQ(appended.records[0]["step"], 21);
  // Truncated in place (the same inode) and written again, longer than before.
  std::string again;
  for (int s = 1; s <= 150; s++) again += fmt::format("{{\"step\": {}, \"loss\": {}}}\n", s, 3.0);
  ASSERT_GT(again.size(), appended.next);
  write(file, again);
  MetricsChunk c = read_metrics_chunk(file, appended.next, 1 << 20, appended.check);
  EXPECT_TRUE(c.reset);
  ASSERT_EQ(c.records.size(), 150u);
  EXPECT_EQ(c.records[0]["step"], 1);
  EXPECT_EQ(c.bad_lines, 0);
  // Replaced by another file (a new inode) holding the same bytes up to the offset and more.
  const fs::path other = f.root / "b" / "metrics.jsonl.new";
  write(other, again + "{\"step\": 151, \"loss\": 2.9}\n");
  fs::rename(other, file);
  c = read_metrics_chunk(file, c.next, 1 << 20, c.check);
  EXPECT_TRUE(c.reset);
  EXPECT_EQ(c.records.size(), 151u);
  // The server takes the check from the page and answers with the next one.
  RunsBoard board(f.root);
  const json page_read = board.metrics("b", 0).value();
  const json after =
      board.metrics("b", page_read["next"].get<uint64_t>(), page_read["check"].get<std::string>())
          .value();
  EXPECT_FALSE(after["reset"].get<bool>());
  EXPECT_EQ(after["records"].size(), 0u);
  write(file, again + again);
  EXPECT_TRUE(
      board.metrics("b", page_read["next"].get<uint64_t>(), page_read["check"].get<std::string>())
          .value()["reset"]
          .get<bool>());
}

// The list reads every run's metrics without holding the board's lock: while one request reads a
// run whose file is slow to read (here: 80 MB to parse), the others are answered.
TEST(BoardIndex, ASlowRunFolderDoesNotStallTheOtherRequests) {
  BoardFolder f;
  const std::string line =
      json({{"step", 1}, {"loss", 4.5}, {"lr", 1e-3}, {"ms", 2.0}, {"tokens_per_s", 1000.0}})
          .dump() +
      "\n";
  std::string slow;
  slow.reserve(80u << 20);
  while (slow.size() + line.size() <= (80u << 20)) slow += line;
  write(f.root / "slow" / "metrics.jsonl", slow);
  slow.clear();
  RunsBoard board(f.root);
  std::atomic<bool> listed{false};
  const auto start = std::chrono::steady_clock::now();
  std::thread lister([&] {
    board.list();
    listed = true;
  });
  double slowest_other = 0;
  int others = 0;
  while (!listed) {
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(board.metrics("a", 0));
    ASSERT_TRUE(board.comparison("cmp"));
    slowest_other =
        std::max(slowest_other,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    others++;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  lister.join();
  const double listing =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_GT(listing, 0.3) << "the slow folder must take long enough to tell";
  EXPECT_LT(slowest_other, listing / 4)
      << others << " other requests during a list of " << listing << " s";
}

TEST(BoardPage, ReportHtmlCarriesItsDataAndCannotBeBrokenOutOf) {
  BoardFolder f;
  // A sample that would end the script, or hold the page's own markers: data, not page.
  write(f.root / "cmp" / "samples.txt",
        "</script><script>alert(1)</script> <!-- /*BOARD_JS*/ /*DATA*/");
  const json data = comparison_page_data(f.root / "cmp");
  std::string why;
  if (!board_charts_embedded(&why)) GTEST_SKIP() << why;
  const std::string page = board_page(&data);
  EXPECT_NE(page.find("window.XSA_STATIC = "), std::string::npos);
  EXPECT_EQ(page.find("</script><script>alert(1)"), std::string::npos);
  EXPECT_NE(page.find("\\u003c/script>\\u003cscript>alert(1)\\u003c/script> \\u003c!-- "
                      "/*BOARD_JS*/ /*DATA*/"),
            std::string::npos);
  // Nothing to load: no script or style from elsewhere (the browser test watches the requests).
  EXPECT_EQ(page.find("<script src"), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
}

// The command's bad input: one line, a non-zero exit.
TEST(BoardCommand, BadInputGetsOneLine) {
  BoardFolder f;
  const std::string xsa = XSA_BINARY;
  test::CommandResult r = test::run_command(xsa + " board runs/a/run.json", f.base);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "xsa: error: runs/a/run.json: not a folder\n");
  r = test::run_command(xsa + " board runs --port 70000", f.base);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "xsa: error: --port: 70000 is outside [0, 65535] (--help lists the options)\n");
  r = test::run_command(xsa + " board runs --threads 0", f.base);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "xsa: error: --threads: 0 is outside [1, 256] (--help lists the options)\n");
#ifdef XSA_WITH_BOARD_SERVER
  r = test::run_command(xsa + " board runs --host 203.0.113.7", f.base);  // not this machine's
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err,
            "xsa: error: xsa board: cannot listen on 203.0.113.7:0 (in use, or not an address of "
            "this machine)\n");
  // Beyond loopback: the warning comes first; SIGTERM ends it cleanly.
  r = test::run_command(
      "sh -c '" + xsa + " board runs --host 0.0.0.0 & p=$!; sleep 1.5; kill -TERM $p; wait $p'",
      f.base);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.rfind("xsa board: warning: listening on 0.0.0.0: anyone who can reach", 0), 0u)
      << r.err;
  EXPECT_EQ(r.out.rfind("xsa board: runs (5 runs, 1 comparisons) at http://127.0.0.1:", 0), 0u)
      << r.out;
#endif
}

#ifdef XSA_WITH_BOARD_SERVER

// One request on its own connection, as bytes; the answer up to the server's close (or 10 s).
std::string raw_request(int port, const std::string& bytes, size_t read_at_most = 64 << 20) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  std::string answer;
  if (::connect(fd, (sockaddr*)&addr, sizeof addr) == 0) {
    for (size_t sent = 0; sent < bytes.size();) {
      const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += (size_t)n;
    }
    char buf[65536];
    for (ssize_t n; answer.size() < read_at_most && (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
      answer.append(buf, (size_t)n);
  }
  ::close(fd);
  return answer;
}

std::string get(int port, const std::string& target, const std::string& extra_headers = "") {
  return raw_request(port, "GET " + target +
                               " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                               "\r\nConnection: close\r\n" + extra_headers + "\r\n");
}

int status_of(const std::string& answer) {
  int status = 0;
  return std::sscanf(answer.c_str(), "HTTP/1.1 %d", &status) == 1 ? status : 0;
}

std::string body_of(const std::string& answer) {
  const size_t at = answer.find("\r\n\r\n");
  return at == std::string::npos ? "" : answer.substr(at + 4);
}

class BoardServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    before_ = hashes(f_.base);
    server_ = std::make_unique<BoardServer>(BoardOptions{f_.root, "127.0.0.1", 0, 16});
    port_ = server_->port();
    thread_ = std::thread([this] { server_->serve(); });
    for (int i = 0; i < 100 && status_of(get(port_, "/api/runs")) != 200; i++)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  void TearDown() override {
    server_->stop();
    thread_.join();
  }
  // Files below the base folder (the runs and the outside): unchanged, but for `except`.
  void expect_no_file_changed(const std::string& except = "") {
    auto after = hashes(f_.base);
    auto before = before_;
    if (!except.empty()) before.erase(except), after.erase(except);
    EXPECT_EQ(before, after);
  }

  BoardFolder f_;
  std::map<std::string, uint64_t> before_;
  std::unique_ptr<BoardServer> server_;
  std::thread thread_;
  int port_ = 0;
};

TEST_F(BoardServerTest, ServesThePageAndTheApi) {
  const std::string page = get(port_, "/");
  EXPECT_EQ(status_of(page), 200);
  EXPECT_NE(page.find("<title>xsa board</title>"), std::string::npos);
  const json list = json::parse(body_of(get(port_, "/api/runs")));
  EXPECT_EQ(list["runs"].size(), 5u);
  const json m = json::parse(body_of(get(port_, "/api/metrics?id=a&from=0")));
  EXPECT_EQ(m["records"].size(), 50u + 6u);
  const json c = json::parse(body_of(get(port_, "/api/comparison?id=cmp")));
  EXPECT_EQ(c["live"].size(), 1u);
  EXPECT_EQ(status_of(get(port_, "/api/metrics?id=a&from=12x")), 400);
  expect_no_file_changed();
}

TEST_F(BoardServerTest, NothingOutsideTheFolderComesBack) {
  const std::vector<std::string> targets = {"/../../etc/passwd",
                                            "/%2e%2e/%2e%2e/etc/passwd",
                                            "/..%2f..%2f..%2fetc%2fpasswd",
                                            "//etc/passwd",
                                            "/etc/passwd",
                                            "/secret.txt",
                                            "/outside/secret.txt",
                                            "/../outside/secret.txt",
                                            "/%2e%2e/outside/secret.txt",
                                            "/a/metrics.jsonl",
                                            "/escape/secret.txt",
                                            "/api/metrics?id=../outside",
                                            "/api/metrics?id=..%2Foutside",
                                            "/api/metrics?id=%2e%2e%2foutside",
                                            "/api/metrics?id=/etc/passwd",
                                            "/api/metrics?id=%2Fetc%2Fpasswd",
                                            "/api/metrics?id=escape",
                                            "/api/metrics?id=linked",
                                            "/api/metrics?id=a/../../outside",
                                            "/api/metrics?id=a%00",
                                            "/api/comparison?id=..",
                                            "/api/comparison?id=/",
                                            "/api/comparison?id=escape",
                                            "/api/runs/../../outside/secret.txt",
                                            "/api/../../outside/secret.txt",
                                            "/api/metrics?id=" + (f_.outside).string()};
  for (const std::string& target : targets) {
    const std::string answer = get(port_, target);
    SCOPED_TRACE(target);
    EXPECT_TRUE(status_of(answer) == 404 || status_of(answer) == 400) << answer.substr(0, 200);
    EXPECT_EQ(answer.find(kSecret), std::string::npos);
    EXPECT_EQ(answer.find("root:x:"), std::string::npos);
  }
  // Not listed either.
  EXPECT_EQ(get(port_, "/api/runs").find(kSecret), std::string::npos);
  EXPECT_EQ(get(port_, "/api/runs").find("escape"), std::string::npos);
  expect_no_file_changed();
}

TEST_F(BoardServerTest, WritesAndForeignHostsAreRefused) {
  for (const char* method : {"POST", "PUT", "DELETE", "PATCH"}) {
    const std::string answer =
        raw_request(port_, std::string(method) +
                               " /api/runs HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
                               "\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
    EXPECT_EQ(status_of(answer), 405) << method;
  }
  // Another site's name for 127.0.0.1 (DNS rebinding): refused.
  EXPECT_EQ(
      status_of(raw_request(port_, "GET /api/runs HTTP/1.1\r\nHost: evil.example:" +
                                       std::to_string(port_) + "\r\nConnection: close\r\n\r\n")),
      403);
  expect_no_file_changed();
}

TEST_F(BoardServerTest, OversizedRequestsAreRefusedAndServingGoesOn) {
  const std::string long_url = get(port_, "/api/metrics?id=" + std::string(100000, 'a'));
  EXPECT_NE(status_of(long_url), 200);
  const std::string long_header =
      get(port_, "/api/runs", "X-Big: " + std::string(100000, 'b') + "\r\n");
  EXPECT_NE(status_of(long_header), 200);
  std::string many_headers;
  for (int i = 0; i < 5000; i++) many_headers += fmt::format("X-H{}: v\r\n", i);
  EXPECT_NE(status_of(get(port_, "/api/runs", many_headers)), 200);
  EXPECT_EQ(status_of(get(port_, "/api/runs")), 200);
  expect_no_file_changed();
}

TEST_F(BoardServerTest, TwoHundredConnectionsAtOnceAreAllServed) {
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < 200; i++)
    clients.emplace_back([&, i] {
      const std::string target = i % 2 ? "/api/runs" : "/api/metrics?id=a&from=0";
      const std::string answer = get(port_, target);
      if (status_of(answer) == 200 && json::parse(body_of(answer), nullptr, false).is_object())
        ok++;
    });
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(ok.load(), 200);
  expect_no_file_changed();
}

TEST_F(BoardServerTest, AClientThatStopsReadingHoldsNoOneElseUp) {
  // Asks for 4 MB of records and reads none of it.
  const int stuck = ::socket(AF_INET, SOCK_STREAM, 0);
  int small = 4096;
  ::setsockopt(stuck, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)port_);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(stuck, (sockaddr*)&addr, sizeof addr), 0);
  const std::string request =
      "GET /api/metrics?id=big&from=0 HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
      "\r\n\r\n";
  ASSERT_EQ(::send(stuck, request.data(), request.size(), 0), (ssize_t)request.size());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int i = 0; i < 20; i++) {
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(status_of(get(port_, "/api/runs")), 200);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  }
  ::close(stuck);
  expect_no_file_changed();
}

TEST_F(BoardServerTest, AMetricsFileTornOrGarbledWhileServedIsReadSafely) {
  const fs::path file = f_.root / "torn" / "metrics.jsonl";
  std::atomic<bool> done{false};
  std::string last_written;
  std::thread writer([&] {
    const std::string good = metrics_lines(30);
    for (int round = 0; !done; round++) {
      std::string text = good.substr(0, (size_t)(round * 97) % good.size());  // torn anywhere
      if (round % 3 == 1) text += "\x01\x02 garbage {\"step\":\n";
      if (round % 5 == 2) text += std::string(10000, '{') + "\n";
      write(file, text);
      last_written = text;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  int served = 0;
  uint64_t from = 0;
  for (int i = 0; i < 200; i++) {
    const std::string answer = get(port_, fmt::format("/api/metrics?id=torn&from={}", from));
    ASSERT_EQ(status_of(answer), 200);
    const json chunk = json::parse(body_of(answer), nullptr, false);
    ASSERT_TRUE(chunk.is_object());
    for (const json& r : chunk["records"]) EXPECT_TRUE(r.is_object() && r.contains("step"));
    from = chunk["next"].get<uint64_t>();
    if (i % 10 == 0) {
      EXPECT_EQ(status_of(get(port_, "/api/runs")), 200);
    }
    served++;
  }
  done = true;
  writer.join();
  EXPECT_EQ(served, 200);
  EXPECT_EQ(slurp(file), last_written);  // the server wrote nothing into it
  expect_no_file_changed((f_.root / "torn" / "metrics.jsonl").string());
}

#else

TEST(BoardServerTest, NeedsCppHttplib) {
  GTEST_SKIP() << "this build has no web server: libcpp-httplib-dev was not found at configure";
}

#endif

}  // namespace
}  // namespace xsa
