// The GPU row kernels' arithmetic, replayed on the CPU (no GPU or nvcc needed).
//
// cuda/norms.cu splits a row over 32 lanes (warp-per-row): lane l sums the values it loads, V at a time
// (V = 4 for f32 with 128-bit loads), then the lanes combine with a butterfly (lane l adds lane l ^ 16, then
// l ^ 8, ... l ^ 1). The per-value math is nn/norms/norm_math.h's: rstd_from_var, centered_norm_dx,
// rms_norm_dx. This file replays exactly that order of additions with those functions and checks the
// result against the CPU reference loops, on hostile rows: large mean with tiny spread, constant rows,
// length 1, lengths that are not a multiple of the pack.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "nn/norms/layer_norm.h"
#include "nn/norms/norm_math.h"
#include "nn/norms/rms_norm.h"
#include "normgrad.h"

namespace {

using ng::Tensor;
namespace nm = ng::norm_math;

constexpr int kLanes = 32;

// The warp's sum: per-lane strided partial sums of f(i), then the butterfly, as warp_sum in cuda/common.cuh.
template <typename F>
float warp_sum_replay(int64_t L, int V, F&& f) {
  std::array<float, kLanes> lane{};
  for (int l = 0; l < kLanes; ++l)
    for (int64_t i = int64_t(l) * V; i < L; i += int64_t(kLanes) * V)
      for (int k = 0; k < V; ++k) lane[size_t(l)] += f(i + k);
  for (int offset = 16; offset > 0; offset /= 2) {
    std::array<float, kLanes> next{};
    for (int l = 0; l < kLanes; ++l) next[size_t(l)] = lane[size_t(l)] + lane[size_t(l ^ offset)];
    lane = next;
  }
  return lane[0];
}

struct RowResult {
  std::vector<float> y, dx;
  float mean = 0, rstd = 0;
};

// The LayerNorm (centered) or RMSNorm row forward and dx, in the kernel's order, for one f32 row.
RowResult replay_row(const std::vector<float>& x, const std::vector<float>& dy, const std::vector<float>& w,
                     bool centered, float eps) {
  const int64_t L = int64_t(x.size());
  const int V = L % 4 == 0 ? 4 : 1;  // 128-bit loads only when the row length allows
  RowResult r;
  float shift = 0, d = 0, rs;
  if (centered) {
    shift = x[0];
    d = warp_sum_replay(L, V, [&](int64_t i) { return x[size_t(i)] - shift; }) / float(L);
    const float var = warp_sum_replay(L, V,
                                      [&](int64_t i) {
                                        const float c = (x[size_t(i)] - shift) - d;
                                        return c * c;
                                      }) /
                      float(L);
    rs = nm::rstd_from_var(var, eps);
  } else {
    rs = nm::rstd_from_var(
        warp_sum_replay(L, V, [&](int64_t i) { return x[size_t(i)] * x[size_t(i)]; }) / float(L), eps);
  }
  r.mean = shift + d;
  r.rstd = rs;
  for (int64_t i = 0; i < L; ++i) r.y.push_back(((x[size_t(i)] - shift) - d) * rs * w[size_t(i)]);

  // dx: centered rows take the saved mean as a shift s and measure their offset d from it (norm_row_backward)
  const float s = centered ? r.mean : 0.0f;
  auto g = [&](int64_t i) { return dy[size_t(i)] * w[size_t(i)]; };
  auto c = [&](int64_t i) { return x[size_t(i)] - s; };
  const float dd = centered ? warp_sum_replay(L, V, c) / float(L) : 0.0f;
  auto xhat = [&](int64_t i) { return (c(i) - dd) * rs; };
  const float mean_g = warp_sum_replay(L, V, g) / float(L);
  const float mean_gx =
      centered ? rs * (warp_sum_replay(L, V, [&](int64_t i) { return g(i) * c(i); }) / float(L) - dd * mean_g)
               : warp_sum_replay(L, V, [&](int64_t i) { return g(i) * (x[size_t(i)] * rs); }) / float(L);
  for (int64_t i = 0; i < L; ++i)
    r.dx.push_back(centered ? nm::centered_norm_dx(g(i), xhat(i), rs, mean_g, mean_gx)
                            : nm::rms_norm_dx(g(i), xhat(i), rs, mean_gx));
  return r;
}

void expect_close(const std::vector<float>& got, const Tensor& want, double tol, const char* what) {
  auto v = want.to_vector<double>();
  ASSERT_EQ(got.size(), v.size()) << what;
  for (size_t i = 0; i < v.size(); ++i)
    ASSERT_NEAR(got[i], v[i], tol * (1 + std::abs(v[i]))) << what << " at " << i;
}

void check_row(const std::vector<float>& x, bool centered, double tol) {
  const int64_t n = int64_t(x.size());
  ng::Generator gen(uint64_t(n) + (centered ? 1 : 0));
  Tensor xt = ng::from_vector(x, {1, n});
  Tensor dyt = ng::randn({1, n}, gen), wt = ng::randn({n}, gen);
  auto dy = dyt.to_vector<float>(), w = wt.to_vector<float>();
  RowResult r = replay_row(x, dy, w, centered, 1e-5f);
  if (centered) {
    auto st = ng::norms::layer_norm_forward(xt, n, wt, Tensor(), 1e-5, ng::norms::Impl::reference);
    auto gr = ng::norms::layer_norm_backward(dyt, xt, st.mean, st.rstd, wt, true, false, false,
                                             ng::norms::Impl::reference);
    expect_close(r.y, st.y, tol, "y");
    expect_close(r.dx, gr.dx, tol, "dx");
    EXPECT_NEAR(r.mean, st.mean.item(), tol * (1 + std::abs(r.mean)));
    EXPECT_NEAR(r.rstd, st.rstd.item(), tol * r.rstd);
  } else {
    auto st = ng::norms::rms_norm_forward(xt, n, wt, 1e-5, ng::norms::Impl::reference);
    auto gr = ng::norms::rms_norm_backward(dyt, xt, st.rstd, wt, true, false, ng::norms::Impl::reference);
    expect_close(r.y, st.y, tol, "y");
    expect_close(r.dx, gr.dx, tol, "dx");
  }
}

}  // namespace

TEST(CudaRowMath, WarpOrderMatchesCpuReferenceOnRandomRows) {
  ng::Generator gen(3);
  for (int64_t n : {1, 3, 4, 31, 32, 33, 128, 1000, 4096}) {
    auto x = ng::randn({n}, gen, ng::DType::f32, 0.5, 2.0).to_vector<float>();
    check_row(x, true, 2e-5);
    check_row(x, false, 2e-5);
  }
}

TEST(CudaRowMath, LargeMeanTinySpreadStaysAccurate) {
  // mean 1e4, std 1e-2 in f32: the shift makes the lanes' sums see only the spread.
  ng::Generator gen(4);
  auto x = ng::randn({1024}, gen, ng::DType::f32, 1e4, 1e-2).to_vector<float>();
  std::vector<float> dy(1024, 1.0f), w(1024, 1.0f);
  RowResult r = replay_row(x, dy, w, true, 1e-5f);
  // The exact statistics of the f32 values, in double: the replay must find them to f32 accuracy.
  double mu = 0, var = 0;
  for (float v : x) mu += v;
  mu /= 1024;
  for (float v : x) var += (v - mu) * (v - mu);
  var /= 1024;
  EXPECT_NEAR(r.mean, mu, 1e-3);
  EXPECT_NEAR(r.rstd, 1 / std::sqrt(var + 1e-5), 1e-3 / std::sqrt(var + 1e-5));
  // and the normalised row has mean ~0 and variance var / (var + eps)
  double m = 0, v = 0;
  for (float y : r.y) m += y;
  m /= 1024;
  for (float y : r.y) v += (y - m) * (y - m);
  v /= 1024;
  EXPECT_NEAR(m, 0.0, 1e-3);
  EXPECT_NEAR(v, var / (var + 1e-5), 2e-3);
  check_row(x, true, 2e-3);
}

TEST(CudaRowMath, ConstantRowIsGovernedByEps) {
  std::vector<float> x(64, 7.0f), dy(64, 1.0f), w(64, 1.0f);
  RowResult r = replay_row(x, dy, w, true, 1e-5f);
  EXPECT_FLOAT_EQ(r.rstd, 1.0f / std::sqrt(1e-5f));
  for (float y : r.y) EXPECT_EQ(y, 0.0f);
  for (float d : r.dx) EXPECT_NEAR(d, 0.0f, 1e-3f);  // all-equal dy: nothing survives the mean term
  check_row(x, true, 1e-5);
}
