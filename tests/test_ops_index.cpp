// embedding, index_select, masked_fill: values, scatter-add gradients, errors, determinism.
#include "ops_test_util.h"

using namespace ng;
using namespace ng::testing;

static Tensor ids(std::vector<int64_t> v, Shape s) {
  return from_vector(v, s);
}

TEST(Embedding, ForwardPicksRows) {
  Tensor w = tensor({{0.0, 1.0}, {10.0, 11.0}, {20.0, 21.0}});
  Tensor out = embedding(w, ids({2, 0, 2, 1}, {2, 2}));
  EXPECT_EQ(out.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{20, 21, 0, 1, 20, 21, 10, 11}));
  // 0-d ids -> (C); a transposed (non-contiguous) weight.
  EXPECT_EQ(embedding(w, scalar_tensor(1, DType::i64)).to_vector<double>(), (std::vector<double>{10, 11}));
  Tensor wt = tensor({{0.0, 10.0, 20.0}, {1.0, 11.0, 21.0}}).t();
  EXPECT_EQ(embedding(wt, ids({1}, {1})).to_vector<double>(), (std::vector<double>{10, 11}));
  // half weights are copied bit for bit
  Tensor wh = w.to(DType::bf16);
  EXPECT_TRUE(bitwise_equal(embedding(wh, ids({2, 0}, {2})), embedding(w, ids({2, 0}, {2})).to(DType::bf16)));
}

TEST(Embedding, BackwardScatterAddsRepeatedIds) {
  Tensor w = zeros({3, 2}, DType::f64).requires_grad_();
  Tensor out = embedding(w, ids({2, 0, 2}, {3}));
  out.backward(tensor({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}}, DType::f64));
  // row 2 used twice: (1+5, 2+6); row 0: (3, 4); row 1 unused: 0
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{3, 4, 0, 0, 6, 8}));
}

TEST(Embedding, Gradcheck) {
  Generator g(1);
  Tensor i = ids({1, 3, 3, 0, 4, 1}, {2, 3});
  expect_gradcheck([i](auto& in) { return embedding(in[0], i); }, {leaf({5, 4}, g)});
  expect_gradcheck([i](auto& in) { return embedding(in[0], i); }, {noncontig_leaf({5, 4}, g)});
}

TEST(Embedding, Errors) {
  Tensor w = zeros({4, 3});
  expect_error(
      [&] {
        embedding(w, ids({0, 4}, {2}));
      },
      {"embedding: index 4 at position 1 is out of range", "V = 4", "(4, 3)"});
  expect_error([&] { embedding(w, ids({-1}, {1})); }, {"embedding: index -1 at position 0 is out of range"});
  expect_error([&] { embedding(w, zeros({2})); }, {"embedding: expected i64 ids, got f32"});
  expect_error([&] { embedding(zeros({4}), ids({0}, {1})); },
               {"embedding: expected weight of shape (V, C), got (4)"});
  expect_error(
      [&] {
        embedding(zeros({4, 3}, DType::i64), ids({0}, {1}));
      },
      {"embedding: expected a floating weight, got i64"});
}

TEST(Embedding, BackwardSameAtOneAndTwoThreads) {
  Generator g(2);
  Tensor i = randint(0, 50, {4096}, g);  // many repeats
  Tensor dout = randn({4096, 300}, g);
  Tensor a, b;
  for (int threads : {1, 2}) {
    ThreadsGuard guard(threads);
    Tensor w = zeros({50, 300}).requires_grad_();
    embedding(w, i).backward(dout);
    (threads == 1 ? a : b) = w.grad();
  }
  EXPECT_TRUE(bitwise_equal(a, b));
}

TEST(IndexSelect, ForwardAlongEachDim) {
  Tensor x = arange(0.0, 24.0, 1.0, DType::f64).reshape({2, 3, 4});
  Tensor i = ids({2, 0}, {2});
  EXPECT_EQ(index_select(x, 1, i).shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(index_select(x, 1, i).to_vector<double>(),
            (std::vector<double>{8, 9, 10, 11, 0, 1, 2, 3, 20, 21, 22, 23, 12, 13, 14, 15}));
  EXPECT_EQ(index_select(x, -1, i).select(0, 0).select(0, 0).to_vector<double>(),
            (std::vector<double>{2, 0}));
  EXPECT_EQ(index_select(x, 0, ids({1, 1}, {2})).select(0, 1).select(0, 2).to_vector<double>(),
            (std::vector<double>{20, 21, 22, 23}));
  // A 0-d index removes the dim; i64 data works too.
  EXPECT_EQ(index_select(x, 2, scalar_tensor(3, DType::i64)).shape(), (Shape{2, 3}));
  EXPECT_EQ(index_select(arange(5), 0, ids({4, 1}, {2})).to_vector<int64_t>(), (std::vector<int64_t>{4, 1}));
}

TEST(IndexSelect, GradcheckRepeatedIndicesAndNonContiguous) {
  Generator g(3);
  Tensor i = ids({2, 0, 2, 3}, {4});
  for (int64_t d : {0, 1, 2}) {
    expect_gradcheck([i, d](auto& in) { return index_select(in[0], d, i); }, {leaf({4, 5, 4}, g)});
    expect_gradcheck([i, d](auto& in) { return index_select(in[0], d, i); }, {noncontig_leaf({4, 5, 4}, g)});
  }
}

TEST(IndexSelect, Errors) {
  Tensor x = zeros({2, 3});
  expect_error([&] { index_select(x, 1, ids({3}, {1})); },
               {"index_select: index 3 at position 0 is out of range for dim 1 of size 3", "(2, 3)"});
  expect_error([&] { index_select(x, 0, zeros({1})); }, {"index_select: expected an i64 index, got f32"});
  expect_error(
      [&] {
        index_select(x, 0, ids({0, 1}, {1, 2}));
      },
      {"index_select: expected a 0-d or 1-D index, got shape (1, 2)"});
  expect_error([&] { index_select(x, 2, ids({0}, {1})); }, {"index_select: dim 2 is out of range"});
  expect_error([&] { index_select(scalar_tensor(1.0), 0, ids({0}, {1})); },
               {"index_select: expected a tensor with at least 1 dim"});
}

TEST(MaskedFill, ForwardWithBroadcastMaskOfAnyDtype) {
  Tensor x = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  Tensor m_row = tensor({1.0, 0.0, 1.0});  // (3) broadcast over rows
  EXPECT_EQ(masked_fill(x, m_row, -1.0).to_vector<double>(), (std::vector<double>{-1, 2, -1, -1, 5, -1}));
  Tensor m_col = from_vector(std::vector<int64_t>{0, 7}, {2, 1});  // i64 mask, (2, 1)
  EXPECT_EQ(masked_fill(x, m_col, 0.5).to_vector<double>(), (std::vector<double>{1, 2, 3, 0.5, 0.5, 0.5}));
  // f16 mask; nan in a float mask counts as nonzero; -0 counts as zero.
  Tensor m_h = tensor({0.0, 2.0, 0.0}).to(DType::f16);
  EXPECT_EQ(masked_fill(x, m_h, 9.0).to_vector<double>(), (std::vector<double>{1, 9, 3, 4, 9, 6}));
  Tensor m_nan = tensor({NAN, -0.0, 0.0});
  EXPECT_EQ(masked_fill(x, m_nan, 9.0).to_vector<double>(), (std::vector<double>{9, 2, 3, 9, 5, 6}));
  // -inf fill (causal attention) on a non-contiguous x
  Tensor y = masked_fill(x.t(), tensor({0.0, 1.0}), -INFINITY);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1, -INFINITY, 2, -INFINITY, 3, -INFINITY}));
}

TEST(MaskedFill, GradcheckBroadcastAndNonContiguous) {
  Generator g(4);
  Tensor m = from_vector(std::vector<int64_t>{1, 0, 0, 1}, {4});
  expect_gradcheck([m](auto& in) { return masked_fill(in[0], m, 2.0); }, {leaf({3, 4}, g)});
  expect_gradcheck([m](auto& in) { return masked_fill(in[0], m, 2.0); }, {noncontig_leaf({3, 4}, g)});
  Tensor m3 = from_vector(std::vector<double>{1, 0, 1}, {3, 1});
  expect_gradcheck([m3](auto& in) { return mul(masked_fill(in[0], m3, 0.0), in[0]); }, {leaf({2, 3, 5}, g)});
}

TEST(MaskedFill, BackwardZeroesFilledPositions) {
  Tensor x = ones({2, 2}, DType::f64).requires_grad_();
  masked_fill(x, tensor({{1.0, 0.0}, {0.0, 1.0}}), 5.0).backward(full({2, 2}, 3.0, DType::f64));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 3, 3, 0}));
}

TEST(MaskedFill, Errors) {
  expect_error(
      [] {
        masked_fill(zeros({2, 3}), zeros({2}), 0.0);
      },
      {"masked_fill: shapes (2, 3) and (2) cannot be broadcast together"});
  expect_error(
      [] {
        masked_fill(zeros({3}), zeros({2, 3}), 0.0);
      },
      {"masked_fill: mask of shape (2, 3) cannot be broadcast to x's shape (3)"});
}
