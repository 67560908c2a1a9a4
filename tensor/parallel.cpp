#include "tensor/parallel.h"

#include <atomic>

#include "tensor/error.h"

#if defined(NORMGRAD_OPENMP)
#include <omp.h>
#endif

namespace ng {

namespace {
// 0: not chosen yet. Atomic because any thread may set it while others run kernels that read it. A plain int
// was a data race: stop 40 found it by reading the globals, and ThreadSanitizer reports it in a plain-int
// build of UserThreads.SetNumThreadsFromAnotherThreadWhileKernelsRun. Relaxed order is enough: the count only
// sizes the next parallel region, and a kernel's result never depends on it (tensor/parallel.h).
std::atomic<int> g_threads{0};
}  // namespace

int num_threads() {
  if (const int n = g_threads.load(std::memory_order_relaxed); n > 0) return n;
#if defined(NORMGRAD_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

void set_num_threads(int n) {
  NG_CHECK(n <= kMaxThreads, "set_num_threads", "expected at most ", kMaxThreads, " threads, got ", n,
           " (0 or less: the OpenMP default)");
#if defined(NORMGRAD_OPENMP)
  // OpenMP's own count before normgrad first changed it (OMP_NUM_THREADS, or the cores), read once, at the
  // first call. n <= 0 puts it back: leaving the last omp_set_num_threads in place made set(1) then set(0)
  // stay on one thread (num_threads() asks omp_get_max_threads(), which still said 1).
  static const int openmp_default = omp_get_max_threads();
  g_threads.store(n > 0 ? n : 0, std::memory_order_relaxed);
  omp_set_num_threads(n > 0 ? n : openmp_default);
#else
  (void)n;
  g_threads.store(1, std::memory_order_relaxed);
#endif
}

}  // namespace ng
