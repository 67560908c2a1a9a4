// Elementwise ops and activations: hand-computed values, gradchecks (broadcast, non-contiguous), half
// precision computing in f32, and every error path.
#include "ops_test_util.h"
#include "simd_targets.h"

using namespace ng;
using namespace ng::testing;

TEST(Elementwise, ForwardHandComputed) {
  Tensor a = tensor({1.0, -2.0, 4.0}, DType::f64), b = tensor({2.0, 0.5, -4.0}, DType::f64);
  EXPECT_EQ(add(a, b).to_vector<double>(), (std::vector<double>{3, -1.5, 0}));
  EXPECT_EQ(sub(a, b).to_vector<double>(), (std::vector<double>{-1, -2.5, 8}));
  EXPECT_EQ(mul(a, b).to_vector<double>(), (std::vector<double>{2, -1, -16}));
  EXPECT_EQ(div(a, b).to_vector<double>(), (std::vector<double>{0.5, -4, -1}));
  EXPECT_EQ(maximum(a, b).to_vector<double>(), (std::vector<double>{2, 0.5, 4}));
  EXPECT_EQ(minimum(a, b).to_vector<double>(), (std::vector<double>{1, -2, -4}));
  {
    // A NaN is passed on, and where either input is NaN both get the whole gradient, as in PyTorch
    // (torch.maximum(nan, 1).backward() gives 1 and 1). Until stop 42 the gradient went to the other input
    // only (b's weight was 1 - a's); stop 42 gave it to the NaN input only.
    for (bool is_max : {true, false}) {
      Tensor x = tensor({NAN, 1.0, NAN, 2.0}, DType::f64).requires_grad_();
      Tensor z = tensor({1.0, NAN, NAN, 2.0}, DType::f64).requires_grad_();
      Tensor y = is_max ? maximum(x, z) : minimum(x, z);
      for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(y.to_vector<double>()[size_t(i)]));
      sum(y).backward();
      EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 1, 1, 0.5})) << is_max;
      EXPECT_EQ(z.grad().to_vector<double>(), (std::vector<double>{1, 1, 1, 0.5})) << is_max;
    }
  }
  EXPECT_EQ(rsub(1.0, a).to_vector<double>(), (std::vector<double>{0, 3, -3}));
  EXPECT_EQ(rdiv(8.0, a).to_vector<double>(), (std::vector<double>{8, -4, 2}));
  EXPECT_EQ((2.0 * a - 1.0).to_vector<double>(), (std::vector<double>{1, -5, 7}));
  EXPECT_EQ(neg(a).to_vector<double>(), (std::vector<double>{-1, 2, -4}));
  EXPECT_EQ(abs(a).to_vector<double>(), (std::vector<double>{1, 2, 4}));
  EXPECT_EQ(square(a).to_vector<double>(), (std::vector<double>{1, 4, 16}));
  EXPECT_EQ(clamp(a, -1.0, 2.0).to_vector<double>(), (std::vector<double>{1, -1, 2}));
  EXPECT_EQ(relu(a).to_vector<double>(), (std::vector<double>{1, 0, 4}));
  Tensor p = tensor({1.0, 4.0, 0.25}, DType::f64);
  EXPECT_EQ(sqrt(p).to_vector<double>(), (std::vector<double>{1, 2, 0.5}));
  EXPECT_EQ(rsqrt(p).to_vector<double>(), (std::vector<double>{1, 0.5, 2}));
  EXPECT_EQ(pow(p, 1.5).to_vector<double>(), (std::vector<double>{1, 8, 0.125}));
  EXPECT_NEAR(exp(p).to_vector<double>()[1], 54.598150033144236, 1e-12);
  EXPECT_NEAR(log(p).to_vector<double>()[1], 1.3862943611198906, 1e-15);
  // Activations at x = 1: sigmoid = 1/(1+e^-1), tanh(1), silu = x sigmoid(x),
  // gelu(tanh approx) = 0.5 (1 + tanh(sqrt(2/pi) (1 + 0.044715))) = 0.8411919906082768
  Tensor one = tensor({1.0}, DType::f64);
  EXPECT_NEAR(sigmoid(one).item(), 0.7310585786300049, 1e-15);
  EXPECT_NEAR(tanh(one).item(), 0.7615941559557649, 1e-15);
  EXPECT_NEAR(silu(one).item(), 0.7310585786300049, 1e-15);
  EXPECT_NEAR(gelu(one).item(), 0.8411919906082768, 1e-15);
  EXPECT_NEAR(gelu(tensor({-3.0}, DType::f64)).item(), -0.0036373920817729943, 1e-15);
}

// A tensor with a Python-style scalar (a 0-dim tensor broadcast with stride 0) takes the SIMD scalar path
// (ops/elementwise.cpp): the values must be those of the plain loop, f32 and f64, on both sides.
TEST(Elementwise, ScalarOperandOnEitherSide) {
  Generator g(12);
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = add(rand({3, 37}, g, dt), 0.25);
    const std::vector<double> xv = x.to_vector<double>();
    auto check = [&](const Tensor& y, const char* what, auto f) {
      const std::vector<double> yv = y.to_vector<double>();
      ASSERT_EQ(yv.size(), xv.size());
      for (size_t i = 0; i < xv.size(); ++i) {
        const double want = dt == DType::f32 ? double(float(f(float(xv[i])))) : f(xv[i]);
        ASSERT_EQ(yv[i], want) << what << " " << dtype_name(dt) << " element " << i;
      }
    };
    const Tensor s = scalar_tensor(0.3, dt);
    check(mul(x, 0.3), "x * 0.3", [](auto v) { return v * decltype(v)(0.3); });
    check(add(x, 0.3), "x + 0.3", [](auto v) { return v + decltype(v)(0.3); });
    check(sub(s, x), "0.3 - x", [](auto v) { return decltype(v)(0.3) - v; });
    check(div(s, x), "0.3 / x", [](auto v) { return decltype(v)(0.3) / v; });
    check(div(x, s), "x / 0.3", [](auto v) { return v / decltype(v)(0.3); });
  }
}

TEST(Elementwise, BroadcastShapes) {
  Tensor a = arange(0.0, 6.0, 1.0, DType::f64).reshape({2, 3});
  Tensor col = tensor({10.0, 20.0}, DType::f64).reshape({2, 1});
  Tensor row = tensor({1.0, 2.0, 3.0}, DType::f64);
  EXPECT_EQ(add(a, col).to_vector<double>(), (std::vector<double>{10, 11, 12, 23, 24, 25}));
  EXPECT_EQ(mul(a, row).to_vector<double>(), (std::vector<double>{0, 2, 6, 3, 8, 15}));
  Tensor outer = mul(col, row);  // (2, 1) * (3) -> (2, 3)
  EXPECT_EQ(outer.shape(), (Shape{2, 3}));
  EXPECT_EQ(outer.to_vector<double>(), (std::vector<double>{10, 20, 30, 20, 40, 60}));
  EXPECT_EQ(add(scalar_tensor(1.0, DType::f64), zeros({2, 2}, DType::f64)).shape(), (Shape{2, 2}));
}

TEST(Elementwise, GradcheckBinaryWithBroadcastAndNonContiguous) {
  Generator g(1);
  using F = std::function<Tensor(const Tensor&, const Tensor&)>;
  std::vector<std::pair<const char*, F>> ops = {
      {"add", [](auto& a, auto& b) { return add(a, b); }},
      {"sub", [](auto& a, auto& b) { return sub(a, b); }},
      {"mul", [](auto& a, auto& b) { return mul(a, b); }},
      {"div", [](auto& a, auto& b) { return div(a, add(square(b), 0.5)); }},
      {"maximum", [](auto& a, auto& b) { return maximum(a, b); }},
      {"minimum", [](auto& a, auto& b) { return minimum(a, b); }},
  };
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{3, 1}, {1, 4}}, {{2, 3, 4}, {3, 1}}, {{4}, {2, 3, 4}}, {{}, {2, 3}}};
  for (auto& [name, op] : ops) {
    for (auto& [sa, sb] : shapes) {
      SCOPED_TRACE(std::string(name) + " " + shape_str(sa) + " " + shape_str(sb));
      F f = op;
      expect_gradcheck([f](auto& in) { return f(in[0], in[1]); }, {leaf(sa, g), leaf(sb, g)});
      expect_gradcheck([f](auto& in) { return f(in[0], in[1]); },
                       {noncontig_leaf(sa, g), noncontig_leaf(sb, g)});
    }
  }
  // Only one input requiring grad; the same tensor on both sides.
  Tensor c = randn({3, 4}, g, DType::f64);
  expect_gradcheck([c](auto& in) { return mul(in[0], c); }, {leaf({3, 4}, g)});
  expect_gradcheck([c](auto& in) { return div(c, add(square(in[0]), 1.0)); }, {leaf({4}, g)});
  expect_gradcheck([](auto& in) { return mul(in[0], in[0]); }, {leaf({5}, g)});
  // Scalar forms.
  expect_gradcheck([](auto& in) { return rsub(2.0, mul(rdiv(3.0, add(square(in[0]), 1.0)), 0.5)); },
                   {leaf({6}, g)});
}

TEST(Elementwise, GradcheckUnaryAndActivations) {
  Generator g(2);
  using F = std::function<Tensor(const Tensor&)>;
  std::vector<std::pair<const char*, F>> ops = {
      {"neg", [](auto& x) { return neg(x); }},
      {"exp", [](auto& x) { return exp(x); }},
      {"log", [](auto& x) { return log(add(square(x), 0.5)); }},
      {"sqrt", [](auto& x) { return sqrt(add(square(x), 0.5)); }},
      {"rsqrt", [](auto& x) { return rsqrt(add(square(x), 0.5)); }},
      {"abs", [](auto& x) { return abs(x); }},
      {"pow", [](auto& x) { return pow(add(square(x), 0.5), 2.5); }},
      {"pow_int", [](auto& x) { return pow(x, 3.0); }},
      {"clamp", [](auto& x) { return clamp(x, -0.5, 0.7); }},
      {"square", [](auto& x) { return square(x); }},
      {"relu", [](auto& x) { return relu(x); }},
      {"gelu", [](auto& x) { return gelu(x); }},
      {"silu", [](auto& x) { return silu(x); }},
      {"sigmoid", [](auto& x) { return sigmoid(x); }},
      {"tanh", [](auto& x) { return tanh(x); }},
  };
  for (auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    F f = op;
    // Random shapes; kinks (abs, relu, clamp) are not hit by continuous random draws.
    for (Shape s : {Shape{7}, Shape{3, 5}, Shape{2, 3, 4}}) {
      expect_gradcheck([f](auto& in) { return f(in[0]); }, {leaf(s, g)});
      expect_gradcheck([f](auto& in) { return f(in[0]); }, {noncontig_leaf(s, g)});
    }
    // A sliced view as input.
    expect_gradcheck([f](auto& in) { return f(in[0].slice(1, 1, 6, 2)); }, {leaf({3, 6}, g)});
  }
}

TEST(Elementwise, HalfComputesInF32AndRoundsOnce) {
  Generator g(3);
  Tensor a = randn({5, 7}, g), b = randn({7}, g);
  for (DType h : {DType::f16, DType::bf16}) {
    Tensor ah = a.to(h), bh = b.to(h);
    Tensor a32 = ah.to(DType::f32), b32 = bh.to(DType::f32);
    EXPECT_TRUE(bitwise_equal(add(ah, bh), add(a32, b32).to(h)));
    EXPECT_TRUE(bitwise_equal(mul(ah, bh), mul(a32, b32).to(h)));
    EXPECT_TRUE(bitwise_equal(div(ah, bh), div(a32, b32).to(h)));
    EXPECT_TRUE(bitwise_equal(gelu(ah), gelu(a32).to(h)));
    EXPECT_TRUE(bitwise_equal(exp(ah), exp(a32).to(h)));
    EXPECT_EQ(gelu(ah).dtype(), h);
  }
  // The f32 intermediate matters: in f16, 2049 is not representable, but (2048 + 1.5) - 1.5 done in f32
  // then rounded once gives 2048.
  Tensor x = tensor({2048.0}).to(DType::f16);
  EXPECT_EQ(sub(add(x, 1.5), 1.5).item(), 2048.0);
  // Gradients flow through half precision as well.
  Tensor w = ones({3}).to(DType::bf16).requires_grad_();
  sum(mul(w, 3.0)).backward();
  EXPECT_EQ(w.grad().dtype(), DType::bf16);
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{3, 3, 3}));
}

TEST(Elementwise, InPlaceOps) {
  Tensor a = tensor({1.0, 2.0}), b = tensor({10.0, 20.0});
  uint64_t v = a.version();
  add_(a, b, 0.5);
  EXPECT_EQ(a.to_vector<double>(), (std::vector<double>{6, 12}));
  mul_(a, 2.0);
  EXPECT_EQ(a.to_vector<double>(), (std::vector<double>{12, 24}));
  EXPECT_EQ(a.version(), v + 2);
  Tensor h = ones({2}, DType::bf16);
  add_(h, ones({2}, DType::bf16), 2.0);
  EXPECT_EQ(h.to_vector<double>(), (std::vector<double>{3, 3}));
  Tensor bc = zeros({2, 2});
  add_(bc, tensor({1.0, 2.0}));  // broadcast other
  EXPECT_EQ(bc.to_vector<double>(), (std::vector<double>{1, 2, 1, 2}));
}

TEST(Elementwise, Errors) {
  Tensor f32 = zeros({2, 3}), f64 = zeros({2, 3}, DType::f64), i64 = zeros({2, 3}, DType::i64);
  expect_error([&] { add(f32, f64); }, {"add: dtype mismatch: got f32 and f64", ".to(dtype)"});
  expect_error([&] { mul(f64, f32); }, {"mul: dtype mismatch: got f64 and f32"});
  expect_error(
      [&] {
        sub(zeros({2, 3}), zeros({4}));
      },
      {"sub: shapes (2, 3) and (4) cannot be broadcast together", "dim 1: 3 vs 4"});
  expect_error(
      [&] {
        div(zeros({2, 3}), zeros({3, 3}));
      },
      {"div: shapes (2, 3) and (3, 3) cannot be broadcast"});
  expect_error([&] { maximum(zeros({2}), zeros({3})); }, {"maximum: shapes (2) and (3)"});
  expect_error([&] { minimum(f32, f64); }, {"minimum: dtype mismatch"});
  expect_error([&] { add(i64, i64); }, {"add: expected dtype f32 or f64, got i64"});
  expect_error([&] { exp(i64); }, {"exp: expected a floating tensor, got i64"});
  expect_error([&] { relu(i64); }, {"relu: expected a floating tensor, got i64"});
  expect_error([&] { clamp(f32, 1.0, 0.0); }, {"clamp: expected lo <= hi, got lo = 1 and hi = 0"});
  expect_error([&] { clamp(f32, NAN, 1.0); }, {"clamp: expected bounds that are numbers, got lo = nan"});
  expect_error([&] { clamp(f32, 0.0, NAN); }, {"clamp: expected bounds that are numbers", "hi = nan"});
  expect_error([&] { add_(f32, f64); }, {"add_: dtype mismatch: got f32 and f64"});
  expect_error([&] { add_(i64, i64); }, {"add_: expected a floating tensor, got i64"});
  expect_error([&] { add_(f32, zeros({4})); },
               {"add_: source of shape (4) cannot be broadcast to the destination's shape (2, 3)"});
}

// exp, sigmoid and silu (forward, and silu's and sigmoid's gradients) over the whole range, on every SIMD
// target (contiguous: the Highway kernel) and on a strided view (the scalar loop), against std::exp. Highway
// 1.0.3's Exp is valid only up to 104 (f32) / 706 (f64) and gives 0 for NaN: until 2026-11-28 the kernel
// gave exp(200) = 0 and exp(710) = 1.24 in f32, sigmoid(-200) = 1, silu(-200) = -200, and sigmoid(NaN) = 1;
// until stop 44 f64's exp(707) was inf (its true value, 1.1e307, is finite) and sigmoid(-707) 0.
TEST(Elementwise, ExpSigmoidSiluAreRightOverTheWholeRangeOnEveryTarget) {
  const std::vector<double> points = {NAN, INFINITY, -INFINITY, 1e10, -1e10, 1e3, -1e3, 710, -710, 706, -706,
                                      200, -200, 105, -105, 104, -104, 100, -100, 88.7, -88.7, 87, -87, 20,
                                      -20, 1, -1, 0.5, -0.5, 0,
                                      // f64's finite results past Highway's 706: they were inf until stop 44
                                      707, -707, 709.7, -709.7, 709.78, 709.79};
  // 64 values (whole vectors and a tail on every target), every point at several lanes
  std::vector<double> v(64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = points[(i * 7) % points.size()];

  auto same = [](double got, double want, double rel, double tiny) {
    if (std::isnan(want)) return std::isnan(got);
    if (std::isinf(want)) return got == want;
    return std::abs(got - want) <= rel * std::abs(want) + tiny;
  };
  const int ran = for_each_target([&] {
    for (DType dt : {DType::f32, DType::f64}) {
      const bool f32 = dt == DType::f32;
      const double rel = f32 ? 4e-7 : 2e-15,
                   tiny = f32 ? 1e-44 : 1e-320;  // results below ~1e-38 are subnormal
      // the expected values, in the tensor's own precision, as the scalar reference computes them
      auto ex = [&](double x) { return f32 ? double(std::exp(float(x))) : std::exp(x); };
      auto sig = [&](double x) {
        return f32 ? double(1.0f / (1.0f + std::exp(-float(x)))) : 1.0 / (1.0 + std::exp(-x));
      };
      auto silu_v = [&](double x) {
        return f32 ? double(float(x) / (1.0f + std::exp(-float(x)))) : x / (1.0 + std::exp(-x));
      };
      for (bool strided : {false, true}) {
        // strided: every other value of a tensor twice as long, which the scalar loop takes
        std::vector<double> laid = v;
        if (strided) {
          laid.assign(v.size() * 2, 0.0);
          for (size_t i = 0; i < v.size(); ++i) laid[2 * i] = v[i];
        }
        Tensor base = from_vector(laid, Shape{int64_t(laid.size())}, DType::f64).to(dt);
        Tensor x = strided ? base.slice(0, 0, base.size(0), 2) : base;
        ASSERT_EQ(x.is_contiguous(), !strided);
        const std::vector<double> e = exp(x).to_vector<double>(), s = sigmoid(x).to_vector<double>();
        const std::vector<double> si = silu(x).to_vector<double>();
        Tensor xs = x.detach().requires_grad_(), xg = x.detach().requires_grad_();
        silu(xs).backward(ones(xs.shape(), dt));  // a contiguous dout: the SIMD backward (sum's is stride 0)
        sigmoid(xg).backward(ones(xg.shape(), dt));
        const std::vector<double> dsilu = xs.grad().to_vector<double>(), dsig = xg.grad().to_vector<double>();
        for (size_t i = 0; i < v.size(); ++i) {
          const double xi = v[i];
          const std::string at = std::string(dtype_name(dt)) + (strided ? " strided" : " contiguous") +
                                 " x = " + std::to_string(xi);
          EXPECT_TRUE(same(e[i], ex(xi), rel, tiny)) << "exp " << at << ": " << e[i] << " vs " << ex(xi);
          EXPECT_TRUE(same(s[i], sig(xi), rel, tiny))
              << "sigmoid " << at << ": " << s[i] << " vs " << sig(xi);
          EXPECT_TRUE(same(si[i], silu_v(xi), rel, tiny)) << "silu " << at << ": " << si[i];
          const double sg = sig(xi), want_dsilu = sg * (1 + xi * (1 - sg)), want_dsig = sg * (1 - sg);
          EXPECT_TRUE(same(dsilu[i], want_dsilu, 4 * rel, tiny)) << "silu grad " << at << ": " << dsilu[i];
          EXPECT_TRUE(same(dsig[i], want_dsig, 4 * rel, tiny)) << "sigmoid grad " << at << ": " << dsig[i];
        }
      }
    }
  });
  EXPECT_GE(ran, 1);
}

// relu passes a NaN on (PyTorch does; `x > 0 ? x : 0` gave 0 and hid it), and so does its gradient;
// pow(x, 0) is 1 everywhere, so its gradient is 0, also at x = 0 (0 * 0^-1 gave NaN).
TEST(Elementwise, ReluPassesNaNAndPowZeroHasGradientZero) {
  const int ran = for_each_target([&] {
    for (DType dt : {DType::f32, DType::f64}) {
      std::vector<double> v(40, -1.0);
      v[3] = NAN, v[17] = NAN, v[39] = NAN, v[5] = 2.0;
      Tensor x = from_vector(v, Shape{40}, DType::f64).to(dt);
      for (const Tensor& in : {x, x.reshape({20, 2}).transpose(0, 1)}) {  // SIMD and scalar loop
        const std::vector<double> y = relu(in).contiguous().reshape({40}).to_vector<double>();
        const std::vector<double> src = in.contiguous().reshape({40}).to_vector<double>();
        for (size_t i = 0; i < 40; ++i)
          EXPECT_EQ(std::isnan(y[i]), std::isnan(src[i])) << dtype_name(dt) << " value " << i;
      }
      for (bool contiguous_dout : {false, true}) {  // sum's dout has stride 0: the scalar loop; else SIMD
        Tensor xr = x.detach().requires_grad_();
        if (contiguous_dout)
          relu(xr).backward(ones(xr.shape(), dt));
        else
          sum(relu(xr)).backward();
        const std::vector<double> g = xr.grad().to_vector<double>();
        EXPECT_EQ(g[3], 1.0);  // through a NaN, as PyTorch's threshold_backward (result <= 0 ? 0 : dout)
        EXPECT_EQ(g[5], 1.0);
        EXPECT_EQ(g[0], 0.0);
      }

      Tensor p =
          from_vector(std::vector<double>{0.0, 2.0, -3.0}, Shape{3}, DType::f64).to(dt).requires_grad_();
      sum(pow(p, 0.0)).backward();
      EXPECT_EQ(p.grad().to_vector<double>(), (std::vector<double>{0, 0, 0})) << dtype_name(dt);
    }
  });
  EXPECT_GE(ran, 2);  // EMU128 and at least one x86 target
}
