// Threads. normgrad uses OpenMP when built with it, and runs serially otherwise.
//
// Determinism rule: how work is SPLIT never depends on the thread count. A reduction is cut into fixed
// chunks, each chunk is summed in a fixed order, and the chunk results are combined in a fixed order. So
// 1 thread and 2 threads give bitwise-identical results.
#pragma once

#include <cstdint>

namespace ng {

int num_threads();
void set_num_threads(int n);  // n <= 0: the OpenMP default

// Run fn(begin, end) over [0, n) cut into chunks of at least `grain` items, in parallel.
// Chunk boundaries depend only on n and grain, never on the thread count.
template <typename Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int64_t chunks = (n + grain - 1) / grain;
  if (chunks == 1 || num_threads() == 1) {
    for (int64_t c = 0; c < chunks; ++c) fn(c * grain, c + 1 == chunks ? n : (c + 1) * grain);
    return;
  }
#if defined(NORMGRAD_OPENMP)
#pragma omp parallel for schedule(static) num_threads(num_threads())
#endif
  for (int64_t c = 0; c < chunks; ++c) fn(c * grain, c + 1 == chunks ? n : (c + 1) * grain);
}

}  // namespace ng
