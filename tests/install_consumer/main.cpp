// An outside project that uses an installed normgrad through find_package(normgrad).
// Run by the ctest "InstallConsumer": prints the gradient of sum(x*x) at x = (1, 2, 3). With the CUDA
// backend it also includes the installed cuda/backend.h, as that header tells users to, and asks it for the
// device count (an ng::Error where there is no driver, as on a machine without a GPU).
#include <cstdio>

#include "normgrad.h"
#if NORMGRAD_HAVE_CUDA
#include "cuda/backend.h"
#endif

int main() {
  ng::Tensor x = ng::tensor({1.0, 2.0, 3.0}, ng::DType::f64).requires_grad_();
  ng::sum(ng::mul(x, x)).backward();
  std::vector<double> g = x.grad().to_vector<double>();
  std::printf("grad %g %g %g\n", g[0], g[1], g[2]);
#if NORMGRAD_HAVE_CUDA
  try {
    std::printf("cuda devices: %d\n", ng::cuda::device_count());
  } catch (const ng::Error& e) {
    std::printf("cuda: %s\n", e.what());
  }
#endif
  return (g[0] == 2 && g[1] == 4 && g[2] == 6) ? 0 : 1;
}
