#include "tensor/parallel.h"

#include "tensor/error.h"

#if defined(NORMGRAD_OPENMP)
#include <omp.h>
#endif

namespace ng {

namespace {
int g_threads = 0;  // 0: not chosen yet
}

int num_threads() {
  if (g_threads > 0) return g_threads;
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
  g_threads = n > 0 ? n : 0;
  if (n > 0) omp_set_num_threads(n);
#else
  (void)n;
  g_threads = 1;
#endif
}

}  // namespace ng
