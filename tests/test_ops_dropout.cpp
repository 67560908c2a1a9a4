// dropout: identity cases, keep rate and scaling, reproducibility, gradient, errors.
#include "ops_test_util.h"

using namespace ng;
using namespace ng::testing;

TEST(Dropout, IdentityWhenEvalOrPZero) {
  Tensor x = randn({10});
  Generator g(1);
  EXPECT_TRUE(dropout(x, 0.5, /*training=*/false, g).same(x));
  EXPECT_TRUE(dropout(x, 0.0, true, g).same(x));
  EXPECT_EQ(g.offset(), 0u);  // nothing was drawn
}

TEST(Dropout, PEqualsOneGivesZerosAndZeroGradient) {
  Generator g(1);
  Tensor x = randn({4, 5}, g, DType::f64).requires_grad_();
  Tensor y = dropout(x, 1.0, true, g);
  for (double v : y.to_vector<double>()) EXPECT_EQ(v, 0.0);
  sum(y).backward();
  for (double v : x.grad().to_vector<double>()) EXPECT_EQ(v, 0.0);
}

TEST(Dropout, KeepsAboutOneMinusPAndScalesSurvivors) {
  Generator g(7);
  const int64_t n = 200000;
  Tensor x = full({n}, 2.0);
  for (double p : {0.1, 0.5, 0.9}) {
    auto y = dropout(x, p, true, g).to_vector<double>();
    int64_t kept = 0;
    for (double v : y) {
      if (v != 0) {
        ++kept;
        EXPECT_FLOAT_EQ(v, float(2.0 / (1.0 - p)));
      }
    }
    // binomial std: sqrt(n p (1-p)) <= 224; allow 5 sigma
    EXPECT_NEAR(double(kept), n * (1 - p), 1200.0) << p;
  }
}

TEST(Dropout, SameSeedSameMaskAtOneAndTwoThreads) {
  Tensor x = ones({300, 301});
  Tensor a, b;
  for (int threads : {1, 2}) {
    ThreadsGuard guard(threads);
    Generator g(42);
    (threads == 1 ? a : b) = dropout(x, 0.3, true, g);
  }
  EXPECT_TRUE(bitwise_equal(a, b));
  Generator g1(42), g2(43);
  EXPECT_FALSE(bitwise_equal(dropout(x, 0.3, true, g1), dropout(x, 0.3, true, g2)));
  // The generator advanced by ceil(n / 4) blocks: the next call draws a different mask.
  Generator g3(42);
  Tensor first = dropout(x, 0.3, true, g3);
  EXPECT_EQ(g3.offset(), uint64_t((300 * 301 + 3) / 4));
  EXPECT_FALSE(bitwise_equal(first, dropout(x, 0.3, true, g3)));
}

TEST(Dropout, GradcheckWithFixedSeed) {
  Generator g(3);
  auto f = [](auto& in) {
    Generator local(99);  // same mask at every evaluation
    return dropout(in[0], 0.4, true, local);
  };
  expect_gradcheck(f, {leaf({6, 7}, g)});
  expect_gradcheck(f, {noncontig_leaf({6, 7}, g)});
}

TEST(Dropout, BackwardIsMaskTimesUpstream) {
  Generator g(5);
  Tensor x = randn({50}, g, DType::f64).requires_grad_();
  Generator gd(11);
  Tensor y = dropout(x, 0.25, true, gd);
  Tensor u = randn({50}, g, DType::f64);
  y.backward(u);
  auto xv = x.to_vector<double>(), yv = y.to_vector<double>(), gv = x.grad().to_vector<double>(),
       uv = u.to_vector<double>();
  for (int i = 0; i < 50; ++i) EXPECT_NEAR(gv[i], yv[i] == 0 ? 0.0 : uv[i] / 0.75, 1e-15) << i;
}

TEST(Dropout, HalfInput) {
  Generator g(1), g2(1);
  Tensor x = randn({64}, g);
  Tensor y = dropout(x.to(DType::bf16), 0.5, true, g2);
  EXPECT_EQ(y.dtype(), DType::bf16);
  Generator g3(1);
  EXPECT_TRUE(bitwise_equal(y, dropout(x.to(DType::bf16).to(DType::f32), 0.5, true, g3).to(DType::bf16)));
}

TEST(Dropout, Errors) {
  Tensor x = ones({3});
  expect_error([&] { dropout(x, 1.5, true); }, {"dropout: p must be in [0, 1], got 1.5"});
  expect_error([&] { dropout(x, -0.1, true); }, {"dropout: p must be in [0, 1], got -0.1"});
  expect_error([&] { dropout(x, NAN, false); }, {"dropout: p must be in [0, 1], got nan"});
  expect_error([&] { dropout(arange(3), 0.5, true); }, {"dropout: expected a floating tensor, got i64"});
  Generator g(1);
  expect_error([&] { dropout_mask({3}, 0.5, DType::i64, g); },
               {"dropout: expected a floating dtype, got i64"});
  expect_error([&] { dropout_mask({3}, 2.0, DType::f32, g); }, {"dropout: p must be in [0, 1], got 2"});
}
