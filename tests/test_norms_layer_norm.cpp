#include <cstring>
#include <algorithm>
// LayerNorm: golden values, gradchecks (random shapes, non-contiguous, behind a matmul), fast kernel vs the
// reference loop on random and hostile rows, half precision, determinism, errors, the module.
#include "norms_test_util.h"
#include "worst_error.h"

using namespace ng;
using namespace normtest;

namespace {

// The whole op in f64 straight from the formula, for comparisons.
std::vector<double> layer_norm_f64(const std::vector<double>& x, int64_t n, double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / size_t(n); ++r) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < n; ++i) m += x[r * n + i];
    m /= double(n);
    for (int64_t i = 0; i < n; ++i) v += (x[r * n + i] - m) * (x[r * n + i] - m);
    v /= double(n);
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = (x[r * n + i] - m) / std::sqrt(v + eps);
  }
  return y;
}

}  // namespace

TEST(LayerNorm, GoldenHandComputed) {
  // x = [1, 2, 3, 4]: mean 2.5, var = (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25, rstd = 1/sqrt(1.25 + 1e-5).
  // y = xhat * w + b with w = [1, 2, 1, 0.5], b = [0, 0, 1, -1].
  Tensor x = tensor({1.0, 2.0, 3.0, 4.0}, DType::f64);
  Tensor w = tensor({1.0, 2.0, 1.0, 0.5}, DType::f64), b = tensor({0.0, 0.0, 1.0, -1.0}, DType::f64);
  std::vector<double> y = F::layer_norm(x, {4}, w, b).to_vector<double>();
  const double r = 1.0 / std::sqrt(1.25 + 1e-5);  // 0.894423613...
  std::vector<double> expect = {-1.5 * r, -0.5 * r * 2, 0.5 * r + 1, 1.5 * r * 0.5 - 1};
  std::vector<double> literal = {-1.3416354199689269, -0.894423613312618, 1.447211806656309,
                                 -0.32918229001553656};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(y[i], expect[i], 1e-14);
    EXPECT_NEAR(y[i], literal[i], 1e-12);
  }
  // The saved statistics.
  norms::NormStats s = norms::layer_norm_forward(x, 4, Tensor(), Tensor(), 1e-5);
  EXPECT_DOUBLE_EQ(s.mean.item(), 2.5);
  EXPECT_NEAR(s.rstd.item(), r, 1e-15);
}

TEST(LayerNorm, GradcheckRandomShapes) {
  // (shape, number of trailing dims normalized)
  std::vector<std::pair<Shape, int>> cases = {{{7}, 1},       {{3, 5}, 1},       {{2, 3, 4}, 1},
                                              {{2, 3, 4}, 2}, {{2, 2, 3, 3}, 1}, {{2, 2, 3, 3}, 3},
                                              {{4, 1}, 1}};
  uint64_t seed = 10;
  for (auto& [shape, k] : cases) {
    Shape ns(shape.end() - k, shape.end());
    Tensor x = leaf(shape, ++seed), w = leaf(ns, ++seed, 1.0, 0.5), b = leaf(ns, ++seed);
    expect_gradcheck([&](const std::vector<Tensor>& in) { return F::layer_norm(in[0], ns, in[1], in[2]); },
                     {x, w, b}, "layer_norm " + shape_str(shape) + " over " + shape_str(ns));
    // and without affine parameters
    expect_gradcheck([&](const std::vector<Tensor>& in) { return F::layer_norm(in[0], ns); }, {x},
                     "layer_norm no affine " + shape_str(shape));
  }
}

TEST(LayerNorm, GradcheckNonContiguousInput) {
  Tensor x = strided_leaf({3, 6}, 21), w = leaf({6}, 22, 1.0, 0.5), b = leaf({6}, 23);
  expect_gradcheck([&](const std::vector<Tensor>& in) { return F::layer_norm(in[0], {6}, in[1], in[2]); },
                   {x, w, b}, "strided x");
  // a transposed (column-major) input
  Tensor xt = leaf({5, 4}, 24).detach().t().requires_grad_();
  ASSERT_FALSE(xt.is_contiguous());
  Tensor w5 = leaf({5}, 25);
  expect_gradcheck([&](const std::vector<Tensor>& in) { return F::layer_norm(in[0], {5}, in[1]); }, {xt, w5},
                   "transposed x");
}

TEST(LayerNorm, GradcheckBehindMatmul) {
  // y = layer_norm(a @ W): the gradient reaching a and W goes through the full dx of the norm.
  Tensor a = leaf({4, 3}, 31), W = leaf({3, 6}, 32), w = leaf({6}, 33, 1.0, 0.5), b = leaf({6}, 34);
  expect_gradcheck(
      [&](const std::vector<Tensor>& in) { return F::layer_norm(matmul(in[0], in[1]), {6}, in[2], in[3]); },
      {a, W, w, b}, "layer_norm(a @ W)");
}

TEST(LayerNorm, GradcheckBehindLinear) {
  // (B, T, 5) -> Linear -> (B, T, 6) -> LayerNorm over 6, and over the last two dims (T, C) as well.
  nn::LayerNorm ln(6);
  expect_gradcheck_behind_linear(
      ln, {2, 3, 5}, 6, [](const Tensor& h) { return h; }, 35, "LayerNorm(Linear)");
  nn::LayerNorm ln2(Shape{3, 6});
  expect_gradcheck_behind_linear(
      ln2, {2, 3, 5}, 6, [](const Tensor& h) { return h; }, 36, "LayerNorm (3, 6) (Linear)");
}

TEST(LayerNorm, FastMatchesReferenceOnEveryTarget) {
  const int targets = for_each_target([&] {
    // Odd lengths exercise the SIMD tails; 1 is the degenerate row. 600 (f16/bf16): rows of 1.2 KiB, whose
    // output walks prefetch the row after next (rows 0-2 of 5). 1027 (f64) and 3001: rows so wide that the
    // forward takes them four at a time (5 = 4 + 1). 256 and 1024: multiples of 2 Lanes on every target,
    // which the bf16 backward takes in pairs (LayerNormBackwardPairRows). 2560 and 4096: four at a time and
    // then one, with the bf16 backward's buffer and without.
    for (int64_t n : {1, 2, 3, 7, 8, 15, 17, 33, 100, 256, 600, 1024, 1027, 2560, 3001, 4096}) {
      for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
        Generator gen(uint64_t(n) * 7 + uint64_t(dt));
        Tensor x = randn({5, n}, gen, DType::f32, 0.5, 2.0).to(dt);
        Tensor w = randn({n}, gen, compute_dtype(dt)), b = randn({n}, gen, compute_dtype(dt));
        Tensor dy = randn({5, n}, gen, DType::f32).to(dt);
        auto ref = norms::layer_norm_forward(x, n, w, b, 1e-5, norms::Impl::reference);
        auto fast = norms::layer_norm_forward(x, n, w, b, 1e-5, norms::Impl::fast);
        // y and dx: absolute in f32 / f64, one unit in the last place (plus a little) in f16 / bf16;
        // dweight and dbias (the compute dtype) relative to 1 + their largest value.
        const double tol = dt == DType::f64   ? 1e-12
                           : dt == DType::f32 ? 1e-4
                           : dt == DType::f16 ? 1e-4
                                              : 1e-3;
        const double rtol = half_rtol(dt), sum_tol = dt == DType::f64 ? 1e-12 : 1e-5;
        const std::string what = "n=" + std::to_string(n) + " " + dtype_name(dt);
        EXPECT_LE(max_diff_beyond(fast.y, ref.y, rtol), tol) << what;
        EXPECT_LE(max_abs_diff(ref.mean, fast.mean), 1e-5) << what;
        EXPECT_LE(max_abs_diff(ref.rstd, fast.rstd), 1e-4) << what;
        auto gref = norms::layer_norm_backward(dy, x, ref.mean, ref.rstd, w, true, true, true,
                                               norms::Impl::reference);
        auto gfast =
            norms::layer_norm_backward(dy, x, ref.mean, ref.rstd, w, true, true, true, norms::Impl::fast);
        EXPECT_LE(max_diff_beyond(gfast.dx, gref.dx, rtol), tol) << what;
        EXPECT_LE(max_diff_scaled(gfast.dweight, gref.dweight), sum_tol) << what;
        EXPECT_LE(max_diff_scaled(gfast.dbias, gref.dbias), sum_tol) << what;
      }
    }
  });
  EXPECT_GE(targets, 2);
}

TEST(LayerNorm, LargeMeanSmallStdIsRightInF32) {
  // A row with mean 1e4 and std 1e-2. E[x^2] - E[x]^2 would subtract two numbers near 1e8 (float spacing 8)
  // to find 1e-4. The centred two-pass gets the normalized values right.
  const int64_t n = 1000;
  Generator gen(5);
  Tensor x = randn({2, n}, gen, DType::f32, 1e4, 1e-2);
  std::vector<double> xs = x.to_vector<double>();  // the exact f32 inputs, in f64
  std::vector<double> expect = layer_norm_f64(xs, n, 1e-8);
  for (norms::Impl impl : {norms::Impl::reference, norms::Impl::fast}) {
    auto s = norms::layer_norm_forward(x, n, Tensor(), Tensor(), 1e-8, impl);
    std::vector<double> y = s.y.to_vector<double>();
    double worst = 0;
    for (size_t i = 0; i < y.size(); ++i) worst = ng::test::worse(worst, std::abs(y[i] - expect[i]));
    EXPECT_LT(worst, 1e-3) << (impl == norms::Impl::fast ? "fast" : "reference");
  }
  // Through the public op too: output has mean 0 and variance 1 per row.
  std::vector<double> y = F::layer_norm(x, {n}, Tensor(), Tensor(), 1e-8).to_vector<double>();
  double m = 0, v = 0;
  for (int64_t i = 0; i < n; ++i) m += y[i];
  m /= double(n);
  for (int64_t i = 0; i < n; ++i) v += (y[i] - m) * (y[i] - m);
  EXPECT_NEAR(m, 0.0, 1e-4);
  EXPECT_NEAR(v / double(n), 1.0, 1e-3);
}

TEST(LayerNorm, UnrepresentativeRowStartsTakeTheCentredPath) {
  // The fast forward shifts each row by the mean of its first vector of values and uses s2/n - d^2; when
  // that shift sits far from the row's mean the kernel must notice and recompute the variance centred.
  // Rows built to defeat the shift: sorted ascending, a large outlier first, a first vector far from the
  // rest, and a row with mean 1e4 whose start is 50 std away. All checked against the f64 formula.
  const int64_t n = 1000;
  std::vector<double> xs(size_t(4 * n));
  Generator gen(11);
  std::vector<double> r = randn({4 * n}, gen, DType::f64).to_vector<double>();
  std::vector<double> sorted(r.begin(), r.begin() + n);
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < n; ++i) {
    xs[size_t(i)] = sorted[size_t(i)] * 3.0 + 1.0;                                         // sorted
    xs[size_t(n + i)] = i == 0 ? 1e3 : r[size_t(n + i)];                                   // outlier first
    xs[size_t(2 * n + i)] = i < 64 ? 100.0 + r[size_t(2 * n + i)] : r[size_t(2 * n + i)];  // far start
    xs[size_t(3 * n + i)] = 1e4 + 1e-2 * (i < 32 ? 50.0 : r[size_t(3 * n + i)]);  // mean 1e4, far start
  }
  Tensor x = from_vector(xs, {4, n}).to(DType::f32);
  std::vector<double> exact = x.to_vector<double>();  // the f32 inputs, in f64
  std::vector<double> expect = layer_norm_f64(exact, n, 1e-8);
  const int targets = for_each_target([&] {
    auto s = norms::layer_norm_forward(x, n, Tensor(), Tensor(), 1e-8, norms::Impl::fast);
    std::vector<double> y = s.y.to_vector<double>();
    for (int64_t row = 0; row < 4; ++row) {
      double worst = 0;
      for (int64_t i = 0; i < n; ++i)
        worst = ng::test::worse(worst, std::abs(y[size_t(row * n + i)] - expect[size_t(row * n + i)]));
      // f32 rounding of a normalized value is ~1e-7 relative; the mean-1e4 row is limited by its f32 input
      // spacing (1e-3 of a 1e-2 std), as in LargeMeanSmallStdIsRightInF32.
      EXPECT_LT(worst, row == 3 ? 1e-3 : 1e-4) << "row " << row;
    }
  });
  EXPECT_GE(targets, 1);
}

TEST(LayerNorm, Bf16RowsTheUnshiftedSumsCannotTrustAreShifted) {
  // The fast forward sums a short bf16 row and its squares unshifted and uses S2/n - mean^2
  // (UnshiftedStatisticsFromSums, norm_simd-inl.h); it must hand rows where that cancels to the shifted path,
  // and get the others right:
  //   kind 0: 1000 everywhere but every 64th value 1004: mean^2 / var ~ 4e6, the subtraction loses all
  //   kind 1: +-2^-70 (1 + k/16) in pairs, mean exactly 0: the squares are f32 denormals (no cancellation,
  //           but 9 significant bits; at this eps the variance is all that sets rstd)
  //   kind 2: randn + 30: mean^2 / var ~ 900
  // The rows go in the gate's blocks of 16 (UnshiftedGate; one block per 16 rows here: rows of 200, 1000 and
  // 2560 are one chunk of 80 rows, and chunks of 16, in layer_norm_forward_fast). Block k < 3 opens with a
  // randn row, which the unshifted sums take, so that its row 1, of kind k, is tried; block 3 opens with a
  // row of kind 0, which shuts the gate for its randn rows; block 4 is randn. Every row against the f64
  // formula on the same bf16 inputs, on every SIMD target. (200 and 1000 leave a tail of 8 values.) Rows of
  // 2560 go four per output walk with the next four's sums taken inside it (LayerNormOutputFused): unshifted
  // while the gate is open, so row 48 is refused after the walk took its unshifted sums (rows 49-51 then
  // need shifted ones from the cache), and shifted while it is shut, so row 64, which opens block 4 and is
  // trusted, needs unshifted ones from the cache. Rows of 256 and 512 (multiples of 4 Lanes) keep the values
  // their statistics pass loaded for the output walk (LayerNormForwardKeptRows): from the unshifted pass
  // when it was tried, else from the shifted one, in two buffers taken in turn.
  const double eps = 1e-45;  // (f32: a denormal; lets the tiny row's variance matter)
  const int64_t rows = 80;
  for (int64_t n : {1000, 200, 2560, 256, 512}) {
    Generator gen{uint64_t(n)};
    std::vector<double> xs = randn({rows * n}, gen, DType::f64).to_vector<double>();
    auto make = [&](int64_t row, int kind) {
      for (int64_t i = 0; i < n; ++i) {
        double& v = xs[size_t(row * n + i)];
        if (kind == 0) v = i % 64 == 5 ? 1004.0 : 1000.0;
        if (kind == 1) v = (i % 2 ? -1.0 : 1.0) * std::ldexp(1.0 + double((i / 2) % 16) / 16.0, -70);
        if (kind == 2) v += 30.0;
      }
    };
    for (int kind = 0; kind < 3; ++kind) make(16 * kind + 1, kind);
    make(48, 0);
    Tensor x = from_vector(xs, {rows, n}).to(DType::bf16);
    std::vector<double> exact = x.to_vector<double>();  // the bf16 inputs, in f64
    std::vector<double> expect = layer_norm_f64(exact, n, eps);
    const int targets = for_each_target([&] {
      auto s = norms::layer_norm_forward(x, n, Tensor(), Tensor(), eps, norms::Impl::fast);
      std::vector<double> y = s.y.to_vector<double>();
      for (int64_t row = 0; row < rows; ++row) {
        double worst = 0;  // relative to max(1, |expected|): bf16 keeps 8 bits
        for (int64_t i = 0; i < n; ++i) {
          const double e = expect[size_t(row * n + i)];
          worst = ng::test::worse(worst, std::abs(y[size_t(row * n + i)] - e) / std::max(1.0, std::abs(e)));
        }
        EXPECT_LT(worst, 1e-2) << "n=" << n << " row " << row;
      }
    });
    EXPECT_GE(targets, 1);
  }
}

TEST(LayerNorm, LargeMeanSmallStdBackwardIsRightInF32) {
  // The same hostile rows (mean 1e4, std 1e-2, f32) through the backward, against the whole backward done in
  // f64 on the same f32 inputs. The backward must centre x as precisely as the forward: a mean rounded to f32
  // is off by up to ulp(1e4)/2 ~ 5e-4, 5% of the std, which moves every xhat of the row by up to 0.05 and
  // dweight by as much per row. (Centring with (x - saved mean) failed this test: dweight off by up to 3e-2
  // of its scale, dx by 1e-3. Measuring the row's offset from the shift, as the backward does, gives ~1e-6.)
  const int64_t rows = 8;
  for (int64_t n : {1000, 1027, 2053}) {  // 1027: the SIMD tail too; 2053: wide rows, four at a time
    Generator gen{uint64_t(n)};
    Tensor x = randn({rows, n}, gen, DType::f32, 1e4, 1e-2);
    Tensor w = randn({n}, gen, DType::f32, 1.0, 0.5), dy = randn({rows, n}, gen, DType::f32);
    const double eps = 1e-8;

    // f64 reference: dx = rstd (g - mean_g - xhat mean_gx), dweight = sum_rows dy xhat, dbias = sum_rows dy.
    std::vector<double> xs = x.to_vector<double>(), ws = w.to_vector<double>(), dys = dy.to_vector<double>();
    std::vector<double> dx_ref(xs.size()), dw_ref(size_t(n), 0.0), db_ref(size_t(n), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const double* xr = xs.data() + r * n;
      const double* dyr = dys.data() + r * n;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < n; ++i) mean += xr[i];
      mean /= double(n);
      for (int64_t i = 0; i < n; ++i) var += (xr[i] - mean) * (xr[i] - mean);
      const double rstd = 1.0 / std::sqrt(var / double(n) + eps);
      double mean_g = 0, mean_gx = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double xhat = (xr[i] - mean) * rstd;
        mean_g += dyr[i] * ws[i] / double(n);
        mean_gx += dyr[i] * ws[i] * xhat / double(n);
        dw_ref[i] += dyr[i] * xhat;
        db_ref[i] += dyr[i];
      }
      for (int64_t i = 0; i < n; ++i) {
        const double xhat = (xr[i] - mean) * rstd;
        dx_ref[r * n + i] = rstd * (dyr[i] * ws[i] - mean_g - xhat * mean_gx);
      }
    }
    // Worst error relative to the largest reference value (dx is ~rstd = 100 times dy).
    auto rel_err = [](const Tensor& got, const std::vector<double>& want) {
      std::vector<double> g = got.to_vector<double>();
      double worst = 0, scale = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        worst = ng::test::worse(worst, std::abs(g[i] - want[i]));
        scale = std::max(scale, std::abs(want[i]));
      }
      return worst / scale;
    };

    for (norms::Impl impl : {norms::Impl::reference, norms::Impl::fast}) {
      const std::string what =
          std::string(impl == norms::Impl::fast ? "fast" : "reference") + " n=" + std::to_string(n);
      auto s = norms::layer_norm_forward(x, n, w, Tensor(), eps, impl);
      auto g = norms::layer_norm_backward(dy, x, s.mean, s.rstd, w, true, true, true, impl);
      EXPECT_LT(rel_err(g.dx, dx_ref), 1e-5) << what;
      EXPECT_LT(rel_err(g.dweight, dw_ref), 1e-5) << what;
      EXPECT_LT(rel_err(g.dbias, db_ref), 1e-6) << what;
      // dweight alone (no dx asked for) is the same numbers.
      auto g_w = norms::layer_norm_backward(dy, x, s.mean, s.rstd, w, false, true, false, impl);
      EXPECT_TRUE(bitwise_equal(g_w.dweight, g.dweight)) << what;
    }
    // And through the autograd op.
    Tensor xl = x.detach().requires_grad_(), wl = w.detach().requires_grad_();
    Tensor bl = zeros({n}).requires_grad_();
    F::layer_norm(xl, {n}, wl, bl, eps).backward(dy);
    EXPECT_LT(rel_err(xl.grad(), dx_ref), 1e-5) << "F::layer_norm n=" << n;
    EXPECT_LT(rel_err(wl.grad(), dw_ref), 1e-5) << "F::layer_norm n=" << n;
    EXPECT_LT(rel_err(bl.grad(), db_ref), 1e-6) << "F::layer_norm n=" << n;
  }
}

TEST(LayerNorm, BackwardCentresOnTheRowsOwnMeanWhenTheSavedOneIsSlightlyOff) {
  // The fast backward adds dweight's second part, dy * (-d * rstd) with d = the row's mean - the saved mean,
  // only where |d * rstd| is above the rounding noise of d itself (fix_dw, layer_norm.cpp: eps/2 * sqrt(n /
  // lanes), 1e-6 at most here). This bounds that floor from above: saved means off by 4e-6 and 1e-5 of the
  // std must still be corrected. dy = 1, so every row's offset adds up in each dweight[i] (8 rows: 3.2e-5
  // and 8e-5 against dweight's scale of ~8); f32 rounding alone stays near 1e-7 of that scale. Checked per
  // SIMD target (the floor depends on the lanes), for rows one at a time (1000), four at a time (4096), and
  // four at a time with a tail (3001). Without the correction the error is 4e-6 of the scale, and more.
  const int targets = for_each_target([&] {
    for (int64_t n : {1000, 3001, 4096})
      for (double off : {4e-6, 1e-5}) {
        const int64_t rows = 8;
        Generator gen{uint64_t(n)};
        const std::vector<float> x = randn({rows, n}, gen).to_vector<float>();
        const std::vector<float> w(static_cast<size_t>(n), 1.0f), dy(static_cast<size_t>(rows * n), 1.0f);
        std::vector<float> mean(static_cast<size_t>(rows)), rstd(mean), dx(static_cast<size_t>(rows * n));
        std::vector<float> dw(static_cast<size_t>(n), 0.0f), db(dw);
        std::vector<double> dw_ref(static_cast<size_t>(n), 0.0);
        for (int64_t r = 0; r < rows; ++r) {
          double m = 0, v = 0;
          for (int64_t i = 0; i < n; ++i) m += x[size_t(r * n + i)];
          m /= double(n);
          for (int64_t i = 0; i < n; ++i) v += (x[size_t(r * n + i)] - m) * (x[size_t(r * n + i)] - m);
          rstd[size_t(r)] = float(1.0 / std::sqrt(v / double(n)));
          mean[size_t(r)] = float(m + off / rstd[size_t(r)]);  // off by `off` of the std, all the same way
          for (int64_t i = 0; i < n; ++i) dw_ref[size_t(i)] += (x[size_t(r * n + i)] - m) * rstd[size_t(r)];
        }
        norms::layer_norm_backward_rows<float, float>(dy.data(), x.data(), w.data(), mean.data(), rstd.data(),
                                                      dx.data(), dw.data(), db.data(), rows, n);
        double worst = 0, scale = 0;
        for (int64_t i = 0; i < n; ++i) {
          worst = ng::test::worse(worst, std::abs(double(dw[size_t(i)]) - dw_ref[size_t(i)]));
          scale = std::max(scale, std::abs(dw_ref[size_t(i)]));
        }
        EXPECT_LT(worst / scale, 1e-6) << "n=" << n << " off=" << off;
      }
  });
  EXPECT_GE(targets, 1);
}

TEST(LayerNorm, ConstantRowsAreGovernedByEps) {
  // var = 0: xhat = 0, so y = bias exactly, and rstd = 1/sqrt(eps).
  for (int64_t n : {1, 5, 19}) {
    Tensor x = full({3, n}, 7.25);
    Tensor b = full({n}, 0.5);
    for (norms::Impl impl : {norms::Impl::reference, norms::Impl::fast}) {
      auto s = norms::layer_norm_forward(x, n, Tensor(), b, 1e-5, impl);
      for (double v : s.y.to_vector<double>()) EXPECT_EQ(v, 0.5);
      for (double v : s.rstd.to_vector<double>()) EXPECT_NEAR(v, 1.0 / std::sqrt(1e-5), 1e-2);
      // backward of a constant row: dx = rstd * (g - mean(g)) (xhat = 0), finite
      Tensor dy = arange(0.0, double(3 * n), 1.0).reshape({3, n});
      auto g = norms::layer_norm_backward(dy, x, s.mean, s.rstd, Tensor(), true, false, false, impl);
      for (double v : g.dx.to_vector<double>()) EXPECT_TRUE(std::isfinite(v));
    }
  }
}

TEST(LayerNorm, ValuesNearF16Limits) {
  // f16 values near 6e4: squares overflow f16 but the statistics are in f32.
  Tensor x32 = tensor({{60000.0, -60000.0, 30000.0, 65000.0, -65000.0, 1.0, 0.0}}, DType::f32);
  Tensor x16 = x32.to(DType::f16);
  std::vector<double> expect = layer_norm_f64(x16.to_vector<double>(), 7, 1e-5);
  for (norms::Impl impl : {norms::Impl::reference, norms::Impl::fast}) {
    std::vector<double> y =
        norms::layer_norm_forward(x16, 7, Tensor(), Tensor(), 1e-5, impl).y.to_vector<double>();
    for (size_t i = 0; i < y.size(); ++i) {
      EXPECT_TRUE(std::isfinite(y[i]));
      EXPECT_NEAR(y[i], expect[i], 2e-3);
    }
  }
}

TEST(LayerNorm, HalfPrecisionMatchesF32) {
  Generator gen(77);
  Tensor x = randn({6, 40}, gen);
  Tensor w = randn({40}, gen, DType::f32, 1.0, 0.2).requires_grad_(), b = randn({40}, gen).requires_grad_();
  Tensor dy = randn({6, 40}, gen);
  Tensor x32 = x.detach().requires_grad_();
  Tensor y32 = F::layer_norm(x32, {40}, w, b);
  y32.backward(dy);
  Tensor dw32 = w.grad(), db32 = b.grad(), dx32 = x32.grad();
  for (DType dt : {DType::f16, DType::bf16}) {
    w.zero_grad();
    b.zero_grad();
    Tensor xh = x.to(dt).requires_grad_();
    Tensor yh = F::layer_norm(xh, {40}, w, b);
    EXPECT_EQ(yh.dtype(), dt);
    const double tol = dt == DType::f16 ? 1e-2 : 6e-2;
    EXPECT_LE(max_abs_diff(yh, y32), tol) << dtype_name(dt);
    yh.backward(dy.to(dt));
    EXPECT_EQ(xh.grad().dtype(), dt);
    EXPECT_EQ(w.grad().dtype(), DType::f32);
    EXPECT_LE(max_abs_diff(xh.grad(), dx32), tol * 2) << dtype_name(dt);
    EXPECT_LE(max_abs_diff(w.grad(), dw32), tol * 4) << dtype_name(dt);
    EXPECT_LE(max_abs_diff(b.grad(), db32), tol * 4) << dtype_name(dt);
  }
}

TEST(LayerNorm, DeterministicAcrossThreadCounts) {
  Generator gen(3);
  Tensor x = randn({513, 96}, gen), dy = randn({513, 96}, gen), w = randn({96}, gen);
  auto run = [&]() {
    auto s = norms::layer_norm_forward(x, 96, w, Tensor(), 1e-5);
    auto g = norms::layer_norm_backward(dy, x, s.mean, s.rstd, w, true, true, true);
    return std::vector<Tensor>{s.y, g.dx, g.dweight, g.dbias};
  };
  std::vector<Tensor> one = with_threads(1, run), two = with_threads(2, run);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(bitwise_equal(one[i], two[i])) << "output " << i;
}

TEST(LayerNorm, WideRowsFourAtATimeGiveTheOneRowBits) {
  // Rows wider than 2048 floats go through the kernels four at a time (w, b, dweight, dbias loaded once for
  // four rows); the arithmetic per row is that of one row at a time, so the bits must be too. The one
  // exception is dweight: a row whose offset from the saved mean needs dweight's second part (fix_dw: an
  // offset above the rounding noise of the offset itself, as row 9's at mean 30 can be) adds it after its
  // group's first pass,
  // not before the next row's, so dweight is compared to rounding. 5 rows: one group and one single row,
  // against five one-row calls (dweight and dbias accumulate in the same row order). f16 and bf16 rows (f32
  // weights and statistics) go four at a time too; one at a time, their backward keeps pass 1's c and g in a
  // buffer for pass 2 (rows up to 3072 values), so their dx here also checks that the buffer keeps the bits.
  // Then 14 rows of 2560 (f64: 1280), a multiple of 4 vectors on every target: the forward's groups 0 and 1
  // walk with the next group's statistics inside (LayerNormOutputFused), group 2 is the last, rows 12-13 go
  // one at a time. Row 6's first 16 values are 50 above the rest, so that its shift K sits far from its mean
  // and its statistics take the centred second pass inside group 0's walk; row 9 sits at mean 30.
  const int targets = for_each_target([&] {
    for (int64_t rows : {5, 14})
      for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
        const int64_t n = rows == 5 ? (dt == DType::f64 ? 1031 : 3001) : (dt == DType::f64 ? 1280 : 2560);
        const DType acc = compute_dtype(dt);
        Generator gen{uint64_t(n)};
        std::vector<double> xs = randn({rows, n}, gen, DType::f64).to_vector<double>();
        if (rows == 14) {
          for (int64_t i = 0; i < 16; ++i) xs[size_t(6 * n + i)] += 50.0;
          for (int64_t i = 0; i < n; ++i) xs[size_t(9 * n + i)] += 30.0;
        }
        Tensor x = from_vector(xs, {rows, n}).to(dt), dy = randn({rows, n}, gen).to(dt);
        Tensor w = randn({n}, gen, acc), b = randn({n}, gen, acc);
        auto both = [&]<typename T, typename A>() {
          const T *px = x.data<T>(), *pdy = dy.data<T>();
          const A *pw = w.data<A>(), *pb = b.data<A>();
          const size_t all = static_cast<size_t>(rows * n);
          std::vector<T> y4(all), y1(all), dx4(all), dx1(all);
          std::vector<A> m4(static_cast<size_t>(rows)), m1(m4.size()), rs4(m4.size()), rs1(m4.size());
          std::vector<A> dw4(static_cast<size_t>(n), A(0)), dw1(dw4), db4(dw4), db1(dw4);
          norms::layer_norm_forward_rows<T, A>(px, pw, pb, y4.data(), m4.data(), rs4.data(), rows, n,
                                               A(1e-5));
          norms::layer_norm_backward_rows<T, A>(pdy, px, pw, m4.data(), rs4.data(), dx4.data(), dw4.data(),
                                                db4.data(), rows, n);
          for (int64_t r = 0; r < rows; ++r) {
            norms::layer_norm_forward_rows<T, A>(px + r * n, pw, pb, y1.data() + r * n, m1.data() + r,
                                                 rs1.data() + r, 1, n, A(1e-5));
            norms::layer_norm_backward_rows<T, A>(pdy + r * n, px + r * n, pw, m1.data() + r, rs1.data() + r,
                                                  dx1.data() + r * n, dw1.data(), db1.data(), 1, n);
          }
          auto same = [](const std::vector<T>& p, const std::vector<T>& q) {
            return std::memcmp(p.data(), q.data(), p.size() * sizeof(T)) == 0;
          };
          const std::string what = std::string(dtype_name(dt)) + " n=" + std::to_string(n);
          EXPECT_TRUE(same(y4, y1)) << what;
          EXPECT_TRUE(m4 == m1 && rs4 == rs1) << what;
          EXPECT_TRUE(same(dx4, dx1)) << what;
          EXPECT_TRUE(db4 == db1) << what;
          double worst = 0, scale = 0;
          for (size_t i = 0; i < dw4.size(); ++i) {
            worst = ng::test::worse(worst, std::abs(double(dw4[i]) - double(dw1[i])));
            scale = std::max(scale, std::abs(double(dw1[i])));
          }
          EXPECT_LE(worst, 8 * double(std::numeric_limits<A>::epsilon()) * scale) << what;
        };
        if (dt == DType::f32) both.template operator()<float, float>();
        if (dt == DType::f64) both.template operator()<double, double>();
        if (dt == DType::f16) both.template operator()<f16, float>();
        if (dt == DType::bf16) both.template operator()<bf16, float>();
      }
  });
  EXPECT_GE(targets, 2);
}

TEST(LayerNorm, WideBf16RowsKeepSubnormalOutputs) {
  // bf16 rows wider than 2048 values take the four-row backward, whose dx stores use vcvtne2ps2bf16 where
  // the CPU has AVX512-BF16. The instruction flushes subnormal inputs to zero, so a pair with one must take
  // the rounding by hand (StoreBf16PairWithInstruction, tensor/kernels/half-inl.h). dy here is scaled by
  // 2^-128, so that most dx are f32 subnormals. The bf16 kernel computes dx in f32 exactly as the f32 kernel
  // does on the same values (x and dy are bf16 values either way), so its dx must be the f32 kernel's dx
  // rounded to nearest even, bit for bit: a flushed subnormal would be a zero there.
  const int targets = for_each_target([&] {
    const int64_t rows = 8, n = 4096;
    Generator gen{11};
    const Tensor x = randn({rows, n}, gen).to(DType::bf16);
    const Tensor dy = (randn({rows, n}, gen) * 0x1p-128).to(DType::bf16);
    const Tensor x32 = x.to(DType::f32), dy32 = dy.to(DType::f32), w = randn({n}, gen), b = randn({n}, gen);
    const size_t all = static_cast<size_t>(rows * n);
    std::vector<float> y32(all), mean(static_cast<size_t>(rows)), rstd(mean.size()), dx32(all);
    std::vector<bf16> dx16(all);
    norms::layer_norm_forward_rows<float, float>(x32.data<float>(), w.data<float>(), b.data<float>(),
                                                 y32.data(), mean.data(), rstd.data(), rows, n, 1e-5f);
    norms::layer_norm_backward_rows<float, float>(dy32.data<float>(), x32.data<float>(), w.data<float>(),
                                                  mean.data(), rstd.data(), dx32.data(), nullptr, nullptr,
                                                  rows, n);
    norms::layer_norm_backward_rows<bf16, float>(dy.data<bf16>(), x.data<bf16>(), w.data<float>(),
                                                 mean.data(), rstd.data(), dx16.data(), nullptr, nullptr,
                                                 rows, n);
    expect_bf16_rounding_of_subnormals(dx32, dx16);

    // The forward's four-row output stores the same way. With w at 2^-128 and b = 0 most y are f32
    // subnormals. The bf16 forward may take its statistics another way than the f32 one (the unshifted
    // sums), so y is held to the f32 kernel's to a few bf16 units, and no y may be a zero where the f32 y
    // is at least 2^-132 (a flushed subnormal; bf16's smallest is 2^-133).
    const Tensor w_tiny = w * 0x1p-128, zero = zeros({n});
    std::vector<bf16> y16(all);
    std::vector<float> mean16(mean.size()), rstd16(mean.size());
    norms::layer_norm_forward_rows<float, float>(x32.data<float>(), w_tiny.data<float>(), zero.data<float>(),
                                                 y32.data(), mean.data(), rstd.data(), rows, n, 1e-5f);
    norms::layer_norm_forward_rows<bf16, float>(x.data<bf16>(), w_tiny.data<float>(), zero.data<float>(),
                                                y16.data(), mean16.data(), rstd16.data(), rows, n, 1e-5f);
    int64_t tiny = 0, flushed = 0, far = 0;
    for (size_t i = 0; i < all; ++i) {
      const double e = y32[i], got = bf16_to_f32(y16[i]);
      if (e != 0.0 && std::abs(e) < double(std::numeric_limits<float>::min())) ++tiny;
      if (std::abs(e) >= 0x1p-132 && got == 0.0) ++flushed;
      if (std::abs(got - e) > 0x1p-7 * std::abs(e) + 0x1p-132) ++far;
    }
    EXPECT_GT(tiny, rows * n / 2);
    EXPECT_EQ(flushed, 0);
    EXPECT_EQ(far, 0);
  });
  EXPECT_GE(targets, 2);
}

TEST(LayerNorm, Errors) {
  Tensor x = randn({2, 16, 128});
  expect_error([&] { F::layer_norm(x, {128}, ones({64})); },
               {"layer_norm: weight has shape (64), expected (128)", "(2, 16, 128)"});
  expect_error([&] { F::layer_norm(x, {128}, ones({128}), ones({3})); }, {"layer_norm: bias has shape (3)"});
  expect_error(
      [&] { F::layer_norm(x, {64}); },
      {"layer_norm: normalized_shape (64) does not match the last 1 dimension(s) of x (2, 16, 128)"});
  expect_error([&] { F::layer_norm(x, {2, 16, 128, 1}); }, {"layer_norm: normalized_shape (2, 16, 128, 1)"});
  expect_error([&] { F::layer_norm(x, {128}, Tensor(), Tensor(), 0.0); },
               {"layer_norm: expected eps > 0", "got 0"});
  expect_error([&] { F::layer_norm(x, {128}, Tensor(), Tensor(), -1e-5); }, {"layer_norm: expected eps > 0"});
  expect_error([&] { F::layer_norm(arange(4), {4}); }, {"layer_norm: expected a floating input", "i64"});
  expect_error([&] { nn::LayerNorm(8, 0.0); }, {"LayerNorm: expected eps > 0"});
}

TEST(LayerNorm, ModuleParametersAndForward) {
  nn::LayerNorm ln(Shape{3, 4});
  auto names = ln.state_dict();
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0].first, "weight");
  EXPECT_EQ(names[1].first, "bias");
  EXPECT_EQ(ln.weight.shape(), (Shape{3, 4}));
  EXPECT_TRUE(ln.weight.requires_grad());
  Tensor x = randn({2, 3, 4});
  Tensor y = ln(x);
  EXPECT_LE(max_abs_diff(y, F::layer_norm(x, {3, 4})), 1e-6);  // weight 1, bias 0 at init
  sum(mul(y, y)).backward();
  ASSERT_TRUE(ln.weight.grad().defined());
  ASSERT_TRUE(ln.bias.grad().defined());
  // sum(y^2) with y = xhat * w + b: dL/db_i = sum_rows 2 y_i, and dL/dw_i = sum_rows 2 y_i xhat_i, where
  // xhat = y at init (w = 1, b = 0). Rows are the 2 samples; i runs over the (3, 4) features.
  std::vector<double> yv = y.to_vector<double>(), db = ln.bias.grad().to_vector<double>(),
                      dw = ln.weight.grad().to_vector<double>();
  ASSERT_EQ(db.size(), 12u);
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_NEAR(db[i], 2 * (yv[i] + yv[12 + i]), 1e-5) << i;
    EXPECT_NEAR(dw[i], 2 * (yv[i] * yv[i] + yv[12 + i] * yv[12 + i]), 1e-5) << i;
  }
  nn::LayerNorm no_affine(4, 1e-5, false);
  EXPECT_EQ(no_affine.parameters().size(), 0u);
  nn::LayerNorm no_bias(4, 1e-5, true, false);
  EXPECT_EQ(no_bias.parameters().size(), 1u);
}

TEST(Norms, EachOpIsOneAutogradNodeWhoseEdgesAreTheInputs) {
  // Not composed of primitive ops: the output's grad_fn is the norm's own node, and its edges lead straight
  // to the leaves' accumulators.
  Tensor x = randn({4, 6, 2}).requires_grad_(), w = ones({6}).requires_grad_(),
         b = zeros({6}).requires_grad_();
  Tensor w2 = ones({2}).requires_grad_(), b2 = zeros({2}).requires_grad_();
  struct Case {
    Tensor y;
    const char* name;
    size_t edges;
  };
  std::vector<Case> cases = {
      {F::layer_norm(x, {2}, w2, b2), "LayerNormBackward", 3},
      {F::rms_norm(x, w2), "RMSNormBackward", 2},
      {F::batch_norm(x, Tensor(), Tensor(), w, b, true), "BatchNormBackward", 3},
      {F::group_norm(x, 3, w, b), "GroupNormBackward", 3},
  };
  for (const Case& c : cases) {
    ASSERT_TRUE(c.y.grad_fn() != nullptr) << c.name;
    EXPECT_EQ(c.y.grad_fn()->name(), c.name);
    ASSERT_EQ(c.y.grad_fn()->next_edges.size(), c.edges) << c.name;
    for (const Edge& e : c.y.grad_fn()->next_edges) {
      ASSERT_TRUE(e.valid()) << c.name;
      EXPECT_EQ(e.fn->name(), "AccumulateGrad") << c.name;
    }
  }
}

TEST(Norms, MixedFloatDtypesAreAnErrorExceptHalfXWithF32Params) {
  // The rule (nn/norms/norms.h): weight and bias have x's dtype, or f32 when x is f16/bf16. A norm never
  // rounds a parameter silently.
  Generator gen(12);
  Tensor x32 = randn({4, 6, 2}, gen);
  const std::string tail = "mixed float dtypes are not converted silently";
  expect_error([&] { F::layer_norm(x32, {2}, ones({2}, DType::f64)); },
               {"layer_norm: weight has dtype f64, expected f32 to match x (f32)", tail});
  expect_error([&] { F::layer_norm(x32, {2}, ones({2}), zeros({2}, DType::f64)); },
               {"layer_norm: bias has dtype f64, expected f32 to match x (f32)", tail});
  expect_error([&] { F::rms_norm(x32.to(DType::f64), ones({2})); },
               {"rms_norm: weight has dtype f32, expected f64 to match x (f64)", tail});
  expect_error(
      [&] { F::batch_norm(x32.to(DType::f16), Tensor(), Tensor(), ones({6}, DType::bf16), Tensor(), true); },
      {"batch_norm: weight has dtype bf16, expected f16 or f32 to match x (f16)", tail});
  expect_error([&] { F::group_norm(x32.to(DType::bf16), 3, ones({6}), zeros({6}, DType::f64)); },
               {"group_norm: bias has dtype f64, expected bf16 or f32 to match x (bf16)", tail});
  expect_error([&] { F::group_norm(x32, 3, ones({6}, DType::f16)); },
               {"group_norm: weight has dtype f16, expected f32 to match x (f32)"});
  // A module's parameters are f32 until the module is cast (nn::cast_), so an f64 input is refused.
  nn::LayerNorm ln(2);
  expect_error([&] { ln(x32.to(DType::f64)); }, {"layer_norm: weight has dtype f32, expected f64"});
  nn::cast_(ln, DType::f64);
  EXPECT_EQ(ln(x32.to(DType::f64)).dtype(), DType::f64);

  // Allowed: f16/bf16 x with f32 parameters, or with parameters in x's own dtype. The kernels compute in
  // f32 either way, so the two give bitwise the same output; each gradient comes back in its parameter's
  // dtype.
  for (DType half : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(half));
    Tensor xh = x32.to(half);
    Tensor w6 = randn({6}, gen).to(half), b6 = randn({6}, gen).to(half), w2 = randn({2}, gen).to(half);
    struct Run {
      const char* name;
      std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)> fn;
      Tensor w, b;
    };
    std::vector<Run> runs = {
        {"layer_norm", [](auto& x, auto& w, auto&) { return F::layer_norm(x, {2}, w); }, w2, Tensor()},
        {"rms_norm", [](auto& x, auto& w, auto&) { return F::rms_norm(x, w); }, w2, Tensor()},
        {"batch_norm",
         [](auto& x, auto& w, auto& b) { return F::batch_norm(x, Tensor(), Tensor(), w, b, true); }, w6, b6},
        {"group_norm", [](auto& x, auto& w, auto& b) { return F::group_norm(x, 3, w, b); }, w6, b6},
    };
    for (const Run& r : runs) {
      Tensor w_own = r.w.detach().requires_grad_();
      Tensor w_f32 = r.w.to(DType::f32).requires_grad_();
      Tensor b_own = r.b.defined() ? r.b.detach().requires_grad_() : Tensor();
      Tensor b_f32 = r.b.defined() ? r.b.to(DType::f32).requires_grad_() : Tensor();
      Tensor y_own = r.fn(xh, w_own, b_own), y_f32 = r.fn(xh, w_f32, b_f32);
      EXPECT_EQ(y_own.dtype(), half) << r.name;
      EXPECT_TRUE(bitwise_equal(y_own, y_f32)) << r.name;
      Tensor dy = randn(xh.shape(), gen).to(half);
      y_own.backward(dy);
      y_f32.backward(dy);
      EXPECT_EQ(w_own.grad().dtype(), half) << r.name;
      EXPECT_EQ(w_f32.grad().dtype(), DType::f32) << r.name;
      EXPECT_TRUE(bitwise_equal(w_own.grad(), w_f32.grad().to(half))) << r.name;
      if (b_own.defined()) {
        EXPECT_EQ(b_own.grad().dtype(), half) << r.name;
      }
    }
  }
}

TEST(Norms, InputsWithNoValuesGiveEmptyOutputsAndZeroParameterGradients) {
  // PyTorch's behaviour: a batch of no rows (or rows of no values) normalizes to an empty output, the input's
  // gradient is empty, and each parameter's gradient is zeros of its shape (no row contributed). Until
  // 2026-11-28 layer_norm and rms_norm said "expected a contiguous x" for rows of no values (a (4, 0) tensor
  // counted as strided), and their weight gradients failed to reshape for a batch of no rows.
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    const DType pt = dt == DType::bf16 ? DType::f32 : dt;  // the parameters' dtype
    struct Case {
      const char* name;
      Shape x, param;
      std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)> fn;
      bool has_bias;
    };
    const std::vector<Case> cases = {
        {"layer_norm, no rows",
         {0, 5},
         {5},
         [](auto& x, auto& w, auto& b) { return F::layer_norm(x, {5}, w, b); },
         true},
        {"layer_norm (3, 2) trailing, no rows",
         {0, 3, 2},
         {3, 2},
         [](auto& x, auto& w, auto& b) {
           return F::layer_norm(x, {3, 2}, w, b);
         },
         true},
        {"layer_norm, bias only, no rows",
         {2, 0, 4},
         {4},
         [](auto& x, auto&, auto& b) { return F::layer_norm(x, {4}, Tensor(), b); },
         true},
        {"layer_norm, rows of no values",
         {4, 0},
         {0},
         [](auto& x, auto& w, auto& b) { return F::layer_norm(x, {0}, w, b); },
         true},
        {"rms_norm, no rows", {0, 5}, {5}, [](auto& x, auto& w, auto&) { return F::rms_norm(x, w); }, false},
        {"rms_norm, rows of no values",
         {3, 0},
         {0},
         [](auto& x, auto& w, auto&) { return F::rms_norm(x, w); },
         false},
        {"add_rms_norm, no rows",
         {0, 5},
         {5},
         [](auto& x, auto& w, auto&) { return F::add_rms_norm(x, x, 1.0, w); },
         false},
        {"add_layer_norm, no rows",
         {0, 5},
         {5},
         [](auto& x, auto& w, auto& b) { return F::add_layer_norm(x, x, 1.0, {5}, w, b); },
         true},
        {"group_norm, no samples",
         {0, 6, 3},
         {6},
         [](auto& x, auto& w, auto& b) { return F::group_norm(x, 3, w, b); },
         true},
        {"group_norm, no positions",
         {2, 6, 0},
         {6},
         [](auto& x, auto& w, auto& b) { return F::group_norm(x, 3, w, b); },
         true},
        {"batch_norm eval, no samples",
         {0, 6},
         {6},
         [pt](auto& x, auto& w, auto& b) {
           return F::batch_norm(x, zeros({6}, pt), ones({6}, pt), w, b, /*training=*/false);
         },
         true},
    };
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name);
      Tensor x = randn(c.x).to(dt).requires_grad_();
      Tensor w = ones(c.param, pt).requires_grad_(), b = zeros(c.param, pt).requires_grad_();
      Tensor y = c.fn(x, w, b);
      EXPECT_EQ(y.shape(), c.x);
      EXPECT_EQ(y.dtype(), dt);
      sum(y).backward();
      ASSERT_TRUE(x.grad().defined());
      EXPECT_EQ(x.grad().shape(), c.x);
      const bool bias_only = std::string(c.name).find("bias only") != std::string::npos;
      for (const Tensor* p : {&w, &b}) {
        if ((p == &b && !c.has_bias) || (p == &w && bias_only)) continue;
        ASSERT_TRUE(p->grad().defined());
        EXPECT_EQ(p->grad().shape(), c.param);
        EXPECT_EQ(p->grad().dtype(), pt);
        for (double v : p->grad().to_vector<double>()) EXPECT_EQ(v, 0.0);
      }
    }
  }
}
