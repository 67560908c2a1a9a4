// nn::Linear: init distribution, forward against a hand loop, gradcheck, errors; activation modules.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "normgrad.h"
#include "ops_test_util.h"

using namespace ng;
using ng::testing::expect_error;

TEST(Linear, InitStatisticsMatchKaimingUniformA5) {
  // PyTorch's default: weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  Generator g(11);
  const int64_t in = 256, out = 512;
  nn::Linear lin(in, out, true, g);
  const double bound = 1.0 / std::sqrt(double(in));
  std::vector<double> w = lin.weight.to_vector<double>();
  double lo = 1e9, hi = -1e9, s = 0, s2 = 0;
  for (double v : w) lo = std::min(lo, v), hi = std::max(hi, v), s += v, s2 += v * v;
  const double n = double(w.size()), mean = s / n, var = s2 / n - mean * mean;
  EXPECT_GE(lo, -bound);
  EXPECT_LT(hi, bound);
  EXPECT_GT(hi, 0.999 * bound);  // the whole interval is used
  EXPECT_LT(lo, -0.999 * bound);
  EXPECT_NEAR(mean, 0.0, 4 * bound / std::sqrt(3 * n));  // 4 standard errors
  EXPECT_NEAR(var, bound * bound / 3.0, 0.02 * bound * bound / 3.0);
  for (double v : lin.bias.to_vector<double>()) EXPECT_LE(std::abs(v), bound);
  EXPECT_EQ(lin.bias.shape(), (Shape{out}));
  EXPECT_EQ(lin.weight.shape(), (Shape{out, in}));
  EXPECT_EQ(lin.num_parameters(), in * out + out);
}

TEST(Linear, BiasInitStatisticsMatchUniformOverFanIn) {
  // The bias is U(-1/sqrt(fan_in), 1/sqrt(fan_in)) too: fan_in 16 (bound 0.25) and 65536 outputs, so the
  // bias alone has enough draws for its statistics (and a bound from fan_out, 1/256, would be far off).
  Generator g(12);
  const int64_t in = 16, out = 65536;
  nn::Linear lin(in, out, true, g);
  const double bound = 1.0 / std::sqrt(double(in));
  std::vector<double> b = lin.bias.to_vector<double>();
  ASSERT_EQ(b.size(), size_t(out));
  double lo = 1e9, hi = -1e9, s = 0, s2 = 0;
  for (double v : b) lo = std::min(lo, v), hi = std::max(hi, v), s += v, s2 += v * v;
  const double n = double(b.size()), mean = s / n, var = s2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 4 * bound / std::sqrt(3 * n));  // 4 standard errors
  // variance (1/fan_in)/3; the estimate's relative standard error is sqrt(0.8 / n) ~ 0.35%
  EXPECT_NEAR(var, bound * bound / 3.0, 0.02 * bound * bound / 3.0);
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  EXPECT_GT(hi, 0.999 * bound);
  EXPECT_LT(lo, -0.999 * bound);
  // Not the weight's numbers again: bias and weight are separate draws.
  std::vector<double> w0 = lin.weight.narrow(0, 0, 1).contiguous().to_vector<double>();
  EXPECT_NE(std::vector<double>(b.begin(), b.begin() + in), w0);
}

TEST(Linear, SameGeneratorSeedGivesSameWeights) {
  Generator g1(5), g2(5), g3(6);
  nn::Linear a(8, 4, true, g1), b(8, 4, true, g2), c(8, 4, true, g3);
  EXPECT_EQ(a.weight.to_vector<double>(), b.weight.to_vector<double>());
  EXPECT_EQ(a.bias.to_vector<double>(), b.bias.to_vector<double>());
  EXPECT_NE(a.weight.to_vector<double>(), c.weight.to_vector<double>());
}

TEST(Linear, ForwardMatchesLoop) {
  Generator g(1);
  nn::Linear lin(5, 3, true, g);
  Tensor x = randn({2, 4, 5}, g);
  Tensor y = lin(x);
  ASSERT_EQ(y.shape(), (Shape{2, 4, 3}));
  auto xv = x.to_vector<double>(), wv = lin.weight.to_vector<double>(), bv = lin.bias.to_vector<double>();
  auto yv = y.to_vector<double>();
  for (int r = 0; r < 8; ++r)
    for (int o = 0; o < 3; ++o) {
      double ref = bv[o];
      for (int i = 0; i < 5; ++i) ref += xv[r * 5 + i] * wv[o * 5 + i];
      EXPECT_NEAR(yv[r * 3 + o], ref, 1e-5);
    }
  nn::Linear nobias(5, 3, false, g);
  EXPECT_FALSE(nobias.bias.defined());
  EXPECT_EQ(nobias.named_parameters().size(), 1u);
  EXPECT_EQ(nobias(x).shape(), (Shape{2, 4, 3}));
}

TEST(Linear, GradcheckF64IncludingNonContiguousInput) {
  Generator g(2);
  nn::Linear lin(4, 3, true, g, DType::f64);
  Tensor x = randn({2, 3, 4}, g, DType::f64).requires_grad_();
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return lin(in[0]); }, {x, lin.weight, lin.bias});
  EXPECT_TRUE(r.ok) << r.message();
  Tensor xt = randn({4, 5}, g, DType::f64).requires_grad_();  // used transposed: a non-contiguous (5, 4)
  r = gradcheck([&](const std::vector<Tensor>& in) { return lin(in[0].t()); }, {xt, lin.weight});
  EXPECT_TRUE(r.ok) << r.message();
}

TEST(Linear, ErrorsNameShapes) {
  nn::Linear lin(4, 3);
  try {
    lin(zeros({2, 5}));
    FAIL() << "expected ng::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("linear: x has shape (2, 5), expected last dimension 4"),
              std::string::npos)
        << e.what();
  }
  expect_error([] { nn::Linear(0, 3); },
               {"Linear: expected positive in_features and out_features, got 0 and 3"});
  expect_error(
      [] {
        F::linear(zeros({2, 4}), zeros({3, 4}), zeros({4}));
      },
      {"linear: bias has shape (4), expected (3) to match weight (3, 4)"});
  // A dtype mismatch names linear, not the matmul inside it, and says how to fix it.
  expect_error(
      [&] {
        lin(zeros({2, 4}, DType::f64));
      },
      {"linear: x has dtype f64, expected f32 to match weight", "nn::cast_"});
  expect_error([&] { lin(zeros({2, 4}, DType::bf16)); }, {"linear: x has dtype bf16, expected f32"});
}

TEST(Activations, ModulesMatchOps) {
  Generator g(3);
  Tensor x = randn({3, 4}, g);
  auto same = [](const Tensor& a, const Tensor& b) { return a.to_vector<double>() == b.to_vector<double>(); };
  EXPECT_TRUE(same(nn::ReLU()(x), relu(x)));
  EXPECT_TRUE(same(nn::GELU()(x), gelu(x)));
  EXPECT_TRUE(same(nn::SiLU()(x), silu(x)));
  EXPECT_TRUE(same(nn::Tanh()(x), ng::tanh(x)));
  EXPECT_TRUE(same(nn::Sigmoid()(x), sigmoid(x)));
  EXPECT_EQ(nn::ReLU()(tensor({-1.0, 2.0})).to_vector<double>(), (std::vector<double>{0.0, 2.0}));
  nn::Sequential seq;
  seq.push_back(std::make_shared<nn::Linear>(4, 4, true, g));
  seq.push_back(std::make_shared<nn::ReLU>());
  EXPECT_EQ(seq(x).shape(), (Shape{3, 4}));
  EXPECT_EQ(seq.named_parameters()[0].first, "0.weight");
}
