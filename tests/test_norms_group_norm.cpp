// GroupNorm and InstanceNorm: golden values, gradchecks, fast vs reference, half precision, determinism,
// errors, the modules (incl. InstanceNorm's running statistics).
#include "norms_test_util.h"
#include "worst_error.h"

using namespace ng;
using namespace normtest;

TEST(GroupNorm, GoldenHandComputed) {
  // x (1, 4, 2), 2 groups of 2 channels: group 0 = channels 0, 1 = {1, 2, 3, 4}: mean 2.5, var 1.25;
  // group 1 = {10, 10, 10, 14}: mean 11, var 3. weight [1, 2, 1, 1], bias [0, 0, 0, 1].
  Tensor x = tensor({1.0, 2.0, 3.0, 4.0, 10.0, 10.0, 10.0, 14.0}, DType::f64).reshape({1, 4, 2});
  Tensor w = tensor({1.0, 2.0, 1.0, 1.0}, DType::f64), b = tensor({0.0, 0.0, 0.0, 1.0}, DType::f64);
  std::vector<double> y = F::group_norm(x, 2, w, b).to_vector<double>();
  const double r0 = 1 / std::sqrt(1.25 + 1e-5), r1 = 1 / std::sqrt(3.0 + 1e-5);
  std::vector<double> expect = {-1.5 * r0, -0.5 * r0, 0.5 * r0 * 2, 1.5 * r0 * 2,
                                -r1,       -r1,       -r1 + 1,      3 * r1 + 1};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(y[i], expect[i], 1e-12) << i;
}

TEST(GroupNorm, InstanceNormIsGroupsEqualChannels) {
  Generator gen(3);
  Tensor x = randn({2, 3, 5}, gen, DType::f64);
  std::vector<double> xs = x.to_vector<double>(), y = nn::InstanceNorm1d(3)(x).to_vector<double>();
  for (int64_t nc = 0; nc < 6; ++nc) {  // every (sample, channel) alone, over its 5 positions
    double m = 0, v = 0;
    for (int s = 0; s < 5; ++s) m += xs[nc * 5 + s] / 5;
    for (int s = 0; s < 5; ++s) v += (xs[nc * 5 + s] - m) * (xs[nc * 5 + s] - m) / 5;
    for (int s = 0; s < 5; ++s) EXPECT_NEAR(y[nc * 5 + s], (xs[nc * 5 + s] - m) / std::sqrt(v + 1e-5), 1e-12);
  }
  EXPECT_LE(max_abs_diff(F::group_norm(x, 3), nn::InstanceNorm1d(3)(x)), 0.0);
  // G = 1 with no affine is LayerNorm over (C, S)
  EXPECT_LE(max_abs_diff(F::group_norm(x, 1), F::layer_norm(x, {3, 5})), 1e-12);
}

TEST(GroupNorm, GradcheckRandomShapes) {
  struct Case {
    Shape shape;
    int64_t G;
  };
  std::vector<Case> cases = {{{3, 4}, 2}, {{2, 6, 3}, 3}, {{2, 6, 3}, 1}, {{2, 4, 2, 3}, 4}, {{1, 4, 5}, 2}};
  uint64_t seed = 100;
  for (const Case& c : cases) {
    const int64_t C = c.shape[1];
    Tensor x = leaf(c.shape, ++seed), w = leaf({C}, ++seed, 1.0, 0.5), b = leaf({C}, ++seed);
    const int64_t G = c.G;
    expect_gradcheck([G](const std::vector<Tensor>& in) { return F::group_norm(in[0], G, in[1], in[2]); },
                     {x, w, b}, "group_norm " + shape_str(c.shape) + " G=" + std::to_string(G));
    expect_gradcheck([G](const std::vector<Tensor>& in) { return F::group_norm(in[0], G); }, {x},
                     "group_norm no affine " + shape_str(c.shape));
  }
}

TEST(GroupNorm, GradcheckNonContiguousAndBehindMatmul) {
  Tensor x = strided_leaf({2, 4, 3}, 120), w = leaf({4}, 121, 1.0, 0.5), b = leaf({4}, 122);
  expect_gradcheck([](const std::vector<Tensor>& in) { return F::group_norm(in[0], 2, in[1], in[2]); },
                   {x, w, b}, "strided x");
  Tensor a = leaf({3, 5}, 123), W = leaf({5, 4}, 124);
  expect_gradcheck(
      [](const std::vector<Tensor>& in) { return F::group_norm(matmul(in[0], in[1]), 2, in[2], in[3]); },
      {a, W, w, b}, "group_norm(a @ W)");
}

TEST(GroupNorm, GradcheckBehindLinear) {
  // (N, 5) -> Linear -> (N, 6) -> GroupNorm(3 groups); and (N, L, 5) -> Linear -> (N, L, 6), transposed to a
  // non-contiguous (N, 6, L), as a channels-last layer in front of a channels-first norm.
  nn::GroupNorm gn(3, 6);
  expect_gradcheck_behind_linear(
      gn, {4, 5}, 6, [](const Tensor& h) { return h; }, 125, "GroupNorm(Linear)");
  nn::GroupNorm gn2(2, 6);
  expect_gradcheck_behind_linear(
      gn2, {2, 3, 5}, 6, [](const Tensor& h) { return h.transpose(1, 2); }, 126,
      "GroupNorm(Linear) (N, C, L)");
}

TEST(GroupNorm, FastMatchesReferenceOnEveryTarget) {
  const int targets = for_each_target([&] {
    struct Case {
      Shape shape;
      int64_t G;
    };
    std::vector<Case> cases = {
        {{3, 4}, 2},
        {{2, 6, 1}, 6},
        {{2, 6, 7}, 3},
        {{2, 4, 17}, 4},
        {{3, 8, 33}, 2},
        {{1, 2, 100}, 1},
        {{2, 4, 3, 5}, 2},
        {{2, 32, 16}, 8},
        {{5, 96}, 4},
        {{3, 70}, 2},
        // (N, C) shapes whose groups tile the vectors (the batch path on AVX2/AVX-512,
        // L groups reduced together): m = 8, 32, 4, 1, 16, 16, 2
        {{7, 256}, 32},
        {{4, 1024}, 32},
        {{3, 64}, 16},
        {{5, 32}, 32},
        {{2, 128}, 8},
        {{3, 48}, 3},
        {{6, 16}, 8},
        // ... whose last batch has fewer than L groups:
        // m = 2 (24 groups), 16 (40 groups), 16 (36), and m = 2048 (one group per batch)
        {{3, 16}, 8},
        {{5, 128}, 8},
        {{9, 64}, 4},
        {{3, 4096}, 2},
        // ... wide enough (C > 2048 in f32) that four samples share each load of w and b, with samples
        // left over (9 = 4 + 4 + 1 per chunk); the second has a last strip of one group (G = 33)
        {{9, 4096}, 32},
        {{5, 2112}, 33}};
    for (const Case& c : cases) {
      const int64_t N = c.shape[0], C = c.shape[1], S = numel(c.shape) / (N * C);
      for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
        Generator gen(uint64_t(numel(c.shape)) * 17 + uint64_t(dt));
        const DType acc = compute_dtype(dt);
        Tensor x = randn(c.shape, gen, DType::f32, -0.5, 2.0).to(dt), dy = randn(c.shape, gen).to(dt);
        Tensor w = randn({C}, gen, acc), b = randn({C}, gen, acc);
        const std::string what = shape_str(c.shape) + " G=" + std::to_string(c.G) + " " + dtype_name(dt);
        // y and dx: absolute in f32 / f64, one unit in the last place (plus a little) in f16 / bf16;
        // dweight and dbias (the compute dtype) relative to 1 + their largest value.
        const double tol = dt == DType::f64   ? 1e-12
                           : dt == DType::f32 ? 1e-4
                           : dt == DType::f16 ? 1e-4
                                              : 1e-3;
        const double rtol = half_rtol(dt), sum_tol = dt == DType::f64 ? 1e-12 : 1e-5;
        auto ref = norms::group_norm_forward(x, N, C, S, c.G, w, b, 1e-5, norms::Impl::reference);
        auto fast = norms::group_norm_forward(x, N, C, S, c.G, w, b, 1e-5, norms::Impl::fast);
        EXPECT_LE(max_diff_beyond(fast.y, ref.y, rtol), tol) << what;
        // (the reference sums a group in order, in f32 for f32/f16/bf16: its own error grows with the
        // group's length m; 1.5e-5 at m = 2048)
        const double m = double(C / c.G * S);
        EXPECT_LE(max_abs_diff(ref.mean, fast.mean), 1e-5 * std::max(1.0, m / 512)) << what;
        auto gr = norms::group_norm_backward(dy, x, ref.mean, ref.rstd, w, N, C, S, c.G, true, true, true,
                                             norms::Impl::reference);
        auto gf = norms::group_norm_backward(dy, x, ref.mean, ref.rstd, w, N, C, S, c.G, true, true, true,
                                             norms::Impl::fast);
        EXPECT_LE(max_diff_beyond(gf.dx, gr.dx, rtol), tol) << what;
        EXPECT_LE(max_diff_scaled(gf.dweight, gr.dweight), sum_tol) << what;
        EXPECT_LE(max_diff_scaled(gf.dbias, gr.dbias), sum_tol) << what;
      }
    }
  });
  EXPECT_GE(targets, 2);
}

// Where C is wide (C > 2048 in f32), ForwardLargeGroups takes four samples per batch (f32, f64), and the
// backward takes the same group of four samples at a time (every dtype), so that they share each load of w
// (and dweight, dbias); samples left over go one at a time. Each group's arithmetic is the same either way,
// so the bits are too: sample 4 (a chunk of its own in the forward at C = 4096, a leftover in the backward's
// one chunk of 5) is a copy of sample 0 (in a block of 4), in x and in dy.
TEST(GroupNorm, WideBatchesGiveTheBitsOfOneSampleAtATime) {
  const int targets = for_each_target([&] {
    const int64_t N = 5, C = 4096, G = 32;
    for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
      Generator gen(31);
      std::vector<double> v = randn({N * C}, gen, DType::f64, 0.5, 2.0).to_vector<double>();
      std::vector<double> g = randn({N * C}, gen, DType::f64).to_vector<double>();
      std::copy(v.begin(), v.begin() + C, v.begin() + 4 * C);
      std::copy(g.begin(), g.begin() + C, g.begin() + 4 * C);
      const Tensor x = from_vector(v, {N, C}, DType::f32).to(dt),
                   dy = from_vector(g, {N, C}, DType::f32).to(dt);
      const Tensor w = randn({C}, gen, compute_dtype(dt)), b = randn({C}, gen, compute_dtype(dt));
      const auto st = norms::group_norm_forward(x, N, C, 1, G, w, b, 1e-5, norms::Impl::fast);
      const std::vector<double> y = st.y.to_vector<double>(), mean = st.mean.to_vector<double>(),
                                rstd = st.rstd.to_vector<double>();
      for (int64_t c = 0; c < C; ++c)
        ASSERT_EQ(y[size_t(4 * C + c)], y[size_t(c)]) << dtype_name(dt) << " " << c;
      for (int64_t k = 0; k < G; ++k) {
        EXPECT_EQ(mean[size_t(4 * G + k)], mean[size_t(k)]);
        EXPECT_EQ(rstd[size_t(4 * G + k)], rstd[size_t(k)]);
      }
      const auto gr = norms::group_norm_backward(dy, x, st.mean, st.rstd, w, N, C, 1, G, true, true, true,
                                                 norms::Impl::fast);
      const std::vector<double> dx = gr.dx.to_vector<double>();
      for (int64_t c = 0; c < C; ++c)
        ASSERT_EQ(dx[size_t(4 * C + c)], dx[size_t(c)]) << dtype_name(dt) << " dx " << c;
    }
  });
  EXPECT_GE(targets, 2);
}

TEST(GroupNorm, HostileGroups) {
  // group 0: mean 1e4, std 1e-2 in f32; group 1: constant -> y = bias
  const int64_t S = 50;
  Generator gen(6);
  std::vector<double> nz = randn({2 * S}, gen, DType::f64).to_vector<double>(), xs(4 * S);
  for (int64_t i = 0; i < 2 * S; ++i) xs[i] = double(float(1e4 + 1e-2 * nz[i]));
  for (int64_t i = 2 * S; i < 4 * S; ++i) xs[i] = -2.0;
  Tensor x = from_vector(xs, {1, 4, S}, DType::f32);
  Tensor truth = norms::group_norm_forward(from_vector(xs, {1, 4, S}, DType::f64), 1, 4, S, 2, Tensor(),
                                           Tensor(), 1e-8, norms::Impl::reference)
                     .y;
  for (norms::Impl impl : {norms::Impl::reference, norms::Impl::fast}) {
    Tensor y = norms::group_norm_forward(x, 1, 4, S, 2, Tensor(), Tensor(), 1e-8, impl).y;
    EXPECT_LE(max_abs_diff(y, truth), 1e-3);
    std::vector<double> yv = y.to_vector<double>();
    for (int64_t i = 2 * S; i < 4 * S; ++i) EXPECT_EQ(yv[i], 0.0);
  }
  // the same in an (N, C) input whose groups of 8 channels tile the vectors (the many-groups-per-vector
  // path): group 0 of each sample has mean 1e4 and std 1e-2, group 1 is constant, the rest are ordinary
  {
    const int64_t N = 3, C = 64, G = 8;
    std::vector<double> v = randn({N * C}, gen, DType::f64).to_vector<double>();
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < 16; ++c) {
        double& e = v[size_t(n * C + c)];
        e = c < 8 ? double(float(1e4 + 1e-2 * e)) : 3.0;
      }
    Tensor xc = from_vector(v, {N, C}, DType::f32);
    Tensor t = norms::group_norm_forward(from_vector(v, {N, C}, DType::f64), N, C, 1, G, Tensor(), Tensor(),
                                         1e-8, norms::Impl::reference)
                   .y;
    for (norms::Impl impl : {norms::Impl::reference, norms::Impl::fast}) {
      Tensor y = norms::group_norm_forward(xc, N, C, 1, G, Tensor(), Tensor(), 1e-8, impl).y;
      EXPECT_LE(max_abs_diff(y, t), 1e-3);
      std::vector<double> yv = y.to_vector<double>();
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 8; c < 16; ++c) EXPECT_EQ(yv[size_t(n * C + c)], 0.0);
    }
  }
  // f16 near its limits
  Tensor h = from_vector(std::vector<double>{6e4, -6e4, 3e4, 65000, -65000, 1}, {1, 2, 3}, DType::f16);
  Tensor ht = F::group_norm(h.to(DType::f64), 1);
  for (norms::Impl impl : {norms::Impl::reference, norms::Impl::fast})
    EXPECT_LE(max_abs_diff(norms::group_norm_forward(h, 1, 2, 3, 1, Tensor(), Tensor(), 1e-5, impl).y, ht),
              2e-3);
}

TEST(GroupNorm, UnrepresentativeGroupStartsTakeTheCentredPath) {
  // The per-row kernel (S > 1) takes LayerNorm's statistics (ShiftedRowStatistics in norm_simd-inl.h): a
  // shift by the mean of the group's first vector, s2/m - d^2, and a centred second pass where that shift
  // sits far from the mean. The groups of LayerNorm's test for that check: sorted ascending, a large
  // outlier first, a first vector far from the rest, and mean 1e4 with a start 50 std away.
  const int64_t G = 4, C = 8, S = 500, m = C / G * S;  // (1, 8, 500): 4 groups of 1000 values
  std::vector<double> xs(size_t(G * m));
  Generator gen(12);
  std::vector<double> r = randn({G * m}, gen, DType::f64).to_vector<double>();
  std::vector<double> sorted(r.begin(), r.begin() + m);
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < m; ++i) {
    xs[size_t(i)] = sorted[size_t(i)] * 3.0 + 1.0;
    xs[size_t(m + i)] = i == 0 ? 1e3 : r[size_t(m + i)];
    xs[size_t(2 * m + i)] = i < 64 ? 100.0 + r[size_t(2 * m + i)] : r[size_t(2 * m + i)];
    xs[size_t(3 * m + i)] = 1e4 + 1e-2 * (i < 32 ? 50.0 : r[size_t(3 * m + i)]);
  }
  Tensor x = from_vector(xs, {1, C, S}).to(DType::f32);
  Tensor expect = norms::group_norm_forward(x.to(DType::f64), 1, C, S, G, Tensor(), Tensor(), 1e-8,
                                            norms::Impl::reference)
                      .y;
  const std::vector<double> e = expect.to_vector<double>();
  const int targets = for_each_target([&] {
    std::vector<double> y =
        norms::group_norm_forward(x, 1, C, S, G, Tensor(), Tensor(), 1e-8, norms::Impl::fast)
            .y.to_vector<double>();
    for (int64_t g = 0; g < G; ++g) {
      double worst = 0;
      for (int64_t i = 0; i < m; ++i)
        worst = ng::test::worse(worst, std::abs(y[size_t(g * m + i)] - e[size_t(g * m + i)]));
      EXPECT_LT(worst, g == 3 ? 1e-3 : 1e-4) << "group " << g;
    }
  });
  EXPECT_GE(targets, 1);
}

// bf16 (N, C) inputs whose groups tile the pairs of values (section 3c of group_norm.cpp: m = 2 ... 2L or a
// multiple of 2L, up to 2048) take the pairs path: one-pass statistics about each group's first value with a
// check, and stores that put each pair back in place. Against the f64 formula on the same bf16 inputs, on
// every SIMD target (L = 4, 8, 16 give different batches), with last batches of fewer groups, and groups
// made to fail the check:
//   - sample 1, group 0: a first value 1e4 above the rest (the shift is far from the mean: the check
//     should pass it (d^2 <= 32 var) for m <= 32, and send it to the centred pass above);
//   - sample 1, group 1 (m >= 4): +-A with the first value -A, where the shifted sum of squares, 2 A^2 m,
//     overflows f32 and the centred one, A^2 m, does not;
//   - sample 2, group 0: constant (var 0: y = b exactly).
// Sample 0 has weights of 1e-39 on its first channels in a second run, so that y is an f32 subnormal: the
// AVX-512 store must not flush it (StoreBf16Interleaved falls back to rounding by hand).
TEST(GroupNorm, Bf16PairsMatchF64) {
  struct Case {
    int64_t N, C, G;
  };
  const std::vector<Case> cases = {{5, 64, 32},  {3, 64, 16}, {7, 256, 32}, {5, 128, 8},   {3, 96, 3},
                                   {5, 640, 10}, {3, 512, 4}, {2, 4096, 2}, {9, 1024, 32}, {4, 2048, 16}};
  for (const Case& c : cases) {
    const int64_t N = c.N, C = c.C, G = c.G, m = C / G;
    Generator gen(uint64_t(N * C + G));
    std::vector<double> xs = randn({N * C}, gen, DType::f64).to_vector<double>();
    if (N > 2) {
      xs[size_t(C)] += 1e4;  // sample 1, group 0
      // (A^2 m = 2.5e38: the centred sum of squares A^2 m fits f32, the shifted one, 2 A^2 m, does not)
      const double A = std::sqrt(2.5e38 / double(m));
      if (m >= 4)
        for (int64_t i = 0; i < m; ++i) xs[size_t(C + m + i)] = (i % 2 == 0 ? -A : A);
      for (int64_t i = 0; i < m; ++i) xs[size_t(2 * C + i)] = 0.75;  // sample 2, group 0
    }
    const Tensor x = from_vector(xs, {N, C}).to(DType::bf16);
    const std::vector<double> xv = x.to_vector<double>();  // the bf16 inputs, in f64
    for (bool tiny : {false, true}) {
      std::vector<double> wv = randn({C}, gen, DType::f64, 1.0, 0.5).to_vector<double>();
      std::vector<double> bv = randn({C}, gen, DType::f64).to_vector<double>();
      if (tiny)
        for (int64_t k = 0; k < std::min<int64_t>(C, 64); ++k) wv[size_t(k)] = 1e-39, bv[size_t(k)] = 0.0;
      const Tensor w = from_vector(wv, {C}), b = from_vector(bv, {C});  // f32
      const std::vector<double> wf = w.to_vector<double>(), bf = b.to_vector<double>();
      const std::vector<double> b_bf16 = b.to(DType::bf16).to_vector<double>();
      // the f64 formula
      std::vector<double> ey(size_t(N * C)), eterms(size_t(N * C)), emean(size_t(N * G)),
          erstd(size_t(N * G)), emax(size_t(N * G));
      for (int64_t r = 0; r < N * G; ++r) {
        double s = 0, q = 0;
        for (int64_t i = 0; i < m; ++i) {
          s += xv[size_t(r * m + i)];
          emax[size_t(r)] = std::max(emax[size_t(r)], std::abs(xv[size_t(r * m + i)]));
        }
        const double mu = s / double(m);
        for (int64_t i = 0; i < m; ++i) q += (xv[size_t(r * m + i)] - mu) * (xv[size_t(r * m + i)] - mu);
        const double rs = 1.0 / std::sqrt(q / double(m) + 1e-5);
        emean[size_t(r)] = mu, erstd[size_t(r)] = rs;
        for (int64_t i = 0; i < m; ++i) {
          const int64_t ch = (r % G) * m + i;
          const double t = (xv[size_t(r * m + i)] - mu) * rs * wf[size_t(ch)];
          ey[size_t(r * m + i)] = t + bf[size_t(ch)];
          eterms[size_t(r * m + i)] = std::abs(t) + std::abs(bf[size_t(ch)]);
        }
      }
      const std::string what = "N=" + std::to_string(N) + " C=" + std::to_string(C) +
                               " G=" + std::to_string(G) + (tiny ? " tiny w" : "");
      const int targets = for_each_target([&] {
        auto s = norms::group_norm_forward(x, N, C, 1, G, w, b, 1e-5, norms::Impl::fast);
        const std::vector<double> y = s.y.to_vector<double>(), mu = s.mean.to_vector<double>(),
                                  rs = s.rstd.to_vector<double>();
        int bad = 0;
        for (size_t i = 0; i < y.size(); ++i) {
          // bf16 keeps 8 significant bits: half an ulp is at most 2^-8 of the value; its subnormals are
          // multiples of 2^-133; plus the f32 arithmetic's own error, in proportion to the terms |xhat w| +
          // |b| (rstd's, below, included)
          const double e = ey[i];
          if (!(std::abs(y[i] - e) <= std::abs(e) * 0x1p-8 + 2e-5 * eterms[i] + 0x1p-133)) ++bad;
          if (tiny && std::abs(e) >= 0x1p-133 && y[i] == 0) ++bad;  // a flushed subnormal
        }
        EXPECT_EQ(bad, 0) << what;
        for (int64_t r = 0; r < N * G; ++r) {
          // (the mean in f32 is good to a few ulp of the group's largest value; the one-pass variance, to
          // (1 + 2 d^2 / var) times the sums' rounding, with d^2 / var <= 32 where it is used: ~4e-5 at
          // worst for m = 2048, so rstd to 2e-5)
          EXPECT_NEAR(mu[size_t(r)], emean[size_t(r)], 4e-7 * std::max(1.0, emax[size_t(r)]))
              << what << " group " << r;
          EXPECT_NEAR(rs[size_t(r)], erstd[size_t(r)], 2e-5 * erstd[size_t(r)]) << what << " group " << r;
        }
        if (N > 2) {  // the constant group: b, rounded to bf16
          for (int64_t i = 0; i < m; ++i) EXPECT_EQ(y[size_t(2 * C + i)], b_bf16[size_t(i)]) << what;
        }
      });
      EXPECT_GE(targets, 1);
    }
  }
}

TEST(GroupNorm, LargeMeanSmallStdBackwardIsRightInF32) {
  // Groups with mean 1e4 and std 1e-2 in f32 through the backward, against the backward done in f64 on the
  // same f32 inputs. As in LayerNorm's test of the same name: a mean rounded to f32 is off by up to
  // ulp(1e4)/2 ~ 5e-4, 5% of the std, so a backward that centres with (x - saved mean) moves every xhat by up
  // to 0.05. (That one, before 2026-11-25, failed here with dweight off by 4% of its scale; measuring the
  // group's offset from the saved mean gives ~1e-7.) Every path of the fast kernel: a group of channels x
  // positions (with a SIMD tail: S = 33), (N, C) groups the unit path takes (m = 8 and m = 32), and (N, C)
  // groups it does not (m = 15).
  struct Case {
    int64_t N, C, S, G;
  };
  for (const Case k :
       {Case{2, 4, 50, 2}, Case{2, 6, 33, 3}, Case{3, 64, 1, 8}, Case{3, 128, 1, 4}, Case{2, 60, 1, 4}}) {
    const std::string what = "N=" + std::to_string(k.N) + " C=" + std::to_string(k.C) +
                             " S=" + std::to_string(k.S) + " G=" + std::to_string(k.G);
    Generator gen{uint64_t(k.C * 7 + k.S)};
    const Shape shape = k.S == 1 ? Shape{k.N, k.C} : Shape{k.N, k.C, k.S};
    // the first group of every sample is hostile, the others ordinary
    std::vector<double> v = randn(shape, gen, DType::f64).to_vector<double>();
    const int64_t m = k.C / k.G * k.S;
    for (int64_t n = 0; n < k.N; ++n)
      for (int64_t i = 0; i < m; ++i) {
        double& e = v[size_t(n * k.C * k.S + i)];
        e = double(float(1e4 + 1e-2 * e));
      }
    const Tensor x = from_vector(v, shape, DType::f32), x64 = from_vector(v, shape, DType::f64);
    const Tensor dy = randn(shape, gen), dy64 = dy.to(DType::f64);
    const Tensor w = randn({k.C}, gen, DType::f32, 1.0, 0.5), b = zeros({k.C});
    const double eps = 1e-8;
    auto t = norms::group_norm_forward(x64, k.N, k.C, k.S, k.G, w.to(DType::f64), b.to(DType::f64), eps,
                                       norms::Impl::reference);
    auto want = norms::group_norm_backward(dy64, x64, t.mean, t.rstd, w.to(DType::f64), k.N, k.C, k.S, k.G,
                                           true, true, true, norms::Impl::reference);
    for (norms::Impl impl : {norms::Impl::reference, norms::Impl::fast}) {
      const std::string label = what + (impl == norms::Impl::fast ? " fast" : " reference");
      auto f = norms::group_norm_forward(x, k.N, k.C, k.S, k.G, w, b, eps, impl);
      auto g =
          norms::group_norm_backward(dy, x, f.mean, f.rstd, w, k.N, k.C, k.S, k.G, true, true, true, impl);
      EXPECT_LT(max_rel_diff(g.dx, want.dx), 1e-5) << label;
      EXPECT_LT(max_rel_diff(g.dweight, want.dweight), 1e-5) << label;
      EXPECT_LT(max_rel_diff(g.dbias, want.dbias), 1e-6) << label;
    }
  }
}

TEST(GroupNorm, HalfPrecisionMatchesF32) {
  Generator gen(91);
  Tensor x = randn({4, 8, 10}, gen), dy = randn({4, 8, 10}, gen);
  Tensor w = randn({8}, gen, DType::f32, 1.0, 0.2).requires_grad_(), b = randn({8}, gen).requires_grad_();
  Tensor x32 = x.detach().requires_grad_();
  F::group_norm(x32, 4, w, b).backward(dy);
  Tensor dx32 = x32.grad(), dw32 = w.grad(), db32 = b.grad();
  Tensor y32 = F::group_norm(x, 4, w, b).detach();
  for (DType dt : {DType::f16, DType::bf16}) {
    w.zero_grad();
    b.zero_grad();
    Tensor xh = x.to(dt).requires_grad_();
    Tensor yh = F::group_norm(xh, 4, w, b);
    EXPECT_EQ(yh.dtype(), dt);
    const double tol = dt == DType::f16 ? 1e-2 : 6e-2;
    EXPECT_LE(max_abs_diff(yh, y32), tol) << dtype_name(dt);
    yh.backward(dy.to(dt));
    EXPECT_LE(max_abs_diff(xh.grad(), dx32), tol) << dtype_name(dt);
    EXPECT_LE(max_abs_diff(w.grad(), dw32), tol * 10) << dtype_name(dt);
    EXPECT_LE(max_abs_diff(b.grad(), db32), tol * 10) << dtype_name(dt);
  }
}

TEST(GroupNorm, DeterministicAcrossThreadCounts) {
  Generator gen(7);
  Tensor x = randn({40, 16, 90}, gen), dy = randn({40, 16, 90}, gen), w = randn({16}, gen);
  auto run = [&]() {
    auto s = norms::group_norm_forward(x, 40, 16, 90, 4, w, Tensor(), 1e-5);
    auto g = norms::group_norm_backward(dy, x, s.mean, s.rstd, w, 40, 16, 90, 4, true, true, true);
    return std::vector<Tensor>{s.y, g.dx, g.dweight, g.dbias};
  };
  std::vector<Tensor> one = with_threads(1, run), two = with_threads(2, run);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(bitwise_equal(one[i], two[i])) << "output " << i;
  // (N, C) input: one value per channel, the across-channel path
  Tensor x2 = randn({3000, 64}, gen), dy2 = randn({3000, 64}, gen), w2 = randn({64}, gen);
  auto run2 = [&]() {
    auto s = norms::group_norm_forward(x2, 3000, 64, 1, 8, w2, Tensor(), 1e-5);
    auto g = norms::group_norm_backward(dy2, x2, s.mean, s.rstd, w2, 3000, 64, 1, 8, true, true, true);
    return std::vector<Tensor>{s.y, g.dx, g.dweight, g.dbias};
  };
  std::vector<Tensor> one2 = with_threads(1, run2), two2 = with_threads(2, run2);
  for (size_t i = 0; i < one2.size(); ++i)
    EXPECT_TRUE(bitwise_equal(one2[i], two2[i])) << "(N, C) output " << i;
}

TEST(GroupNorm, Errors) {
  Tensor x = randn({2, 6, 5});
  expect_error([&] { F::group_norm(x, 4); },
               {"group_norm: expected the number of channels C = 6 to be divisible by num_groups = 4",
                "got x (2, 6, 5)"});
  expect_error([&] { F::group_norm(x, 3, ones({5})); },
               {"group_norm: weight has shape (5), expected (6)", "channel dimension of x (2, 6, 5)"});
  expect_error([&] { F::group_norm(x, 3, ones({6}), ones({2})); },
               {"group_norm: bias has shape (2), expected (6)"});
  expect_error([&] { F::group_norm(x, 3, Tensor(), Tensor(), 0.0); }, {"group_norm: expected eps > 0"});
  expect_error([&] { F::group_norm(randn({6}), 3); },
               {"group_norm: expected x of shape (N, C, *) with at least 2 dimensions, got (6)"});
  expect_error([&] { F::group_norm(x, 0); }, {"group_norm: expected num_groups > 0, got 0"});
  expect_error([&] { nn::GroupNorm(4, 6); },
               {"GroupNorm: expected num_channels = 6 to be divisible by num_groups = 4"});
  nn::GroupNorm gn(3, 6);
  expect_error([&] { gn(randn({2, 5, 3})); }, {"GroupNorm: expected x of shape (N, 6, *), got (2, 5, 3)"});
  nn::InstanceNorm1d in1(6);
  expect_error(
      [&] {
        in1(randn({2, 6, 3, 3}));
      },
      {"InstanceNorm1d: expected a 2-D or 3-D input, got 4-D (2, 6, 3, 3)"});
  expect_error([&] { in1(randn({2, 5, 3})); }, {"InstanceNorm1d: expected 6 channels, got x (2, 5, 3)"});
  nn::InstanceNorm2d in2(6);
  expect_error([&] { in2(randn({6, 3})); }, {"InstanceNorm2d: expected a 3-D or 4-D input, got 2-D (6, 3)"});
  nn::InstanceNorm1d tracked(6, 1e-5, 0.1, false, true);
  expect_error([&] { tracked(randn({2, 6, 1})); }, {"InstanceNorm1d: expected more than 1 spatial element"});
}

TEST(GroupNorm, Modules) {
  nn::GroupNorm gn(2, 4);
  auto state = gn.state_dict();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[0].first, "weight");
  Generator gen(1);
  Tensor x = randn({3, 4, 6}, gen);
  EXPECT_LE(max_abs_diff(gn(x), F::group_norm(x, 2)), 1e-7);
  // InstanceNorm defaults: no affine, no running stats
  nn::InstanceNorm2d in2(4);
  EXPECT_EQ(in2.state_dict().size(), 0u);
  Tensor x4 = randn({2, 4, 3, 3}, gen);
  EXPECT_LE(max_abs_diff(in2(x4), F::group_norm(x4, 4)), 0.0);
  // unbatched (C, H, W)
  Tensor x3 = randn({4, 3, 3}, gen);
  EXPECT_LE(max_abs_diff(in2(x3), F::group_norm(x3.unsqueeze(0), 4).squeeze(0)), 0.0);
}

TEST(GroupNorm, InstanceNormRunningStats) {
  nn::InstanceNorm1d in(2, 1e-5, 0.1, /*affine=*/true, /*track_running_stats=*/true);
  std::vector<std::string> names;
  for (auto& [n, t] : in.state_dict()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"weight", "bias", "running_mean", "running_var",
                                             "num_batches_tracked"}));
  // x (2, 2, 3): instance (0,0) {1,2,3} mean 2 var_unbiased 1; (1,0) {3,5,7} mean 5 var 4;
  //              (0,1) {0,0,6} mean 2 var 12;  (1,1) {1,1,1} mean 1 var 0
  Tensor x = tensor({1.0, 2.0, 3.0, 0.0, 0.0, 6.0, 3.0, 5.0, 7.0, 1.0, 1.0, 1.0}).reshape({2, 2, 3});
  in(x);
  std::vector<double> rm = in.running_mean.to_vector<double>(), rv = in.running_var.to_vector<double>();
  EXPECT_NEAR(rm[0], 0.1 * (2 + 5) / 2.0, 1e-6);
  EXPECT_NEAR(rm[1], 0.1 * (2 + 1) / 2.0, 1e-6);
  EXPECT_NEAR(rv[0], 0.9 + 0.1 * (1 + 4) / 2.0, 1e-6);
  EXPECT_NEAR(rv[1], 0.9 + 0.1 * (12 + 0) / 2.0, 1e-6);
  // eval: per channel with the running stats (like BatchNorm in eval)
  // num_batches_tracked stays 0, as in PyTorch's InstanceNorm (which never counts it)
  in(x);
  EXPECT_EQ(in.num_batches_tracked.item(), 0.0);
  in.eval();
  rm = in.running_mean.to_vector<double>(), rv = in.running_var.to_vector<double>();
  std::vector<double> y = in(x).to_vector<double>();
  EXPECT_NEAR(y[0], (1.0 - rm[0]) / std::sqrt(rv[0] + 1e-5), 1e-5);
  EXPECT_NEAR(y[3], (0.0 - rm[1]) / std::sqrt(rv[1] + 1e-5), 1e-5);
  // momentum = nullopt: refused with running statistics (PyTorch would never move them), fine without
  expect_error([] { nn::InstanceNorm2d(2, 1e-5, std::nullopt, false, true); },
               {"InstanceNorm2d: momentum = nullopt", "PyTorch's InstanceNorm takes it as 0"});
  nn::InstanceNorm2d untracked(2, 1e-5, std::nullopt);
  // and when set to nullopt after construction (a public field), at the next training forward
  nn::InstanceNorm1d later(2, 1e-5, 0.1, false, true);
  later.momentum = std::nullopt;
  expect_error([&] { later(x); }, {"InstanceNorm1d: momentum = nullopt"});
}
