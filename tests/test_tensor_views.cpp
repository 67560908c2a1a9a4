// View ops and joins: values, that views share storage, gradchecks of every one, and every error path.
#include "ops_test_util.h"

using namespace ng;
using namespace ng::testing;

static Tensor ar(Shape s) {
  return arange(0.0, double(numel(s)), 1.0, DType::f64).reshape(s);
}

TEST(Views, ForwardValuesAndSharedStorage) {
  Tensor x = ar({2, 3, 4});
  EXPECT_EQ(x.permute({2, 0, 1}).shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(x.permute({2, 0, 1}).contiguous().to_vector<double>()[1], 4.0);  // (0,0,1) -> x[0,1,0]
  EXPECT_EQ(x.transpose(0, 2).shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(x.narrow(2, 1, 2).to_vector<double>(),
            (std::vector<double>{1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22}));
  EXPECT_EQ(x.slice(2, 0, 4, 3).to_vector<double>(),
            (std::vector<double>{0, 3, 4, 7, 8, 11, 12, 15, 16, 19, 20, 23}));
  EXPECT_EQ(x.slice(1, -2, 100).shape(), (Shape{2, 2, 4}));  // negative start, end clamped
  EXPECT_EQ(x.select(1, -1).to_vector<double>(), (std::vector<double>{8, 9, 10, 11, 20, 21, 22, 23}));
  EXPECT_EQ(x.flatten().shape(), (Shape{24}));
  EXPECT_EQ(x.flatten(1).shape(), (Shape{2, 12}));
  EXPECT_EQ(x.flatten(0, 1).shape(), (Shape{6, 4}));
  EXPECT_EQ(x.reshape({4, -1}).shape(), (Shape{4, 6}));
  EXPECT_EQ(x.view({-1}).to_vector<double>()[23], 23.0);
  EXPECT_EQ(x.unsqueeze(0).shape(), (Shape{1, 2, 3, 4}));
  EXPECT_EQ(x.unsqueeze(-1).shape(), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(x.unsqueeze(1).squeeze(1).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(x.squeeze(0).shape(), (Shape{2, 3, 4}));  // size 2: unchanged
  Tensor col = ar({3, 1});
  EXPECT_EQ(col.expand({2, 3, 4}).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(col.expand({3, -1}).shape(), (Shape{3, 1}));
  EXPECT_EQ(col.expand({2, 3, 4}).stride(0), 0);
  EXPECT_EQ(col.expand({3, 2}).to_vector<double>(), (std::vector<double>{0, 0, 1, 1, 2, 2}));
  // Views share storage: a write through the view is seen by the base, and bumps the shared version.
  Tensor v = x.select(0, 1).narrow(1, 0, 1);
  uint64_t before = x.version();
  v.fill_(-1.0);
  EXPECT_EQ(x.to_vector<double>()[12], -1.0);
  EXPECT_EQ(x.to_vector<double>()[16], -1.0);
  EXPECT_GT(x.version(), before);
  EXPECT_FALSE(x.t().is_contiguous() && x.dim() == 2);
  // reshape of a non-viewable layout copies; view of a transposed matrix is refused (error test below).
  Tensor m = ar({3, 4});
  Tensor r = m.t().reshape({12});
  EXPECT_EQ(r.to_vector<double>()[1], 4.0);
}

TEST(Views, CatAndStackValues) {
  Tensor a = ar({2, 2}), b = add(ar({2, 1}), 10.0);
  EXPECT_EQ(cat({a, b}, 1).to_vector<double>(), (std::vector<double>{0, 1, 10, 2, 3, 11}));
  EXPECT_EQ(cat({a, a}, 0).shape(), (Shape{4, 2}));
  EXPECT_EQ(cat({a, a.t()}, -1).to_vector<double>(), (std::vector<double>{0, 1, 0, 2, 2, 3, 1, 3}));
  Tensor s = stack({a, a}, 1);
  EXPECT_EQ(s.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(s.to_vector<double>(), (std::vector<double>{0, 1, 0, 1, 2, 3, 2, 3}));
  EXPECT_EQ(stack({a, a, a}, -1).shape(), (Shape{2, 2, 3}));
}

TEST(Views, GradcheckEveryViewOp) {
  Generator g(1);
  const Shape s{2, 3, 4};
  std::vector<std::pair<const char*, GradcheckFn>> ops = {
      {"reshape",
       [](auto& in) {
         return in[0].reshape({4, 6});
       }},
      {"reshape_copy", [](auto& in) { return in[0].transpose(0, 2).reshape({-1}); }},
      {"view",
       [](auto& in) {
         return in[0].contiguous().view({6, 4});
       }},
      {"flatten", [](auto& in) { return in[0].flatten(1); }},
      {"permute",
       [](auto& in) {
         return in[0].permute({2, 0, 1});
       }},
      {"transpose", [](auto& in) { return in[0].transpose(-1, 0); }},
      {"narrow", [](auto& in) { return in[0].narrow(2, 1, 2); }},
      {"slice_step", [](auto& in) { return in[0].slice(2, 0, 4, 3); }},
      {"slice_neg", [](auto& in) { return in[0].slice(1, -2, 3); }},
      {"select", [](auto& in) { return in[0].select(1, 2); }},
      {"squeeze_unsqueeze", [](auto& in) { return in[0].unsqueeze(1).unsqueeze(-1).squeeze(1); }},
      {"expand",
       [](auto& in) {
         return in[0].select(2, 0).unsqueeze(0).expand({5, 2, 3});
       }},
      {"expand_mid",
       [](auto& in) {
         return in[0].narrow(1, 0, 1).expand({2, 3, 4});
       }},
      {"contiguous",
       [](auto& in) {
         return in[0].permute({1, 0, 2}).contiguous();
       }},
      {"clone", [](auto& in) { return in[0].clone(); }},
      {"cat",
       [](auto& in) {
         return cat({in[0], in[0].narrow(1, 0, 1), in[0]}, 1);
       }},
      {"cat_last",
       [](auto& in) {
         return cat({in[0].t().contiguous().t(), in[0]}, -1);
       }},
      {"stack",
       [](auto& in) {
         return stack({in[0], mul(in[0], 2.0)}, 2);
       }},
      {"to_f32_and_back", [](auto& in) { return in[0].to(DType::f32).to(DType::f64); }},
      {"chain",
       [](auto& in) {
         return in[0].permute({2, 1, 0}).slice(0, 1, 4).flatten(0, 1).narrow(0, 2, 5);
       }},
  };
  for (auto& [name, f] : ops) {
    SCOPED_TRACE(name);
    if (std::string(name) == "to_f32_and_back") {
      // f32 in the middle: loosen the tolerance to f32 rounding of the values.
      GradcheckOptions o;
      o.eps = 1e-3;
      o.atol = 1e-4;
      expect_gradcheck(f, {leaf(s, g)}, o);
      continue;
    }
    expect_gradcheck(f, {leaf(s, g)});
    expect_gradcheck(f, {noncontig_leaf(s, g)});
  }
  // cat / stack of two different leaves.
  expect_gradcheck([](auto& in) { return cat({in[0], in[1]}, 0); }, {leaf({2, 3}, g), leaf({4, 3}, g)});
  expect_gradcheck(
      [](auto& in) {
        return stack({in[0], in[1]}, 0);
      },
      {leaf({2, 3}, g), noncontig_leaf({2, 3}, g)});
}

TEST(Views, ToDtypeGradientConvertsBack) {
  Tensor x = tensor({1.0, 2.0}, DType::f64).requires_grad_();
  Tensor y = x.to(DType::f16);
  sum(mul(y, 3.0)).backward();
  EXPECT_EQ(x.grad().dtype(), DType::f64);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3, 3}));
  // to(i64) is not differentiable: the result does not require grad.
  EXPECT_FALSE(x.to(DType::i64).requires_grad());
}

TEST(Views, SizesNearTheInt64EdgeAreExactOrErrors) {
  // Each of these overflowed int64 (undefined behaviour) and gave an empty tensor without a word.
  const Tensor r = arange(10);
  EXPECT_EQ(r.slice(0, 0, 10, INT64_MAX).to_vector<int64_t>(), (std::vector<int64_t>{0}));
  EXPECT_EQ(r.slice(0, 3, 10, INT64_MAX - 1).to_vector<int64_t>(), (std::vector<int64_t>{3}));
  EXPECT_EQ(r.slice(0, 1, 10, 4).to_vector<int64_t>(), (std::vector<int64_t>{1, 5, 9}));  // still ceil
  EXPECT_EQ(r.slice(0, 5, 5, INT64_MAX).numel(), 0);
  expect_error([&] { r.narrow(0, 1, INT64_MAX); },
               {"narrow: window [1, 2^63 or past) is out of range for dim 0 of size 10"});
  expect_error([&] { r.narrow(0, 11, 0); }, {"narrow: window [11, 11) is out of range"});
  EXPECT_EQ(r.narrow(0, 10, 0).numel(), 0);
  // expand: -1 keeps a size; other negative sizes were taken for sizes (shape (-2), numel -2).
  expect_error([&] { ones({1}).expand({-2}); },
               {"expand: cannot expand shape (1) to (-2): size -2 at dim 0 is negative"});
  EXPECT_EQ(ones({1, 3}).expand({2, -1}).shape(), (Shape{2, 3}));
  // arange: a count past int64 converted to INT64_MIN, then clamped to 0 values.
  expect_error([] { arange(0.0, 1e30, 1.0); }, {"arange: [0, 1e+30) with step 1 has 1e+30 values"});
  expect_error([] { arange(-1e308, 1e308, 1.0); }, {"arange:", "values, more than a tensor can hold"});
}

// Sizes whose product passes int64. A tensor's sizes must multiply to an int64 (numel, and every op's loops,
// rely on it), except where one of them is 0 (no values). Found under UBSan on 2026-11-29: expand took
// (1) -> (2^62, 4), and sum() of it then overflowed in its plan (undefined behaviour); flatten of an empty
// expanded view and cat of two 2^62-long views overflowed the same way, and numel() of a (2^40, 2^40, 0)
// view threw, because it multiplied the sizes before it reached the 0.
TEST(Views, SizesPastInt64AreRefusedWhereTheyWouldWrap) {
  const int64_t big = int64_t(1) << 62, t40 = int64_t(1) << 40;
  expect_error(
      [&] {
        ones({1}).expand({big, 4});
      },
      {"expand: cannot expand shape (1) to (4611686018427387904, 4): the sizes multiply past int64"});
  expect_error(
      [&] {
        ones({1, 1}).expand({4, big, -1});
      },
      {"expand: cannot expand shape (1, 1) to (4, 4611686018427387904, -1): the sizes multiply"});
  // the largest that fit are taken, and so are any sizes beside a 0 (nothing to count)
  EXPECT_EQ(ones({1}).expand({big, 1}).numel(), big);
  Tensor empty_front = zeros({0, 1, 1}).expand({0, t40, t40});
  Tensor empty_back = zeros({1, 1, 0}).expand({t40, t40, 0});
  EXPECT_EQ(empty_front.numel(), 0);
  EXPECT_EQ(empty_back.numel(), 0);
  EXPECT_EQ(numel({t40, t40, 0}), 0);
  // flatten: the flattened size of two 2^40 dims does not fit, whatever the other sizes
  expect_error([&] { empty_front.flatten(1); },
               {"flatten: dims 1 to 2 of shape (0, 1099511627776, 1099511627776) multiply past int64"});
  EXPECT_EQ(empty_front.flatten(0, 1).shape(), (Shape{0, t40}));
  // cat: 2^62 + 2^62 along dim 0
  Tensor half = zeros({1}).expand({big});
  expect_error(
      [&] {
        cat({half, half}, 0);
      },
      {"cat: the sizes along dim 0 add up past int64 at tensor 1 (shape (4611686018427387904))"});
}

TEST(Views, Errors) {
  Tensor x = zeros({2, 3, 4});
  expect_error(
      [&] {
        x.reshape({5, -1});
      },
      {"reshape: shape (5, -1) is invalid for a tensor of shape (2, 3, 4) (24 elements)"});
  expect_error([&] { x.reshape({-1, -1}); }, {"reshape: only one dimension can be -1, got (-1, -1)"});
  expect_error([&] { x.reshape({7}); }, {"reshape: shape (7) is invalid for a tensor of shape (2, 3, 4)"});
  expect_error([&] { x.reshape({-2, 12}); }, {"reshape: invalid size -2 in shape (-2, 12)"});
  expect_error([&] { x.view({0, -1}); }, {"view: shape (0, -1) is invalid"});
  // Sizes whose product passes int64 are an error, never a wrapped-around number.
  expect_error(
      [&] {
        x.reshape({4294967296, 4294967296, -1});
      },
      {"reshape: shape (4294967296, 4294967296, -1) is invalid", "multiply past int64"});
  expect_error([&] { x.reshape({4294967296, 4294967296, 8}); }, {"reshape: shape", "multiply past int64"});
  expect_error([&] { zeros({0, 4294967296, 4294967296}); }, {"multiply past the largest int64"});
  expect_error(
      [&] { x.transpose(0, 1).view({24}); },
      {"view: cannot view a tensor of shape (3, 2, 4) with strides (4, 12, 1) as (24) without copying",
       "use reshape()"});
  expect_error(
      [&] {
        x.permute({0, 1});
      },
      {"permute: expected 3 dims for a tensor of shape (2, 3, 4), got 2"});
  expect_error(
      [&] {
        x.permute({0, 1, 1});
      },
      {"permute: dim 1 appears twice in the permutation (0, 1, 1) (negative dims counted from the end): "
       "expected each of 0..2 once"});
  expect_error([&] { x.permute({0, -1, 2}); }, {"dim 2 appears twice in the permutation (0, -1, 2)"});
  expect_error([&] { x.permute({0, 1, 3}); }, {"permute: dim 3 is out of range for a tensor with 3 dims"});
  expect_error([&] { x.transpose(0, 3); }, {"transpose: dim 3 is out of range"});
  expect_error([&] { x.narrow(1, 2, 2); }, {"narrow: window [2, 4) is out of range for dim 1 of size 3"});
  expect_error([&] { x.narrow(1, -1, 1); }, {"narrow: window [-1, 0) is out of range"});
  expect_error([&] { x.slice(0, 0, 2, 0); }, {"slice: step must be positive, got 0"});
  expect_error([&] { x.slice(5, 0, 1); }, {"slice: dim 5 is out of range"});
  expect_error([&] { x.select(2, 4); }, {"select: index 4 is out of range for dim 2 of size 4"});
  expect_error([&] { x.select(0, -3); }, {"select: index -3 is out of range for dim 0 of size 2"});
  expect_error([&] { x.expand({3, 4}); }, {"expand: cannot expand shape (2, 3, 4) to (3, 4) (fewer dims)"});
  expect_error(
      [&] {
        x.expand({2, 5, 4});
      },
      {"expand: cannot expand shape (2, 3, 4) to (2, 5, 4): dim 1 has size 3, which is neither 5 nor 1"});
  expect_error(
      [&] {
        x.expand({-2, 2, 3, 4});
      },
      {"expand: cannot expand shape (2, 3, 4) to (-2, 2, 3, 4): size -2 at new leading dim 0 is negative"});
  expect_error(
      [&] {
        x.expand({-1, 2, 3, 4});
      },
      {"expand: cannot expand shape (2, 3, 4) to (-1, 2, 3, 4): size -1 at new leading dim 0",
       "a new dim has none to keep"});
  expect_error([&] { x.squeeze(3); }, {"squeeze: dim 3 is out of range"});
  expect_error([&] { x.unsqueeze(4); }, {"unsqueeze: dim 4 is out of range for a tensor with 4 dims"});
  expect_error([&] { x.flatten(2, 1); }, {"flatten: start dim 2 must not come after end dim 1"});
  expect_error([&] { x.flatten(0, 3); }, {"flatten: dim 3 is out of range"});
  expect_error([&] { cat({}, 0); }, {"cat: expected at least one tensor"});
  expect_error(
      [&] {
        cat({x, zeros({2, 3, 4}, DType::f64)}, 0);
      },
      {"cat: tensor 1 has dtype f64, expected f32"});
  expect_error(
      [&] {
        cat({x, zeros({2, 3})}, 0);
      },
      {"cat: tensor 1 has shape (2, 3), expected 3 dims like (2, 3, 4)"});
  expect_error(
      [&] {
        cat({x, zeros({2, 5, 4})}, 0);
      },
      {"cat: tensor 1 has shape (2, 5, 4), which differs from (2, 3, 4) outside dim 0"});
  expect_error([&] { cat({x}, 3); }, {"cat: dim 3 is out of range"});
  expect_error([&] { stack({}, 0); }, {"stack: expected at least one tensor"});
  expect_error(
      [&] {
        stack({x, zeros({2, 3, 5})}, 0);
      },
      {"stack: tensor 1 has shape (2, 3, 5), expected (2, 3, 4) like tensor 0"});
  expect_error([&] { stack({x}, 4); }, {"stack: dim 4 is out of range"});
  // (the dtype was found by the cat inside, which named itself)
  expect_error(
      [&] {
        stack({x, x.to(DType::f64)}, 0);
      },
      {"stack: tensor 1 has dtype f64, expected f32 like tensor 0"});
  expect_error([&] { x.size(3); }, {"Tensor::size: dim 3 is out of range"});
  expect_error([&] { x.stride(-4); }, {"Tensor::stride: dim -4 is out of range"});
}

// 0-d tensors (scalars) in every op that takes a dim. wrap_dim lets dim 0 and -1 name a 0-d tensor's one
// value (PyTorch's rule, which the reductions use); the ops that index a dim must not then read shape()[0]
// of an empty shape. Found by a probe on 2026-11-28: cat of two 0-d tensors wrote past the end of an empty
// shape (a segmentation fault), size(0) and slice/narrow/select read past it, transpose(0, -1) swapped two
// entries of an empty permutation, and sum/max over dim 0 failed with "permute: expected 0 dims".
TEST(Views, ZeroDimTensorsInOpsThatTakeADim) {
  Tensor s = full(Shape{}, 2.5, DType::f64);
  // the ops that need a dim to exist refuse, by name
  expect_error([&] { cat({s, s}, 0); }, {"cat: tensor 0 is 0-d", "(use stack)"});
  expect_error([&] { cat({ones({2}), s}, 0); }, {"cat: tensor 1 is 0-d"});
  expect_error([&] { s.slice(0, 0, 1); }, {"slice: expected a tensor with at least 1 dim, got a 0-d tensor"});
  expect_error([&] { s.narrow(0, 0, 1); }, {"narrow: expected a tensor with at least 1 dim"});
  expect_error([&] { s.select(0, 0); }, {"select: expected a tensor with at least 1 dim"});
  expect_error([&] { (void)s.size(0); }, {"Tensor::size: dim 0 asked of a 0-d tensor"});
  expect_error([&] { (void)s.stride(-1); }, {"Tensor::stride: dim -1 asked of a 0-d tensor"});
  EXPECT_EQ(stack({s, s}, 0).to_vector<double>(), (std::vector<double>{2.5, 2.5}));
  // the views that have nothing to do return the scalar
  EXPECT_EQ(s.transpose(0, -1).shape(), Shape{});
  EXPECT_EQ(s.transpose(0, -1).item(), 2.5);
  EXPECT_EQ(s.squeeze(0).shape(), Shape{});
  EXPECT_EQ(s.unsqueeze(0).shape(), Shape{1});
  // reductions over dim 0 (or -1) of a 0-d tensor reduce its one value, as in PyTorch; gradients are 1
  Tensor x = full(Shape{}, -1.5, DType::f64).requires_grad_();
  Tensor y = sum(x, {0}) + mean(x, {-1}, true) + max(x, 0);
  EXPECT_EQ(y.shape(), Shape{});
  EXPECT_EQ(y.item(), -4.5);
  y.backward();
  EXPECT_EQ(x.grad().item(), 3.0);
  EXPECT_EQ(argmax(x, -1).item(), 0.0);
  // the same gradients by central differences, with a random upstream gradient (f64)
  Generator g(3);
  expect_gradcheck([](auto& in) { return sum(in[0], {0}) * 2.0 + mean(in[0], {-1}, true) + max(in[0], 0); },
                   {randn(Shape{}, g, DType::f64).requires_grad_()});
  EXPECT_EQ(var(x.detach(), {0}, /*unbiased=*/false).item(), 0.0);
  expect_error([&] { sum(s, {1}); }, {"sum: dim 1 is out of range for a tensor with 0 dims"});
  expect_error([&] { max(s, 1); }, {"max: dim 1 is out of range"});
}
