// The Highway kernels against their scalar references, on every SIMD target this machine supports
// (SSE4, AVX2, AVX-512 ...), with odd lengths (tails) and unaligned starts.
#include <hwy/targets.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>
#include <type_traits>

#include "ops_test_util.h"
#include "simd_targets.h"
#include "tensor/kernels/elementwise_simd.h"
#include "tensor/kernels/reduce_simd.h"
#include "tensor/kernels/softmax_simd.h"

using namespace ng;
using namespace ng::testing;

namespace {

const std::vector<int64_t> kLengths = {0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 100, 1023, 4099};

}  // namespace

TEST(Kernels, SumRowsMatchReferenceOnEveryTarget) {
  Generator g(1);
  Tensor x32 = randn({4100}, g), x64 = randn({4100}, g, DType::f64);
  int targets = for_each_target([&] {
    for (int64_t n : kLengths) {
      for (int64_t start : {0, 1}) {  // start = 1: an unaligned pointer
        const float* a = x32.data<float>() + start;
        const double* b = x64.data<double>() + start;
        EXPECT_NEAR(simd::sum_row(a, n), sum_row_reference(a, n), 1e-9) << n;
        EXPECT_NEAR(simd::sum_row(b, n), sum_row_reference(b, n), 1e-9) << n;
        EXPECT_NEAR(simd::sum_sq_dev_row(a, n, 0.3), sum_sq_dev_row_reference(a, n, 0.3), 1e-9) << n;
        EXPECT_NEAR(simd::sum_sq_dev_row(b, n, -0.1), sum_sq_dev_row_reference(b, n, -0.1), 1e-9) << n;
      }
    }
  });
  EXPECT_GE(targets, 2);  // at least EMU128 and one x86 target
}

TEST(Kernels, ColumnSumsMatchReferenceOnEveryTarget) {
  Generator g(2);
  Tensor x = randn({37, 70}, g), x64 = x.to(DType::f64);
  const int ran = for_each_target([&] {
    for (int64_t C : {1, 3, 8, 13, 64, 69}) {
      std::vector<double> a(size_t(C), 1.0), b(size_t(C), 1.0), c(size_t(C), 1.0), d(size_t(C), 1.0);
      simd::add_rows_to(x.data<float>() + 1, 37, C, 70, a.data());
      add_rows_to_reference(x.data<float>() + 1, 37, C, 70, b.data());
      simd::add_rows_to(x64.data<double>() + 1, 37, C, 70, c.data());
      add_rows_to_reference(x64.data<double>() + 1, 37, C, 70, d.data());
      for (int64_t k = 0; k < C; ++k) {
        EXPECT_NEAR(a[k], b[k], 1e-12) << C;
        EXPECT_NEAR(c[k], d[k], 1e-12) << C;
      }
    }
  });
  EXPECT_GE(ran, 2);  // EMU128 and at least one x86 target
}

TEST(Kernels, SoftmaxRowsMatchReferenceOnEveryTarget) {
  Generator g(3);
  Tensor x = mul(randn({4200}, g), 3.0), x64 = x.to(DType::f64);
  const int ran = for_each_target([&] {
    for (int64_t n : kLengths) {
      if (n == 0) continue;
      for (bool log : {false, true}) {
        std::vector<float> y(static_cast<size_t>(n)), r(static_cast<size_t>(n));
        ASSERT_TRUE(simd::softmax_row(x.data<float>() + 1, y.data(), n, log));
        softmax_rows_reference(x.data<float>() + 1, r.data(), 1, n, log);
        for (int64_t k = 0; k < n; ++k) EXPECT_NEAR(y[k], r[k], log ? 2e-5 : 2e-6) << n;
        std::vector<double> y64(static_cast<size_t>(n)), r64(static_cast<size_t>(n));
        ASSERT_TRUE(simd::softmax_row(x64.data<double>() + 1, y64.data(), n, log));
        softmax_rows_reference(x64.data<double>() + 1, r64.data(), 1, n, log);
        for (int64_t k = 0; k < n; ++k) EXPECT_NEAR(y64[k], r64[k], 1e-13) << n;
      }
      // Backward rows: y from the forward, a random upstream gradient.
      for (bool log : {false, true}) {
        std::vector<float> y(static_cast<size_t>(n)), dx(static_cast<size_t>(n)), ref(static_cast<size_t>(n));
        softmax_rows_reference(x.data<float>() + 1, y.data(), 1, n, log);
        const float* dy = x.data<float>() + 7;
        ASSERT_TRUE(simd::softmax_backward_row(y.data(), dy, dx.data(), n, log));
        softmax_backward_rows_reference(y.data(), dy, ref.data(), 1, n, log);
        for (int64_t k = 0; k < n; ++k) EXPECT_NEAR(dx[k], ref[k], 1e-4) << n << " log=" << log;
        std::vector<double> y64(static_cast<size_t>(n)), dx64(static_cast<size_t>(n)),
            ref64(static_cast<size_t>(n));
        softmax_rows_reference(x64.data<double>() + 1, y64.data(), 1, n, log);
        const double* dy64 = x64.data<double>() + 7;
        ASSERT_TRUE(simd::softmax_backward_row(y64.data(), dy64, dx64.data(), n, log));
        softmax_backward_rows_reference(y64.data(), dy64, ref64.data(), 1, n, log);
        for (int64_t k = 0; k < n; ++k) EXPECT_NEAR(dx64[k], ref64[k], 1e-11) << n << " log=" << log;
      }
      float lse = 0, lse_ref = 0;
      ASSERT_TRUE(simd::logsumexp_row(x.data<float>() + 1, n, &lse));
      logsumexp_rows_reference(x.data<float>() + 1, &lse_ref, 1, n);
      EXPECT_NEAR(lse, lse_ref, 2e-5) << n;
    }
  });
  EXPECT_GE(ran, 2);  // EMU128 and at least one x86 target
}

// The row kernels' `end` argument only lets RowMax prefetch the rows after this one (rows of 4 KiB and
// more): every row gives the same bits with and without it, the last ones included, where the prefetch
// window reaches past `end` and the bound stops it. (A prefetch cannot fault, so no test sees a bound that
// is wrong; the bound is there to keep every address inside the caller's memory.)
TEST(Kernels, SoftmaxRowPrefetchEndChangesNothing) {
  Generator g(5);
  const int ran = for_each_target([&] {
    for (int64_t n : {1024, 1031, 2100, 4099}) {
      const int64_t rows = 5;
      Tensor x = mul(randn({rows, n}, g), 2.0), x64 = x.to(DType::f64);
      const float* px = x.data<float>();
      const double* px64 = x64.data<double>();
      for (int64_t r = 0; r < rows; ++r) {
        const float* xr = px + r * n;
        for (bool log : {false, true}) {
          std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
          ASSERT_TRUE(simd::softmax_row(xr, a.data(), n, log));
          ASSERT_TRUE(simd::softmax_row(xr, b.data(), n, log, px + rows * n));
          ASSERT_EQ(a, b) << n << " row " << r;
        }
        std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
        float la = 0, lb = 0, sa = 0, sb = 0;
        ASSERT_TRUE(simd::scaled_softmax_row(xr, 0.25f, a.data(), n, &la));
        ASSERT_TRUE(simd::scaled_softmax_row(xr, 0.25f, b.data(), n, &lb, px + rows * n));
        ASSERT_EQ(a, b) << n << " row " << r;
        ASSERT_EQ(la, lb);
        ASSERT_TRUE(simd::logsumexp_row(xr, n, &sa));
        ASSERT_TRUE(simd::logsumexp_row(xr, n, &sb, px + rows * n));
        ASSERT_EQ(sa, sb);
        std::vector<double> a64(static_cast<size_t>(n)), b64(static_cast<size_t>(n));
        ASSERT_TRUE(simd::softmax_row(px64 + r * n, a64.data(), n, false));
        ASSERT_TRUE(simd::softmax_row(px64 + r * n, b64.data(), n, false, px64 + rows * n));
        ASSERT_EQ(a64, b64) << n << " row " << r;
      }
    }
  });
  EXPECT_GE(ran, 2);  // EMU128 and at least one x86 target
}

// FastExp (kernels/fast_exp-inl.h), the exp inside the softmax / cross-entropy kernels, against std::exp
// in double: relative error below FLT_EPSILON (1.19e-7) over [-87.3, 88], exactly 0 below (and at -inf),
// exactly 1 at 0.
TEST(Kernels, FastExpMatchesStdExpOnEveryTarget) {
  std::vector<float> x;
  for (int64_t k = 0; k <= 400000; ++k) x.push_back(float(-87.3 + (88.0 + 87.3) * double(k) / 400000.0));
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-7f, 0.34657f, -0.34658f, 1.0f, -1.0f, 88.0f, -87.3f})
    x.push_back(v);
  const size_t n_in_range = x.size();
  for (float v : {-87.5f, -100.0f, -1e30f, -INFINITY}) x.push_back(v);
  double worst = 0;
  const int ran = for_each_target([&] {
    std::vector<float> y(x.size());
    simd::fast_exp_row(x.data(), y.data(), int64_t(x.size()));
    for (size_t k = 0; k < n_in_range; ++k) {
      const double want = std::exp(double(x[k]));
      const double rel = std::abs(double(y[k]) - want) / want;
      worst = std::max(worst, rel);
      ASSERT_LT(rel, double(FLT_EPSILON)) << "x = " << x[k] << " got " << y[k] << " want " << want;
    }
    for (size_t k = n_in_range; k < x.size(); ++k) EXPECT_EQ(y[k], 0.0f) << x[k];
    std::vector<float> one(1);
    simd::fast_exp_row(x.data() + n_in_range - 10, one.data(), 1);  // x = 0
    EXPECT_EQ(one[0], 1.0f);
  });
  EXPECT_GE(ran, 2);  // EMU128 and at least one x86 target
  std::printf("FastExp: worst relative error %.3g (f32 ulp = %.3g)\n", worst, double(FLT_EPSILON));
}

TEST(Kernels, ElementwiseMatchesScalarOnEveryTarget) {
  Generator g(4);
  Tensor a = randn({1100}, g), b = add(rand({1100}, g), 0.5);
  const int ran = for_each_target([&] {
    for (int64_t n : kLengths) {
      if (n > 1099) continue;
      std::vector<float> y(static_cast<size_t>(n));
      const float* pa = a.data<float>() + 1;
      const float* pb = b.data<float>() + 1;
      simd::binary(2, pa, pb, y.data(), n);  // mul
      for (int64_t k = 0; k < n; ++k) EXPECT_EQ(y[k], pa[k] * pb[k]);
      ASSERT_TRUE(simd::unary(0, pa, y.data(), n));  // neg
      for (int64_t k = 0; k < n; ++k) EXPECT_EQ(y[k], -pa[k]);
      // One operand a broadcast scalar, on either side, for all four ops (sub and div are not symmetric).
      const float s = pb[0];
      for (int op = 0; op < 4; ++op) {
        auto ref = [op](float u, float v) {
          return op == 0 ? u + v : op == 1 ? u - v : op == 2 ? u * v : u / v;
        };
        simd::binary_scalar_b(op, pa, &s, y.data(), n);
        for (int64_t k = 0; k < n; ++k) ASSERT_EQ(y[k], ref(pa[k], s)) << "op " << op << " n " << n;
        simd::binary_scalar_a(op, &s, pa, y.data(), n);
        for (int64_t k = 0; k < n; ++k) ASSERT_EQ(y[k], ref(s, pa[k])) << "op " << op << " n " << n;
      }
    }
  });
  EXPECT_GE(ran, 2);  // EMU128 and at least one x86 target
}

// simd::unary_backward against the scalar loop (unary_backward_reference), for every op that has a SIMD
// derivative, f32 and f64, every SIMD target, odd lengths (tails) and an unaligned start. The derivatives
// are written with the reference's operations in the reference's order, so they agree bitwise, except:
// gelu and silu, whose tanh / exp come from Highway instead of the C library, and tanh's 1 - y^2, which the
// compiler fuses into one FMA on targets that have it (the scalar reference, built for baseline x86-64,
// rounds twice). Those agree to a few ulp.
template <typename T>
void expect_unary_backward_matches_reference() {
  Generator g(5);
  const DType dt = std::is_same_v<T, double> ? DType::f64 : DType::f32;
  const Tensor any = randn({4101}, g, dt), positive = add(rand({4101}, g, dt), 0.1),
               dout = randn({4101}, g, dt);
  const std::vector<std::pair<UnaryKind, const char*>> ops = {
      {UnaryKind::neg, "neg"},       {UnaryKind::exp, "exp"},         {UnaryKind::log, "log"},
      {UnaryKind::sqrt, "sqrt"},     {UnaryKind::rsqrt, "rsqrt"},     {UnaryKind::abs, "abs"},
      {UnaryKind::square, "square"}, {UnaryKind::relu, "relu"},       {UnaryKind::gelu, "gelu"},
      {UnaryKind::silu, "silu"},     {UnaryKind::sigmoid, "sigmoid"}, {UnaryKind::tanh, "tanh"}};
  const int targets = for_each_target([&] {
    for (auto [op, name] : ops) {
      const bool needs_positive = op == UnaryKind::log || op == UnaryKind::sqrt || op == UnaryKind::rsqrt;
      const Tensor x_all = needs_positive ? positive : any;
      // y = op(x), as the forward would have saved it (the same formulas in double, rounded to T)
      std::vector<T> y_all(4101);
      for (int64_t i = 0; i < 4101; ++i) {
        const double v = double(x_all.data<T>()[i]);
        double y = v;
        switch (op) {
          case UnaryKind::exp:
            y = std::exp(v);
            break;
          case UnaryKind::sqrt:
            y = std::sqrt(v);
            break;
          case UnaryKind::rsqrt:
            y = 1 / std::sqrt(v);
            break;
          case UnaryKind::sigmoid:
            y = 1 / (1 + std::exp(-v));
            break;
          case UnaryKind::tanh:
            y = std::tanh(v);
            break;
          default:
            break;  // the others' derivatives read x only
        }
        y_all[size_t(i)] = T(y);
      }
      const Tensor y_t = from_vector(y_all, {4101}).to(dt);
      for (int64_t n : kLengths) {
        if (n > 4100) continue;
        SCOPED_TRACE(std::string(name) + ", n = " + std::to_string(n));
        // Views starting one element in: unaligned for every vector width.
        const Tensor xv = x_all.narrow(0, 1, n), yv = y_t.narrow(0, 1, n), dv = dout.narrow(0, 1, n);
        const Tensor ref = unary_backward_reference(op, xv, yv, dv);
        std::vector<T> fast(size_t(n) + 1, T(-7));  // one sentinel past the end
        ASSERT_TRUE(simd::unary_backward(int(op), xv.data<T>(), yv.data<T>(), dv.data<T>(), fast.data(), n));
        ASSERT_EQ(fast[size_t(n)], T(-7)) << "wrote past the end";
        const bool exact = op != UnaryKind::gelu && op != UnaryKind::silu && op != UnaryKind::tanh;
        for (int64_t i = 0; i < n; ++i) {
          const double r = double(ref.data<T>()[i]), f = double(fast[size_t(i)]);
          if (exact)
            ASSERT_EQ(f, r) << "i = " << i;
          else
            ASSERT_NEAR(f, r, 8 * std::numeric_limits<T>::epsilon() * (1 + std::abs(r))) << "i = " << i;
        }
      }
    }
    // NaN and inf in dout propagate as in the reference: relu at x <= 0 gives dout * 0 = NaN, not 0.
    std::vector<T> xs = {T(-1), T(2), T(-3), T(0)}, ys = xs;
    std::vector<T> ds = {std::numeric_limits<T>::infinity(), std::numeric_limits<T>::quiet_NaN(),
                         std::numeric_limits<T>::quiet_NaN(), T(1)};
    std::vector<T> out(4);
    ASSERT_TRUE(simd::unary_backward(int(UnaryKind::relu), xs.data(), ys.data(), ds.data(), out.data(), 4));
    EXPECT_TRUE(std::isnan(out[0])) << "inf * 0 is NaN";
    EXPECT_TRUE(std::isnan(out[1]));
    EXPECT_TRUE(std::isnan(out[2])) << "NaN * 0 is NaN";
    EXPECT_EQ(out[3], T(0));
    // The ops without a SIMD derivative say so and touch nothing.
    out.assign(4, T(5));
    EXPECT_FALSE(simd::unary_backward(int(UnaryKind::pow), xs.data(), ys.data(), xs.data(), out.data(), 4));
    EXPECT_FALSE(simd::unary_backward(int(UnaryKind::clamp), xs.data(), ys.data(), xs.data(), out.data(), 4));
    EXPECT_EQ(out, std::vector<T>(4, T(5)));
  });
  EXPECT_GE(targets, 2);
}

TEST(Kernels, UnaryBackwardMatchesReferenceOnEveryTarget) {
  expect_unary_backward_matches_reference<float>();
  expect_unary_backward_matches_reference<double>();
}

TEST(Kernels, SumMeanVarMatchDoubleReference) {
  Generator g(5);
  Tensor x = randn({33, 45}, g);  // column path: dims {0}; row path: dims {1}
  auto xv = x.to_vector<double>();
  std::vector<double> col(45, 0.0), row(33, 0.0);
  for (int r = 0; r < 33; ++r)
    for (int c = 0; c < 45; ++c) col[c] += xv[r * 45 + c], row[r] += xv[r * 45 + c];
  EXPECT_LT(max_abs_diff(sum(x, {0}), from_vector(col, {45})), 1e-5);
  EXPECT_LT(max_abs_diff(sum(x, {1}), from_vector(row, {33})), 1e-5);
  for (double& v : col) v /= 33;
  EXPECT_LT(max_abs_diff(mean(x, {0}), from_vector(col, {45})), 1e-6);
  // var over dim 0 (unbiased)
  std::vector<double> vr(45, 0.0);
  for (int r = 0; r < 33; ++r)
    for (int c = 0; c < 45; ++c) vr[c] += (xv[r * 45 + c] - col[c]) * (xv[r * 45 + c] - col[c]) / 32;
  EXPECT_LT(max_abs_diff(var(x, {0}), from_vector(vr, {45})), 1e-5);
  // A (B, T, C) tensor summed over (B, T), as sum_to does for a bias gradient.
  Tensor y = randn({4, 5, 40}, g, DType::f64);
  EXPECT_LT(max_abs_diff(sum(y, {0, 1}), sum(sum(y, {0}), {0})), 1e-12);
}

TEST(Kernels, ReductionsSameAtOneAndTwoThreads) {
  Generator g(6);
  Tensor big = randn({1 << 20}, g);
  Tensor m = randn({2048, 600}, g);
  std::vector<Tensor> r1, r2;
  for (int threads : {1, 2}) {
    ThreadsGuard guard(threads);
    auto& r = threads == 1 ? r1 : r2;
    r = {sum(big), sum(m, {0}), sum(m, {1}), mean(m), var(m, {1}), var(m, {0}), max(m, 0)};
  }
  for (size_t i = 0; i < r1.size(); ++i) EXPECT_TRUE(bitwise_equal(r1[i], r2[i])) << i;
}
