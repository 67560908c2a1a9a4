// Threads. normgrad uses OpenMP when built with it, and runs serially otherwise.
//
// Determinism rule: how work is SPLIT never depends on the thread count. A reduction is cut into fixed
// chunks, each chunk is summed in a fixed order, and the chunk results are combined in a fixed order. So
// 1 thread and 2 threads give bitwise-identical results.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <limits>
#include <mutex>

namespace ng {

// The most threads set_num_threads takes (and the trainers' and benchmarks' --threads). Past it is an
// ng::Error: OpenMP starts that many threads at the next parallel region, and at 100000 libgomp ran out of
// resources and the process crashed (a segmentation fault, 2026-11-28); 5000 ran.
constexpr int kMaxThreads = 1024;

int num_threads();
void set_num_threads(int n);  // n <= 0: the OpenMP default; n > kMaxThreads: ng::Error

// An exception must not leave an OpenMP region: the runtime calls std::terminate, and the process dies
// (a NaN met while converting 100000 floats to i64 aborted the process on 2 threads and was an ng::Error
// on 1, stop 42). So each chunk's exception is caught inside the region, and after it the one of the
// lowest chunk is rethrown: every chunk still runs, so that is the error a serial loop stops at, whatever
// the thread count.
class FirstChunkError {
 public:
  template <typename Fn>
  void run(int64_t chunk, Fn&& fn) noexcept {
    try {
      fn();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (chunk < chunk_) chunk_ = chunk, error_ = std::current_exception();
    }
  }
  void rethrow() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::mutex mutex_;
  int64_t chunk_ = std::numeric_limits<int64_t>::max();
  std::exception_ptr error_;
};

// Run fn(begin, end) over [0, n) cut into chunks of at least `grain` items, in parallel.
// Chunk boundaries depend only on n and grain, never on the thread count. fn may throw (see above).
template <typename Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int64_t chunks = (n + grain - 1) / grain;
  if (chunks == 1 || num_threads() == 1) {
    for (int64_t c = 0; c < chunks; ++c) fn(c * grain, c + 1 == chunks ? n : (c + 1) * grain);
    return;
  }
  FirstChunkError error;
#if defined(NORMGRAD_OPENMP)
#pragma omp parallel for schedule(static) num_threads(num_threads())
#endif
  for (int64_t c = 0; c < chunks; ++c)
    error.run(c, [&] { fn(c * grain, c + 1 == chunks ? n : (c + 1) * grain); });
  error.rethrow();
}

// Like parallel_for, but each thread gets its chunks as ONE call fn(begin, end): a run of consecutive whole
// chunks (with T threads and C chunks, run t is chunks [C t / T, C (t + 1) / T)). A kernel can then carry its
// work across the chunk boundaries: ask for the next rows while it writes these, or start the next rows'
// statistics before this row's output (the row norms' forwards). The chunk boundaries are parallel_for's,
// but where a run begins and ends depends on the thread count, so the determinism rule holds only if fn
// gives each item the same result in whatever run it comes: anything fn carries from item to item may
// restart only at a chunk boundary (UnshiftedGate, nn/norms/norm_simd-inl.h, is such a thing).
template <typename Fn>
void parallel_for_runs(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  const int64_t chunks = (n + grain - 1) / grain;
  const int64_t runs = std::min<int64_t>(chunks, num_threads());
  if (runs <= 1) return fn(int64_t(0), n);
  FirstChunkError error;  // a run's exception, rethrown after the region (the lowest run's)
#if defined(NORMGRAD_OPENMP)
#pragma omp parallel for schedule(static) num_threads(int(runs))
#endif
  for (int64_t t = 0; t < runs; ++t)
    error.run(t, [&] { fn(chunks * t / runs * grain, std::min(n, chunks * (t + 1) / runs * grain)); });
  error.rethrow();
}

}  // namespace ng
