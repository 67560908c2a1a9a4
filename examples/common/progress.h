// A one-line progress bar on stderr for long runs:
//
//   Pre-LN + RMSNorm  [##########----------]  512/1000  loss 2.7412  38.1 steps/s  ETA 0:13
//
// It redraws at most 10 times a second, and stays silent when its stream is not a terminal (CI logs, pipes,
// files) or when quiet is set. finish() ends the line.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace ng::examples {

class Progress {
 public:
  // first_step: the first step this process runs (after --resume, the checkpoint's step + 1), so that
  // steps/s and the ETA count only the steps done here.
  // out: where the bar goes (stderr; the tests pass a file or a pseudo-terminal). The bar is active only
  // when out is a terminal (isatty) and quiet is false.
  Progress(std::string label, int64_t total, bool quiet, int64_t first_step = 1, std::FILE* out = stderr);
  ~Progress() { finish(); }

  // Call after step `step` (1-based count of steps done) with its loss.
  void update(int64_t step, double loss);
  void finish();

  bool active() const { return active_; }

  // The bar's text for the given state (no terminal needed): used by update() and by the tests.
  static std::string format(const std::string& label, int64_t step, int64_t total, double loss,
                            double steps_per_s);

 private:
  std::string label_;
  int64_t total_;
  int64_t first_step_;
  std::FILE* out_;
  bool active_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// "1:05", "12:00:03": seconds as a clock.
std::string format_duration(double seconds);

}  // namespace ng::examples
