// RoPE: the kernel against the plain loop, the relative-position property, gradcheck, errors.
#include <gtest/gtest.h>

#include <cmath>

#include "normgrad.h"
#include "nn/rope_simd.h"
#include "ops_test_util.h"
#include "simd_targets.h"

using namespace ng;
using ng::testing::expect_error;

// The SIMD rotation (nn/rope_simd.cpp) against the plain loop, bit for bit, on every target: head sizes
// with and without a partial last vector, both signs (forward and backward), f32 and f64.
template <typename F>
void expect_simd_rotation_is_the_loop() {
  Generator g(21);
  const DType dt = sizeof(F) == 8 ? DType::f64 : DType::f32;
  for (int64_t HS : {2, 6, 16, 30, 64, 66, 130}) {
    const int64_t NH = 3, half = HS / 2;
    const Tensor x = randn({NH * HS}, g, dt), c = randn({half}, g, dt), s = randn({half}, g, dt);
    for (F sign : {F(1), F(-1)}) {
      std::vector<F> want(size_t(NH * HS)), got(size_t(NH * HS));
      rope_rotate_row_reference(x.data<F>(), c.data<F>(), s.data<F>(), sign, want.data(), NH, HS);
      const int targets = ng::testing::for_each_target([&] {
        std::fill(got.begin(), got.end(), F(0));
        simd::rope_rotate_row(x.data<F>(), c.data<F>(), s.data<F>(), sign, got.data(), NH, HS);
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_EQ(got[i], want[i]) << "HS " << HS << " sign " << sign << " element " << i;
      });
      EXPECT_GE(targets, 1);
    }
  }
}
TEST(Rope, SimdRotationIsThePlainLoopBitForBit) {
  expect_simd_rotation_is_the_loop<float>();
  expect_simd_rotation_is_the_loop<double>();
}

TEST(Rope, MatchesReferenceLoopAndKeepsNorms) {
  Generator g(1);
  auto tables = rope_tables(5, 8, 1e6, DType::f64);
  Tensor x = randn({2, 5, 3, 8}, g, DType::f64);
  Tensor y = apply_rope(x, tables.cos, tables.sin);
  Tensor ref = apply_rope_reference(x, tables.cos, tables.sin);
  EXPECT_EQ(y.to_vector<double>(), ref.to_vector<double>());
  // Position 0 is not rotated; a rotation keeps each head vector's length.
  auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
  for (int i = 0; i < 3 * 8; ++i) EXPECT_DOUBLE_EQ(yv[size_t(i)], xv[size_t(i)]);
  for (int row = 0; row < 2 * 5 * 3; ++row) {
    double nx = 0, ny = 0;
    for (int i = 0; i < 8; ++i)
      nx += xv[size_t(row * 8 + i)] * xv[size_t(row * 8 + i)],
          ny += yv[size_t(row * 8 + i)] * yv[size_t(row * 8 + i)];
    EXPECT_NEAR(nx, ny, 1e-12);
  }
  // The tables: w_i = theta^(-2i/HS); at t = 3, i = 1 (HS = 8, theta = 1e6): angle 3 * 1e6^(-1/4).
  EXPECT_NEAR(tables.cos.to_vector<double>()[3 * 4 + 1], std::cos(3 * std::pow(1e6, -0.25)), 1e-15);
}

TEST(Rope, ScoresDependOnlyOnRelativePosition) {
  // q . k after RoPE at positions (t, s) equals the same q . k at (t + d, s + d).
  Generator g(2);
  const int64_t HS = 6, T = 9;
  auto tables = rope_tables(T, HS, 10000.0, DType::f64);
  Tensor q = randn({1, 1, 1, HS}, g, DType::f64), k = randn({1, 1, 1, HS}, g, DType::f64);
  auto score = [&](int64_t t, int64_t s) {
    Tensor qs = q.expand({1, T, 1, HS}).contiguous(), ks = k.expand({1, T, 1, HS}).contiguous();
    auto qr = apply_rope(qs, tables.cos, tables.sin).to_vector<double>();
    auto kr = apply_rope(ks, tables.cos, tables.sin).to_vector<double>();
    double d = 0;
    for (int64_t i = 0; i < HS; ++i) d += qr[size_t(t * HS + i)] * kr[size_t(s * HS + i)];
    return d;
  };
  EXPECT_NEAR(score(4, 1), score(7, 4), 1e-12);
  EXPECT_NEAR(score(2, 2), score(8, 8), 1e-12);
  EXPECT_GT(std::abs(score(4, 1) - score(4, 3)), 1e-6);  // but it does depend on the offset
}

TEST(Rope, GradcheckF64NonContiguous) {
  Generator g(3);
  auto tables = rope_tables(4, 4, 1e6, DType::f64);
  Tensor x = randn({2, 3, 4, 4}, g, DType::f64).requires_grad_();  // used as (B=2, T=4, NH=3, HS=4)
  auto r = gradcheck(
      [&](const std::vector<Tensor>& in) {
        return apply_rope(in[0].transpose(1, 2), tables.cos, tables.sin);
      },
      {x});
  EXPECT_TRUE(r.ok) << r.message();
  EXPECT_EQ(r.checked, 96);
}

TEST(Rope, Errors) {
  auto tables = rope_tables(4, 4, 1e6, DType::f32);
  try {
    apply_rope(zeros({1, 5, 2, 4}), tables.cos, tables.sin);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rope: tables have shapes (4, 2) and (4, 2), expected (>= 5, 2)"),
              std::string::npos)
        << e.what();
  }
  expect_error([] { rope_tables(4, 5, 1e6, DType::f32); },
               {"rope: expected a positive even head size, got 5"});
  expect_error([] { rope_tables(4, -2, 1e6, DType::f32); },
               {"rope: expected a positive even head size, got -2"});
  // i64 tables were cos and sin truncated to 1 and 0
  expect_error([] { rope_tables(2, 8, 1e4, DType::i64); },
               {"rope: expected a floating dtype for the cos/sin tables, got i64"});
  expect_error([] { rope_tables(4, 4, INFINITY, DType::f32); },
               {"rope: expected a finite theta > 0, got inf"});
  expect_error([] { rope_tables(4, 4, -2.0, DType::f32); }, {"rope: expected a finite theta > 0, got -2"});
  expect_error(
      [&] {
        apply_rope(zeros({1, 4, 2, 4}, DType::f64), tables.cos, tables.sin);
      },
      {"rope: tables have dtype f32, expected x's dtype f64"});
}
