// Quick cross-checks of the core ops against references (the full per-op suites live in test_ops_*.cpp).
#include <gtest/gtest.h>

#include <cmath>

#include "normgrad.h"
#include "ops_test_util.h"
#include "worst_error.h"

using namespace ng;

using ng::testing::max_abs_diff;  // NaN on one side only is an infinite difference

// The worst error the comparisons across the suite keep: a NaN anywhere makes it NaN, and it stays NaN, so
// EXPECT_LT(worst, tol) fails (with std::max it was dropped: a kernel writing NaN passed).
TEST(SmokeCore, WorstErrorKeepsANaN) {
  using ng::test::worse;
  EXPECT_EQ(worse(0.5, 0.25), 0.5);
  EXPECT_EQ(worse(0.25, 0.5), 0.5);
  EXPECT_TRUE(std::isnan(worse(0.5, NAN)));
  EXPECT_TRUE(std::isnan(worse(NAN, 0.5)));  // stays NaN after a later finite error
  EXPECT_TRUE(std::isnan(worse(NAN, INFINITY)));
  EXPECT_EQ(worse(0.5, INFINITY), INFINITY);
  Tensor a = from_vector(std::vector<double>{1, 2, 3}, Shape{3});
  Tensor b = from_vector(std::vector<double>{1, NAN, 3}, Shape{3});
  EXPECT_FALSE(max_abs_diff(a, b) < 1e-4);
  EXPECT_FALSE(max_abs_diff(b, a) < 1e-4);
}

TEST(SmokeCore, MatmulMatchesNaiveInAllTransposeForms) {
  Generator g(7);
  for (auto [M, K, N] : {std::tuple{1, 1, 1}, {3, 5, 7}, {17, 33, 9}, {64, 31, 65}}) {
    Tensor a = randn({M, K}, g), b = randn({K, N}, g);
    EXPECT_LT(max_abs_diff(matmul(a, b), matmul_naive(a, b)), 1e-4);
    Tensor at = randn({K, M}, g).t(), bt = randn({N, K}, g).t();  // transposed views
    EXPECT_LT(max_abs_diff(matmul(at, bt), matmul_naive(at.contiguous(), bt.contiguous())), 1e-4);
  }
  Tensor a = randn({2, 3, 4, 5}, g), b = randn({3, 5, 6}, g);  // broadcast batch
  EXPECT_EQ(matmul(a, b).shape(), (Shape{2, 3, 4, 6}));
  EXPECT_LT(max_abs_diff(matmul(a, b), matmul_naive(a, b)), 1e-4);
}

TEST(SmokeCore, GradcheckCoreOps) {
  Generator g(3);
  Tensor a = randn({3, 4}, g, DType::f64).requires_grad_();
  Tensor b = randn({4}, g, DType::f64).requires_grad_();
  Tensor c = randn({4, 2}, g, DType::f64).requires_grad_();
  auto check = [](const GradcheckFn& f, const std::vector<Tensor>& in) {
    GradcheckResult r = gradcheck(f, in);
    EXPECT_TRUE(r.ok) << r.message();
  };
  check([](auto& in) { return add(in[0], in[1]); }, {a, b});
  check([](auto& in) { return mul(in[0], in[1]); }, {a, b});
  check([](auto& in) { return div(in[0], add(mul(in[1], in[1]), 1.0)); }, {a, b});
  check([](auto& in) { return matmul(in[0], in[1]); }, {a, c});
  check([](auto& in) { return matmul(in[0].t(), in[0]); }, {a});
  check([](auto& in) { return sum(in[0], {0}); }, {a});
  check([](auto& in) { return mean(in[0], {1}, true); }, {a});
  check([](auto& in) { return var(in[0], {1}); }, {a});
  check([](auto& in) { return max(in[0], 0); }, {a});
  check([](auto& in) { return in[0].permute({1, 0}).reshape({2, 6}); }, {a});
  check([](auto& in) { return in[0].slice(1, 1, 4, 2); }, {a});
  check([](auto& in) { return cat({in[0], in[0].narrow(0, 0, 1)}, 0); }, {a});
  check([](auto& in) { return gelu(in[0]); }, {a});
  check([](auto& in) { return silu(in[0]); }, {a});
  check([](auto& in) { return tanh(in[0]); }, {a});
  check([](auto& in) { return sigmoid(in[0]); }, {a});
  check([](auto& in) { return rsqrt(add(square(in[0]), 1.0)); }, {a});
}

TEST(SmokeCore, HalfConversionRoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f).bits, 0x3c00);
  EXPECT_EQ(f32_to_f16(65504.0f).bits, 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f).bits, 0x7c00);                // rounds up to inf
  EXPECT_EQ(f32_to_f16(5.960464477539063e-08f).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(f16_to_f32(f16{0x0001}), 5.960464477539063e-08f);
  EXPECT_EQ(f32_to_bf16(1.00390625f).bits, 0x3f80);  // tie -> even (down)
  EXPECT_EQ(f32_to_bf16(1.01171875f).bits, 0x3f82);  // tie -> even (up)
}
