// Faults a long run meets, each provoked: SIGTERM and SIGINT (checkpoint and exit, then resume on
// the uninterrupted curve; compare at its seed granularity; a second signal at once), two
// processes on one folder, a disk that refuses a write (file-size limit, read-only folder), a
// non-finite loss, a poisoned batch under --skip-bad-steps, kills at random moments (metrics.jsonl
// stays whole lines) and memory over thousands of steps.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "test_util.h"
#include "xsa/io/checkpoint.h"
#include "xsa/train/step.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/fmt.h"
#include "xsa/util/rng.h"

extern char** environ;

namespace xsa {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path work_dir() {
  static fs::path dir = test::temp_dir("faults");
  return dir;
}

test::CommandResult xsa(const std::string& args) {
  return test::run_command(std::string(XSA_BINARY) + " " + args, work_dir());
}

// `xsa ARGS` started in the background in the work folder, its output into NAME.out/NAME.err.
struct Background {
  pid_t pid = -1;
  std::string name;
};

Background start_xsa(const std::string& args, const std::string& name) {
  const std::string cmd = "cd " + work_dir().string() + " && exec " + XSA_BINARY + " " + args +
                          " >" + name + ".out 2>" + name + ".err </dev/null";
  const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
  Background b;
  b.name = name;
  EXPECT_EQ(posix_spawn(&b.pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
  return b;
}

// Its exit status (128 + signal when a signal ended it) and what it wrote to stderr.
test::CommandResult finish(const Background& b) {
  int raw = 0;
  EXPECT_EQ(::waitpid(b.pid, &raw, 0), b.pid);
  const int status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  return {status, read_file(work_dir() / (b.name + ".out")),
          read_file(work_dir() / (b.name + ".err"))};
}

size_t line_count(const fs::path& path) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n++;
  return n;
}

// Waits (up to a minute) until `ready` holds; false when the time ran out.
template <typename Fn>
bool wait_until(Fn&& ready) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

std::vector<json> metrics(const fs::path& run) {
  std::vector<json> out;
  std::ifstream in(work_dir() / run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

// The training records (not validation) of a run: step → {loss, grad_norm}, exact.
std::map<int64_t, std::pair<double, double>> train_curve(const fs::path& run) {
  std::map<int64_t, std::pair<double, double>> curve;
  for (const json& r : metrics(run))
    if (!r.contains("split"))
      curve[r["step"].get<int64_t>()] = {r["loss"].get<double>(), r["grad_norm"].get<double>()};
  return curve;
}

bool complete_checkpoint(const fs::path& ckpt) {
  for (const char* f :
       {"config.json", "model.safetensors", "optimizer.safetensors", "trainer.json"})
    if (!fs::is_regular_file(ckpt / f)) return false;
  return true;
}

using test::text_of;

const std::string kTiny =
    "--data data.txt --layers 2 --heads 4 --embd 32 --seq-len 16 --batch 4 --threads 1 "
    "--val-every 0 --quiet";

class Faults : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { std::ofstream(work_dir() / "data.txt") << text_of(30000); }
};

TEST_F(Faults, SigtermSavesTheStepAndResumeStaysOnTheCurve) {
  const std::string run = kTiny + " --steps 1500 --ckpt-every 500";
  ASSERT_EQ(xsa("train " + run + " --out whole").status, 0);
  const auto whole = train_curve("whole");

  for (int signal : {SIGTERM, SIGINT}) {
    const std::string out = signal == SIGTERM ? "term" : "int";
    Background b = start_xsa("train " + run + " --out " + out, out);
    ASSERT_TRUE(wait_until([&] { return line_count(work_dir() / out / "metrics.jsonl") > 40; }));
    ::kill(b.pid, signal);
    const test::CommandResult r = finish(b);
    ASSERT_EQ(r.status, 128 + signal) << r.err;
    const auto stopped = train_curve(out);
    const int64_t at = stopped.rbegin()->first;
    ASSERT_LT(at, 1500) << "the run ended before the signal";
    const std::string ckpt = fmt::format("{}/ckpt_{:06d}", out, at);
    EXPECT_NE(r.err.find(fmt::format("interrupted by {}: stopped at step {} of 1500; checkpoint "
                                     "{} saved; continue with xsa train --resume {}",
                                     signal == SIGTERM ? "SIGTERM" : "SIGINT", at, ckpt, out)),
              std::string::npos)
        << r.err;
    EXPECT_TRUE(complete_checkpoint(work_dir() / ckpt));
    EXPECT_FALSE(fs::exists(work_dir() / out / ".lock")) << "the lock goes with the process";

    const test::CommandResult resumed = xsa("train --resume " + out + " --quiet");
    ASSERT_EQ(resumed.status, 0) << resumed.err;
    EXPECT_EQ(train_curve(out), whole) << "the resumed curve leaves the uninterrupted one";
  }
}

// Document i of the test corpora: distinct, about 1 kB, as a JSON line.
std::string corpus_line(int i) {
  return json{{"text", fmt::format("document {}: {}", i, text_of(900 + i % 200))}}.dump() + "\n";
}

// JSON lines of `n` documents in one file.
void write_corpus(const fs::path& path, int n) {
  std::ofstream out(path);
  for (int i = 0; i < n; i++) out << corpus_line(i);
}

// The same in a folder of files of 1 000 documents each, so that a prepare stops between files
// as well as within one.
void write_corpus_folder(const fs::path& dir, int n) {
  fs::create_directories(dir);
  std::ofstream out;
  for (int i = 0; i < n; i++) {
    if (i % 1000 == 0) out = std::ofstream(dir / fmt::format("part-{:03d}.jsonl", i / 1000));
    out << corpus_line(i);
  }
}

// Every file of a prepared folder, by name: its size and a hash of its bytes (long/meta.json
// without the name of the folder it belongs to).
std::map<std::string, std::string> folder_files(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::string bytes = read_file(e.path());
    const std::string name = fs::relative(e.path(), dir).string();
    if (name == "long/meta.json") {
      json meta = json::parse(bytes);
      meta.erase("long_documents_of");
      bytes = meta.dump();
    }
    files[name] = fmt::format("{} bytes, hash {:016x}", bytes.size(), hash_name(bytes, 0));
  }
  return files;
}

// (saving after every batch, so that a kill at any moment finds a recent save)
const std::string kPrepare =
    "prepare --input corpus --tokenizer byte --shard-tokens 1000000 --batch-bytes 65536 "
    "--save-every 0 --long-min-tokens 1000 --long-fraction 0.2 --quiet --out ";

// Ctrl-C keeps what is done in OUT.partial; the same command continues it to the shards of an
// uninterrupted run.
TEST_F(Faults, AnInterruptedPrepareContinuesToTheSameShards) {
  write_corpus_folder(work_dir() / "corpus", 20000);
  ASSERT_EQ(xsa(kPrepare + "whole_shards").status, 0);
  Background b = start_xsa(kPrepare + "stopped_shards --threads 1", "prep");
  ASSERT_TRUE(wait_until(
      [&] { return fs::exists(work_dir() / "stopped_shards.partial" / "progress.json"); }));
  ::kill(b.pid, SIGINT);
  test::CommandResult r = finish(b);
  ASSERT_EQ(r.status, 128 + SIGINT) << r.err;
  EXPECT_NE(r.err.find("xsa: interrupted by SIGINT: stopped after"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("kept in stopped_shards.partial: run the same command again to continue"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(work_dir() / "stopped_shards"));
  // An input it had read, rewritten since with the same length and its date put back: not
  // continued (its content is checked, not its size and date), and named.
  const fs::path first = work_dir() / "corpus/part-000.jsonl";
  const std::string before = read_file(first);
  const auto when = fs::last_write_time(first);
  std::string changed = before;
  changed[changed.find("document 0:") + 9] = '7';  // "document 7:", as long
  std::ofstream(first, std::ios::binary) << changed;
  fs::last_write_time(first, when);
  r = xsa(kPrepare + "stopped_shards");
  EXPECT_EQ(r.status, 1);
  // (its content, or its first items when the stop came within it)
  EXPECT_EQ(r.err.rfind("xsa: error: corpus/part-000.jsonl: changed since the interrupted prepare "
                        "in stopped_shards.partial read it (its ",
                        0),
            0u)
      << r.err;
  EXPECT_NE(r.err.find(" differ"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(fs::exists(work_dir() / "stopped_shards.partial/progress.json")) << "kept";
  std::ofstream(first, std::ios::binary) << before;  // back
  fs::last_write_time(first, when);
  // progress.json edited by hand (a count lowered): refused, not continued into a truncated output.
  const fs::path progress = work_dir() / "stopped_shards.partial/progress.json";
  const std::string saved = read_file(progress);
  json edited = json::parse(saved);
  edited["train_documents"] = 1;
  std::ofstream(progress) << edited.dump() << "\n";
  r = xsa(kPrepare + "stopped_shards");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err,
            "xsa: error: stopped_shards.partial/progress.json: changed since prepare wrote "
            "it (its checksum differs); remove stopped_shards.partial to start over\n");
  std::ofstream(progress) << saved;  // as written: it continues
  r = xsa(kPrepare + "stopped_shards");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(fs::exists(work_dir() / "stopped_shards.partial"));
  EXPECT_EQ(folder_files(work_dir() / "stopped_shards"), folder_files(work_dir() / "whole_shards"));
}

// Killed (SIGKILL) at random moments, several times over, and run again each time: the shards of
// an uninterrupted run. Other options start over instead of continuing.
TEST_F(Faults, APrepareKilledAtRandomContinuesToTheSameShards) {
  write_corpus_folder(work_dir() / "corpus", 20000);
  // Kills land between a tenth and the whole of an uninterrupted run's time on one thread.
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(xsa(kPrepare + "uninterrupted --threads 1").status, 0);
  const auto run_time = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start);
  std::mt19937 rng(7);
  int continued = 0;
  for (int round = 0; round < 6; round++) {
    Background b = start_xsa(kPrepare + "killed_shards --threads 1", "killed_prep");
    std::this_thread::sleep_for(run_time / 10 + run_time * (rng() % 900) / 1000);
    ::kill(b.pid, SIGKILL);
    finish(b);
    continued += fs::exists(work_dir() / "killed_shards.partial" / "progress.json");
    if (fs::exists(work_dir() / "killed_shards")) break;  // it finished first
  }
  EXPECT_GT(continued, 0) << "no kill landed after a saved batch";
  test::CommandResult r;
  if (!fs::exists(work_dir() / "killed_shards")) {  // (a continued run may finish before its kill)
    r = xsa(kPrepare + "killed_shards --threads 2");
    ASSERT_EQ(r.status, 0) << r.err;
  }
  EXPECT_EQ(folder_files(work_dir() / "killed_shards"), folder_files(work_dir() / "uninterrupted"));

  // A partial output of other options is not continued: said, and started over.
  Background b = start_xsa(kPrepare + "other_shards --threads 1", "other_prep");
  ASSERT_TRUE(wait_until(
      [&] { return fs::exists(work_dir() / "other_shards.partial" / "progress.json"); }));
  ::kill(b.pid, SIGKILL);
  finish(b);
  const std::string loud = std::regex_replace(kPrepare, std::regex(" --quiet"), "");
  r = xsa(loud + "other_shards --seed 2");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("other_shards.partial holds an interrupted prepare of other inputs or "
                       "options; starting over"),
            std::string::npos)
      << r.err;
  r = xsa(kPrepare + "other_seed --seed 2");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(folder_files(work_dir() / "other_shards"), folder_files(work_dir() / "other_seed"));
}

// Peak resident memory of `xsa ARGS` (kB), after it succeeded.
long peak_rss_kb(const std::string& args) {
  Background b = start_xsa(args, "rss");
  int raw = 0;
  rusage usage{};
  EXPECT_EQ(::wait4(b.pid, &raw, 0, &usage), b.pid);
  EXPECT_TRUE(WIFEXITED(raw) && WEXITSTATUS(raw) == 0) << read_file(work_dir() / "rss.err");
  return usage.ru_maxrss;
}

// Prepare streams: eight times the input takes the same memory (within 10 %).
TEST_F(Faults, PrepareMemoryDoesNotGrowWithTheInput) {
  write_corpus(work_dir() / "small.jsonl", 4000);   // 4 MB
  write_corpus(work_dir() / "large.jsonl", 32000);  // 32 MB
  const std::string args =
      "prepare --tokenizer byte --batch-bytes 262144 --threads 1 --quiet --force --input ";
  const long small = peak_rss_kb(args + "small.jsonl --out rss_small");
  const long large = peak_rss_kb(args + "large.jsonl --out rss_large");
  EXPECT_LT(large, small * 1.10) << "peak RSS " << small << " kB for 4 MB, " << large
                                 << " kB for 32 MB";
}

// A run's peak RSS (kB) and exit status (128 + signal when a signal ended it), stderr kept.
std::pair<long, int> peak_rss_kb_and_status(const std::string& args, std::string* err) {
  Background b = start_xsa(args, "bomb");
  int raw = 0;
  rusage usage{};
  EXPECT_EQ(::wait4(b.pid, &raw, 0, &usage), b.pid);
  if (err) *err = read_file(work_dir() / "bomb.err");
  return {usage.ru_maxrss, WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw)};
}

// `bytes` of zeros into a .zst (frames of 64 MiB) or .gz file, streamed: a decompression bomb.
void write_zero_bomb(const fs::path& path, uint64_t bytes) {
  const std::string zeros(64 << 20, '\0');
  std::ofstream out(path, std::ios::binary);
  if (path.extension() == ".zst") {
    std::string frame(ZSTD_compressBound(zeros.size()), '\0');
    const size_t n = ZSTD_compress(frame.data(), frame.size(), zeros.data(), zeros.size(), 1);
    ASSERT_FALSE(ZSTD_isError(n));
    for (uint64_t done = 0; done < bytes; done += zeros.size()) out.write(frame.data(), n);
    return;
  }
  z_stream z{};
  ASSERT_EQ(deflateInit2(&z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string chunk(1 << 20, '\0');
  for (uint64_t done = 0; done < bytes; done += zeros.size()) {
    z.next_in = (Bytef*)zeros.data(), z.avail_in = (uInt)zeros.size();
    const int flush = done + zeros.size() >= bytes ? Z_FINISH : Z_NO_FLUSH;
    do {
      z.next_out = (Bytef*)chunk.data(), z.avail_out = (uInt)chunk.size();
      deflate(&z, flush);
      out.write(chunk.data(), chunk.size() - z.avail_out);
    } while (z.avail_out == 0);
  }
  deflateEnd(&z);
}

// Decompression bombs and a huge line are refused as bad input in bounded memory, whatever their
// size: 2 GB of zeros as JSON lines in .zst, 1 GB in .gz, and a valid 200 MB JSON line (a line
// past --max-record-mb, 16 MiB), stopped at or skipped. The bound: 250 MB (a prepare of small
// inputs peaks near 100 MB; holding the bomb would take gigabytes).
TEST_F(Faults, DecompressionBombsStayInBoundedMemory) {
  write_zero_bomb(work_dir() / "bomb.jsonl.zst", 2ull << 30);
  write_zero_bomb(work_dir() / "bomb.jsonl.gz", 1ull << 30);
  {
    std::ofstream line(work_dir() / "huge.jsonl", std::ios::binary);
    line << corpus_line(0) << "{\"text\": \"" << std::string(200 << 20, 'a') << "\"}\n"
         << corpus_line(1) << corpus_line(2);
  }
  const long kBoundKb = 250 << 10;
  for (const char* input : {"bomb.jsonl.zst", "bomb.jsonl.gz", "huge.jsonl"}) {
    std::string err;
    const std::string args = fmt::format(
        "prepare --tokenizer byte --threads 1 --quiet --force --val-fraction 0 --input {}", input);
    auto [kb, status] = peak_rss_kb_and_status(args + " --out bomb_stop", &err);
    EXPECT_EQ(status, 1) << input << ": " << err;
    EXPECT_NE(err.find("longer than 16777216 bytes (--max-record-mb)"), std::string::npos)
        << input << ": " << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_LT(kb, kBoundKb) << input << " (stop): peak " << kb << " kB";
    std::tie(kb, status) =
        peak_rss_kb_and_status(args + " --on-bad-input skip --out bomb_skip", &err);
    EXPECT_LT(kb, kBoundKb) << input << " (skip): peak " << kb << " kB";
    if (std::string(input) == "huge.jsonl") {
      EXPECT_EQ(status, 0) << err;  // the three short lines around it make the output
      const json meta = json::parse(read_file(work_dir() / "bomb_skip/meta.json"));
      EXPECT_EQ(meta["train_documents"], 3);
    } else {
      EXPECT_EQ(status, 1) << "nothing but the bomb: no documents";
      EXPECT_NE(err.find("the inputs hold no documents"), std::string::npos) << err;
    }
  }
  for (const char* f : {"bomb.jsonl.zst", "bomb.jsonl.gz", "huge.jsonl"})
    fs::remove(work_dir() / f);
}

TEST_F(Faults, SecondSignalStopsAtOnce) {
  // Steps of tens of milliseconds, so that the second signal comes while the first waits.
  Background b = start_xsa(
      "train " + kTiny + " --embd 256 --seq-len 256 --batch 8 --steps 100000 --out twice", "twice");
  ASSERT_TRUE(wait_until([&] { return line_count(work_dir() / "twice" / "metrics.jsonl") > 1; }));
  ::kill(b.pid, SIGINT);
  ASSERT_TRUE(wait_until([&] {
    return read_file(work_dir() / "twice.err").find("stopping after") != std::string::npos;
  }));
  ::kill(b.pid, SIGINT);
  const test::CommandResult r = finish(b);
  EXPECT_EQ(r.status, 128 + SIGINT);
  EXPECT_NE(r.err.find("second signal: stopping now"), std::string::npos) << r.err;
  for (const auto& e : fs::directory_iterator(work_dir() / "twice")) {  // none half-written
    if (e.path().filename().string().rfind("ckpt_", 0) == 0) {
      EXPECT_TRUE(complete_checkpoint(e.path())) << e.path();
    }
  }
}

TEST_F(Faults, CompareStopsBetweenSeedsWorthOfWorkAndContinues) {
  const std::string cmp =
      "compare " + kTiny + " --variants sa,xsa --seeds 2 --steps 1500 --val-batches 2";
  ASSERT_EQ(xsa(cmp + " --out cmp_whole").status, 0);
  Background b = start_xsa(cmp + " --out cmp_cut", "cmp_cut");
  ASSERT_TRUE(wait_until([&] { return fs::exists(work_dir() / "cmp_cut" / "seed-1.json"); }));
  ::kill(b.pid, SIGTERM);
  const test::CommandResult r = finish(b);
  ASSERT_EQ(r.status, 128 + SIGTERM) << r.err;
  EXPECT_NE(r.err.find("interrupted by SIGTERM: stopped at seed 2, step "), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(work_dir() / "cmp_cut" / "report.json"));

  const test::CommandResult again = xsa(cmp + " --out cmp_cut");
  ASSERT_EQ(again.status, 0) << again.err;
  const json whole = json::parse(read_file(work_dir() / "cmp_whole" / "report.json"));
  const json cut = json::parse(read_file(work_dir() / "cmp_cut" / "report.json"));
  ASSERT_EQ(whole["arms"].size(), 4u);
  for (size_t k = 0; k < 4; k++) {
    EXPECT_EQ(cut["arms"][k]["val_loss"], whole["arms"][k]["val_loss"]) << k;
    EXPECT_EQ(cut["arms"][k]["val_curve"], whole["arms"][k]["val_curve"]) << k;
  }
}

TEST_F(Faults, OneLiveProcessPerFolder) {
  // A real second run against a live one: refused, naming it.
  Background b = start_xsa("train " + kTiny + " --steps 100000 --out busy", "busy");
  ASSERT_TRUE(wait_until([&] { return line_count(work_dir() / "busy" / "metrics.jsonl") > 2; }));
  const test::CommandResult second = xsa("train " + kTiny + " --steps 10 --out busy --force");
  ::kill(b.pid, SIGTERM);
  EXPECT_EQ(finish(b).status, 128 + SIGTERM);
  EXPECT_EQ(second.status, 1);
  EXPECT_NE(second.err.find(fmt::format("xsa: error: busy: in use by process {} (", b.pid)),
            std::string::npos)
      << second.err;
  EXPECT_NE(second.err.find("--out busy"), std::string::npos) << "names the holder's command";
  EXPECT_EQ(std::count(second.err.begin(), second.err.end(), '\n'), 1) << second.err;
  EXPECT_TRUE(complete_checkpoint(*latest_checkpoint(work_dir() / "busy")))
      << "the live run's checkpoint survives the refused --force";

  // compare and prepare, against a lock this test holds.
  fs::create_directories(work_dir() / "cmp_busy");
  {
    FolderLock held(work_dir() / "cmp_busy" / ".lock", work_dir() / "cmp_busy");
    const test::CommandResult c = xsa("compare " + kTiny + " --steps 5 --out cmp_busy");
    EXPECT_EQ(c.status, 1);
    EXPECT_NE(c.err.find(fmt::format("in use by process {} (", ::getpid())), std::string::npos)
        << c.err;
    FolderLock prep_held(work_dir() / "shards.lock", work_dir() / "shards");
    const test::CommandResult p =
        xsa("prepare --input data.txt --tokenizer byte --val-fraction 0 --out shards --quiet");
    EXPECT_EQ(p.status, 1);
    EXPECT_NE(p.err.find(fmt::format("shards: in use by process {} (", ::getpid())),
              std::string::npos)
        << p.err;
    EXPECT_FALSE(fs::exists(work_dir() / "shards"));
  }
  // A lock file left by a process that died holds nothing.
  std::ofstream(work_dir() / "cmp_busy" / ".lock") << "process 999999 (xsa compare) on gone";
  EXPECT_EQ(xsa("compare " + kTiny + " --steps 5 --out cmp_busy").status, 0);
  EXPECT_EQ(
      xsa("prepare --input data.txt --tokenizer byte --val-fraction 0 --out shards --quiet").status,
      0);
  EXPECT_FALSE(fs::exists(work_dir() / "shards.lock"));
}

TEST_F(Faults, AFailedCheckpointWriteKeepsTheNewestComplete) {
  ASSERT_EQ(xsa("train " + kTiny + " --steps 10 --out full").status, 0);
  // The file-size limit (ulimit -f, KiB) is below one checkpoint's model.safetensors (~130 kB).
  const test::CommandResult r = test::run_command(
      std::string("ulimit -f 64 && ") + XSA_BINARY + " train --resume full --steps 20 --quiet",
      work_dir());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err,
            "xsa: error: checkpoint full/ckpt_000020 not written: "
            "full/.tmp_ckpt_000020/model.safetensors: write failed: File too large; the newest "
            "complete checkpoint is full/ckpt_000010\n");
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(work_dir() / "full"))
    left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"ckpt_000010", "metrics.jsonl", "run.json"}));
  for (const json& m : metrics("full")) EXPECT_TRUE(m.contains("step"));  // whole lines

  // The newest complete checkpoint resumes, onto the curve of the same resume never refused.
  ASSERT_EQ(xsa("train " + kTiny + " --steps 10 --out full_ref").status, 0);
  ASSERT_EQ(xsa("train --resume full_ref --steps 20 --quiet").status, 0);
  ASSERT_EQ(xsa("train --resume full --steps 20 --quiet").status, 0);
  EXPECT_EQ(train_curve("full"), train_curve("full_ref"));

  // prepare: a shard that cannot be written leaves no output and no partial folder.
  const test::CommandResult p = test::run_command(
      std::string("ulimit -f 8 && ") + XSA_BINARY +
          " prepare --input data.txt --tokenizer byte --val-fraction 0 --out limited --quiet",
      work_dir());
  EXPECT_EQ(p.status, 1);
  EXPECT_NE(p.err.find("train_000000.bin: write failed: File too large"), std::string::npos)
      << p.err;
  for (const auto& e : fs::directory_iterator(work_dir()))
    EXPECT_EQ(e.path().filename().string().rfind("limited", 0), std::string::npos) << e.path();
}

// A report that cannot be written: one line naming it; the finished seeds stay, and the same
// command writes the report once the way is clear, without training again.
TEST_F(Faults, AFailedReportWriteKeepsTheSeeds) {
  const std::string cmp = "compare " + kTiny + " --steps 20 --out cmp_blocked";
  fs::create_directories(work_dir() / "cmp_blocked" / "report.md");  // in the report's way
  const test::CommandResult r = xsa(cmp);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "xsa: error: cmp_blocked/report.md: cannot rename into place: Is a directory\n");
  EXPECT_TRUE(fs::exists(work_dir() / "cmp_blocked" / "seed-1.json"));
  fs::remove(work_dir() / "cmp_blocked" / "report.md");
  const test::CommandResult again = xsa(cmp + " --log-every 1");
  EXPECT_EQ(again.status, 0) << again.err;
  EXPECT_TRUE(fs::exists(work_dir() / "cmp_blocked" / "report.md"));
}

TEST_F(Faults, AReadOnlyFolderIsOneLine) {
  // Root writes anywhere, so as root the command runs as `nobody`.
  std::string as_user;
  if (::geteuid() == 0) {
    if (std::system("command -v setpriv >/dev/null") != 0)
      GTEST_SKIP() << "running as root without setpriv: cannot make a folder read-only";
    as_user = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  }
  ASSERT_EQ(xsa("train " + kTiny + " --steps 10 --out ro_run").status, 0);
  fs::permissions(work_dir() / "ro_run", fs::perms::owner_read | fs::perms::owner_exec |
                                             fs::perms::group_read | fs::perms::group_exec |
                                             fs::perms::others_read | fs::perms::others_exec);
  const test::CommandResult r = test::run_command(
      as_user + XSA_BINARY + " train --resume ro_run --steps 20 --quiet", work_dir());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "xsa: error: ro_run/.lock: cannot create the lock file: Permission denied\n");
  const test::CommandResult c = test::run_command(
      as_user + XSA_BINARY + " compare " + kTiny + " --steps 5 --out ro_run/cmp", work_dir());
  EXPECT_EQ(c.status, 1);
  EXPECT_EQ(c.err, "xsa: error: ro_run/cmp: cannot create the report folder: Permission denied\n");
  fs::permissions(work_dir() / "ro_run", fs::perms::owner_all, fs::perm_options::add);
  EXPECT_TRUE(complete_checkpoint(work_dir() / "ro_run" / "ckpt_000010"));
  EXPECT_EQ(xsa("train --resume ro_run --steps 20 --quiet").status, 0);
}

TEST_F(Faults, ANonFiniteLossStopsWithTheStepAndKeepsTheLastCheckpoint) {
  const test::CommandResult r =
      xsa("train " + kTiny + " --steps 50 --lr 1e3 --warmup 0 --ckpt-every 1 --out blowup");
  EXPECT_EQ(r.status, 1);
  const std::optional<fs::path> newest = latest_checkpoint(work_dir() / "blowup");
  ASSERT_TRUE(newest);
  const int64_t last = std::stoll(newest->filename().string().substr(5));
  // Which of the loss and the gradient norm overflows first, and to NaN or to infinity, is a
  // matter of rounding (other CPUs, other BLAS, other orders): any of the four, at the step after
  // the newest checkpoint, named with its step.
  EXPECT_TRUE(std::regex_search(
      r.err, std::regex(fmt::format("^xsa: error: (loss|gradient norm) became (NaN|infinite) at "
                                    "step {} \\(lr ",
                                    last + 1))))
      << r.err;
  EXPECT_NE(r.err.find(fmt::format(
                "); stopped without saving; last checkpoint blowup/ckpt_{:06d} is intact\n", last)),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(complete_checkpoint(*newest));
}

// A stretch of random letters in a text the model has learned: its batches are outliers.
TEST_F(Faults, SkipBadStepsLeavesOutAPoisonedBatchAndResumesExactly) {
  std::string text = text_of(30000);
  std::mt19937 rng(5);
  std::string poison(640, ' ');
  for (char& c : poison) c = "abcdefghijklmnopqrstuvwxyz "[rng() % 27];
  text.insert(16000, poison);  // steps 251–260 read it (64 tokens a step, in order)
  std::ofstream(work_dir() / "poison.txt") << text;
  const std::string run = kTiny + " --data poison.txt --no-shuffle --lr 1e-2 --steps 400";

  ASSERT_EQ(xsa("train " + run + " --out plain").status, 0);  // finite spikes are trained on
  const auto plain = metrics("plain");
  for (const json& m : plain) EXPECT_FALSE(m.contains("skipped"));

  ASSERT_EQ(xsa("train " + run + " --skip-bad-steps --out skip").status, 0);
  // Every decision is clear of rounding: each step's z-score (recomputed here from the run's own
  // records, the window of the last 128 updates applied) lies a tenth or more away from the
  // limit of 5 (ordinary steps stay below 3.6 here, poisoned ones far above); float rounding on
  // another machine moves these curves, and so z, by orders of magnitude less.
  std::vector<int64_t> skipped;
  std::vector<double> window_loss, window_norm;
  const auto z_of = [](const std::vector<double>& w, double x) {
    const size_t n = std::min<size_t>(w.size(), BadStepFilter::kWindow);
    double mean = 0, var = 0;
    for (size_t k = w.size() - n; k < w.size(); k++) mean += w[k];
    mean /= n;
    for (size_t k = w.size() - n; k < w.size(); k++) var += (w[k] - mean) * (w[k] - mean);
    return (x - mean) / std::sqrt(var / n);
  };
  for (const json& m : metrics("skip")) {
    if (m.contains("split")) continue;
    const double loss = m["loss"].get<double>(), norm = m["grad_norm"].get<double>();
    if (window_loss.size() >= BadStepFilter::kMinHistory) {
      const double z = std::max(z_of(window_loss, loss), z_of(window_norm, norm));
      EXPECT_FALSE(z > 0.9 * BadStepFilter::kZLimit && z < 1.1 * BadStepFilter::kZLimit)
          << "step " << m["step"] << ": z " << z << " is too close to the limit";
    }
    if (m.contains("skipped")) {
      skipped.push_back(m["step"].get<int64_t>());
      EXPECT_NE(m["skipped"].get<std::string>().find("sd above the last 128 steps'"),
                std::string::npos);
    } else {
      window_loss.push_back(loss), window_norm.push_back(norm);
    }
  }
  std::vector<int64_t> expected;
  for (int64_t s = 251; s <= 260; s++) expected.push_back(s);
  EXPECT_EQ(skipped, expected);
  const auto skip = train_curve("skip");
  EXPECT_EQ(skip.at(250), train_curve("plain").at(250)) << "the same run before the poison";
  EXPECT_LT(skip.at(261).first, train_curve("plain").at(261).first)
      << "the poisoned updates hurt the plain run";

  // Resumed inside the poison (the filter's window is in trainer.json): the same skips, bits.
  ASSERT_EQ(xsa("train " + run + " --skip-bad-steps --ckpt-every 255 --out skip_cut").status, 0);
  ASSERT_EQ(xsa("train --resume skip_cut/ckpt_000255 --force --quiet").status, 0);
  EXPECT_EQ(train_curve("skip_cut"), skip);
  const json state =
      json::parse(read_file(work_dir() / "skip_cut" / "ckpt_000255" / "trainer.json"));
  EXPECT_EQ(state["bad_steps"]["skipped"], 5);
}

TEST_F(Faults, DivergedRunStopsEvenWhenSkipping) {
  const test::CommandResult r =
      xsa("train " + kTiny + " --steps 50 --lr 1e3 --warmup 0 --skip-bad-steps --out diverged");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("17 steps in a row skipped as bad"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the run has diverged"), std::string::npos) << r.err;
}

TEST(BadStepFilter, ZScoresAgainstANaiveReference) {
  BadStepFilter f;
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(0, 1);
  std::vector<double> losses, norms;
  for (int i = 0; i < 300; i++) {
    const double loss = 3 + 0.1 * noise(rng), norm = 1 + 0.05 * noise(rng);
    // The reference: mean and population sd of the last 128 applied values, in long double.
    auto z = [](const std::vector<double>& v, double x) -> long double {
      const size_t n = std::min<size_t>(v.size(), 128);
      long double mean = 0, var = 0;
      for (size_t k = v.size() - n; k < v.size(); k++) mean += v[k];
      mean /= n;
      for (size_t k = v.size() - n; k < v.size(); k++) var += (v[k] - mean) * (v[k] - mean);
      return (x - mean) / std::sqrt(var / n);
    };
    const double spike = i % 37 == 36 ? 1.0 : 0.0;  // now and then a loss far above the rest
    const long double zl = z(losses, loss + spike), zn = z(norms, norm);
    const bool expect_skip = losses.size() >= 32 && (zl > 5 || zn > 5);
    const std::string why = f.judge(loss + spike, norm);
    // (a z within float64's rounding of the limit could be judged either way: none is here)
    const bool clear = std::fabs((double)zl - 5) > 1e-9 && std::fabs((double)zn - 5) > 1e-9;
    if (losses.size() >= 32) {
      ASSERT_TRUE(clear) << i;
    }
    EXPECT_EQ(!why.empty(), expect_skip) << i << ": " << why;
    if (why.empty()) {
      f.applied(loss + spike, norm);
      losses.push_back(loss + spike);
      norms.push_back(norm);
    }
  }
  EXPECT_EQ(f.judge(NAN, 1), "loss is NaN");
  EXPECT_EQ(f.judge(3, INFINITY), "gradient norm is infinite");
  BadStepFilter g;
  g.from_json(f.to_json());
  EXPECT_EQ(g.to_json(), f.to_json());
  EXPECT_THROW(g.from_json(json{{"losses", {1, 2}}, {"grad_norms", {1}}}), Error);
}

TEST_F(Faults, KilledAtRandomMetricsStayWholeLines) {
  std::mt19937 rng(11);
  for (int k = 0; k < 5; k++) {
    fs::remove_all(work_dir() / "killed");  // (the last round's records are not this one's)
    Background b = start_xsa("train " + kTiny + " --steps 100000 --out killed --force", "killed");
    // Killed at a random point once it writes its records (a sanitized build takes 0.2 s or so
    // to get there, so a fixed delay from the start could end it before its first line).
    for (int wait = 0; wait < 2000 && line_count(work_dir() / "killed" / "metrics.jsonl") == 0;
         wait++)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 400));
    ::kill(b.pid, SIGKILL);
    finish(b);
    std::ifstream in(work_dir() / "killed" / "metrics.jsonl");
    size_t lines = 0;
    json parsed;
    for (std::string line; std::getline(in, line); lines++)
      EXPECT_NO_THROW(parsed = json::parse(line)) << "line " << lines << ": " << line;
    EXPECT_GT(lines, 0u);
  }
}

// Resident memory over 3000 steps: what the first steps allocate stays, nothing grows after.
TEST_F(Faults, MemoryStaysFlatOverALongRun) {
  ASSERT_EQ(xsa("train " + kTiny + " --steps 3000 --out long").status, 0);
  double at_500 = 0, highest_after = 0;
  for (const json& m : metrics("long")) {
    if (!m.contains("rss_mb")) continue;
    const int64_t step = m["step"].get<int64_t>();
    if (step == 500) at_500 = m["rss_mb"].get<double>();
    if (step > 500) highest_after = std::max(highest_after, m["rss_mb"].get<double>());
  }
  ASSERT_GT(at_500, 0);
  EXPECT_LE(highest_after - at_500, 0.5) << "MB grown between step 500 and 3000";
}

}  // namespace
}  // namespace xsa
