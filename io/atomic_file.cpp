#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "tensor/error.h"

namespace ng::io {

namespace {
int64_t g_fail_after = -1;  // testing::fail_next_write_after
}  // namespace

namespace testing {
void fail_next_write_after(int64_t bytes) {
  g_fail_after = bytes;
}
}  // namespace testing

void atomic_write_file(const std::string& path, const std::string& bytes, const char* op) {
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
  const size_t limit = fail_after >= 0 ? std::min(bytes.size(), size_t(fail_after)) : bytes.size();
  size_t done = 0;
  while (done < limit) {
    const ssize_t w = ::write(fd, bytes.data() + done, std::min<size_t>(limit - done, 1 << 20));
    if (w < 0) {
      if (errno == EINTR) continue;
      give_up(std::strerror(errno));
    }
    done += size_t(w);
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
