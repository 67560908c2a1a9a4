#include "io/whole_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <random>
#include <utility>
#include <vector>

#include "tensor/error.h"

namespace ng::io {

namespace {
thread_local int64_t g_fail_after = -1;  // testing::fail_next_write_after (per thread, like the next suffix)
thread_local int g_folder_fsync_errno = 0;  // testing::fail_next_folder_fsync
}  // namespace

int64_t regular_file_size(const std::string& path, const char* op) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  NG_CHECK(fs::exists(st), op, path, ": ",
           ec && ec != std::errc::no_such_file_or_directory ? ec.message() : std::string("no such file"));
  NG_CHECK(fs::is_regular_file(st), op, path, ": not a regular file (",
           fs::is_directory(st) ? "a folder" : "a device, pipe or socket", ")");
  const auto size = fs::file_size(path, ec);
  NG_CHECK(!ec, op, path, ": cannot read the file size: ", ec.message());
  return int64_t(size);
}

std::string read_whole_file(const std::string& path, const char* op) {
  const int64_t size = regular_file_size(path, op);
  std::ifstream f(path, std::ios::binary);
  NG_CHECK(f.good(), op, path, ": cannot open the file: ", std::strerror(errno));
  std::string bytes(size_t(size), '\0');  // exactly the file's size, no more
  f.read(bytes.data(), std::streamsize(size));
  NG_CHECK(f.gcount() == size, op, path, ": read ", f.gcount(), " of ", size, " bytes");
  return bytes;
}

namespace testing {
void fail_next_write_after(int64_t bytes) {
  g_fail_after = bytes;
}
void fail_next_folder_fsync(int err) {
  g_folder_fsync_errno = err;
}
}  // namespace testing

namespace {

// A fresh name beside `path` for its temporary file: this process's id, a count for its threads, and 64
// random bits, so that no other writer (another process, or one of the same pid in another PID namespace
// writing to a shared folder) can guess it. Tests can fix the next suffix (testing::next_temp_suffix).
thread_local std::string g_next_suffix;
std::string temp_name(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  std::string suffix;
  std::swap(suffix, g_next_suffix);
  if (suffix.empty()) {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    char buf[48];
    std::snprintf(buf, sizeof(buf), "%d.%llu.%016llx", int(::getpid()), (unsigned long long)counter++,
                  (unsigned long long)rng());
    suffix = buf;
  }
  return path + ".tmp." + suffix;
}

// Step 1 and 2: the bytes in a new temporary file beside `path`, on disk. Returns its name. The file is
// created with O_EXCL | O_NOFOLLOW: a name that already exists (a file, or a symlink someone planted to
// make us write elsewhere) is never opened; another name is tried.
std::string write_temp(const std::string& path, std::initializer_list<std::string_view> pieces,
                       const char* op) {
  std::error_code ec;
  NG_CHECK(!std::filesystem::is_directory(path, ec), op, "cannot write '", path, "': it is a folder");
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    tmp = temp_name(path);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) break;
  }
  NG_CHECK(fd >= 0, op, "cannot create '", tmp, "': ", std::strerror(errno));
  auto give_up = [&](const std::string& why) {
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(op, "writing '", path, "' failed: ", why, " (the old file, if any, is untouched)");
  };
  const int64_t fail_after = g_fail_after;  // fault injection for tests (testing::fail_next_write_after)
  g_fail_after = -1;
  size_t done = 0;  // bytes written, over all pieces
  for (std::string_view piece : pieces) {
    const size_t limit = fail_after >= 0
                             ? std::min(piece.size(), size_t(fail_after) - std::min(done, size_t(fail_after)))
                             : piece.size();
    size_t at = 0;
    while (at < limit) {
      const ssize_t w = ::write(fd, piece.data() + at, std::min<size_t>(limit - at, 1 << 20));
      if (w < 0) {
        if (errno == EINTR) continue;
        give_up(std::strerror(errno));
      }
      at += size_t(w);
    }
    done += at;
  }
  if (fail_after >= 0) give_up("injected fault after " + std::to_string(done) + " bytes");
  if (::fsync(fd) != 0) give_up(std::string("fsync: ") + std::strerror(errno));
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    fail(op, "writing '", path, "' failed: close: ", std::strerror(errno));
  }
  return tmp;
}

// Steps 3 and 4: rename the temporary file over `path`, and fsync the folder so that the rename is on disk.
// A folder that cannot be opened (no read permission) is skipped, as is one whose file system does not
// fsync folders (EINVAL); any other fsync error (EIO) is reported: the new file is in place, but it may
// not survive a crash.
void commit_temp(const std::string& tmp, const std::string& path, const char* op) {
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    fail(op, "renaming '", tmp, "' to '", path, "' failed: ", why);
  }
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return;
  int rc = ::fsync(dfd), err = errno;
  ::close(dfd);
  if (const int injected = std::exchange(g_folder_fsync_errno, 0)) rc = -1, err = injected;  // (tests)
  NG_CHECK(rc == 0 || err == EINVAL || err == EROFS, op, "'", path,
           "' is written, but fsync of its folder failed: ", std::strerror(err),
           " (the rename may not survive a crash)");
}

}  // namespace

namespace testing {
void next_temp_suffix(const std::string& suffix) {
  g_next_suffix = suffix;
}
}  // namespace testing

void atomic_write_file(const std::string& path, std::string_view bytes, const char* op) {
  atomic_write_file(path, {bytes}, op);
}

void atomic_write_file(const std::string& path, std::initializer_list<std::string_view> pieces,
                       const char* op) {
  commit_temp(write_temp(path, pieces, op), path, op);
}

void atomic_write_files(const std::vector<std::pair<std::string, std::string_view>>& files, const char* op) {
  // Nothing is renamed until every temporary file is written: a failure while writing (a full disk, a folder
  // where a file should go) removes the temporary files written so far and leaves every old file as it was.
  std::error_code ec;
  for (const auto& [path, _] : files)
    NG_CHECK(!std::filesystem::is_directory(path, ec), op, "cannot write '", path, "': it is a folder");
  std::vector<std::string> temps;
  try {
    for (const auto& [path, bytes] : files) temps.push_back(write_temp(path, {bytes}, op));
  } catch (...) {
    for (const std::string& t : temps) ::unlink(t.c_str());
    throw;
  }
  for (size_t i = 0; i < files.size(); ++i) commit_temp(temps[i], files[i].first, op);
}

}  // namespace ng::io
