// softmax / log_softmax: values, numerical safety, gradients, fast == reference, errors, determinism.
#include <cfloat>

#include "ops_test_util.h"
#include "simd_targets.h"
#include "worst_error.h"

using namespace ng;
using namespace ng::testing;

TEST(Softmax, ForwardHandComputed) {
  Tensor x = tensor({1.0, 2.0, 3.0}, DType::f64);
  // e^1, e^2, e^3 over their sum 30.19287485...
  auto y = softmax(x).to_vector<double>();
  EXPECT_NEAR(y[0], 0.09003057317038046, 1e-15);
  EXPECT_NEAR(y[1], 0.24472847105479764, 1e-15);
  EXPECT_NEAR(y[2], 0.6652409557748219, 1e-15);
  // log_softmax = x - log(sum e^x) = x - 3.40760596444438
  auto l = log_softmax(x).to_vector<double>();
  EXPECT_NEAR(l[0], -2.40760596444438, 1e-14);
  EXPECT_NEAR(l[1], -1.40760596444438, 1e-14);
  EXPECT_NEAR(l[2], -0.40760596444438, 1e-14);
}

TEST(Softmax, LargeLogitsDoNotOverflow) {
  Tensor x = tensor({{1000.0, 1000.0}, {1000.0, 0.0}});
  auto y = softmax(x).to_vector<double>();
  EXPECT_FLOAT_EQ(y[0], 0.5f);
  EXPECT_FLOAT_EQ(y[1], 0.5f);
  EXPECT_FLOAT_EQ(y[2], 1.0f);
  EXPECT_EQ(y[3], 0.0);
  auto l = log_softmax(x).to_vector<double>();
  EXPECT_NEAR(l[2], 0.0, 1e-6);
  EXPECT_NEAR(l[3], -1000.0, 1e-3);
}

TEST(Softmax, MinusInfinityIsMaskedOut) {
  // Attention masks fill with -inf: those entries get probability exactly 0, the rest renormalise.
  const double inf = INFINITY;
  Tensor x = tensor({{-inf, 0.0, 0.0, -inf}, {3.0, -inf, -inf, -inf}});
  auto y = softmax(x).to_vector<double>();
  EXPECT_EQ(y, (std::vector<double>{0, 0.5, 0.5, 0, 1, 0, 0, 0}));
  auto l = log_softmax(x).to_vector<double>();
  EXPECT_EQ(l[0], -inf);
  EXPECT_NEAR(l[1], -std::log(2.0), 1e-6);
  EXPECT_EQ(l[4], 0.0);
}

TEST(Softmax, NanPropagatesOnlyToItsRow) {
  Tensor x = tensor({{1.0, NAN, 2.0}, {1.0, 2.0, 3.0}});
  for (bool log : {false, true}) {
    auto y = (log ? log_softmax(x) : softmax(x)).to_vector<double>();
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(y[i])) << i;
    for (int i = 3; i < 6; ++i) EXPECT_FALSE(std::isnan(y[i])) << i;
  }
}

TEST(Softmax, AnyDimSumsToOne) {
  Generator g(1);
  Tensor x = randn({3, 4, 5}, g, DType::f64);
  for (int64_t d : {0, 1, 2, -1}) {
    Tensor s = sum(softmax(x, d), {d});
    for (double v : s.to_vector<double>()) EXPECT_NEAR(v, 1.0, 1e-14);
    // exp(log_softmax) == softmax
    EXPECT_LT(max_abs_diff(exp(log_softmax(x, d)), softmax(x, d)), 1e-14);
  }
  // 0-d input: softmax of one element is 1.
  EXPECT_DOUBLE_EQ(softmax(scalar_tensor(5.0, DType::f64)).item(), 1.0);
}

TEST(Softmax, GradcheckRandomShapesDimsAndNonContiguous) {
  Generator g(2);
  for (int rep = 0; rep < 3; ++rep) {
    Shape s{2 + rep, 3, 4 + rep};
    for (int64_t d : {0, 1, -1}) {
      expect_gradcheck([d](auto& in) { return softmax(in[0], d); }, {leaf(s, g)});
      expect_gradcheck([d](auto& in) { return log_softmax(in[0], d); }, {leaf(s, g)});
      expect_gradcheck([d](auto& in) { return softmax(in[0], d); }, {noncontig_leaf(s, g)});
      expect_gradcheck([d](auto& in) { return log_softmax(in[0], d); }, {noncontig_leaf(s, g)});
    }
  }
  // A sliced (strided) input, and softmax composed with another op.
  Tensor big = leaf({4, 9}, g);
  expect_gradcheck([](auto& in) { return softmax(in[0].slice(1, 1, 9, 2)); }, {big});
  expect_gradcheck([](auto& in) { return mul(softmax(in[0]), in[0]); }, {big});
}

TEST(Softmax, FastMatchesReferenceIncludingTails) {
  Generator g(3);
  for (int64_t L : {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 1000, 1027}) {
    for (bool log : {false, true}) {
      const int64_t rows = 5;
      Tensor x32 = mul(randn({rows, L}, g), 4.0);
      Tensor a = empty({rows, L}), b = empty({rows, L});
      softmax_rows_reference(x32.data<float>(), a.data<float>(), rows, L, log);
      softmax_rows(x32.data<float>(), b.data<float>(), rows, L, log);
      EXPECT_LT(max_abs_diff(a, b), log ? 2e-5 : 2e-6) << "f32 L=" << L << " log=" << log;
      Tensor x64 = x32.to(DType::f64);
      Tensor c = empty({rows, L}, DType::f64), e = empty({rows, L}, DType::f64);
      softmax_rows_reference(x64.data<double>(), c.data<double>(), rows, L, log);
      softmax_rows(x64.data<double>(), e.data<double>(), rows, L, log);
      EXPECT_LT(max_abs_diff(c, e), 1e-13) << "f64 L=" << L << " log=" << log;
    }
  }
}

// A row of a vocabulary's length and more: the sum of its exps used to be kept in f32 to the end, so its
// error grew with the row (2^20 values: 307 FLT_EPSILON on the portable target, 8 on AVX-512). Now blocks
// of it are added in double: every value within a few FLT_EPSILON of the double reference, on every target.
TEST(Softmax, LongRowsStayAccurateOnEveryTarget) {
  Generator g(9);
  const int64_t L = int64_t(1) << 20;
  Tensor x = mul(randn({1, L}, g), 0.5);  // exps of one size: the worst case for a running sum
  Tensor want = empty({1, L}), got = empty({1, L});
  const int ran = for_each_target([&] {
    for (bool log : {false, true}) {
      softmax_rows_reference(x.data<float>(), want.data<float>(), 1, L, log);
      softmax_rows(x.data<float>(), got.data<float>(), 1, L, log);
      const float* w = want.data<float>();
      const float* o = got.data<float>();
      double worst = 0;
      for (int64_t j = 0; j < L; ++j)
        worst = ng::test::worse(worst, std::abs(double(o[j]) - w[j]) / std::abs(w[j]));
      EXPECT_LT(worst, 4 * FLT_EPSILON) << "log=" << log;  // the target: for_each_target's trace
    }
  });
  EXPECT_GE(ran, 1);
}

TEST(Softmax, BackwardFastMatchesReferenceAndKeepsNan) {
  Generator g(6);
  for (int64_t L : {1, 5, 16, 33, 1000}) {
    for (bool log : {false, true}) {
      Tensor y = log ? log_softmax(randn({4, L}, g)) : softmax(randn({4, L}, g));
      Tensor dy = randn({4, L}, g);
      Tensor a = empty({4, L}), b = empty({4, L});
      softmax_backward_rows_reference(y.data<float>(), dy.data<float>(), a.data<float>(), 4, L, log);
      softmax_backward_rows(y.data<float>(), dy.data<float>(), b.data<float>(), 4, L, log);
      EXPECT_LT(max_abs_diff(a, b), 1e-5) << L << " log=" << log;
    }
  }
  // A nan in a log_softmax output row gives nan gradients in that row (the SIMD Exp would hide it).
  Tensor y = tensor({{NAN, -1.0}, {-0.5, -1.0}});
  Tensor dy = ones({2, 2});
  Tensor dx = empty({2, 2});
  softmax_backward_rows(y.data<float>(), dy.data<float>(), dx.data<float>(), 2, 2, true);
  auto v = dx.to_vector<double>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_FALSE(std::isnan(v[2]));
}

TEST(Softmax, HalfComputesInF32AndRoundsBack) {
  Generator g(4);
  Tensor x = randn({4, 37}, g);
  for (DType h : {DType::f16, DType::bf16}) {
    Tensor xh = x.to(h);
    Tensor y = softmax(xh);
    EXPECT_EQ(y.dtype(), h);
    // Exactly the f32 softmax of the rounded input, rounded once.
    EXPECT_TRUE(bitwise_equal(y, softmax(xh.to(DType::f32)).to(h)));
    EXPECT_EQ(log_softmax(xh).dtype(), h);
  }
}

TEST(Softmax, GraphIsFreedWhenNoBackwardRuns) {
  // The op saves its output for backward; that must not keep the output and its node alive in a cycle.
  Tensor x = randn({3, 4}, default_generator(), DType::f64).requires_grad_();
  for (bool log : {false, true}) {
    Tensor y = log ? log_softmax(x) : softmax(x);
    std::weak_ptr<Node> node = y.grad_fn();
    std::weak_ptr<TensorImpl> out = y.impl_ptr();
    y = Tensor();
    EXPECT_TRUE(node.expired());
    EXPECT_TRUE(out.expired());
  }
}

TEST(Softmax, Errors) {
  expect_error([] { softmax(arange(4)); }, {"softmax: expected a floating tensor, got i64"});
  expect_error([] { log_softmax(arange(4)); }, {"log_softmax: expected a floating tensor, got i64"});
  expect_error([] { softmax(zeros({2, 3}), 2); }, {"softmax: dim 2 is out of range", "2 dims"});
  expect_error([] { log_softmax(zeros({2, 3}), -3); }, {"log_softmax: dim -3 is out of range"});
}

TEST(Softmax, SameResultAtOneAndTwoThreads) {
  Generator g(5);
  Tensor x = randn({256, 1000}, g);
  Tensor a, b, ga, gb;
  for (int threads : {1, 2}) {
    ThreadsGuard t(threads);
    Tensor xl = x.detach().requires_grad_();
    Tensor y = softmax(xl);
    y.backward(x);
    (threads == 1 ? a : b) = y;
    (threads == 1 ? ga : gb) = xl.grad();
  }
  EXPECT_TRUE(bitwise_equal(a, b));
  EXPECT_TRUE(bitwise_equal(ga, gb));
}

// ---- causal_softmax: attention's masked softmax in one op -------------------------------------------

namespace {
// mask[t, s] = 1 where s > t (the future), as nn/attention.cpp builds it.
Tensor future_mask(int64_t T) {
  std::vector<double> m(size_t(T * T), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t s = t + 1; s < T; ++s) m[size_t(t * T + s)] = 1.0;
  return from_vector(m, Shape{T, T}, DType::f32);
}
}  // namespace

TEST(CausalSoftmax, MatchesMaskedFillThenSoftmax) {
  Generator g(8);
  for (int64_t T : {1, 2, 5, 17, 40}) {
    Tensor x = mul(randn({2, 3, T, T}, g, DType::f64), 3.0);
    Tensor want = softmax(masked_fill(x, future_mask(T), -INFINITY), -1);
    Tensor got = causal_softmax(x);
    EXPECT_LT(max_abs_diff(got, want), 1e-15) << T;
    Tensor want32 = softmax(masked_fill(x.to(DType::f32), future_mask(T), -INFINITY), -1);
    Tensor got32 = causal_softmax(x.to(DType::f32));
    EXPECT_LT(max_abs_diff(got32, want32), 1e-6) << T;
    auto v = got32.to_vector<double>();
    for (int64_t b = 0; b < 6; ++b)  // above the diagonal: exactly 0
      for (int64_t t = 0; t < T; ++t)
        for (int64_t s = t + 1; s < T; ++s) EXPECT_EQ(v[size_t((b * T + t) * T + s)], 0.0);
  }
}

TEST(CausalSoftmax, GradcheckAndNonContiguous) {
  Generator g(9);
  expect_gradcheck([](auto& in) { return causal_softmax(in[0]); }, {leaf({2, 4, 4}, g)});
  expect_gradcheck([](auto& in) { return causal_softmax(in[0]); }, {noncontig_leaf({3, 5, 5}, g)});
  expect_gradcheck([](auto& in) { return mul(causal_softmax(in[0]), in[0]); }, {leaf({1, 6, 6}, g)});
}

TEST(CausalSoftmax, FastMatchesReference) {
  Generator g(10);
  for (int64_t L : {1, 3, 16, 33, 100}) {
    const int64_t rows = 2 * L;  // two (L x L) blocks
    Tensor x = mul(randn({rows, L}, g), 4.0), x64 = x.to(DType::f64);
    Tensor a = empty({rows, L}), b = empty({rows, L});
    causal_softmax_rows_reference(x.data<float>(), a.data<float>(), rows, L);
    causal_softmax_rows(x.data<float>(), b.data<float>(), rows, L);
    EXPECT_LT(max_abs_diff(a, b), 2e-6) << L;
    Tensor c = empty({rows, L}, DType::f64), d = empty({rows, L}, DType::f64);
    causal_softmax_rows_reference(x64.data<double>(), c.data<double>(), rows, L);
    causal_softmax_rows(x64.data<double>(), d.data<double>(), rows, L);
    EXPECT_LT(max_abs_diff(c, d), 1e-13) << L;
  }
}

TEST(CausalSoftmax, Errors) {
  expect_error(
      [] {
        causal_softmax(zeros({2, 3}));
      },
      {"causal_softmax: expected scores of shape (..., T, T) (queries x keys), got (2, 3)"});
  expect_error([] { causal_softmax(zeros({4})); }, {"causal_softmax: expected scores of shape", "got (4)"});
  expect_error(
      [] {
        causal_softmax(arange(4).reshape({2, 2}));
      },
      {"causal_softmax: expected a floating tensor, got i64"});
}
