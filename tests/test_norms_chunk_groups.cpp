// The fixed chunks and groups of chunks that every norm's reductions use (nn/norms/norm_common.h):
// the grouping itself, sum_over_chunks, and each norm at a size with more chunks than groups, so that a
// group adds or merges several chunks into its one partial row.
#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "nn/norms/norm_common.h"
#include "norms_test_util.h"

using namespace normtest;
using ng::norms::chunk_groups;
using ng::norms::ChunkGroups;
using ng::norms::kChunkGroups;
using ng::norms::row_chunks;
using ng::norms::RowChunks;

TEST(ChunkGroups, EveryChunkInExactlyOneGroupInOrder) {
  for (int64_t count = 1; count <= 64; ++count) {
    RowChunks chunks;
    chunks.count = count;
    const ChunkGroups g = chunk_groups(chunks);
    EXPECT_LE(g.count, kChunkGroups) << count;
    EXPECT_EQ(g.first(0), 0) << count;
    for (int64_t i = 0; i < g.count; ++i) {
      EXPECT_LT(g.first(i), g.end(i, chunks)) << count << " group " << i << " is empty";
      if (i + 1 < g.count) {
        EXPECT_EQ(g.end(i, chunks), g.first(i + 1)) << count;
      }
    }
    EXPECT_EQ(g.end(g.count - 1, chunks), count) << count;
    // Up to kChunkGroups chunks, one chunk per group (the sums are those of one row per chunk).
    if (count <= kChunkGroups) {
      EXPECT_EQ(g.per, 1) << count;
    }
  }
}

TEST(ChunkGroups, SumOverChunksAddsEveryRowOnceInAnyThreadCount) {
  // rows x n values, sums per column; 1000 rows of 600 in chunks of ~55 rows: 19 chunks, groups of 2.
  const int64_t rows = 1000, n = 600;
  const RowChunks chunks = row_chunks(rows, n);
  ASSERT_GT(chunks.count, kChunkGroups);
  std::vector<double> v(size_t(rows * n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double((i * 7919) % 1009) - 500.0;
  auto run = [&]() {
    std::vector<double> a(size_t(n), -1.0), b(size_t(n), -1.0);  // overwritten, not added to
    std::vector<int64_t> calls;
    std::mutex mu;
    ng::norms::sum_over_chunks(chunks, rows, n, a.data(), b.data(),
                               [&](int64_t r0, int64_t r1, double* pa, double* pb) {
                                 const std::lock_guard<std::mutex> lock(mu);
                                 calls.push_back(r0);
                                 for (int64_t r = r0; r < r1; ++r)
                                   for (int64_t j = 0; j < n; ++j) {
                                     pa[j] += v[size_t(r * n + j)];
                                     pb[j] += 2 * v[size_t(r * n + j)];
                                   }
                               });
    EXPECT_EQ(int64_t(calls.size()), chunks.count);
    return std::make_pair(a, b);
  };
  const auto one = with_threads(1, run), three = with_threads(3, run);
  for (int64_t j = 0; j < n; ++j) {
    double want = 0;
    for (int64_t r = 0; r < rows; ++r) want += v[size_t(r * n + j)];
    ASSERT_EQ(one.first[size_t(j)], want) << j;  // integers: exact in any order
    ASSERT_EQ(one.second[size_t(j)], 2 * want) << j;
    ASSERT_EQ(three.first[size_t(j)], want) << j;
  }
  // One output not wanted: it is left alone, and add gets a null row for it.
  std::vector<double> a(size_t(n), 0.0);
  ng::norms::sum_over_chunks(chunks, rows, n, a.data(), static_cast<double*>(nullptr),
                             [&](int64_t, int64_t, double* pa, double* pb) {
                               EXPECT_NE(pa, nullptr);
                               EXPECT_EQ(pb, nullptr);
                             });
}

// Each norm, fast against reference and 1 against 3 threads (3 does not divide the groups evenly), at
// (rows, n) with more chunks than groups.
namespace {
void expect_same(const std::vector<Tensor>& one, const std::vector<Tensor>& three, const std::string& what) {
  for (size_t i = 0; i < one.size(); ++i)
    if (one[i].defined()) {
      EXPECT_TRUE(bitwise_equal(one[i], three[i])) << what << " output " << i;
    }
}
}  // namespace

TEST(ChunkGroups, EveryNormAtManyChunksMatchesReferenceAndThreadCounts) {
  const int64_t N = 1100, C = 528;  // 580,800 values: 17 chunks of 65 rows, 9 groups (the last of 1 chunk)
  ASSERT_GT(row_chunks(N, C).count, kChunkGroups);
  for (DType dt : {DType::f32, DType::f64}) {
    Generator gen(uint64_t(dt) + 3);
    Tensor x = randn({N, C}, gen, DType::f64, 2.0, 3.0).to(dt), dy = randn({N, C}, gen, dt);
    Tensor w = randn({C}, gen, dt), b = randn({C}, gen, dt);
    const std::string d = dtype_name(dt);
    // Column sums of N = 1100 values of size ~1-10: the reference adds them in another order.
    const double sum_tol = dt == DType::f64 ? 1e-9 : 1e-3;
    const double tol = dt == DType::f64 ? 1e-10 : 1e-4;

    {  // LayerNorm
      auto run = [&](norms::Impl impl) {
        auto s = norms::layer_norm_forward(x, C, w, b, 1e-5, impl);
        auto g = norms::layer_norm_backward(dy, x, s.mean, s.rstd, w, true, true, true, impl);
        return std::vector<Tensor>{s.y, g.dx, g.dweight, g.dbias};
      };
      auto ref = run(norms::Impl::reference);
      auto one = with_threads(1, [&] { return run(norms::Impl::fast); });
      auto three = with_threads(3, [&] { return run(norms::Impl::fast); });
      expect_same(one, three, "layer_norm " + d);
      EXPECT_LE(max_abs_diff(one[1], ref[1]), tol) << "layer_norm dx " << d;
      EXPECT_LE(max_abs_diff(one[2], ref[2]), sum_tol) << "layer_norm dweight " << d;
      EXPECT_LE(max_abs_diff(one[3], ref[3]), sum_tol) << "layer_norm dbias " << d;
    }
    {  // RMSNorm
      auto run = [&](norms::Impl impl) {
        auto s = norms::rms_norm_forward(x, C, w, 1e-5, impl);
        auto g = norms::rms_norm_backward(dy, x, s.rstd, w, true, true, impl);
        return std::vector<Tensor>{s.y, g.dx, g.dweight};
      };
      auto ref = run(norms::Impl::reference);
      auto one = with_threads(1, [&] { return run(norms::Impl::fast); });
      auto three = with_threads(3, [&] { return run(norms::Impl::fast); });
      expect_same(one, three, "rms_norm " + d);
      EXPECT_LE(max_abs_diff(one[2], ref[2]), sum_tol) << "rms_norm dweight " << d;
    }
    {  // BatchNorm: the statistics merge 16 chunks (15 of 69 samples, one of 65; bn_chunks: at most 16), with
       // Chan's formula; the backward sums them
      auto run = [&](norms::Impl impl) {
        auto s = norms::batch_norm_forward(x, N, C, 1, w, b, Tensor(), Tensor(), 1e-5, impl);
        auto g = norms::batch_norm_backward(dy, x, s.mean, s.rstd, w, N, C, 1, true, true, true, true, impl);
        return std::vector<Tensor>{s.y, s.mean, s.var, g.dx, g.dweight, g.dbias};
      };
      auto ref = run(norms::Impl::reference);
      auto one = with_threads(1, [&] { return run(norms::Impl::fast); });
      auto three = with_threads(3, [&] { return run(norms::Impl::fast); });
      expect_same(one, three, "batch_norm " + d);
      EXPECT_LE(max_abs_diff(one[0], ref[0]), tol) << "batch_norm y " << d;
      EXPECT_LE(max_rel_diff(one[1], ref[1]), dt == DType::f64 ? 1e-12 : 1e-6) << "batch_norm mean " << d;
      EXPECT_LE(max_rel_diff(one[2], ref[2]), dt == DType::f64 ? 1e-12 : 1e-6) << "batch_norm var " << d;
      EXPECT_LE(max_abs_diff(one[3], ref[3]), tol) << "batch_norm dx " << d;
      EXPECT_LE(max_abs_diff(one[4], ref[4]), sum_tol) << "batch_norm dweight " << d;
      EXPECT_LE(max_abs_diff(one[5], ref[5]), sum_tol) << "batch_norm dbias " << d;
    }
    // GroupNorm: groups of 132 channels (the general path) and of 8 (the (N, C) path that batches groups)
    for (int64_t G : {4, 66}) {
      auto run = [&](norms::Impl impl) {
        auto s = norms::group_norm_forward(x, N, C, 1, G, w, b, 1e-5, impl);
        auto g = norms::group_norm_backward(dy, x, s.mean, s.rstd, w, N, C, 1, G, true, true, true, impl);
        return std::vector<Tensor>{s.y, g.dx, g.dweight, g.dbias};
      };
      auto ref = run(norms::Impl::reference);
      auto one = with_threads(1, [&] { return run(norms::Impl::fast); });
      auto three = with_threads(3, [&] { return run(norms::Impl::fast); });
      const std::string what = "group_norm G=" + std::to_string(G) + " " + d;
      expect_same(one, three, what);
      EXPECT_LE(max_abs_diff(one[1], ref[1]), tol) << what << " dx";
      EXPECT_LE(max_abs_diff(one[2], ref[2]), sum_tol) << what << " dweight";
      EXPECT_LE(max_abs_diff(one[3], ref[3]), sum_tol) << what << " dbias";
    }
  }
}
