// The progress bar. See progress.h.
#include "examples/common/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace ng::examples {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  long s = long(std::lround(seconds));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof(buf), "%ld:%02ld", s / 60, s % 60);
  return buf;
}

Progress::Progress(std::string label, int64_t total, bool quiet, int64_t first_step, std::FILE* out)
    : label_(std::move(label)),
      total_(total),
      first_step_(first_step),
      out_(out),
      active_(!quiet && out != nullptr && ::isatty(::fileno(out))) {
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

std::string Progress::format(const std::string& label, int64_t step, int64_t total, double loss,
                             double steps_per_s) {
  constexpr int kWidth = 20;
  int filled = total > 0 ? int(kWidth * std::min(step, total) / total) : 0;
  std::string bar(size_t(filled), '#');
  bar += std::string(size_t(kWidth - filled), '-');
  double eta = steps_per_s > 0 ? double(total - step) / steps_per_s : NAN;
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%-20s [%s] %6lld/%lld  loss %.4f  %.1f steps/s  ETA %s", label.c_str(),
                bar.c_str(), (long long)step, (long long)total, loss, steps_per_s,
                format_duration(eta).c_str());
  return buf;
}

void Progress::update(int64_t step, double loss) {
  if (!active_) return;
  auto now = std::chrono::steady_clock::now();
  bool last = step >= total_;
  if (!last && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  double elapsed = std::chrono::duration<double>(now - start_).count();
  double rate = elapsed > 0 ? double(step - first_step_ + 1) / elapsed : 0;
  std::fprintf(out_, "\r%s\033[K", format(label_, step, total_, loss, rate).c_str());
  std::fflush(out_);
  drawn_ = true;
}

void Progress::finish() {
  if (active_ && drawn_) {
    std::fprintf(out_, "\n");
    std::fflush(out_);
  }
  drawn_ = false;
}

}  // namespace ng::examples
