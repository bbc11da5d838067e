// File helpers that name the path in every error, and atomic writes: data goes to a temporary file
// beside the target, is flushed to disk, then renamed over it, so a crash at any moment leaves
// either the old file or the new one, never a torn one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace xsa {

std::string read_file(const std::filesystem::path& path);  // throws Error naming the path
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);
// Flushes a directory entry (after a rename into it) so the rename itself survives a crash.
void sync_directory(const std::filesystem::path& dir);
// Whether `path` is `folder` or lies inside it (symbolic links and `..` resolved as far as they
// exist).
bool path_is_inside(const std::filesystem::path& path, const std::filesystem::path& folder);

// ---- What a command owns ----
// The files and folders a command creates, writes and removes (output folders and their .partial
// twins, run and report folders, checkpoints, lock files, the temporaries of atomic writes) are
// reached without following a symbolic link in their own name: a link found where one of them goes
// was not made by xsa, so it is refused in one line, never written through and never emptied.
// (The folders above them may be links: a runs/ linked to a larger disk is the user's choice.)
// "PATH: is a symbolic link; xsa does not write through links (remove it, or choose another path)"
void refuse_symlink(const std::filesystem::path& path);
// mkdir -p: creates `dir` and its missing parents; an existing `dir` must be a folder, not a link.
void create_owned_folder(const std::filesystem::path& dir, const char* what = "folder");
// open(2) with O_NOFOLLOW | O_CLOEXEC: a link at `path` gives refuse_symlink's line.
int open_owned(const std::filesystem::path& path, int flags, unsigned mode = 0644);
// Removes a file, or a folder and all it holds, that the command owns; a link (at `path` or
// inside) is removed itself, never what it points to. Nothing happens when `path` is missing.
void remove_owned(const std::filesystem::path& path);

// A folder's path as given, without a trailing slash (tok/ is tok: its name is tok, its parent .).
std::filesystem::path folder_path(const std::filesystem::path& path);

// An output folder a command writes whole (token shards, a vocabulary). An existing `out` is
// replaced only with `force`, and only when it holds `marker` (a folder the command wrote before:
// never data/ or whatever else a mistyped --out names); one line says which and why.
void check_output_folder(const std::filesystem::path& out, bool force, const char* marker);
// It is built in a temporary folder beside `out` and renamed into place by commit(), so it is there
// complete or not at all; the temporary folder goes when the work fails first. An old `out` moves
// aside first and goes once the new one is in.
// A resumable output's temporary folder is <out>.partial, found again by the next run (one live
// process per output: FolderLock), and kept when keep() was called before the work failed.
class FolderOutput {
 public:
  enum class Resumable { no, yes };
  FolderOutput(std::filesystem::path out, bool force, const char* marker,
               Resumable resumable = Resumable::no);
  ~FolderOutput();
  FolderOutput(const FolderOutput&) = delete;
  FolderOutput& operator=(const FolderOutput&) = delete;
  const std::filesystem::path& tmp() const { return tmp_; }
  // The work stops here and may continue: leave tmp() as it is (false: it goes again on failure).
  void keep(bool yes = true) { keep_ = yes; }
  void commit();

 private:
  std::filesystem::path out_, tmp_;
  bool committed_ = false, keep_ = false;
};

// One live process per folder. The lock file (created if missing) is held with flock(2) for the
// lock's lifetime and holds who holds it; the kernel drops the lock when the process ends, however
// it ends, so a lock left behind by a dead process blocks nothing. When another live process holds
// it: Error "FOLDER: in use by process PID (COMMAND) on HOST since TIME; ...".
class FolderLock {
 public:
  FolderLock(const std::filesystem::path& lock_file, const std::filesystem::path& folder);
  ~FolderLock();  // removes the lock file, then lets go
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace xsa

namespace xsa {

// A read-only memory map of a whole file (empty files map to nothing). Errors name the path.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace xsa
