#include "xsa/util/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>

#include "xsa/util/error.h"

namespace xsa {

std::string read_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("{}: no such file", path.string());
  if (std::filesystem::is_directory(path, ec))
    fail("{}: is a directory, expected a file", path.string());
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open for reading: {}", path.string(), std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail("{}: read error", path.string());
  return bytes;
}

void refuse_symlink(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_symlink(std::filesystem::symlink_status(path, ec)))
    fail(
        "{}: is a symbolic link; xsa does not write through links (remove it, or choose another "
        "path)",
        path.string());
}

void create_owned_folder(const std::filesystem::path& dir, const char* what) {
  refuse_symlink(dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("{}: cannot create the {}: {}", dir.string(), what, ec.message());
  refuse_symlink(dir);  // made by someone else between the two looks
  if (!std::filesystem::is_directory(dir, ec)) fail("{}: exists and is not a folder", dir.string());
}

int open_owned(const std::filesystem::path& path, int flags, unsigned mode) {
  const int fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
  if (fd < 0 && errno == ELOOP) refuse_symlink(path);
  return fd;
}

void remove_owned(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);  // a link is removed, not followed (nor any inside)
  if (ec && std::filesystem::exists(std::filesystem::symlink_status(path, ec)))
    fail("{}: cannot remove: {}", path.string(), ec.message());
}

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  int fd = open_owned(tmp, O_WRONLY | O_CREAT | O_TRUNC);
  // Errors name the file being written, not its temporary twin.
  if (fd < 0) fail("{}: cannot create: {}", path.string(), std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      fail("{}: write failed: {}", path.string(), std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  const int sync_err = errno;
  if (::close(fd) != 0 || !synced) {
    const int err = synced ? errno : sync_err;
    ::unlink(tmp.c_str());
    fail("{}: flush failed: {}", path.string(), std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("{}: cannot rename into place: {}", path.string(), std::strerror(err));
  }
  sync_directory(path.has_parent_path() ? path.parent_path() : std::filesystem::path("."));
}

void sync_directory(const std::filesystem::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: some filesystems do not allow opening directories
  ::fsync(fd);
  ::close(fd);
}

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open: {}", path.string(), std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: not a regular file", path.string());
  }
  size_ = (size_t)st.st_size;
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      fail("{}: cannot map: {}", path.string(), std::strerror(err));
    }
    data_ = static_cast<const unsigned char*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
}

std::filesystem::path folder_path(const std::filesystem::path& path) {
  std::filesystem::path p = path.lexically_normal();
  return p.filename().empty() && p.has_parent_path() ? p.parent_path() : p;
}

void check_output_folder(const std::filesystem::path& out, bool force, const char* marker) {
  std::error_code ec;
  if (!std::filesystem::exists(out, ec)) return;
  if (!force) fail("{}: already exists; pass --force to replace it", out.string());
  if (!std::filesystem::exists(out / marker, ec))
    fail("{}: already exists and holds no {}: not an output of this command, so not replaced",
         out.string(), marker);
}

FolderOutput::FolderOutput(std::filesystem::path out, bool force, const char* marker,
                           Resumable resumable)
    : out_(folder_path(out)) {
  refuse_symlink(out_);  // a link as the output (dangling or not): said now, not at the rename
  check_output_folder(out_, force, marker);
  std::error_code ec;
  if (resumable == Resumable::yes) {
    tmp_ = out_.parent_path() / (out_.filename().string() + ".partial");
    refuse_symlink(tmp_);  // its contents are cleared and it becomes the output: never a link
    std::filesystem::create_directory(tmp_, ec);
    refuse_symlink(tmp_);
    if (!std::filesystem::is_directory(tmp_, ec))
      fail("{}: cannot create: {}", tmp_.string(), ec ? ec.message() : "not a folder");
    return;
  }
  tmp_ = out_.parent_path() / (out_.filename().string() + ".partial-" + std::to_string(::getpid()));
  remove_owned(tmp_);
  if (!std::filesystem::create_directory(tmp_, ec))
    fail("{}: cannot create: {}", tmp_.string(), ec.message());
}

FolderOutput::~FolderOutput() {
  std::error_code ec;
  if (!committed_ && !keep_) std::filesystem::remove_all(tmp_, ec);  // never a link: see above
}

void FolderOutput::commit() {
  std::error_code ec;
  const std::filesystem::path old =
      out_.parent_path() / (out_.filename().string() + ".old-" + std::to_string(::getpid()));
  if (std::filesystem::exists(out_, ec)) std::filesystem::rename(out_, old, ec);
  if (ec) fail("{}: cannot move the old folder aside: {}", out_.string(), ec.message());
  std::filesystem::rename(tmp_, out_, ec);
  if (ec) fail("{}: cannot move the new folder into place: {}", out_.string(), ec.message());
  committed_ = true;
  sync_directory(out_.parent_path().empty() ? std::filesystem::path(".") : out_.parent_path());
  std::filesystem::remove_all(old, ec);
}

bool path_is_inside(const std::filesystem::path& path, const std::filesystem::path& folder) {
  std::error_code ec;
  const auto inner = std::filesystem::weakly_canonical(path, ec);
  const auto outer = std::filesystem::weakly_canonical(folder, ec);
  if (ec) return false;
  const std::filesystem::path rel = inner.lexically_relative(outer);
  return !rel.empty() && *rel.begin() != "..";
}

namespace {

// "process 1234 (xsa train --out runs/a) on host since 2026-12-01 07:40:00 UTC"
std::string describe_this_process() {
  std::string command = read_file("/proc/self/cmdline");
  while (!command.empty() && command.back() == '\0') command.pop_back();
  for (char& c : command)
    if (c == '\0' || c == '\n') c = ' ';
  if (command.size() > 200) command = command.substr(0, 200) + "...";
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  char when[64] = "";
  const std::time_t now = std::time(nullptr);
  std::tm tm;
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", ::gmtime_r(&now, &tm));
  return "process " + std::to_string(::getpid()) + " (" + command + ") on " + host + " since " +
         when;
}

}  // namespace

FolderLock::FolderLock(const std::filesystem::path& lock_file, const std::filesystem::path& folder)
    : path_(lock_file) {
  // A holder that just let go removed its file after we opened it: then lock the one now there.
  for (int attempt = 0; attempt < 100 && fd_ < 0; attempt++) {
    const int fd = open_owned(path_, O_RDWR | O_CREAT);
    if (fd < 0) fail("{}: cannot create the lock file: {}", path_.string(), std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      char holder[512] = {};
      const ssize_t n = ::pread(fd, holder, sizeof holder - 1, 0);
      ::close(fd);
      if (err != EWOULDBLOCK) fail("{}: cannot lock: {}", path_.string(), std::strerror(err));
      fail("{}: in use by {}; wait for it to end or stop it, or choose another folder",
           folder.string(), n > 0 ? std::string(holder, (size_t)n) : "another process");
    }
    struct stat held, named;
    if (::fstat(fd, &held) == 0 && ::stat(path_.c_str(), &named) == 0 &&
        held.st_ino == named.st_ino && held.st_dev == named.st_dev)
      fd_ = fd;
    else
      ::close(fd);
  }
  if (fd_ < 0) fail("{}: cannot lock: it keeps being replaced", path_.string());
  const std::string me = describe_this_process();
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != (ssize_t)me.size()) {
    const int err = errno;
    ::unlink(path_.c_str());
    ::close(fd_);
    fail("{}: cannot write: {}", path_.string(), std::strerror(err));
  }
}

FolderLock::~FolderLock() {
  ::unlink(path_.c_str());  // while still held, so no one locks the file on its way out
  ::close(fd_);
}

}  // namespace xsa
