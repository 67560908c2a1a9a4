#include "io/whole_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <new>
#include <random>
#include <set>
#include <stdexcept>
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
  // Exactly the file's size, no more. A file larger than memory (or than a string can hold) is an
  // ng::Error naming it, not a std::bad_alloc or std::length_error from deep inside the loader.
  std::string bytes;
  auto too_big = [&] {
    fail(op, path, ": the file is ", size, " bytes, more than this process can allocate to read it");
  };
  try {
    bytes.resize(size_t(size));
  } catch (const std::bad_alloc&) {
    too_big();
  } catch (const std::length_error&) {  // past std::string::max_size()
    too_big();
  }
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

void check_write_target(const std::string& path, const char* op) {
  namespace fs = std::filesystem;
  std::error_code ec;
  NG_CHECK(!fs::is_directory(path, ec), op, "cannot write '", path, "': it is a folder");
  // The rename replaces whatever is at `path` by a regular file: a FIFO or a device node (as root,
  // /dev/null) would have been replaced without a word. A symlink is replaced itself, never its target.
  const fs::file_status st = fs::symlink_status(path, ec);
  NG_CHECK(!fs::exists(st) || fs::is_regular_file(st) || fs::is_symlink(st), op, "cannot write '", path,
           "': it is not a regular file (a device, pipe or socket), which the save would replace");
}

namespace {

// The folder that holds `path` ("." for a bare name).
std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

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
// make us write elsewhere) is never opened; another name is tried. It is created 0666 less the umask, as
// any new file is; when `path` is already a regular file, the temporary file takes its permission bits
// instead, so that a file made private (chmod 600) stays private when it is saved again.
std::string write_temp(const std::string& path, std::initializer_list<std::string_view> pieces,
                       const char* op) {
  check_write_target(path, op);
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    tmp = temp_name(path);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  NG_CHECK(fd >= 0, op, "cannot write '", path, "': cannot create its temporary file '", tmp,
           "': ", std::strerror(errno));
  auto give_up = [&](const std::string& why) {
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(op, "writing '", path, "' failed: ", why, " (the old file, if any, is untouched)");
  };
  // The old file's permissions (lstat: a symlink at `path` is replaced itself, and has none of its own).
  struct stat old_st {};
  if (::lstat(path.c_str(), &old_st) == 0 && S_ISREG(old_st.st_mode) &&
      ::fchmod(fd, old_st.st_mode & 07777) != 0)
    give_up(std::string("cannot give the temporary file the old file's permissions: ") +
            std::strerror(errno));
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

// Step 3: rename the temporary file over `path` (on failure it is removed, and an ng::Error says why).
void rename_temp(const std::string& tmp, const std::string& path, const char* op) {
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    fail(op, "renaming '", tmp, "' to '", path, "' failed: ", why);
  }
}

// Step 4: fsync the folder of `path`, so that the rename is on disk. A folder that cannot be opened (no read
// permission) is skipped, as is one whose file system does not fsync folders (EINVAL, EROFS); any other
// fsync error (EIO) is reported: the new file is in place, but it may not survive a crash.
void fsync_folder_of(const std::string& path, const char* op) {
  const int dfd = ::open(folder_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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
  rename_temp(write_temp(path, pieces, op), path, op);
  fsync_folder_of(path, op);
}

void atomic_write_files(const std::vector<std::pair<std::string, std::string_view>>& files, const char* op) {
  // Nothing is renamed until every temporary file is written: a failure while writing (a full disk, a folder
  // where a file should go) removes the temporary files written so far and leaves every old file as it was.
  for (const auto& [path, _] : files) check_write_target(path, op);
  std::vector<std::string> temps;
  try {
    for (const auto& [path, bytes] : files) temps.push_back(write_temp(path, {bytes}, op));
  } catch (...) {
    for (const std::string& t : temps) ::unlink(t.c_str());
    throw;
  }
  // Then every rename, back to back, and only then the folders' fsyncs (one per folder): a failed fsync
  // used to stop the set after its first file, leaving the other temporary files behind and the folder
  // with one new file beside the old run's others. A rename that fails removes the temporaries not yet
  // renamed.
  for (size_t i = 0; i < files.size(); ++i) {
    try {
      rename_temp(temps[i], files[i].first, op);
    } catch (...) {
      for (size_t k = i + 1; k < temps.size(); ++k) ::unlink(temps[k].c_str());
      throw;
    }
  }
  std::set<std::string> synced;
  for (const auto& [path, _] : files)
    if (synced.insert(folder_of(path)).second) fsync_folder_of(path, op);
}

}  // namespace ng::io
