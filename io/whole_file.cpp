#include "io/whole_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "tensor/error.h"

namespace ng::io {

namespace {
int64_t g_fail_after = -1;  // testing::fail_next_write_after
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
}  // namespace testing

void atomic_write_file(const std::string& path, std::string_view bytes, const char* op) {
  atomic_write_file(path, {bytes}, op);
}

void atomic_write_file(const std::string& path, std::initializer_list<std::string_view> pieces,
                       const char* op) {
  std::error_code ec;
  NG_CHECK(!std::filesystem::is_directory(path, ec), op, "cannot write '", path, "': it is a folder");
  // A name no other writer uses: this process's id, and a count for the threads of this process.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
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
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    fail(op, "renaming '", tmp, "' to '", path, "' failed: ", why);
  }
  // Make the rename itself durable: fsync the folder.
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace ng::io
