// Norms on groups whose squares overflow the compute type (nn/norms/wide_stats.h): every norm, dtype and
// kernel path gives, for x = s * x1 with s = 1e20 (f32, bf16) or 1e200 (f64), what it gives for x1 itself
// (every norm is scale-invariant once var >> eps: norm(s x, eps) = norm(x, eps / s^2)); the groups that do
// not overflow keep the kernel's bits; a group with a NaN keeps its NaN.
#include "norms_test_util.h"

using namespace ng;
using namespace normtest;

namespace {

enum class Kind { layer, rms, group, batch };

// LayerNorm and RMSNorm: x is (rows, n) = (shape[0], shape[1]); GroupNorm and BatchNorm: x is (N, C, S).
struct Case {
  Kind kind;
  Shape shape;
  int64_t G = 1;  // GroupNorm's groups
  std::string name() const {
    const char* k[] = {"layer_norm", "rms_norm", "group_norm", "batch_norm"};
    return std::string(k[int(kind)]) + shape_str(shape) +
           (kind == Kind::group ? " G=" + std::to_string(G) : "");
  }
  // The group (row, (sample, group), channel) that flat index i of x belongs to.
  int64_t group_of(int64_t i) const {
    switch (kind) {
      case Kind::layer:
      case Kind::rms:
        return i / shape[1];
      case Kind::group:
        return i / (shape[1] / G * shape[2]);
      case Kind::batch:
        return (i / shape[2]) % shape[1];
    }
    return 0;
  }
};

// Every fast path: LayerNorm's row groups, its bf16 blocks of 16 rows and short rows, RMSNorm's; GroupNorm's
// (N, C) pairs (bf16) and batches (f32), short groups (m < 16) and feature maps; BatchNorm on (N, C) (also
// past 2048 channels, the column blocks) and on feature maps.
std::vector<Case> cases() {
  return {
      {Kind::layer, {8, 1024}},     {Kind::layer, {32, 256}},     {Kind::layer, {3, 4096}},
      {Kind::layer, {9, 7}},        {Kind::layer, {33, 100}},     {Kind::rms, {8, 1024}},
      {Kind::rms, {32, 256}},       {Kind::rms, {9, 7}},          {Kind::group, {64, 1024, 1}, 32},
      {Kind::group, {8, 64, 1}, 4}, {Kind::group, {6, 8, 3}, 4},  {Kind::group, {4, 64, 49}, 8},
      {Kind::batch, {64, 96, 1}},   {Kind::batch, {40, 2100, 1}}, {Kind::batch, {6, 16, 50}},
  };
}

norms::NormStats forward(const Case& c, const Tensor& x, const Tensor& w, const Tensor& b, double eps,
                         norms::Impl impl) {
  const Shape& s = c.shape;
  switch (c.kind) {
    case Kind::layer:
      return norms::layer_norm_forward(x, s[1], w, b, eps, impl);
    case Kind::rms:
      return norms::rms_norm_forward(x, s[1], w, eps, impl);
    case Kind::group:
      return norms::group_norm_forward(x, s[0], s[1], s[2], c.G, w, b, eps, impl);
    case Kind::batch:
      return norms::batch_norm_forward(x, s[0], s[1], s[2], w, b, Tensor(), Tensor(), eps, impl);
  }
  return {};
}

// Past where the squares overflow: float's at ~1.8e19, double's at ~1.3e154. The larger of each pair also
// leaves rstd^2 with no normal number (BatchNorm's backward takes its slow path there).
std::vector<double> huge_scales(DType dt) {
  return dt == DType::f64 ? std::vector<double>{1e200, 1e300} : std::vector<double>{1e20, 1e30};
}

// eps / s^2, kept above double's range floor (1e-300 against a variance of ~1 changes nothing in f64).
double scaled_eps(double eps, double s) {
  return std::max(eps / s / s, 1e-300);
}

}  // namespace

TEST(NormOverflow, HugeGroupsGiveTheOutputOfTheSameGroupsScaledDown) {
  const double eps = 1e-5;
  // every SIMD target: the kernels and the check of their rstd (wide_stats.cpp) are compiled for each
  const int ran = ng::testing::for_each_target([&] {
    for (const Case& c : cases()) {
      for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
        for (norms::Impl impl : {norms::Impl::reference, norms::Impl::fast}) {
          for (double s : huge_scales(dt)) {
            const std::string what = c.name() + " " + dtype_name(dt) +
                                     (impl == norms::Impl::fast ? " fast" : " ref") +
                                     " s=" + std::to_string(s);
            const DType acc = dt == DType::f64 ? DType::f64 : DType::f32;
            Generator gen(7);
            // x1: randn + 3 (a mean to remove); every other group is multiplied by s
            Tensor x1 = randn(c.shape, gen, DType::f64, 3.0, 1.0);
            std::vector<double> v1 = x1.to_vector<double>(), big(v1.size()), small(v1.size());
            for (size_t i = 0; i < v1.size(); ++i) {
              const bool huge = c.group_of(int64_t(i)) % 2 == 0;
              big[i] = huge ? v1[i] * s : v1[i];
              small[i] = v1[i];
            }
            // the values as stored in dt, and the same values scaled back down (f64, exact up to one
            // rounding)
            Tensor x = from_vector(big, c.shape, DType::f64).to(dt);
            Tensor x_small = from_vector(small, c.shape, DType::f64).to(dt);
            std::vector<double> xs = x.to_vector<double>(), down(xs.size());
            for (size_t i = 0; i < xs.size(); ++i)
              down[i] = c.group_of(int64_t(i)) % 2 == 0 ? xs[i] / s : xs[i];

            const int64_t na = c.shape[1];
            Tensor w = randn({na}, gen, acc, 1.0, 0.5),
                   b = c.kind == Kind::rms ? Tensor() : randn({na}, gen, acc);
            norms::NormStats got = forward(c, x, w, b, eps, impl);
            norms::NormStats want = forward(c, from_vector(down, c.shape, DType::f64), w.to(DType::f64),
                                            b.defined() ? b.to(DType::f64) : Tensor(), scaled_eps(eps, s),
                                            norms::Impl::reference);
            norms::NormStats plain = forward(c, x_small, w, b, eps, impl);  // the groups that do not overflow

            const std::vector<double> y = got.y.to_vector<double>(), yw = want.y.to_vector<double>();
            const std::vector<double> yp = plain.y.to_vector<double>();
            const double tol = dt == DType::f64 ? 1e-10 : dt == DType::f32 ? 2e-5 : 2e-2;  // y is O(1)
            int64_t checked = 0;
            for (size_t i = 0; i < y.size(); ++i) {
              if (c.group_of(int64_t(i)) % 2 == 0) {
                ASSERT_NEAR(y[i], yw[i], tol * (1 + std::abs(yw[i]))) << what << " huge group, value " << i;
                ++checked;
              } else {
                ASSERT_EQ(y[i], yp[i])
                    << what << " a group that does not overflow must keep the kernel's bits, " << i;
              }
            }
            EXPECT_GT(checked, 0) << what;

            // the saved statistics: mean = s * mean(x1), rstd = rstd(x1) / s, both finite
            const std::vector<double> rs = got.rstd.to_vector<double>(), rsw = want.rstd.to_vector<double>();
            for (size_t g = 0; g < rs.size(); g += 2) {
              ASSERT_TRUE(std::isfinite(rs[g]) && rs[g] > 0) << what << " group " << g;
              ASSERT_NEAR(rs[g] * s, rsw[g], 1e-4 * rsw[g]) << what << " rstd of group " << g;
            }
            if (c.kind != Kind::rms) {
              const std::vector<double> mu = got.mean.to_vector<double>(),
                                        muw = want.mean.to_vector<double>();
              for (size_t g = 0; g < mu.size(); g += 2)
                ASSERT_NEAR(mu[g] / s, muw[g], 1e-5 * std::abs(muw[g])) << what << " mean of group " << g;
            }
          }
        }
      }
    }
  });
  EXPECT_GE(ran, 1);
}

// Values near the largest float, of both signs: here not only the squares overflow but the sums, and x - mean
// itself (3e38 - (-3e38)). GroupNorm's bf16 pairs kept a group whose mean was inf (its NaN variance was
// clamped to 0, so rstd looked usable) and wrote -inf and NaN; BatchNorm's output pass computed x - mean in
// float and wrote -inf for a channel of -3e38 and 3e38. Both forward outputs must be the scaled-down ones.
TEST(NormOverflow, ValuesNearTheLargestFloatOfBothSigns) {
  const double eps = 1e-5, s = 2e38;  // x1 in [-1.6, 1.6): |x| up to 3.2e38, spreads up to 6.4e38
  const int ran = ng::testing::for_each_target([&] {
    for (const Case& c : cases()) {
      for (DType dt : {DType::f32, DType::bf16}) {
        for (norms::Impl impl : {norms::Impl::reference, norms::Impl::fast}) {
          const std::string what =
              c.name() + " " + dtype_name(dt) + (impl == norms::Impl::fast ? " fast" : " ref");
          Generator gen(11);
          std::vector<double> v = uniform(c.shape, -1.6, 1.6, gen, DType::f64).to_vector<double>();
          for (double& e : v) e *= s;
          Tensor x = from_vector(v, c.shape, DType::f64).to(dt);
          std::vector<double> down = x.to_vector<double>();
          for (double& e : down) e /= s;
          const int64_t na = c.shape[1];
          const DType acc = DType::f32;
          Tensor w = randn({na}, gen, acc, 1.0, 0.5),
                 b = c.kind == Kind::rms ? Tensor() : randn({na}, gen, acc);
          const norms::NormStats got = forward(c, x, w, b, eps, impl);
          const norms::NormStats want =
              forward(c, from_vector(down, c.shape, DType::f64), w.to(DType::f64),
                      b.defined() ? b.to(DType::f64) : Tensor(), scaled_eps(eps, s), norms::Impl::reference);
          const std::vector<double> y = got.y.to_vector<double>(), yw = want.y.to_vector<double>();
          const double tol = dt == DType::f32 ? 2e-5 : 2e-2;
          for (size_t i = 0; i < y.size(); ++i)
            ASSERT_NEAR(y[i], yw[i], tol * (1 + std::abs(yw[i]))) << what << ", value " << i;
        }
      }
    }
  });
  EXPECT_GE(ran, 1);
}

// Through autograd: the forward as above, and dx = dx(x1) / s, dweight and dbias those of x1, with every
// group huge.
TEST(NormOverflow, GradientsOfHugeInputsAreTheGradientsOfTheInputsScaledDown) {
  const double eps = 1e-5;
  for (const Case& c : cases()) {
    for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
      for (double s : huge_scales(dt)) {
        const std::string what = c.name() + " " + dtype_name(dt) + " s=" + std::to_string(s);
        const DType acc = dt == DType::f64 ? DType::f64 : DType::f32;
        Generator gen(11);
        Tensor x1 = randn(c.shape, gen, DType::f64, 3.0, 1.0);
        Tensor x = (x1 * s).to(dt);
        Tensor down = x.to(DType::f64) / s;
        const int64_t na = c.shape[1];
        Tensor w = randn({na}, gen, acc, 1.0, 0.5), b = randn({na}, gen, acc);
        Tensor dy = randn(c.shape, gen, DType::f64);

        // run(x, w, b, eps) -> y, with x, w, b leaves; the shapes each F:: op wants
        auto run = [&](const Tensor& xin, const Tensor& win, const Tensor& bin, double e) {
          const Shape& sh = c.shape;
          switch (c.kind) {
            case Kind::layer:
              return F::layer_norm(xin, {sh[1]}, win, bin, e);
            case Kind::rms:
              return F::rms_norm(xin, win, e);
            case Kind::group:
              return F::group_norm(xin, c.G, win, bin, e);
            case Kind::batch:
              return F::batch_norm(xin, Tensor(), Tensor(), win, bin, true, 0.1, e);
          }
          return Tensor();
        };
        Tensor xg = x.clone().requires_grad_(), wg = w.clone().requires_grad_(),
               bg = b.clone().requires_grad_();
        Tensor y = run(xg, wg, c.kind == Kind::rms ? Tensor() : bg, eps);
        y.backward(dy.to(dt));
        Tensor xw = down.clone().requires_grad_(), ww = w.to(DType::f64).requires_grad_();
        Tensor bw = b.to(DType::f64).requires_grad_();
        Tensor yw = run(xw, ww, c.kind == Kind::rms ? Tensor() : bw, scaled_eps(eps, s));
        yw.backward(dy);

        // tolerances relative to the largest expected value: the backward's sums round in float (f32, bf16 x)
        const double tol = dt == DType::f64 ? 1e-9 : dt == DType::f32 ? 1e-4 : 3e-2;
        auto expect_close = [&](const Tensor& got, const Tensor& want, double factor, const char* name) {
          const std::vector<double> g = got.to_vector<double>(), e = want.to_vector<double>();
          double emax = 0;
          for (double v : e) emax = std::max(emax, std::abs(v));
          for (size_t i = 0; i < g.size(); ++i)
            ASSERT_NEAR(g[i] * factor, e[i], tol * emax) << what << " " << name << " " << i;
        };
        expect_close(y, yw, 1.0, "y");
        expect_close(xg.grad(), xw.grad(), s, "dx * s");
        expect_close(wg.grad(), ww.grad(), 1.0, "dweight");
        if (c.kind != Kind::rms) expect_close(bg.grad(), bw.grad(), 1.0, "dbias");
      }
    }
  }
}

// The fused residual add + norm builds its rows on the fly: the same repair, the same bits as the unfused
// ops.
TEST(NormOverflow, FusedAddNormIsTheUnfusedOpsOnHugeRows) {
  for (DType dt : {DType::f32, DType::f64}) {
    const double s = huge_scales(dt)[0];
    Generator gen(3);
    Tensor x = (randn({16, 256}, gen, DType::f64) * s).to(dt),
           a = (randn({16, 256}, gen, DType::f64) * s).to(dt);
    Tensor w = randn({256}, gen, dt), b = randn({256}, gen, dt);
    for (double alpha : {1.0, 1.5}) {
      Tensor h = alpha != 1.0 ? x * alpha + a : x + a;
      Tensor fused = F::add_layer_norm(x, a, alpha, {256}, w, b), unfused = F::layer_norm(h, {256}, w, b);
      EXPECT_EQ(max_abs_diff(fused, unfused), 0.0) << dtype_name(dt) << " add_layer_norm alpha " << alpha;
      Tensor fused_rms = F::add_rms_norm(x, a, alpha, w), unfused_rms = F::rms_norm(h, w);
      EXPECT_EQ(max_abs_diff(fused_rms, unfused_rms), 0.0)
          << dtype_name(dt) << " add_rms_norm alpha " << alpha;
      // and they are O(1), not the bias (LayerNorm) or 0 (RMSNorm) that the overflow gave before
      const std::vector<double> v = fused_rms.to_vector<double>();
      double sq = 0;
      for (double e : v) sq += e * e;
      EXPECT_GT(sq / double(v.size()), 0.1) << dtype_name(dt);
      EXPECT_GT(max_abs_diff(fused, b.expand({16, 256})), 0.1) << dtype_name(dt) << " y is not just the bias";
    }
  }
}

// A group with a NaN or an inf is not "repaired": NaN in, NaN out, as before; its neighbours are unaffected.
TEST(NormOverflow, GroupsWithNaNOrInfKeepTheirNaN) {
  for (norms::Impl impl : {norms::Impl::reference, norms::Impl::fast}) {
    for (double bad : {std::nan(""), double(INFINITY)}) {
      Generator gen(5);
      std::vector<double> v = randn({4, 64}, gen, DType::f64).to_vector<double>();
      for (int64_t j = 0; j < 64; ++j) v[size_t(64 + j)] *= 1e20;  // row 1: huge, finite
      v[size_t(2 * 64 + 5)] = bad;                                 // row 2: one NaN or inf among huge values
      for (int64_t j = 0; j < 64; ++j)
        if (j != 5) v[size_t(2 * 64 + j)] *= 1e20;
      Tensor x = from_vector(v, {4, 64}, DType::f64).to(DType::f32);
      norms::NormStats st = norms::layer_norm_forward(x, 64, Tensor(), Tensor(), 1e-5, impl);
      const std::vector<double> y = st.y.to_vector<double>();
      for (int64_t j = 0; j < 64; ++j) {
        EXPECT_TRUE(std::isnan(y[size_t(2 * 64 + j)])) << "row 2 value " << j << " bad " << bad;
        EXPECT_TRUE(std::isfinite(y[size_t(64 + j)])) << "row 1 value " << j;
      }
    }
  }
}
