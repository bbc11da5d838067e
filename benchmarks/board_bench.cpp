// xsa board on a folder of 200 runs (1 000 steps each, a validation every 50) and 10 comparisons
// (Google Benchmark): what starting the board costs (the folder's scan and the first list, which
// reads every metrics.jsonl whole), and what each refresh of the run list costs after that, in
// the library and over HTTP. The targets: start under a second, the list under 100 ms.
//   ./build/board_bench [--benchmark_repetitions=5]
#include <benchmark/benchmark.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "xsa/board/runs_index.h"
#include "xsa/board/server/board_server.h"

namespace {

namespace fs = std::filesystem;

const fs::path& folder() {
  static const fs::path root = [] {
    const fs::path dir = fs::temp_directory_path() / "xsa_board_bench";
    if (fs::exists(dir / "done")) return dir;
    fs::remove_all(dir);
    std::string lines;
    for (int s = 1; s <= 1000; s++) {
      lines += "{\"grad_norm\":0.83,\"loss\":" + std::to_string(5.0 - s * 0.003) +
               ",\"lr\":0.001,\"ms\":41.2,\"rss_mb\":212.5,\"step\":" + std::to_string(s) +
               ",\"tokens_per_s\":99420.3}\n";
      if (s % 50 == 0)
        lines += "{\"loss\":" + std::to_string(5.1 - s * 0.003) +
                 ",\"split\":\"val\",\"step\":" + std::to_string(s) + "}\n";
    }
    auto run = [&](const fs::path& d) {
      fs::create_directories(d);
      std::ofstream(d / "metrics.jsonl") << lines;
      std::ofstream(d / "run.json") << "{\"command\":\"train\",\"steps\":1000}";
    };
    for (int r = 0; r < 180; r++) run(dir / ("run-" + std::to_string(r)));
    for (int c = 0; c < 10; c++)  // 10 comparisons of two arms: 20 runs more
      for (const char* arm : {"sa-seed1", "xsa-seed1"})
        run(dir / ("cmp-" + std::to_string(c)) / "arms" / arm);
    std::ofstream(dir / "done") << "";
    return dir;
  }();
  return root;
}

// Starting: the scan of the folder and the first list (every metrics.jsonl read from its start).
void BM_BoardStart(benchmark::State& state) {
  for (auto _ : state) {
    xsa::RunsBoard board(folder());
    benchmark::DoNotOptimize(board.list().size());
  }
  state.counters["runs"] = (double)xsa::scan_board_folder(folder()).runs.size();
}
BENCHMARK(BM_BoardStart)->Unit(benchmark::kMillisecond)->MinTime(2.0);

// A refresh of the list (the page asks every two seconds): the scan again, each file read on.
void BM_BoardList(benchmark::State& state) {
  xsa::RunsBoard board(folder());
  board.list();
  for (auto _ : state) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1001));  // past the scan's 1 s cache
    const auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(board.list().size());
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
}
BENCHMARK(BM_BoardList)->Unit(benchmark::kMillisecond)->Iterations(5)->UseManualTime();

// The same over HTTP, as the browser asks: GET /api/runs on a running server.
void BM_BoardListOverHttp(benchmark::State& state) {
  xsa::BoardServer server({folder(), "127.0.0.1", 0, 4});
  std::thread serving([&] { server.serve(); });
  httplib::Client client("127.0.0.1", server.port());
  client.Get("/api/runs");
  for (auto _ : state) {
    auto res = client.Get("/api/runs");
    if (!res || res->status != 200) state.SkipWithError("GET /api/runs failed");
    benchmark::DoNotOptimize(res->body.size());
  }
  server.stop();
  serving.join();
}
BENCHMARK(BM_BoardListOverHttp)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
