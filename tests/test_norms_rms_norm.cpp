// RMSNorm: the worked example, gradchecks, fast vs reference, the f16 overflow case, half precision,
// determinism, errors, the module.
#include <cstring>
#include "norms_test_util.h"

using namespace ng;
using namespace normtest;

TEST(RMSNorm, GoldenWorkedExample) {
  // x = [3, -1, 4, -2]: mean(x^2) = 30/4 = 7.5, RMS = sqrt(7.5) = 2.739, y = x / 2.739.
  Tensor x = tensor({3.0, -1.0, 4.0, -2.0});
  std::vector<double> y = F::rms_norm(x, ones({4})).to_vector<double>();
  std::vector<double> expect = {1.095, -0.365, 1.461, -0.730};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], expect[i], 1e-3);
  double ms = 0;
  for (double v : y) ms += v * v / 4;
  EXPECT_NEAR(std::sqrt(ms), 1.0, 1e-5);  // the output's RMS is 1 (up to eps)
  // exact, in f64
  Tensor x64 = x.to(DType::f64);
  std::vector<double> y64 = F::rms_norm(x64).to_vector<double>();
  const double r = 1.0 / std::sqrt(7.5 + 1e-5);
  EXPECT_NEAR(y64[0], 3 * r, 1e-15);
  EXPECT_NEAR(y64[3], -2 * r, 1e-15);
  EXPECT_NEAR(norms::rms_norm_forward(x64, 4, Tensor(), 1e-5).rstd.item(), r, 1e-15);
}

TEST(RMSNorm, GradcheckRandomShapes) {
  uint64_t seed = 40;
  for (Shape shape : std::vector<Shape>{{6}, {3, 5}, {2, 3, 4}, {2, 2, 3, 5}, {4, 1}}) {
    Tensor x = leaf(shape, ++seed), w = leaf({shape.back()}, ++seed, 1.0, 0.5);
    expect_gradcheck([](const std::vector<Tensor>& in) { return F::rms_norm(in[0], in[1]); }, {x, w},
                     "rms_norm " + shape_str(shape));
    expect_gradcheck([](const std::vector<Tensor>& in) { return F::rms_norm(in[0]); }, {x},
                     "rms_norm no weight " + shape_str(shape));
  }
}

TEST(RMSNorm, GradcheckNonContiguousAndBehindMatmul) {
  Tensor x = strided_leaf({4, 5}, 51), w = leaf({5}, 52, 1.0, 0.5);
  expect_gradcheck([](const std::vector<Tensor>& in) { return F::rms_norm(in[0], in[1]); }, {x, w},
                   "strided x");
  Tensor a = leaf({3, 4}, 53), W = leaf({4, 7}, 54), w7 = leaf({7}, 55, 1.0, 0.5);
  expect_gradcheck([](const std::vector<Tensor>& in) { return F::rms_norm(matmul(in[0], in[1]), in[2]); },
                   {a, W, w7}, "rms_norm(a @ W)");
}

TEST(RMSNorm, GradcheckBehindLinear) {
  nn::RMSNorm norm(6);  // (B, T, 5) -> Linear -> (B, T, 6) -> RMSNorm, as in a Pre-LN block
  expect_gradcheck_behind_linear(
      norm, {2, 3, 5}, 6, [](const Tensor& h) { return h; }, 45, "RMSNorm(Linear)");
}

TEST(RMSNorm, FastMatchesReferenceOnEveryTarget) {
  const int targets = for_each_target([&] {
    // 600 (f16/bf16): rows of 1.2 KiB, whose output walks prefetch the row after next (rows 0-2 of 5).
    // 1027 (f64) and 3001: rows so wide that the forward takes them four at a time (5 = 4 + 1).
    for (int64_t n : {1, 2, 3, 7, 8, 15, 17, 33, 100, 600, 1027, 3001}) {
      for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
        Generator gen(uint64_t(n) * 11 + uint64_t(dt));
        Tensor x = randn({5, n}, gen, DType::f32, 0.3, 2.0).to(dt);
        Tensor w = randn({n}, gen, compute_dtype(dt));
        Tensor dy = randn({5, n}, gen, DType::f32).to(dt);
        auto ref = norms::rms_norm_forward(x, n, w, 1e-5, norms::Impl::reference);
        auto fast = norms::rms_norm_forward(x, n, w, 1e-5, norms::Impl::fast);
        // y and dx: absolute in f32 / f64, one unit in the last place (plus a little) in f16 / bf16;
        // dweight (the compute dtype) relative to 1 + its largest value.
        const double tol = dt == DType::f64   ? 1e-12
                           : dt == DType::f32 ? 1e-4
                           : dt == DType::f16 ? 1e-4
                                              : 1e-3;
        const double rtol = half_rtol(dt), sum_tol = dt == DType::f64 ? 1e-12 : 1e-5;
        const std::string what = "n=" + std::to_string(n) + " " + dtype_name(dt);
        EXPECT_LE(max_diff_beyond(fast.y, ref.y, rtol), tol) << what;
        EXPECT_LE(max_abs_diff(ref.rstd, fast.rstd), 1e-5) << what;
        auto gref = norms::rms_norm_backward(dy, x, ref.rstd, w, true, true, norms::Impl::reference);
        auto gfast = norms::rms_norm_backward(dy, x, ref.rstd, w, true, true, norms::Impl::fast);
        EXPECT_LE(max_diff_beyond(gfast.dx, gref.dx, rtol), tol) << what;
        EXPECT_LE(max_diff_scaled(gfast.dweight, gref.dweight), sum_tol) << what;
      }
    }
  });
  EXPECT_GE(targets, 2);
}

TEST(RMSNorm, HostileRows) {
  // Large values (mean 1e4): nothing cancels in RMSNorm, y ~ x / |x| = 1.
  Tensor big = full({2, 37}, 1e4);
  for (norms::Impl impl : {norms::Impl::reference, norms::Impl::fast})
    for (double v : norms::rms_norm_forward(big, 37, Tensor(), 1e-5, impl).y.to_vector<double>())
      EXPECT_NEAR(v, 1.0, 1e-6);
  // All-zero rows: eps governs, rstd = 1/sqrt(eps), y = 0, dx = rstd * g (finite).
  Tensor z = zeros({3, 9});
  for (norms::Impl impl : {norms::Impl::reference, norms::Impl::fast}) {
    auto s = norms::rms_norm_forward(z, 9, Tensor(), 1e-5, impl);
    for (double v : s.y.to_vector<double>()) EXPECT_EQ(v, 0.0);
    for (double v : s.rstd.to_vector<double>()) EXPECT_NEAR(v, 1.0 / std::sqrt(1e-5), 1e-2);
    auto g = norms::rms_norm_backward(ones({3, 9}), z, s.rstd, Tensor(), true, false, impl);
    for (double v : g.dx.to_vector<double>()) EXPECT_NEAR(v, 1.0 / std::sqrt(1e-5), 1e-2);
  }
  // Length-1 rows: y = x / sqrt(x^2 + eps) = sign(x) (almost).
  Tensor one = from_vector(std::vector<double>{-3.0, 0.5}, {2, 1});
  std::vector<double> y = F::rms_norm(one).to_vector<double>();
  EXPECT_NEAR(y[0], -1.0, 1e-5);
  EXPECT_NEAR(y[1], 1.0, 1e-4);
}

TEST(RMSNorm, F16SumOfSquaresOverflowsButRmsNormDoesNot) {
  // A row of f16 values around 300. Each square (~9e4) is already above f16's largest finite value 65504.
  std::vector<double> vals;
  for (int i = 0; i < 64; ++i) vals.push_back((i % 2 ? -1.0 : 1.0) * (280.0 + i));
  Tensor x = from_vector(vals, {1, 64}, DType::f16);

  // Naive: the sum of squares accumulated in f16 arithmetic (every step rounded to f16).
  f16 acc = f32_to_f16(0.0f);
  for (double v : x.to_vector<double>()) {
    f16 sq = f32_to_f16(float(v) * float(v));
    acc = f32_to_f16(f16_to_f32(acc) + f16_to_f32(sq));
  }
  EXPECT_TRUE(std::isinf(f16_to_f32(acc))) << "naive f16 sum of squares: " << f16_to_f32(acc);

  // rms_norm upcasts to f32: finite and right.
  Tensor y = F::rms_norm(x);
  ASSERT_EQ(y.dtype(), DType::f16);
  std::vector<double> xs = x.to_vector<double>(), ys = y.to_vector<double>();
  double ms = 0;
  for (double v : xs) ms += v * v / 64;
  for (size_t i = 0; i < ys.size(); ++i) {
    ASSERT_TRUE(std::isfinite(ys[i])) << i;
    EXPECT_NEAR(ys[i], xs[i] / std::sqrt(ms + 1e-5), 2e-3) << i;
  }
}

TEST(RMSNorm, HalfPrecisionMatchesF32) {
  Generator gen(78);
  Tensor x = randn({6, 48}, gen), dy = randn({6, 48}, gen);
  Tensor w = randn({48}, gen, DType::f32, 1.0, 0.2).requires_grad_();
  Tensor x32 = x.detach().requires_grad_();
  F::rms_norm(x32, w).backward(dy);
  Tensor dw32 = w.grad(), dx32 = x32.grad();
  Tensor y32 = F::rms_norm(x, w).detach();
  for (DType dt : {DType::f16, DType::bf16}) {
    w.zero_grad();
    Tensor xh = x.to(dt).requires_grad_();
    Tensor yh = F::rms_norm(xh, w);
    EXPECT_EQ(yh.dtype(), dt);
    const double tol = dt == DType::f16 ? 1e-2 : 6e-2;
    EXPECT_LE(max_abs_diff(yh, y32), tol) << dtype_name(dt);
    yh.backward(dy.to(dt));
    EXPECT_LE(max_abs_diff(xh.grad(), dx32), tol * 2) << dtype_name(dt);
    EXPECT_LE(max_abs_diff(w.grad(), dw32), tol * 4) << dtype_name(dt);
  }
}

TEST(RMSNorm, RoundsOnceUnlikeTypeAsThenMultiply) {
  // Ours: round(x * rstd * w) once. MiniMind's weight * norm(x.float()).type_as(x) with a bf16 weight rounds
  // norm(x) to bf16, then rounds the product again. Both are within bf16 precision of the f32 result, and
  // ours is never further from it.
  Generator gen(9);
  Tensor x = randn({4, 64}, gen).to(DType::bf16);
  Tensor w = uniform({64}, 0.5, 1.5, gen).to(DType::bf16);
  Tensor ours = F::rms_norm(x, w);
  Tensor exact = F::rms_norm(x.to(DType::f32), w.to(DType::f32));
  Tensor two_roundings = mul(w, F::rms_norm(x.to(DType::f32)).to(DType::bf16));
  EXPECT_LE(max_abs_diff(ours, exact), max_abs_diff(two_roundings, exact) + 1e-12);
  EXPECT_LE(max_abs_diff(ours, exact), 2e-2);
}

TEST(RMSNorm, DeterministicAcrossThreadCounts) {
  Generator gen(4);
  Tensor x = randn({1025, 64}, gen), dy = randn({1025, 64}, gen), w = randn({64}, gen);
  auto run = [&]() {
    auto s = norms::rms_norm_forward(x, 64, w, 1e-5);
    auto g = norms::rms_norm_backward(dy, x, s.rstd, w, true, true);
    return std::vector<Tensor>{s.y, g.dx, g.dweight};
  };
  std::vector<Tensor> one = with_threads(1, run), two = with_threads(2, run);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(bitwise_equal(one[i], two[i])) << "output " << i;
}

TEST(RMSNorm, WideRowsFourAtATimeGiveTheOneRowBits) {
  // Rows wider than 2048 floats go through the kernels four at a time (w loaded once for four rows); the
  // arithmetic per row is that of one row at a time, so the bits must be too. 5 rows: one group of four and
  // one single row; against five one-row calls (dweight accumulates across calls, in the same row order).
  // f16 and bf16 rows (f32 weight and statistics) go four at a time in the backward too; one at a time, their
  // backward keeps pass 1's g and xhat in a buffer for pass 2 (rows up to 3072 values), so their dx here also
  // checks that the buffer keeps the bits.
  // Then 14 rows of 2560 (f64: 1280), a multiple of 4 vectors on every target: the forward's groups 0 and 1
  // walk with the next group's pass 1 inside (FusedGroupWalk, norm_simd-inl.h), group 2 is the last, rows
  // 12-13 go one at a time.
  const int targets = for_each_target([&] {
    for (int64_t rows : {5, 14})
      for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
        const int64_t n = rows == 5 ? (dt == DType::f64 ? 1031 : 3001) : (dt == DType::f64 ? 1280 : 2560);
        const DType acc = compute_dtype(dt);
        Generator gen{uint64_t(n)};
        Tensor x = randn({rows, n}, gen).to(dt), dy = randn({rows, n}, gen).to(dt), w = randn({n}, gen, acc);
        auto both = [&]<typename T, typename A>() {
          const T *px = x.data<T>(), *pdy = dy.data<T>();
          const A* pw = w.data<A>();
          std::vector<T> y4(static_cast<size_t>(rows * n)), y1(y4.size()), dx4(y4.size()), dx1(y4.size());
          std::vector<A> rs4(static_cast<size_t>(rows)), rs1(rs4.size()), dw4(static_cast<size_t>(n), A(0)),
              dw1(dw4.size(), A(0));
          norms::rms_norm_forward_rows<T, A>(px, pw, y4.data(), rs4.data(), rows, n, A(1e-5));
          norms::rms_norm_backward_rows<T, A>(pdy, px, pw, rs4.data(), dx4.data(), dw4.data(), rows, n);
          for (int64_t r = 0; r < rows; ++r) {
            norms::rms_norm_forward_rows<T, A>(px + r * n, pw, y1.data() + r * n, rs1.data() + r, 1, n,
                                               A(1e-5));
            norms::rms_norm_backward_rows<T, A>(pdy + r * n, px + r * n, pw, rs1.data() + r,
                                                dx1.data() + r * n, dw1.data(), 1, n);
          }
          auto same = [](const std::vector<T>& a, const std::vector<T>& b) {
            return std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
          };
          EXPECT_TRUE(same(y4, y1)) << dtype_name(dt) << " n=" << n;
          EXPECT_TRUE(rs4 == rs1) << dtype_name(dt) << " n=" << n;
          EXPECT_TRUE(same(dx4, dx1)) << dtype_name(dt) << " n=" << n;
          EXPECT_TRUE(dw4 == dw1) << dtype_name(dt) << " n=" << n;
        };
        if (dt == DType::f32) both.template operator()<float, float>();
        if (dt == DType::f64) both.template operator()<double, double>();
        if (dt == DType::f16) both.template operator()<f16, float>();
        if (dt == DType::bf16) both.template operator()<bf16, float>();
      }
  });
  EXPECT_GE(targets, 2);
}

TEST(RMSNorm, WideBf16BackwardKeepsSubnormalDx) {
  // As LayerNorm.WideBf16RowsKeepSubnormalOutputs: bf16 rows of 4096 take the four-row backward, whose dx
  // stores use vcvtne2ps2bf16 where the CPU has AVX512-BF16, and a pair with a subnormal value must take the
  // rounding by hand. dy scaled by 2^-128 makes most dx f32 subnormals; the bf16 kernel's dx must be the f32
  // kernel's dx on the same values, rounded to nearest even, bit for bit.
  const int targets = for_each_target([&] {
    const int64_t rows = 8, n = 4096;
    Generator gen{12};
    const Tensor x = randn({rows, n}, gen).to(DType::bf16);
    const Tensor dy = (randn({rows, n}, gen) * 0x1p-128).to(DType::bf16);
    const Tensor x32 = x.to(DType::f32), dy32 = dy.to(DType::f32), w = randn({n}, gen);
    const size_t all = static_cast<size_t>(rows * n);
    std::vector<float> y32(all), rstd(static_cast<size_t>(rows)), dx32(all);
    std::vector<bf16> dx16(all);
    norms::rms_norm_forward_rows<float, float>(x32.data<float>(), w.data<float>(), y32.data(), rstd.data(),
                                               rows, n, 1e-5f);
    norms::rms_norm_backward_rows<float, float>(dy32.data<float>(), x32.data<float>(), w.data<float>(),
                                                rstd.data(), dx32.data(), nullptr, rows, n);
    norms::rms_norm_backward_rows<bf16, float>(dy.data<bf16>(), x.data<bf16>(), w.data<float>(), rstd.data(),
                                               dx16.data(), nullptr, rows, n);
    expect_bf16_rounding_of_subnormals(dx32, dx16);
  });
  EXPECT_GE(targets, 2);
}

TEST(RMSNorm, Errors) {
  Tensor x = randn({2, 16, 128});
  expect_error([&] { F::rms_norm(x, ones({64})); },
               {"rms_norm: weight has shape (64), expected (128)", "last dimension of x (2, 16, 128)"});
  expect_error([&] { F::rms_norm(x, ones({128}), 0.0); }, {"rms_norm: expected eps > 0", "got 0"});
  expect_error([&] { F::rms_norm(scalar_tensor(1.0)); }, {"rms_norm: expected x with at least 1 dimension"});
  expect_error([&] { F::rms_norm(arange(4)); }, {"rms_norm: expected a floating input", "i64"});
  expect_error([&] { nn::RMSNorm(0); }, {"RMSNorm: dim must be positive, got 0"});
  expect_error([&] { nn::RMSNorm(8, -1.0); }, {"RMSNorm: expected eps > 0"});
}

TEST(RMSNorm, Module) {
  nn::RMSNorm norm(8);
  auto state = norm.state_dict();
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0].first, "weight");
  EXPECT_EQ(norm.weight.shape(), (Shape{8}));
  Tensor x = randn({3, 8});
  Tensor y = norm(x);
  EXPECT_LE(max_abs_diff(y, F::rms_norm(x)), 1e-7);
  sum(y).backward();
  ASSERT_TRUE(norm.weight.grad().defined());
  // d sum(x * rstd * w) / dw_i = sum_rows xhat_i
  std::vector<double> xhat = F::rms_norm(x).to_vector<double>(), dw = norm.weight.grad().to_vector<double>();
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(dw[i], xhat[i] + xhat[8 + i] + xhat[16 + i], 1e-5);
  EXPECT_EQ(nn::RMSNorm(8, 1e-6, false).parameters().size(), 0u);
}
