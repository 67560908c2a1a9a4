// Reductions: values, keepdim, gradchecks over any dims (non-contiguous too), half inputs, errors.
#include "ops_test_util.h"

using namespace ng;
using namespace ng::testing;

TEST(Reduce, ForwardHandComputed) {
  Tensor x = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 9.0}}, DType::f64);
  EXPECT_EQ(sum(x).item(), 24.0);
  EXPECT_EQ(sum(x).dim(), 0);
  EXPECT_EQ(sum(x, {0}).to_vector<double>(), (std::vector<double>{5, 7, 12}));
  EXPECT_EQ(sum(x, {1}, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(sum(x, {-1}).to_vector<double>(), (std::vector<double>{6, 18}));
  EXPECT_EQ(sum(x, {0, 1}).item(), 24.0);
  EXPECT_EQ(mean(x).item(), 4.0);
  EXPECT_EQ(mean(x, {1}).to_vector<double>(), (std::vector<double>{2, 6}));
  // var of (4, 5, 9): mean 6, squared deviations 4 + 1 + 9 = 14 -> unbiased 7, biased 14/3
  EXPECT_DOUBLE_EQ(var(x, {1}).to_vector<double>()[1], 7.0);
  EXPECT_DOUBLE_EQ(var(x, {1}, false).to_vector<double>()[1], 14.0 / 3.0);
  EXPECT_EQ(var(x, {1}, true, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(max(x, 0).to_vector<double>(), (std::vector<double>{4, 5, 9}));
  EXPECT_EQ(max(x, 1, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(argmax(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{2, 2}));
  // argmax: first maximum wins; nan counts as the maximum
  EXPECT_EQ(argmax(tensor({1.0, 3.0, 3.0}), 0).item(), 1.0);
  EXPECT_EQ(argmax(tensor({1.0, NAN, 3.0}), 0).item(), 1.0);
  // A permuted (non-contiguous) input.
  EXPECT_EQ(sum(x.t(), {1}).to_vector<double>(), (std::vector<double>{5, 7, 12}));
}

TEST(Reduce, GradcheckAllDimsKeepdimAndNonContiguous) {
  Generator g(1);
  const Shape s{3, 4, 5};
  const std::vector<std::vector<int64_t>> dim_sets = {{}, {0}, {1}, {2}, {-1}, {0, 2}, {0, 1}, {1, 2}};
  for (const auto& dims : dim_sets) {
    for (bool keep : {false, true}) {
      SCOPED_TRACE(shape_str(dims) + (keep ? " keepdim" : ""));
      for (Tensor x : {leaf(s, g), noncontig_leaf(s, g)}) {
        expect_gradcheck([dims, keep](auto& in) { return sum(in[0], dims, keep); }, {x});
        expect_gradcheck([dims, keep](auto& in) { return mean(in[0], dims, keep); }, {x});
        expect_gradcheck([dims, keep](auto& in) { return var(in[0], dims, true, keep); }, {x});
        expect_gradcheck([dims, keep](auto& in) { return var(in[0], dims, false, keep); }, {x});
      }
    }
  }
  for (int64_t d : {0, 1, 2}) {
    expect_gradcheck([d](auto& in) { return max(in[0], d); }, {leaf(s, g)});
    expect_gradcheck([d](auto& in) { return max(in[0], d, true); }, {noncontig_leaf(s, g)});
  }
  expect_gradcheck([](auto& in) { return sum(in[0]); }, {leaf({6}, g)});
  expect_gradcheck([](auto& in) { return mean(in[0].slice(0, 0, 6, 2)); }, {leaf({6, 2}, g)});
}

TEST(Reduce, MaxGradientGoesToFirstMaximum) {
  Tensor x = tensor({{1.0, 5.0, 5.0}, {7.0, 2.0, 3.0}}, DType::f64).requires_grad_();
  max(x, 1).backward(tensor({10.0, 20.0}, DType::f64));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 10, 0, 20, 0, 0}));
}

TEST(Reduce, HalfInputsReduceInF32) {
  // 4096 ones in f16: summed in f16 the running sum would stick at 2048; in f32 it is exact.
  Tensor x = ones({4096}, DType::f16);
  EXPECT_EQ(sum(x).item(), 4096.0);
  EXPECT_EQ(sum(x).dtype(), DType::f16);
  EXPECT_EQ(mean(ones({3, 5}, DType::bf16), {1}).to_vector<double>(), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(max(tensor({1.0, 7.0, 3.0}).to(DType::bf16), 0).item(), 7.0);
  EXPECT_EQ(var(tensor({1.0, 3.0}).to(DType::f16), {0}).item(), 2.0);
}

TEST(Reduce, Errors) {
  Tensor x = zeros({2, 3});
  expect_error([&] { sum(x, {0, 0}); }, {"sum: a dim appears twice"});
  expect_error(
      [&] {
        mean(x, {1, -1});
      },
      {"mean: a dim appears twice in the list of dims to reduce: dim 1 in (1, -1) for a tensor of shape "
       "(2, 3) (expected each dim once)"});
  expect_error([&] { sum(x, {2}); },
               {"sum: dim 2 is out of range for a tensor with 2 dims (expected -2 to 1)"});
  expect_error([&] { mean(x, {-3}); }, {"mean: dim -3 is out of range"});
  expect_error(
      [&] {
        mean(zeros({2, 0}), {1});
      },
      {"mean: cannot take the mean of an empty set of values (shape (2, 0))"});
  expect_error(
      [&] {
        var(zeros({2, 1}), {1});
      },
      {"var: needs at least 2 values per output (unbiased = 1), got 1"});
  expect_error([&] { var(zeros({2, 0}), {1}, false); }, {"var: needs at least 1 values per output", "got 0"});
  expect_error([&] { max(zeros({2, 0}), 1); }, {"max: cannot reduce an empty dim (shape (2, 0))"});
  expect_error([&] { argmax(zeros({0}), 0); }, {"argmax: cannot reduce an empty dim"});
  expect_error([&] { max(x, 5); }, {"max: dim 5 is out of range"});
  expect_error([&] { sum(zeros({2}, DType::i64)); }, {"sum: expected dtype f32 or f64, got i64"});
  expect_error([&] { var(zeros({2}, DType::i64), {0}); }, {"var: expected dtype f32 or f64, got i64"});
}

// An empty tensor's sizes need not multiply to an int64: an expanded view of shape (0, 2^40, 2^40) has no
// values, and reducing dims (1, 2) is a length of 2^80 per row, of which there are none. That length wrapped
// around (undefined behaviour) to 0, and mean refused it as "the mean of an empty set of values".
TEST(Reduce, EmptyTensorWhoseReducedSizesPassInt64) {
  const int64_t t40 = int64_t(1) << 40;
  Tensor e = zeros({0, 1, 1}, DType::f64).expand({0, t40, t40});
  EXPECT_EQ(sum(e, {1, 2}).shape(), (Shape{0}));
  EXPECT_EQ(mean(e, {1, 2}).shape(), (Shape{0}));
  EXPECT_EQ(mean(e, {-1, -2}, true).shape(), (Shape{0, 1, 1}));
  EXPECT_EQ(var(e, {1, 2}).shape(), (Shape{0}));
  // a zero size among the reduced ones still makes the rows empty: the mean of nothing is refused
  Tensor z = zeros({1, 1, 0}, DType::f64).expand({t40, t40, 0});
  expect_error([&] { mean(z, {2}); }, {"mean: cannot take the mean of an empty set of values"});
}

// sum and mean of an expanded view reduce one copy of its values (tensor/ops/reduce.cpp): the contiguous
// copy of (1, 1, 3) expanded to (2^20, 2^20, 3) would be 24 TiB, and sum answered "Storage: out of memory".
TEST(Reduce, ExpandedViewsReduceFromOneCopy) {
  const int64_t n = int64_t(1) << 20;
  const double nn = double(n) * double(n);
  Tensor x = tensor({1.5, -2.0, 4.0}, DType::f64);
  Tensor big = x.reshape({1, 1, 3}).expand({n, n, 3});
  EXPECT_EQ(sum(big).item(), nn * 3.5);
  EXPECT_EQ(sum(big, {0, 1}).to_vector<double>(), (std::vector<double>{nn * 1.5, nn * -2.0, nn * 4.0}));
  EXPECT_DOUBLE_EQ(mean(big).item(), 3.5 / 3.0);
  EXPECT_EQ(mean(big, {0, 1}, true).shape(), (Shape{1, 1, 3}));
  EXPECT_EQ(mean(big, {0, 1}).to_vector<double>(), (std::vector<double>{1.5, -2.0, 4.0}));
  EXPECT_EQ(sum(big.slice(0, 0, 2).slice(1, 0, 2), {2}).to_vector<double>(),
            (std::vector<double>{3.5, 3.5, 3.5, 3.5}));  // kept stride-0 dims: broadcast back
  EXPECT_EQ(sum(ones({1}, DType::f16).expand({4096})).item(), 4096.0);
  EXPECT_EQ(sum(ones({1}, DType::f16).expand({4096})).dtype(), DType::f16);
  // A half view is summed and scaled in f32 and rounded once: 1 + 2^-11 rounded to f16 first is 1 (a tie,
  // to even), and 3 copies of it 3; its contiguous copy sums to 3.00146 in f32, which rounds to 3.00195.
  Tensor h = tensor({1.0, std::ldexp(1.0, -11)}).to(DType::f16).reshape({1, 2}).expand({3, 2});
  EXPECT_EQ(sum(h).item(), sum(h.contiguous()).item());
  EXPECT_EQ(sum(h).item(), 3.0 + std::ldexp(1.0, -9));

  // Small views against their contiguous copies, every set of dims, f32 and the half types.
  Generator g(3);
  const std::vector<std::vector<int64_t>> dim_sets = {{}, {0}, {1}, {2}, {0, 2}, {1, 2}, {0, 1}};
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    Tensor base = randn({3, 1, 5}, g).to(dt);
    Tensor v = base.expand({3, 4, 5}).permute({2, 1, 0});  // (5, 4, 3), the stride-0 dim in the middle
    for (const auto& dims : dim_sets) {
      for (bool keep : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(dims) + (keep ? " keepdim" : ""));
        for (bool is_mean : {false, true}) {
          Tensor a = is_mean ? mean(v, dims, keep) : sum(v, dims, keep);
          Tensor b = is_mean ? mean(v.contiguous(), dims, keep) : sum(v.contiguous(), dims, keep);
          ASSERT_EQ(a.shape(), b.shape());
          ASSERT_EQ(a.dtype(), dt);
          const std::vector<double> av = a.to(DType::f64).to_vector<double>(),
                                    bv = b.to(DType::f64).to_vector<double>();
          const double tol = dt == DType::f32 ? 1e-5 : dt == DType::f16 ? 1e-2 : 5e-2;
          for (size_t i = 0; i < av.size(); ++i) EXPECT_NEAR(av[i], bv[i], tol * (1 + std::abs(bv[i]))) << i;
        }
      }
    }
  }
  // The gradient is the usual one: each element of the view gets dout (here 1), so the leaf under the
  // expand gets one per copy.
  Tensor leaf_x = tensor({{1.0, 2.0}}, DType::f64).requires_grad_();
  sum(leaf_x.expand({6, 2})).backward();
  EXPECT_EQ(leaf_x.grad().to_vector<double>(), (std::vector<double>{6, 6}));
  expect_gradcheck([](auto& in) { return sum(in[0].expand({4, 2, 3}), {0, 2}); }, {leaf({1, 2, 3}, g)});
  expect_gradcheck([](auto& in) { return mean(in[0].expand({2, 4, 3}), {1}, true); }, {leaf({2, 1, 3}, g)});
}

// var, max and argmax of an expanded view also reduce one copy of its values (reduce.cpp's header): the
// view of 2^40 rows below is 24 bytes, its contiguous copy 24 TiB. Before 2026-11-29 all three copied it
// ("Storage: out of memory"). Small views match their contiguous copies; the gradients are the usual ones.
TEST(Reduce, VarMaxArgmaxOfExpandedViewsFromOneCopy) {
  const int64_t n = int64_t(1) << 40;
  Tensor x = tensor({1.5, -2.0, 4.0}, DType::f64);
  Tensor rows = x.reshape({1, 3}).expand({n, 3});  // (2^40, 3)
  EXPECT_EQ(max(rows, 0).to_vector<double>(), (std::vector<double>{1.5, -2.0, 4.0}));
  EXPECT_EQ(argmax(rows, 0).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));  // the first of the ties
  EXPECT_EQ(var(rows, {0}, /*unbiased=*/false).to_vector<double>(), (std::vector<double>{0, 0, 0}));
  // Over a stride-0 dim and another: the values 1.5, -2, 4, each 2^40 times: var = 6.1667 * L / (L - 1).
  const double L = 3.0 * double(n), m = 3.5 / 3.0;
  const double ss = double(n) * ((1.5 - m) * (1.5 - m) + (-2.0 - m) * (-2.0 - m) + (4.0 - m) * (4.0 - m));
  EXPECT_NEAR(var(rows, {}).item(), ss / (L - 1), 1e-12 * ss / L);
  EXPECT_NEAR(var(rows, {0, 1}, false).item(), ss / L, 1e-12 * ss / L);

  // Small views against their contiguous copies, every dim, f32, f64 and the half types.
  Generator g(5);
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    Tensor base = randn({3, 1, 5}, g).to(dt);
    Tensor v = base.expand({3, 4, 5}).permute({2, 1, 0});  // (5, 4, 3), the stride-0 dim in the middle
    const double tol = dt == DType::f64 ? 1e-12 : dt == DType::f32 ? 1e-5 : dt == DType::f16 ? 1e-2 : 5e-2;
    for (int64_t d = 0; d < 3; ++d) {
      for (bool keep : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " dim " + std::to_string(d) + (keep ? " keepdim" : ""));
        EXPECT_EQ(argmax(v, d, keep).to_vector<int64_t>(),
                  argmax(v.contiguous(), d, keep).to_vector<int64_t>());
        const Tensor a = max(v, d, keep), b = max(v.contiguous(), d, keep);
        ASSERT_EQ(a.shape(), b.shape());
        EXPECT_EQ(a.dtype(), dt);
        EXPECT_EQ(a.to(DType::f64).to_vector<double>(), b.to(DType::f64).to_vector<double>());
        for (const std::vector<int64_t>& dims :
             {std::vector<int64_t>{d}, std::vector<int64_t>{d, (d + 1) % 3}}) {
          for (bool unbiased : {false, true}) {
            const Tensor va = var(v, dims, unbiased, keep), vb = var(v.contiguous(), dims, unbiased, keep);
            ASSERT_EQ(va.shape(), vb.shape());
            EXPECT_EQ(va.dtype(), dt);
            const std::vector<double> av = va.to(DType::f64).to_vector<double>(),
                                      bv = vb.to(DType::f64).to_vector<double>();
            for (size_t i = 0; i < av.size(); ++i)
              EXPECT_NEAR(av[i], bv[i], tol * (1 + std::abs(bv[i]))) << i;
          }
        }
      }
    }
  }
  // The gradients: max's goes to the first copy of each maximum, var's to every element.
  Tensor leaf_x = tensor({{1.0, 5.0}}, DType::f64).requires_grad_();
  sum(max(leaf_x.expand({4, 2}), 0)).backward();
  EXPECT_EQ(leaf_x.grad().to_vector<double>(), (std::vector<double>{1, 1}));
  Tensor leaf_h = tensor({{1.0, 5.0}}).to(DType::bf16).detach().requires_grad_();
  sum(max(leaf_h.expand({4, 2}), 1)).backward();  // each row's max is 5: four rows send 1 to it
  EXPECT_EQ(leaf_h.grad().to(DType::f64).to_vector<double>(), (std::vector<double>{0, 4}));
  expect_gradcheck([](auto& in) { return var(in[0].expand({4, 2, 3}), {0, 2}); }, {leaf({1, 2, 3}, g)});
  expect_gradcheck(
      [](auto& in) {
        return var(in[0].expand({2, 4, 3}), {1}, false, true);
      },
      {leaf({2, 1, 3}, g)});
  expect_gradcheck([](auto& in) { return max(in[0].expand({3, 4}), 1); }, {leaf({3, 1}, g)});
}

TEST(Reduce, LargeSumsSameAtOneAndTwoThreads) {
  Generator g(2);
  Tensor x = randn({300000}, g);
  Tensor m = randn({1000, 300}, g);
  Tensor a1, a2, b1, b2, c1, c2;
  {
    ThreadsGuard t(1);
    a1 = sum(x), b1 = sum(m, {0}), c1 = var(m.t(), {1});
  }
  {
    ThreadsGuard t(2);
    a2 = sum(x), b2 = sum(m, {0}), c2 = var(m.t(), {1});
  }
  EXPECT_TRUE(bitwise_equal(a1, a2));
  EXPECT_TRUE(bitwise_equal(b1, b2));
  EXPECT_TRUE(bitwise_equal(c1, c2));
}
