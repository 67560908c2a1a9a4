// The fast GEMM (tensor/kernels/gemm.cpp) against the three-loop reference (gemm_naive.cpp).
//
// The fast kernel packs panels of MR rows and NR columns (12 x 32 for f32 on AVX-512, 6 x 16 on AVX2),
// blocks K by up to 256 and pads every edge with zeros. So the shapes below straddle those numbers:
// 1, odd sizes, MR +- 1, NR +- 1, K just over one k-block, and leading dimensions larger than the
// matrix, with sentinel values in the padding that must survive.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "hwy/targets.h"
#include "normgrad.h"
#include "simd_targets.h"
#include "tensor/kernels/gemm.h"
#include "tensor/sanitizer.h"  // NG_ASAN, NG_TSAN

using namespace ng;

namespace {

constexpr double kSentinel = 12345.0;  // written into the ld padding of C; must come back unchanged

template <typename T>
struct Problem {
  bool ta = false, tb = false;
  int64_t M = 0, N = 0, K = 0, lda = 0, ldb = 0, ldc = 0;
  std::vector<T> A, B, C;
};

// Random A, B (values in [-1, 1]) and a C with random values inside and sentinels in the ld padding.
template <typename T>
Problem<T> make_problem(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t pad, uint32_t seed) {
  Problem<T> p;
  p.ta = ta, p.tb = tb, p.M = M, p.N = N, p.K = K;
  const int64_t a_rows = ta ? K : M, a_cols = ta ? M : K;
  const int64_t b_rows = tb ? N : K, b_cols = tb ? K : N;
  p.lda = a_cols + pad, p.ldb = b_cols + pad, p.ldc = N + pad;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  p.A.resize(size_t(std::max<int64_t>(1, a_rows * p.lda)));
  p.B.resize(size_t(std::max<int64_t>(1, b_rows * p.ldb)));
  p.C.resize(size_t(std::max<int64_t>(1, M * p.ldc)));
  for (auto& x : p.A) x = T(u(rng));
  for (auto& x : p.B) x = T(u(rng));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < p.ldc; ++j) p.C[size_t(i * p.ldc + j)] = j < N ? T(u(rng)) : T(kSentinel);
  return p;
}

template <typename T>
std::vector<T> run_fast(const Problem<T>& p, bool accumulate) {
  std::vector<T> C = p.C;
  gemm(p.ta, p.tb, p.M, p.N, p.K, p.A.data(), p.lda, p.B.data(), p.ldb, C.data(), p.ldc, accumulate);
  return C;
}

// The rows of C that get a naive reference: all of them, except under ThreadSanitizer. There every load of
// the naive triple loop is instrumented, and the reference took two thirds of test_gemm's time (16 of 24 s
// for SplitByKMatchesNaiveAndOneThread); that build is run for races in the fast kernel, which still computes
// every row. So it checks every 7th row and the last one against the reference, and the ld padding of every
// row; the release and ASan builds check every row.
#if defined(NG_TSAN)
constexpr int64_t kReferenceRowStride = 7;
#else
constexpr int64_t kReferenceRowStride = 1;
#endif

bool has_reference(int64_t i, int64_t M) {
  return i % kReferenceRowStride == 0 || i == M - 1;
}

// The naive result in the rows has_reference picks (the other rows keep p.C). One row of C is an M = 1
// product: row i of op(A) starts at A + i * lda, or at A + i when A is transposed.
template <typename T>
std::vector<T> run_naive(const Problem<T>& p, bool accumulate) {
  std::vector<T> C = p.C;
  if (kReferenceRowStride == 1) {
    gemm_naive<T>(p.ta, p.tb, p.M, p.N, p.K, p.A.data(), p.lda, p.B.data(), p.ldb, C.data(), p.ldc,
                  accumulate);
    return C;
  }
  for (int64_t i = 0; i < p.M; ++i)
    if (has_reference(i, p.M))
      gemm_naive<T>(p.ta, p.tb, 1, p.N, p.K, p.A.data() + (p.ta ? i : i * p.lda), p.lda, p.B.data(), p.ldb,
                    C.data() + i * p.ldc, p.ldc, accumulate);
  return C;
}

// Compares the fast and naive results element by element. The naive one sums in double; the fast one
// in T with FMA, so the difference is bounded by about K * eps(T) * max |a b| (|a|, |b| <= 1 here).
template <typename T>
void expect_close(const Problem<T>& p, bool accumulate, const std::string& what) {
  const std::vector<T> fast = run_fast(p, accumulate), ref = run_naive(p, accumulate);
  const double tol = 4.0 * double(std::numeric_limits<T>::epsilon()) * double(p.K + 2);
  int bad = 0;
  for (int64_t i = 0; i < p.M && bad < 5; ++i) {
    for (int64_t j = 0; j < p.ldc && bad < 5; ++j) {
      const size_t at = size_t(i * p.ldc + j);
      if (j >= p.N) {
        if (fast[at] != T(kSentinel)) {
          ADD_FAILURE() << what << ": wrote into the ld padding at (" << i << ", " << j << ")";
          ++bad;
        }
        continue;
      }
      if (has_reference(i, p.M) && !(std::abs(double(fast[at]) - double(ref[at])) <= tol)) {
        ADD_FAILURE() << what << ": C(" << i << ", " << j << ") = " << fast[at] << ", reference " << ref[at]
                      << ", tolerance " << tol;
        ++bad;
      }
    }
  }
}

// run_fast on `threads` threads gives exactly the bits of `want` (a run on another thread count).
template <typename T>
void expect_bits_on_threads(int threads, const Problem<T>& p, bool accumulate, const std::vector<T>& want,
                            const std::string& what) {
  set_num_threads(threads);
  const std::vector<T> got = run_fast(p, accumulate);
  EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(T)))
      << what << ", " << threads << " threads";
}

std::string describe(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t pad, bool acc) {
  return std::string(ta ? "T" : "N") + (tb ? "T" : "N") + " M=" + std::to_string(M) +
         " N=" + std::to_string(N) + " K=" + std::to_string(K) + " pad=" + std::to_string(pad) +
         (acc ? " accumulate" : "");
}

template <typename T>
void sweep_shapes(const std::vector<int64_t>& Ms, const std::vector<int64_t>& Ns,
                  const std::vector<int64_t>& Ks) {
  uint32_t seed = 1;
  for (int form = 0; form < 4; ++form) {
    const bool ta = form & 1, tb = form & 2;
    for (int64_t M : Ms)
      for (int64_t N : Ns)
        for (int64_t K : Ks) {
          const int64_t pad = (M + N + K) % 3;  // 0, 1 or 2 extra columns in lda, ldb and ldc
          const bool acc = (M + N) % 2 == 1;
          auto p = make_problem<T>(ta, tb, M, N, K, pad, seed++);
          expect_close(p, acc, describe(ta, tb, M, N, K, pad, acc));
        }
  }
}

}  // namespace

TEST(Gemm, F32MatchesNaiveOnSmallAndOddShapesInAllForms) {
  sweep_shapes<float>({1, 2, 5, 11, 12, 13, 25}, {1, 3, 15, 16, 17, 31, 32, 33, 47}, {1, 2, 7, 64});
}

TEST(Gemm, F64MatchesNaiveOnSmallAndOddShapesInAllForms) {
  sweep_shapes<double>({1, 3, 6, 7, 12, 13}, {1, 5, 8, 9, 15, 16, 17, 33}, {1, 3, 64});
}

TEST(Gemm, MatchesNaiveAcrossKBlocksAndMacroTiles) {
  // K over one, two and three k-blocks (kc <= 1024), M and N over several panels and macro-tiles.
  sweep_shapes<float>({1, 37, 64}, {70, 300}, {1025, 2100});
  sweep_shapes<double>({29, 100}, {33, 300}, {1030});
}

TEST(Gemm, EverySimdTargetMatchesNaive) {
  // The dispatch picks the widest target; force the others too (AVX-512: 12 x 32 tiles, AVX2 and SSE4:
  // 6 x 16 and 6 x 8).
  const int tested = ng::testing::for_each_target([] {
    sweep_shapes<float>({1, 7, 13}, {5, 17, 40}, {3, 1030});
    sweep_shapes<double>({6, 13}, {9, 33}, {5});
  });
  EXPECT_GE(tested, 2) << "expected at least SSE4 and one wider target on x86";
}

TEST(Gemm, MatchesNaiveWithLargeLeadingDimensions) {
  for (int form = 0; form < 4; ++form) {
    const bool ta = form & 1, tb = form & 2;
    auto p = make_problem<float>(ta, tb, 45, 70, 300, 19, 99 + form);
    expect_close(p, false, describe(ta, tb, 45, 70, 300, 19, false));
    expect_close(p, true, describe(ta, tb, 45, 70, 300, 19, true));
  }
}

TEST(Gemm, AccumulateAddsToExistingC) {
  // Small integers: every product and sum is exact in f32, so fast and naive must agree bitwise.
  const int64_t M = 13, N = 35, K = 300;
  std::vector<float> A(size_t(M * K)), B(size_t(K * N)), C(size_t(M * N)), C2;
  for (size_t i = 0; i < A.size(); ++i) A[i] = float(int(i % 7) - 3);
  for (size_t i = 0; i < B.size(); ++i) B[i] = float(int(i % 5) - 2);
  for (size_t i = 0; i < C.size(); ++i) C[i] = float(i % 11);
  C2 = C;
  std::vector<float> C_ref = C;
  gemm(false, false, M, N, K, A.data(), K, B.data(), N, C.data(), N, true);
  gemm_naive<float>(false, false, M, N, K, A.data(), K, B.data(), N, C_ref.data(), N, true);
  EXPECT_EQ(0, std::memcmp(C.data(), C_ref.data(), C.size() * sizeof(float)));
  // Accumulating twice equals the old C plus twice the product.
  gemm(false, false, M, N, K, A.data(), K, B.data(), N, C.data(), N, true);
  for (size_t i = 0; i < C.size(); ++i) ASSERT_EQ(C[i], 2 * C_ref[i] - C2[i]) << "at " << i;
}

TEST(Gemm, EmptyKGivesZeroOrLeavesCUnchanged) {
  std::vector<float> A(1), B(1), C(6, 3.0f);
  gemm(false, false, 2, 3, 0, A.data(), 1, B.data(), 3, C.data(), 3, true);
  for (float c : C) EXPECT_EQ(c, 3.0f);
  gemm(false, false, 2, 3, 0, A.data(), 1, B.data(), 3, C.data(), 3, false);
  for (float c : C) EXPECT_EQ(c, 0.0f);
}

TEST(Gemm, MatchesNaiveAcrossPackedBSuperblocks) {
  // op(B) wider than the packed-B buffer holds for all k-blocks at once (8 MiB): 65 panels x kc 700 is
  // ~5.8 MiB per k-block, so K = 2100 runs as three superblocks, each packed in bands of rows (the last
  // band of each k-block short) with the write prefetch running past its block.
  sweep_shapes<float>({1, 13}, {2049}, {2100});
  sweep_shapes<double>({5}, {1030}, {2100});
}

TEST(Gemm, OneTwoAndThreeThreadsAreBitwiseEqual) {
  // Big enough to use every thread and several k-blocks; every form, f32 and f64.
  const int before = num_threads();
  for (int form = 0; form < 4; ++form) {
    const bool ta = form & 1, tb = form & 2;
    auto p32 = make_problem<float>(ta, tb, 203, 301, 611, 3, 7 + form);
    auto p64 = make_problem<double>(ta, tb, 97, 130, 530, 1, 17 + form);
    set_num_threads(1);
    const auto f1 = run_fast(p32, true);
    const auto d1 = run_fast(p64, false);
    const std::string f32 = "f32 form " + std::to_string(form), f64 = "f64 form " + std::to_string(form);
    expect_bits_on_threads(2, p32, true, f1, f32);
    expect_bits_on_threads(2, p64, false, d1, f64);
    // 3 threads, and a taller C: 1000 rows are 84 A-panels, in 17 rows of tiles of up to 5 panels that
    // become 18 for 2 threads and 21 (4 panels each, the least a tile takes where every thread has 4) for
    // 3: the rows of tiles are rounded up to a multiple of the thread count and the panels spread over
    // them. (The 203 rows above are 17 A-panels: 1 per tile before that minimum, 4 since.) Different
    // tiles; the same bits.
    expect_bits_on_threads(3, p32, true, f1, f32);
    expect_bits_on_threads(3, p64, false, d1, f64);
    auto tall = make_problem<float>(ta, tb, 1000, 70, 90, 2, 27 + form);
    set_num_threads(1);
    const auto tall1 = run_fast(tall, false);
    for (int t = 2; t <= 3; ++t)
      expect_bits_on_threads(t, tall, false, tall1, "f32 1000 rows, form " + std::to_string(form));
    expect_close(tall, false, "1000 rows, 3 threads, form " + std::to_string(form));
  }
  set_num_threads(before);
}

TEST(Gemm, FarPrefetchLayoutMatchesNaiveAndAgreesAcrossThreads) {
  // Where op(B)'s k-block outgrows the L2 budget (over 1 MiB), GemmT switches to the micro-kernel that
  // prefetches the next sweep's B-panels, whose row-major A-panels have a fixed row stride (kFarArs)
  // instead of kc + 4: the packing and the kernel must agree on it. f32 K = 1030 (two k-blocks of 515)
  // and N = 1100 (35 B-panels, the last one 12 columns wide): 2.3 MiB per k-block, several sweeps per
  // tile; M = 100 is 9 A-panels, the last with 4 rows. f64 the same way at N = 530. Every form, with ld
  // padding, on 1, 2 and 3 threads (the same bits: the prefetch moves no sum).
  const int before = num_threads();
  for (int form = 0; form < 4; ++form) {
    const bool ta = form & 1, tb = form & 2;
    auto p32 = make_problem<float>(ta, tb, 100, 1100, 1030, 2, 61 + form);
    auto p64 = make_problem<double>(ta, tb, 100, 530, 1030, 1, 71 + form);
    set_num_threads(2);
    expect_close(p32, form % 2 == 1, describe(ta, tb, 100, 1100, 1030, 2, form % 2 == 1));
    expect_close(p64, false, describe(ta, tb, 100, 530, 1030, 1, false) + " f64");
    const auto f2 = run_fast(p32, true);
    const auto d2 = run_fast(p64, false);
    for (int t : {1, 3}) {
      expect_bits_on_threads(t, p32, true, f2, "f32 form " + std::to_string(form));
      expect_bits_on_threads(t, p64, false, d2, "f64 form " + std::to_string(form));
    }
  }
  set_num_threads(before);
}

TEST(Gemm, SplitByKMatchesNaiveAndOneThread) {
  // The weight-gradient form (op(A) transposed) with two k-blocks runs split by k on two threads: each
  // thread one k-block over all of C, thread 1 into a partial that is then added to C. It must give the
  // naive result, write nothing into C's ld padding, and give one thread's bits. K = 600 and 1024 have two
  // k-blocks because of the form (kSplitKMin), K = 2000 because of kKcMax; K = 300 has one (not split).
  const int before = num_threads();
  const int64_t shapes[][3] = {{256, 768, 1024}, {37, 45, 600}, {100, 33, 2000}, {130, 70, 300}};
  for (int tb = 0; tb < 2; ++tb) {
    for (const auto& s : shapes) {
      for (bool acc : {false, true}) {
        auto p = make_problem<float>(true, tb, s[0], s[1], s[2], 3, 41 + uint32_t(s[2]));
        set_num_threads(2);
        expect_close(p, acc, describe(true, tb, s[0], s[1], s[2], 3, acc));
        expect_bits_on_threads(1, p, acc, run_fast(p, acc), describe(true, tb, s[0], s[1], s[2], 3, acc));
      }
    }
  }
  auto p = make_problem<double>(true, false, 90, 50, 700, 1, 5);
  set_num_threads(2);
  expect_close(p, true, describe(true, false, 90, 50, 700, 1, true) + " f64");
  // A C over 8 MiB is not split by k (no partial copy of it), but keeps the two k-blocks: 1 and 2 threads
  // still agree.
  auto big = make_problem<float>(true, false, 2048, 1100, 1024, 0, 6);
  const auto big2 = run_fast(big, true);
  set_num_threads(1);
  const auto big1 = run_fast(big, true);
  EXPECT_EQ(0, std::memcmp(big1.data(), big2.data(), big1.size() * sizeof(float))) << "2048 x 1100, K 1024";
  set_num_threads(before);
}

TEST(Gemm, MatmulOnTransposedViewsUsesTheFastKernelCorrectly) {
  // The Tensor-level entry point: transposed views go to the GEMM as NT / TN / TT forms.
  Generator g(5);
  Tensor a = randn({70, 45}, g), b = randn({33, 70}, g);
  Tensor fast = matmul(a.t(), b.t());  // (45, 70) @ (70, 33): TT
  Tensor ref = matmul_naive(a.t().contiguous(), b.t().contiguous());
  auto x = fast.to_vector<double>(), y = ref.to_vector<double>();
  ASSERT_EQ(x.size(), size_t(45 * 33));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], 1e-4) << "at " << i;
}

TEST(Gemm, BatchedEqualsOneGemmPerItemBitwise) {
  // Small items (run in parallel over the batch) and large ones (run one by one on all threads), with a
  // broadcast operand (offset 0 for every item), in NT form as attention's q k^T.
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{64, 64, 64}, {33, 17, 9}, {300, 260, 270}}) {
    const int64_t batch = 5;
    auto p = make_problem<float>(false, true, M * batch, N, K, 0, 11);  // A: batch items stacked by rows
    std::vector<int64_t> a_off(batch), b_off(batch, 0);
    for (int64_t b = 0; b < batch; ++b) a_off[size_t(b)] = b * M * K;
    std::vector<float> C1(size_t(batch * M * N)), C2(size_t(batch * M * N));
    gemm_batched(false, true, batch, M, N, K, p.A.data(), a_off.data(), K, p.B.data(), b_off.data(), K,
                 C1.data(), M * N, N, false);
    for (int64_t b = 0; b < batch; ++b)
      gemm(false, true, M, N, K, p.A.data() + a_off[size_t(b)], K, p.B.data(), K, C2.data() + b * M * N, N,
           false);
    EXPECT_EQ(0, std::memcmp(C1.data(), C2.data(), C1.size() * sizeof(float))) << M << "x" << N << "x" << K;
  }
}

// Under AddressSanitizer the micro-kernel is not instrumented (it would be 20x slower); it checks its
// panels and its rows of C once per call instead (gemm.cpp, "Sanitizer builds"). This shows that check is
// live: a C one float too short makes the last row's store reach past the allocation, and ASan must stop
// the program with the micro-kernel's report rather than let the write through. Only in sanitizer builds
// (in a release build the same call would be a silent overflow, so it is not made there).
#if defined(NG_ASAN)
TEST(Gemm, SanitizerBuildCatchesAnOverflowInTheMicroKernel) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const int64_t M = 7, N = 5, K = 3;
  std::vector<float> A(size_t(M * K), 1.0f), B(size_t(K * N), 1.0f);
  EXPECT_DEATH(
      {
        std::vector<float> C(size_t(M * N - 1));
        gemm(false, false, M, N, K, A.data(), K, B.data(), N, C.data(), N, false);
      },
      "gemm micro-kernel\\): row of C");
}
#else
TEST(Gemm, SanitizerBuildCatchesAnOverflowInTheMicroKernel) {
  GTEST_SKIP() << "needs the asan preset (bash scripts/asan.sh)";
}
#endif
