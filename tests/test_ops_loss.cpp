// cross_entropy: values, ignore_index, the all-ignored case, gradients, fast == reference, errors.
#include "ops_test_util.h"

using namespace ng;
using namespace ng::testing;

TEST(CrossEntropy, ForwardHandComputed) {
  Tensor logits = tensor({{1.0, 2.0, 3.0}, {1.0, 1.0, 1.0}}, DType::f64);
  Tensor t = from_vector(std::vector<int64_t>{2, 0}, {2});
  // row 0: log(e + e^2 + e^3) - 3 = 0.40760596444438; row 1: log 3 = 1.09861228866811
  EXPECT_NEAR(cross_entropy(logits, t).item(), (0.40760596444438 + 1.09861228866811) / 2, 1e-13);
  // f32 too
  EXPECT_NEAR(cross_entropy(logits.to(DType::f32), t).item(), 0.75310912655624, 1e-6);
}

TEST(CrossEntropy, MatchesLogSoftmaxPlusNll) {
  Generator g(1);
  Tensor x = randn({2, 5, 11}, g, DType::f64);
  Tensor t = randint(0, 11, {2, 5}, g);
  auto lp = log_softmax(x).to_vector<double>();
  auto tv = t.to_vector<int64_t>();
  double nll = 0;
  for (int r = 0; r < 10; ++r) nll -= lp[r * 11 + tv[r]];
  EXPECT_NEAR(cross_entropy(x, t).item(), nll / 10, 1e-13);
}

TEST(CrossEntropy, IgnoreIndexSkipsRowsAndTheirGradient) {
  Tensor logits = tensor({{1.0, 2.0, 3.0}, {1.0, 1.0, 1.0}}, DType::f64).requires_grad_();
  Tensor t = from_vector(std::vector<int64_t>{2, -100}, {2});
  Tensor loss = cross_entropy(logits, t);
  EXPECT_NEAR(loss.item(), 0.40760596444438, 1e-13);  // mean over the 1 counted row
  loss.backward();
  auto gr = logits.grad().to_vector<double>();
  // row 0: softmax - onehot(2); row 1: zero
  EXPECT_NEAR(gr[0], 0.09003057317038046, 1e-14);
  EXPECT_NEAR(gr[1], 0.24472847105479764, 1e-14);
  EXPECT_NEAR(gr[2], 0.6652409557748219 - 1.0, 1e-14);
  EXPECT_EQ(gr[3], 0.0);
  EXPECT_EQ(gr[4], 0.0);
  EXPECT_EQ(gr[5], 0.0);
  // A custom ignore_index.
  Tensor t2 = from_vector(std::vector<int64_t>{2, 7}, {2});
  EXPECT_NEAR(cross_entropy(logits, t2, 7).item(), 0.40760596444438, 1e-13);
}

TEST(CrossEntropy, AllTargetsIgnoredGivesZeroLossAndZeroGradient) {
  Tensor logits = randn({3, 4}, default_generator(), DType::f64).requires_grad_();
  Tensor t = full({3}, -100.0, DType::i64);
  Tensor loss = cross_entropy(logits, t);
  EXPECT_EQ(loss.item(), 0.0);  // defined as 0 (PyTorch: nan)
  loss.backward();
  for (double v : logits.grad().to_vector<double>()) EXPECT_EQ(v, 0.0);
}

TEST(CrossEntropy, GradcheckBatchedIgnoredAndNonContiguous) {
  Generator g(2);
  Tensor t = from_vector(std::vector<int64_t>{0, 4, -100, 2, 1, 4}, {2, 3});
  expect_gradcheck([t](auto& in) { return cross_entropy(in[0], t); }, {leaf({2, 3, 5}, g)});
  expect_gradcheck([t](auto& in) { return cross_entropy(in[0], t); }, {noncontig_leaf({2, 3, 5}, g)});
  // logits produced by a view op (vocab dim sliced), 1-D targets
  Tensor t1 = from_vector(std::vector<int64_t>{1, 0, 3}, {3});
  expect_gradcheck([t1](auto& in) { return cross_entropy(in[0].slice(1, 0, 8, 2), t1); }, {leaf({3, 8}, g)});
  // Upstream gradient other than 1 scales the result.
  expect_gradcheck([t1](auto& in) { return mul(cross_entropy(in[0], t1), 3.5); }, {leaf({3, 4}, g)});
}

TEST(CrossEntropy, LargeLogitsStayFinite) {
  Tensor logits = tensor({{1000.0, 0.0}, {-1000.0, 1000.0}});
  Tensor t = from_vector(std::vector<int64_t>{1, 0}, {2});
  EXPECT_NEAR(cross_entropy(logits, t).item(), 1500.0, 1e-2);
}

TEST(CrossEntropy, LogSumExpFastMatchesReference) {
  Generator g(3);
  for (int64_t V : {1, 3, 8, 17, 65, 1000, 1031}) {
    Tensor x = mul(randn({6, V}, g), 5.0);
    Tensor a = empty({6}), b = empty({6});
    logsumexp_rows_reference(x.data<float>(), a.data<float>(), 6, V);
    logsumexp_rows(x.data<float>(), b.data<float>(), 6, V);
    EXPECT_LT(max_abs_diff(a, b), 1e-5) << V;
    Tensor x64 = x.to(DType::f64);
    Tensor c = empty({6}, DType::f64), d = empty({6}, DType::f64);
    logsumexp_rows_reference(x64.data<double>(), c.data<double>(), 6, V);
    logsumexp_rows(x64.data<double>(), d.data<double>(), 6, V);
    EXPECT_LT(max_abs_diff(c, d), 1e-12) << V;
  }
  // Rows with nan, +inf and all -inf go through the reference and give nan, +inf, -inf.
  const float inf = INFINITY;
  Tensor x = from_vector(std::vector<float>{1, NAN, 2, 1, inf, 2, -inf, -inf, -inf}, {3, 3}, DType::f32);
  Tensor l = empty({3});
  logsumexp_rows(x.data<float>(), l.data<float>(), 3, 3);
  auto lv = l.to_vector<double>();
  EXPECT_TRUE(std::isnan(lv[0]));
  EXPECT_EQ(lv[1], inf);
  EXPECT_EQ(lv[2], -inf);
}

// The forward-with-gradient rows (what cross_entropy runs when a gradient is wanted): fast == reference,
// with an ignored row, tails, f32 and f64; a nan row gives nan in that row only.
TEST(CrossEntropy, GradRowsFastMatchReference) {
  Generator g(7);
  for (int64_t V : {1, 3, 8, 17, 65, 1000, 1031}) {
    const int64_t N = 5;
    std::vector<int64_t> tv = {0, V - 1, -100, V / 2, (3 * V) / 4};
    Tensor x = mul(randn({N, V}, g), 4.0), x64 = x.to(DType::f64);
    for (float scale : {1.0f, 0.25f}) {
      Tensor la = empty({N}), lb = empty({N}), ga = empty({N, V}), gb = empty({N, V});
      cross_entropy_rows_reference(x.data<float>(), tv.data(), -100, scale, la.data<float>(),
                                   ga.data<float>(), N, V);
      cross_entropy_rows(x.data<float>(), tv.data(), -100, scale, lb.data<float>(), gb.data<float>(), N, V);
      EXPECT_LT(max_abs_diff(ga, gb), 1e-6) << V;
      auto a = la.to_vector<double>(), b = lb.to_vector<double>();
      for (int64_t r = 0; r < N; ++r) EXPECT_NEAR(a[r], b[r], 1e-5) << V << " row " << r;
      for (int64_t v = 0; v < V; ++v) EXPECT_EQ(gb.to_vector<double>()[2 * V + v], 0.0);  // ignored row
      Tensor lc = empty({N}, DType::f64), ld = empty({N}, DType::f64);
      Tensor gc = empty({N, V}, DType::f64), gd = empty({N, V}, DType::f64);
      cross_entropy_rows_reference(x64.data<double>(), tv.data(), -100, double(scale), lc.data<double>(),
                                   gc.data<double>(), N, V);
      cross_entropy_rows(x64.data<double>(), tv.data(), -100, double(scale), ld.data<double>(),
                         gd.data<double>(), N, V);
      EXPECT_LT(max_abs_diff(gc, gd), 1e-14) << V;
      EXPECT_LT(max_abs_diff(lc, ld), 1e-12) << V;
    }
  }
  Tensor x = from_vector(std::vector<float>{1, NAN, 2, 1, 0, 2}, {2, 3}, DType::f32);
  std::vector<int64_t> tv = {0, 2};
  Tensor l = empty({2}), gr = empty({2, 3});
  cross_entropy_rows(x.data<float>(), tv.data(), -100, 0.5f, l.data<float>(), gr.data<float>(), 2, 3);
  auto gv = gr.to_vector<double>();
  for (int v = 0; v < 3; ++v) EXPECT_TRUE(std::isnan(gv[v])) << v;
  for (int v = 3; v < 6; ++v) EXPECT_FALSE(std::isnan(gv[v])) << v;
}

TEST(CrossEntropy, HalfLogits) {
  Generator g(4);
  Tensor x = randn({4, 9}, g);
  Tensor t = randint(0, 9, {4}, g);
  for (DType h : {DType::f16, DType::bf16}) {
    Tensor loss = cross_entropy(x.to(h), t);
    EXPECT_EQ(loss.dtype(), h);
    EXPECT_NEAR(loss.item(), cross_entropy(x.to(h).to(DType::f32), t).item(), 1e-2);
  }
}

TEST(CrossEntropy, Errors) {
  Tensor x = zeros({2, 5});
  expect_error(
      [&] {
        cross_entropy(x, from_vector(std::vector<int64_t>{1, 5}, {2}));
      },
      {"cross_entropy: target 5 at position 1 is out of range", "V = 5", "ignore_index = -100"});
  expect_error(
      [&] {
        cross_entropy(x, from_vector(std::vector<int64_t>{-1, 0}, {2}));
      },
      {"cross_entropy: target -1 at position 0", "V = 5"});
  expect_error(
      [&] {
        cross_entropy(x, from_vector(std::vector<int64_t>{0, 1, 2}, {3}));
      },
      {"cross_entropy: targets have shape (3), expected (2)", "(2, 5)"});
  expect_error([&] { cross_entropy(x, zeros({2})); }, {"cross_entropy: expected i64 targets", "got f32"});
  expect_error([&] { cross_entropy(arange(5), scalar_tensor(0, DType::i64)); },
               {"cross_entropy: expected floating logits, got i64"});
  expect_error([&] { cross_entropy(scalar_tensor(1.0), scalar_tensor(0, DType::i64)); },
               {"cross_entropy: expected logits of shape (..., V), got a 0-d tensor"});
  expect_error(
      [&] {
        cross_entropy(zeros({2, 0}), zeros({2}, DType::i64));
      },
      {"cross_entropy: expected at least one class (V >= 1)"});
}

TEST(CrossEntropy, SameResultAtOneAndTwoThreads) {
  Generator g(5);
  Tensor x = randn({512, 500}, g);
  Tensor t = randint(0, 500, {512}, g);
  Tensor a, b, ga, gb;
  for (int threads : {1, 2}) {
    ThreadsGuard guard(threads);
    Tensor xl = x.detach().requires_grad_();
    Tensor loss = cross_entropy(xl, t);
    loss.backward();
    (threads == 1 ? a : b) = loss;
    (threads == 1 ? ga : gb) = xl.grad();
  }
  EXPECT_TRUE(bitwise_equal(a, b));
  EXPECT_TRUE(bitwise_equal(ga, gb));
}
