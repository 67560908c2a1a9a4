// The performance helper's fast kernels against their naive twins.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "hwy/targets.h"
#include "normgrad.h"
#include "optim/adam_kernel.h"
#include "simd_targets.h"

using namespace ng;

namespace {

template <typename T>
std::vector<T> random_vector(int64_t n, uint32_t seed, double lo, double hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<T> out(static_cast<size_t>(n));
  for (auto& x : out) x = T(u(rng));
  return out;
}

// Runs both versions of the Adam update on the same random state for three steps. The operations are the
// same, but the compiler may fuse a multiply and an add of the vector version into one FMA (one rounding
// instead of two), so the results agree to a few units in the last place rather than bitwise.
template <typename T>
void expect_adam_fast_equals_reference(int64_t n, bool coupled, bool decoupled) {
  auto p1 = random_vector<T>(n, 1, -1, 1), g = random_vector<T>(n, 2, -1, 1);
  auto m1 = random_vector<T>(n, 3, -0.1, 0.1), v1 = random_vector<T>(n, 4, 0, 0.01);
  auto p2 = p1, m2 = m1, v2 = v1;
  optim::AdamScalars s;
  s.weight_decay = 0.01;
  s.coupled_wd = coupled;
  s.decoupled = decoupled;
  s.decay = decoupled ? 1.0 - 1e-3 * 0.01 : 1.0;
  for (int step = 1; step <= 3; ++step) {
    s.step_size = 1e-3 / (1.0 - std::pow(0.9, step));
    s.bias_correction2_sqrt = std::sqrt(1.0 - std::pow(0.999, step));
    optim::adam_update_reference(p1.data(), g.data(), m1.data(), v1.data(), n, s);
    optim::adam_update(p2.data(), g.data(), m2.data(), v2.data(), n, s);
  }
  const double eps = double(std::numeric_limits<T>::epsilon());
  auto expect_close = [&](const std::vector<T>& a, const std::vector<T>& b, const char* what) {
    for (size_t i = 0; i < a.size(); ++i)
      // m = m + 0.1 (g - m) cancels, so the bound is relative to the inputs' scale (|g|, |p| <= 1), not to m.
      ASSERT_NEAR(double(a[i]), double(b[i]), 16 * eps * (1 + std::abs(double(a[i]))))
          << what << "[" << i << "], n = " << n;
  };
  expect_close(p1, p2, "p");
  expect_close(m1, m2, "m");
  expect_close(v1, v2, "v");
}

}  // namespace

TEST(FusedAdam, FastUpdateMatchesReference) {
  // n: 1, SIMD tails (17, 33), one and several parallel chunks (16 K elements each).
  for (int64_t n : {1, 17, 33, 1000, 40000}) {
    for (int mode = 0; mode < 3; ++mode) {  // plain Adam, Adam + L2 (coupled), AdamW (decoupled)
      expect_adam_fast_equals_reference<float>(n, mode == 1, mode == 2);
      expect_adam_fast_equals_reference<double>(n, mode == 1, mode == 2);
    }
  }
}

TEST(FusedAdam, EverySimdTargetMatchesReference) {
  const int tested = ng::testing::for_each_target([] {
    expect_adam_fast_equals_reference<float>(37, true, false);
    expect_adam_fast_equals_reference<double>(37, false, true);
  });
  EXPECT_GE(tested, 2) << "expected at least SSE4 and one wider target on x86";
}

TEST(FusedAdam, OptimizerStepUsesTheKernelWithPyTorchsFirstStep) {
  // First Adam step from zero moments: m = 0.1 g, v = 0.001 g^2, bias-corrected m_hat = g, v_hat = g^2,
  // so p moves by lr * g / (|g| + eps) = lr * sign(g) (up to eps).
  Tensor p = from_vector(std::vector<double>{1.0, -2.0, 3.0}, {3}).requires_grad_();
  p.set_grad(from_vector(std::vector<double>{0.5, -0.25, 2.0}, {3}));
  optim::Adam adam(std::vector<Tensor>{p}, {.lr = 0.1});
  adam.step();
  auto out = p.to_vector<double>();
  EXPECT_NEAR(out[0], 0.9, 1e-6);
  EXPECT_NEAR(out[1], -1.9, 1e-6);
  EXPECT_NEAR(out[2], 2.9, 1e-6);
}

// The update reads and writes exactly n elements, from any alignment: full vectors use unaligned loads
// and stores, the tail goes through a stack buffer. (Until 2026-11-24 every vector used MaskedLoad, which in
// Highway 1.0.3 on SSE4 is a full *aligned* load: a parameter not 16-byte aligned faulted there.) The arrays
// start one element past an aligned address, and sentinels after n must survive, on every SIMD target.
TEST(FusedAdam, AnyAlignmentAndNothingWrittenPastTheEnd) {
  const int tested = ng::testing::for_each_target([] {
    for (int64_t n = 1; n <= 40; ++n) {
      const int64_t padded = n + 17;  // one leading element (misalignment) and 16 sentinels
      std::vector<float> p(size_t(padded), 0.5f), g(size_t(padded), 0.25f), m(size_t(padded), 0.f),
          v(size_t(padded), 0.f);
      for (int64_t i = n + 1; i < padded; ++i) p[size_t(i)] = m[size_t(i)] = v[size_t(i)] = -7.f;
      optim::AdamScalars s;
      s.step_size = 1e-3 / (1.0 - 0.9);
      s.bias_correction2_sqrt = std::sqrt(1.0 - 0.999);
      optim::adam_update(p.data() + 1, g.data() + 1, m.data() + 1, v.data() + 1, n, s);
      // First step from m = v = 0: p moves by lr (Adam's first step is lr * sign(g)).
      for (int64_t i = 1; i <= n; ++i) ASSERT_NEAR(p[size_t(i)], 0.5f - 1e-3f, 1e-6f) << "element " << i;
      for (int64_t i = n + 1; i < padded; ++i) {
        ASSERT_EQ(p[size_t(i)], -7.f) << "p[" << i << "] written past n = " << n;
        ASSERT_EQ(m[size_t(i)], -7.f) << "m[" << i << "] written past n = " << n;
        ASSERT_EQ(v[size_t(i)], -7.f) << "v[" << i << "] written past n = " << n;
      }
    }
  });
  EXPECT_GE(tested, 2) << "expected at least SSE4 and one wider target on x86";
}
