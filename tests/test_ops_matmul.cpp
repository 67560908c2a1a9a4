// matmul: values, naive == fast for every layout, gradchecks (2-D, batched, broadcast batch dims,
// transposed inputs), determinism, and errors.
#include "ops_test_util.h"

using namespace ng;
using namespace ng::testing;

TEST(Matmul, ForwardHandComputed) {
  Tensor a = tensor({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}}, DType::f64);  // (3, 2)
  Tensor b = tensor({{1.0, 0.0, -1.0}, {2.0, 1.0, 0.5}}, DType::f64);   // (2, 3)
  EXPECT_EQ(matmul(a, b).to_vector<double>(), (std::vector<double>{5, 2, 0, 11, 4, -1, 17, 6, -2}));
  EXPECT_EQ(matmul(b, a).to_vector<double>(), (std::vector<double>{-4, -4, 7.5, 11}));
  EXPECT_EQ(matmul(a.t(), a).to_vector<double>(), (std::vector<double>{35, 44, 44, 56}));
  EXPECT_EQ(matmul_naive(a, b).to_vector<double>(), matmul(a, b).to_vector<double>());
}

TEST(Matmul, FastMatchesNaiveForEveryLayoutAndDtype) {
  Generator g(1);
  for (auto [M, K, N] :
       {std::tuple{1, 1, 1}, {1, 7, 1}, {2, 3, 4}, {17, 33, 9}, {65, 31, 64}, {128, 70, 33}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        Tensor a = ta ? randn({K, M}, g).t() : randn({M, K}, g);
        Tensor b = tb ? randn({N, K}, g).t() : randn({K, N}, g);
        EXPECT_LT(max_abs_diff(matmul(a, b), matmul_naive(a, b)), 1e-4) << M << " " << K << " " << N;
        Tensor a64 = a.to(DType::f64), b64 = b.to(DType::f64);
        EXPECT_LT(max_abs_diff(matmul(a64, b64), matmul_naive(a64, b64)), 1e-12);
      }
    }
  }
  // A sliced operand whose rows are not contiguous.
  Tensor big = randn({10, 20}, g);
  Tensor a = big.slice(1, 0, 20, 2);  // (10, 10), column stride 2
  EXPECT_LT(max_abs_diff(matmul(a, a), matmul_naive(a.contiguous(), a.contiguous())), 1e-4);
  // Half precision computes in f32.
  Tensor h = randn({8, 8}, g).to(DType::bf16);
  EXPECT_TRUE(bitwise_equal(matmul(h, h), matmul(h.to(DType::f32), h.to(DType::f32)).to(DType::bf16)));
}

TEST(Matmul, BatchedAndBroadcastBatchDims) {
  Generator g(2);
  Tensor a = randn({2, 3, 4, 5}, g), b = randn({3, 5, 6}, g);
  Tensor c = matmul(a, b);
  EXPECT_EQ(c.shape(), (Shape{2, 3, 4, 6}));
  // Batch (i, j) equals the 2-D product of the slices.
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      EXPECT_LT(
          max_abs_diff(c.select(0, i).select(0, j), matmul(a.select(0, i).select(0, j), b.select(0, j))),
          1e-5);
  EXPECT_EQ(matmul(randn({4, 1, 2, 3}, g), randn({5, 3, 2}, g)).shape(), (Shape{4, 5, 2, 2}));
  EXPECT_EQ(matmul(randn({2, 3}, g), randn({7, 3, 4}, g)).shape(), (Shape{7, 2, 4}));
}

TEST(Matmul, Gradcheck2DBatchedBroadcastAndTransposed) {
  Generator g(3);
  auto mm = [](auto& in) { return matmul(in[0], in[1]); };
  expect_gradcheck(mm, {leaf({3, 4}, g), leaf({4, 5}, g)});
  expect_gradcheck(mm, {noncontig_leaf({3, 4}, g), noncontig_leaf({4, 5}, g)});
  expect_gradcheck(mm, {leaf({2, 3, 4}, g), leaf({2, 4, 2}, g)});
  expect_gradcheck(mm, {leaf({2, 1, 3, 4}, g), leaf({3, 4, 2}, g)});  // broadcast batch dims on both sides
  expect_gradcheck(mm, {leaf({3, 4}, g), leaf({2, 2, 4, 3}, g)});     // 2-D @ 4-D
  expect_gradcheck(mm, {noncontig_leaf({2, 3, 4}, g), leaf({4, 2}, g)});
  expect_gradcheck([](auto& in) { return matmul(in[0].transpose(-1, -2), in[1]); },
                   {leaf({2, 4, 3}, g), leaf({4, 5}, g)});
  expect_gradcheck([](auto& in) { return matmul(in[0], in[0].t()); }, {leaf({3, 4}, g)});
  // A column-major (transposed-view) input whose gradient is summed over broadcast batch dims.
  expect_gradcheck([](auto& in) { return matmul(in[0], in[1].t()); }, {leaf({2, 3, 4}, g), leaf({5, 4}, g)});
  expect_gradcheck([](auto& in) { return matmul(in[0].t(), in[1]); }, {leaf({4, 3}, g), leaf({2, 4, 5}, g)});
  // Only one side requires grad.
  Tensor w = randn({4, 2}, g, DType::f64);
  expect_gradcheck([w](auto& in) { return matmul(in[0], w); }, {leaf({3, 4}, g)});
}

// linear's weight enters matmul as weight.t(), a column-major view. Its gradient must reach the weight
// contiguous (computed as the transposed product, no transposing copy), with the same bits as the plain
// formula A^T @ dC. Likewise for a column-major left operand.
TEST(Matmul, ColumnMajorInputGetsItsGradientWithoutACopy) {
  Generator g(5);
  const int64_t M = 67, K = 45, N = 38;  // odd sizes: edge tiles on every side
  Tensor x = randn({M, K}, g), dc = randn({M, N}, g);
  Tensor w = randn({N, K}, g).requires_grad_();  // (out, in), used as w.t()
  {
    // The gradient MatmulBackward hands to w.t() has w.t()'s own layout: column-major.
    Tensor y = matmul(x, w.t());
    const std::vector<Tensor> grads = y.grad_fn()->apply(dc);
    ASSERT_EQ(grads.size(), 2u);
    EXPECT_EQ(grads[1].shape(), (Shape{K, N}));
    EXPECT_EQ(grads[1].stride(0), 1);
    EXPECT_EQ(grads[1].stride(1), K);
  }
  sum(matmul(x, w.t()) * dc).backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_TRUE(w.grad().is_contiguous());
  Tensor want = matmul(x.t(), dc).t();  // A^T @ dC, (K, N) row-major, transposed to (N, K)
  EXPECT_TRUE(bitwise_equal(w.grad(), want.contiguous()));

  Tensor at = randn({K, M}, g).requires_grad_();  // a = at.t(): (M, K) column-major
  Tensor b = randn({K, N}, g);
  sum(matmul(at.t(), b) * dc).backward();
  EXPECT_TRUE(at.grad().is_contiguous());
  EXPECT_TRUE(bitwise_equal(at.grad(), matmul(dc, b.t()).t().contiguous()));  // dC @ B^T, transposed
}

TEST(Matmul, LargeSameAtOneAndTwoThreads) {
  Generator g(4);
  Tensor a = randn({256, 192}, g), b = randn({192, 160}, g);
  Tensor c1, c2;
  {
    ThreadsGuard t(1);
    c1 = matmul(a, b);
  }
  {
    ThreadsGuard t(2);
    c2 = matmul(a, b);
  }
  EXPECT_TRUE(bitwise_equal(c1, c2));
}

// 1-D operands take NumPy's and PyTorch's meaning: a vector a is the row (1, K), a vector b the column
// (K, 1), and that dim is dropped from the result. Values by hand, the shapes of every form, the naive
// product, and gradients to the vectors' own shapes.
TEST(Matmul, VectorOperands) {
  Tensor v = tensor({1.0, 2.0}, DType::f64);                            // (2)
  Tensor a = tensor({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}}, DType::f64);  // (3, 2)
  Tensor w = tensor({1.0, -1.0, 2.0}, DType::f64);                      // (3)
  EXPECT_EQ(matmul(v, v).shape(), Shape{});
  EXPECT_EQ(matmul(v, v).item(), 5.0);
  EXPECT_EQ(matmul(a, v).shape(), Shape{3});
  EXPECT_EQ(matmul(a, v).to_vector<double>(), (std::vector<double>{5, 11, 17}));
  EXPECT_EQ(matmul(w, a).shape(), Shape{2});
  EXPECT_EQ(matmul(w, a).to_vector<double>(), (std::vector<double>{8, 10}));  // 1 - 3 + 10, 2 - 4 + 12
  Tensor batch = stack({a, mul(a, 2.0)}, 0);                                  // (2, 3, 2)
  EXPECT_EQ(matmul(batch, v).shape(), (Shape{2, 3}));
  EXPECT_EQ(matmul(batch, v).to_vector<double>(), (std::vector<double>{5, 11, 17, 10, 22, 34}));
  EXPECT_EQ(matmul(w, batch).shape(), (Shape{2, 2}));
  EXPECT_EQ(matmul(w, batch).to_vector<double>(), (std::vector<double>{8, 10, 16, 20}));
  EXPECT_EQ(matmul_naive(batch, v).to_vector<double>(), matmul(batch, v).to_vector<double>());
  EXPECT_EQ(matmul_naive(v, v).shape(), Shape{});

  Generator g(7);
  auto mm = [](auto& in) { return matmul(in[0], in[1]); };
  expect_gradcheck(mm, {leaf({4}, g), leaf({4}, g)});
  expect_gradcheck(mm, {leaf({3, 4}, g), leaf({4}, g)});
  expect_gradcheck(mm, {leaf({4}, g), leaf({4, 5}, g)});
  expect_gradcheck(mm, {leaf({2, 3, 4}, g), leaf({4}, g)});
  expect_gradcheck(mm, {leaf({4}, g), leaf({2, 4, 3}, g)});
  expect_gradcheck(mm, {noncontig_leaf({3, 4}, g), leaf({4}, g)});
}

TEST(Matmul, Errors) {
  expect_error([] { matmul(Tensor(), zeros({3, 2})); }, {"matmul: a is an undefined tensor"});
  expect_error(
      [] {
        matmul(zeros(Shape{}), zeros({3, 2}));
      },
      {"matmul: expected tensors with at least 1 dim, got shapes () and (3, 2)"});
  expect_error(
      [] {
        matmul(zeros({3}), zeros({4, 2}));
      },
      {"matmul: inner dimensions differ: a is (3), b is (4, 2)", "3 must equal b's second-to-last 4"});
  expect_error(
      [] {
        matmul(zeros({2, 3}), zeros({4}));
      },
      {"matmul: inner dimensions differ: a is (2, 3), b is (4)", "3 must equal b's length 4"});
  expect_error(
      [] {
        matmul(zeros({2, 3}), zeros({4, 2}));
      },
      {"matmul: inner dimensions differ: a is (2, 3), b is (4, 2)", "3 must equal", "4"});
  expect_error(
      [] {
        matmul(zeros({2, 3}), zeros({3, 2}, DType::f64));
      },
      {"matmul: dtype mismatch: got f32 and f64"});
  expect_error(
      [] {
        matmul(zeros({2, 2, 3}), zeros({3, 3, 2}));
      },
      {"matmul: shapes (2) and (3) cannot be broadcast together"});
  expect_error(
      [] {
        matmul(zeros({2, 2}, DType::i64), zeros({2, 2}, DType::i64));
      },
      {"matmul: expected floating tensors, got i64"});
}
