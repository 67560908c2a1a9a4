// Embedding (init, lookup, gradient), Dropout (train/eval, generator), nn::cast_.
#include <gtest/gtest.h>

#include <cmath>

#include "normgrad.h"

using namespace ng;

TEST(Embedding, InitIsStandardNormalAndLookupIsRows) {
  Generator g(1);
  nn::Embedding e(500, 64, g);
  auto w = e.weight.to_vector<double>();
  double s = 0, s2 = 0;
  for (double v : w) s += v, s2 += v * v;
  const double n = double(w.size()), mean = s / n, var = s2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 4 / std::sqrt(n));  // 4 standard errors
  EXPECT_NEAR(var, 1.0, 0.03);
  Tensor ids = from_vector(std::vector<int64_t>{3, 0, 499, 3}, Shape{2, 2});
  Tensor out = e(ids);
  ASSERT_EQ(out.shape(), (Shape{2, 2, 64}));
  auto o = out.to_vector<double>();
  for (int j = 0; j < 64; ++j) {
    EXPECT_EQ(o[size_t(j)], w[size_t(3 * 64 + j)]);
    EXPECT_EQ(o[size_t(2 * 64 + j)], w[size_t(499 * 64 + j)]);
  }
  EXPECT_THROW(nn::Embedding(0, 4), Error);
}

TEST(Embedding, GradientScatterAddsRepeatedIds) {
  Generator g(2);
  nn::Embedding e(5, 3, g, DType::f64);
  Tensor ids = from_vector(std::vector<int64_t>{1, 4, 1}, Shape{3});
  auto r = gradcheck([&](const std::vector<Tensor>&) { return e(ids); }, {e.weight});
  EXPECT_TRUE(r.ok) << r.message();
  sum(e(ids)).backward();
  auto gw = e.weight.grad().to_vector<double>();
  EXPECT_EQ(gw[3], 2.0);  // row 1 used twice
  EXPECT_EQ(gw[12], 1.0);
  EXPECT_EQ(gw[0], 0.0);
}

TEST(Dropout, TrainDropsAndScalesEvalIsIdentity) {
  Generator g(3);
  nn::Dropout d(0.25, g);
  Tensor x = ones({4000});
  auto y = d(x).to_vector<double>();
  int zeros_n = 0;
  for (double v : y) {
    if (v == 0)
      ++zeros_n;
    else
      EXPECT_NEAR(v, 1 / 0.75, 1e-6);
  }
  EXPECT_NEAR(zeros_n, 1000, 4 * std::sqrt(4000 * 0.25 * 0.75));
  EXPECT_GT(g.offset(), 0u);  // it drew from the generator it was given
  d.eval();
  const uint64_t before = g.offset();
  EXPECT_EQ(d(x).to_vector<double>(), x.to_vector<double>());
  EXPECT_EQ(g.offset(), before);  // eval draws nothing
  // Same generator state, same mask.
  Generator g1(9), g2(9);
  nn::Dropout a(0.5, g1), b(0.5, g2);
  EXPECT_EQ(a(x).to_vector<double>(), b(x).to_vector<double>());
  EXPECT_THROW(nn::Dropout(1.0), Error);
}

TEST(Cast, ConvertsInPlaceKeepingIdentity) {
  Generator g(4);
  nn::Linear lin(3, 2, true, g);
  Tensor w_handle = lin.weight;  // another handle to the same parameter
  auto before = lin.weight.to_vector<double>();
  nn::cast_(lin, DType::f64);
  EXPECT_EQ(lin.weight.dtype(), DType::f64);
  EXPECT_EQ(w_handle.dtype(), DType::f64);  // every handle sees it
  EXPECT_EQ(lin.named_parameters()[0].second.dtype(), DType::f64);
  EXPECT_EQ(lin.weight.to_vector<double>(), before);  // f32 -> f64 is exact
  EXPECT_TRUE(lin.weight.requires_grad());
  Tensor y = lin(randn({2, 3}, g, DType::f64));
  EXPECT_EQ(y.dtype(), DType::f64);
  EXPECT_THROW(nn::cast_(lin, DType::i64), Error);
}
