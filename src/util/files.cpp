#include "xsa/util/files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("{}: cannot create: {}", tmp.string(), std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      fail("{}: write failed: {}", tmp.string(), std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    fail("{}: flush failed: {}", tmp.string(), std::strerror(errno));
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

bool path_is_inside(const std::filesystem::path& path, const std::filesystem::path& folder) {
  std::error_code ec;
  const auto inner = std::filesystem::weakly_canonical(path, ec);
  const auto outer = std::filesystem::weakly_canonical(folder, ec);
  if (ec) return false;
  const std::filesystem::path rel = inner.lexically_relative(outer);
  return !rel.empty() && *rel.begin() != "..";
}

}  // namespace xsa
