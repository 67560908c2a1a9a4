// Property tests for the norms over many random shapes and scales.
//
// Instead of a few hand-picked cases, each property is checked on dozens of random (shape, scale, shift)
// draws, f32 and f64:
//   LayerNorm, unit weight, zero bias:  each row has mean 0 and (biased) variance var / (var + eps),
//                                       which is 1 whenever var >> eps;
//   RMSNorm, unit weight:               each row has RMS sqrt(ms / (ms + eps)), 1 whenever ms >> eps;
//   BatchNorm in eval:                  y = (x - running_mean) / sqrt(running_var + eps) * weight + bias;
//   every norm:                         gradcheck passes (f64, random upstream gradient).
// The targets are exact formulas in eps, not "about 1", so the tolerances can be tight.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>
#include <vector>

#include "normgrad.h"

using namespace ng;

namespace {

struct Draw {
  Shape shape;
  double scale, shift;
  DType dtype;
  std::string str() const {
    std::ostringstream os;
    os << shape_str(shape) << " scale " << scale << " shift " << shift << " " << dtype_name(dtype);
    return os.str();
  }
};

// Random draws: `dims` dims, the last one (the normalized one) of size 2..max_last, the others 1..5.
std::vector<Draw> draws(uint64_t seed, int count, int dims, int64_t max_last) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const double scales[] = {1e-2, 0.3, 1.0, 7.0, 1e3};
  const double shifts[] = {0.0, 0.0, 1.0, -50.0, 1e3};
  std::vector<Draw> out;
  for (int i = 0; i < count; ++i) {
    Draw d;
    for (int k = 0; k + 1 < dims; ++k) d.shape.push_back(pick(1, 5));
    d.shape.push_back(pick(2, max_last));
    d.scale = scales[pick(0, 4)];
    d.shift = shifts[pick(0, 4)] * d.scale;  // shift in units of the scale: keeps f32 meaningful
    d.dtype = i % 2 ? DType::f32 : DType::f64;
    out.push_back(d);
  }
  return out;
}

Tensor sample(const Draw& d, uint64_t seed) {
  Generator gen(seed);
  return randn(d.shape, gen, d.dtype, d.shift, d.scale);
}

// rows of the last dim, in double
std::vector<std::vector<double>> rows_of(const Tensor& t) {
  const int64_t n = t.size(-1);
  std::vector<double> v = t.to_vector<double>();
  std::vector<std::vector<double>> rows;
  for (size_t i = 0; i < v.size(); i += size_t(n)) rows.emplace_back(v.begin() + i, v.begin() + i + n);
  return rows;
}

double mean_of(const std::vector<double>& r) {
  double s = 0;
  for (double x : r) s += x;
  return s / double(r.size());
}

double biased_var(const std::vector<double>& r) {
  const double m = mean_of(r);
  double s = 0;
  for (double x : r) s += (x - m) * (x - m);
  return s / double(r.size());
}

double mean_square(const std::vector<double>& r) {
  double s = 0;
  for (double x : r) s += x * x;
  return s / double(r.size());
}

double tol(DType t) {
  return t == DType::f64 ? 1e-9 : 2e-4;
}

}  // namespace

TEST(NormProperties, LayerNormRowsHaveMeanZeroAndUnitVariance) {
  const double eps = 1e-5;
  int i = 0;
  for (const Draw& d : draws(11, 60, 3, 300)) {
    Tensor x = sample(d, 100 + i++);
    const int64_t C = d.shape.back();
    Tensor y = F::layer_norm(x, {C}, ones({C}, d.dtype), zeros({C}, d.dtype), eps);
    ASSERT_EQ(y.shape(), x.shape()) << d.str();
    auto xr = rows_of(x), yr = rows_of(y);
    for (size_t r = 0; r < yr.size(); ++r) {
      const double vx = biased_var(xr[r]);
      const double want_var = vx / (vx + eps);  // = 1 when vx >> eps
      EXPECT_NEAR(mean_of(yr[r]), 0.0, tol(d.dtype)) << d.str() << " row " << r;
      EXPECT_NEAR(biased_var(yr[r]), want_var, tol(d.dtype) * 10) << d.str() << " row " << r;
      if (vx > 1e-2) {
        EXPECT_NEAR(biased_var(yr[r]), 1.0, 1e-3) << d.str() << " row " << r;
      }
    }
  }
}

TEST(NormProperties, RMSNormRowsHaveUnitRMS) {
  const double eps = 1e-5;
  int i = 0;
  for (const Draw& d : draws(12, 60, 3, 300)) {
    Tensor x = sample(d, 200 + i++);
    const int64_t C = d.shape.back();
    Tensor y = F::rms_norm(x, ones({C}, d.dtype), eps);
    auto xr = rows_of(x), yr = rows_of(y);
    for (size_t r = 0; r < yr.size(); ++r) {
      const double ms = mean_square(xr[r]);
      const double want_rms = std::sqrt(ms / (ms + eps));
      EXPECT_NEAR(std::sqrt(mean_square(yr[r])), want_rms, tol(d.dtype) * 10) << d.str() << " row " << r;
      if (ms > 1e-2) {
        EXPECT_NEAR(std::sqrt(mean_square(yr[r])), 1.0, 1e-3) << d.str() << " row " << r;
      }
    }
  }
}

TEST(NormProperties, BatchNormEvalIsTheAffineFormula) {
  std::mt19937_64 rng(13);
  for (int i = 0; i < 40; ++i) {
    // x: (N, C), (N, C, L) or (N, C, H, W)
    const int extra = int(rng() % 3);
    Shape shape{int64_t(1 + rng() % 5), int64_t(1 + rng() % 6)};
    for (int k = 0; k < extra; ++k) shape.push_back(int64_t(1 + rng() % 4));
    const DType dt = i % 2 ? DType::f32 : DType::f64;
    const int64_t N = shape[0], C = shape[1], S = numel(shape) / (N * C);
    const double eps = i % 3 == 0 ? 1e-3 : 1e-5;
    Generator gen(300 + uint64_t(i));
    const double scale = i % 4 == 0 ? 100.0 : 1.0;
    Tensor x = randn(shape, gen, dt, 0.0, scale);
    Tensor rm = randn({C}, gen, dt, 0.0, scale);
    Tensor rv = uniform({C}, 0.01, 3.0, gen, dt);
    Tensor w = randn({C}, gen, dt), b = randn({C}, gen, dt);
    Tensor y = F::batch_norm(x, rm, rv, w, b, /*training=*/false, 0.1, eps);

    const std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
    const std::vector<double> m = rm.to_vector<double>(), v = rv.to_vector<double>();
    const std::vector<double> wv = w.to_vector<double>(), bv = b.to_vector<double>();
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t s = 0; s < S; ++s) {
          const size_t k = size_t((n * C + c) * S + s);
          const double want =
              (xv[k] - m[size_t(c)]) / std::sqrt(v[size_t(c)] + eps) * wv[size_t(c)] + bv[size_t(c)];
          EXPECT_NEAR(yv[k], want, (dt == DType::f64 ? 1e-10 : 1e-4) * (1 + std::abs(want)))
              << shape_str(shape) << " " << dtype_name(dt) << " at " << k;
        }
    // Eval leaves the running statistics alone.
    EXPECT_EQ(rm.to_vector<double>(), m);
    EXPECT_EQ(rv.to_vector<double>(), v);
  }
}

TEST(NormProperties, GradcheckOverRandomShapesAndScales) {
  std::mt19937_64 rng(14);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const double scales[] = {0.1, 1.0, 10.0};
  for (int i = 0; i < 12; ++i) {
    const double scale = scales[i % 3];
    Generator gen(400 + uint64_t(i));
    // LayerNorm and RMSNorm: (R, T, C)
    {
      const int64_t R = pick(1, 3), T = pick(1, 3), C = pick(2, 9);
      Tensor x = randn({R, T, C}, gen, DType::f64, 0.5 * scale, scale).requires_grad_();
      Tensor w = randn({C}, gen, DType::f64).requires_grad_(),
             b = randn({C}, gen, DType::f64).requires_grad_();
      GradcheckResult ln = gradcheck(
          [C](const std::vector<Tensor>& in) { return F::layer_norm(in[0], {C}, in[1], in[2]); }, {x, w, b});
      EXPECT_TRUE(ln.ok) << "layer_norm " << shape_str(x.shape()) << " scale " << scale << ": "
                         << ln.message();
      GradcheckResult rms =
          gradcheck([](const std::vector<Tensor>& in) { return F::rms_norm(in[0], in[1]); }, {x, w});
      EXPECT_TRUE(rms.ok) << "rms_norm " << shape_str(x.shape()) << " scale " << scale << ": "
                          << rms.message();
    }
    // BatchNorm (training: the batch statistics are in the gradient) and GroupNorm: (N, C, L)
    {
      const int64_t N = pick(2, 4), G = pick(1, 3), C = G * pick(1, 2), L = pick(1, 3);
      Tensor x = randn({N, C, L}, gen, DType::f64, -0.3 * scale, scale).requires_grad_();
      Tensor w = randn({C}, gen, DType::f64).requires_grad_(),
             b = randn({C}, gen, DType::f64).requires_grad_();
      GradcheckResult bn = gradcheck(
          [](const std::vector<Tensor>& in) {
            return F::batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], /*training=*/true);
          },
          {x, w, b});
      EXPECT_TRUE(bn.ok) << "batch_norm " << shape_str(x.shape()) << " scale " << scale << ": "
                         << bn.message();
      GradcheckResult gn = gradcheck(
          [G](const std::vector<Tensor>& in) { return F::group_norm(in[0], G, in[1], in[2]); }, {x, w, b});
      EXPECT_TRUE(gn.ok) << "group_norm " << shape_str(x.shape()) << " G " << G << " scale " << scale << ": "
                         << gn.message();
    }
  }
}
