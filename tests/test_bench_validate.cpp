// bench/validate.h: the check normgrad_bench runs on each entry before timing it. It must pass equal
// results, and name the entry, the element and both values when they differ, or when one is NaN.
#include <cmath>
#include <cstdint>
#include <vector>

#include "bench/validate.h"
#include "ops_test_util.h"

using namespace ng;
using namespace ng::testing;
using ng_bench::validate;
using ng_bench::validate_matmul;
using ng_bench::ValidationError;

namespace {
std::string validation_error(const Tensor& fast, const Tensor& ref, double tol, bool by_largest = false) {
  try {
    validate("entry", fast, ref, tol, by_largest);
  } catch (const ValidationError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(BenchValidate, PassesEqualResultsAndNamesADifference) {
  const Tensor ref = tensor({1.0, -2.0, 0.5});
  EXPECT_EQ(validation_error(tensor({1.0, -2.0, 0.5}), ref, 0), "");
  EXPECT_EQ(validation_error(tensor({1.0, -2.00001, 0.5}), ref, 1e-5), "");  // 1e-5 / 3 is within
  const std::string msg = validation_error(tensor({1.0, -2.0, 0.75}), ref, 1e-5);
  EXPECT_NE(msg.find("entry: the fast result differs from the reference by 0.166667 (relative to 1 + |ref|) "
                     "at element 2: 0.750000 against 0.500000, more than 0.000010"),
            std::string::npos)
      << msg;
  EXPECT_NE(validation_error(tensor({1.0, -2.0}), ref, 1)
                .find("entry: the fast result has shape (2), the "
                      "reference (3)"),
            std::string::npos);
}

TEST(BenchValidate, ANanAnywhereIsAMismatch) {
  const Tensor ref = tensor({1.0, 2.0, 3.0});
  // The NaN is not the last element: a later, smaller error must not hide it.
  const std::string msg = validation_error(tensor({1.0, NAN, 3.0}), ref, 1e-3);
  EXPECT_NE(msg.find("differs from the reference by nan"), std::string::npos) << msg;
  EXPECT_NE(msg.find("at element 1"), std::string::npos) << msg;
  EXPECT_NE(validation_error(ref, tensor({1.0, 2.0, NAN}), 1e-3), "");
}

// A sum that cancels to near 0 is measured against the scale of the largest value (by_largest).
TEST(BenchValidate, ByLargestScalesBySizeOfTheLargestValue) {
  const Tensor ref = tensor({100.0, 0.001}), fast = tensor({100.0, 0.0015});
  EXPECT_NE(validation_error(fast, ref, 1e-4), "");        // 5e-4 against 1 + 0.001
  EXPECT_EQ(validation_error(fast, ref, 1e-4, true), "");  // 5e-4 against 100
}

// by_largest is relative to the largest |ref|, not to 1 + it. Cross-entropy's gradient of the mean loss over
// 4096 x 1024 logits is (softmax - onehot) / 4096: -2.4e-4 at a target, 2.4e-7 typically elsewhere, 2.9e-5
// at most. Against 1 + |ref| (an absolute 1e-5) a gradient whose softmax term was 1.3 times too large
// everywhere passed normgrad_bench's validation; these are its values at a target, the largest other
// entry and a typical one.
TEST(BenchValidate, ByLargestIsRelativeToTheLargestValueNotToOne) {
  const Tensor ref = tensor({-2.4e-4, 2.9e-5, 2.4e-7}),
               softmax_term_x1_3 = tensor({-2.4e-4, 3.77e-5, 3.12e-7});
  EXPECT_EQ(validation_error(softmax_term_x1_3, ref, 1e-5), "");  // 8.7e-6 against 1 + 2.9e-5: what passed
  const std::string msg = validation_error(softmax_term_x1_3, ref, 1e-5, true);
  EXPECT_NE(msg.find("by 0.036250 (relative to the largest |ref|) at element 1"), std::string::npos) << msg;
  EXPECT_EQ(validation_error(tensor({-2.4e-4, 2.9e-5, 2.41e-7}), ref, 1e-5, true), "");  // 1e-9: 4e-6 of it
  // Every ref 0: relative to 1, not 0 / 0.
  EXPECT_EQ(validation_error(tensor({0.0, 0.0}), tensor({0.0, 0.0}), 1e-5, true), "");
  EXPECT_NE(validation_error(tensor({0.0, 1e-3}), tensor({0.0, 0.0}), 1e-5, true), "");
}

// The matmul check reaches C's last row, last column and last corner, where the GEMM's edge panels are
// (padded up to its 12- or 6-row register tile). The 256 spread places alone never went past row 972 of 1024:
// a GEMM that got the last 51 rows of C wrong passed normgrad_bench's validation.
TEST(BenchValidate, MatmulChecksTheLastRowAndColumn) {
  const int64_t M = 1024, N = 64, K = 8;
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      // op(A)[i, k] and op(B)[k, j], stored as ta and tb say; C by dot products in double.
      const int64_t lda = ta ? M : K, ldb = tb ? K : N;
      std::vector<float> A(size_t(M * K)), B(size_t(K * N)), C(size_t(M * N));
      for (size_t i = 0; i < A.size(); ++i) A[i] = float(int(i % 13) - 6) * 0.01f;
      for (size_t i = 0; i < B.size(); ++i) B[i] = float(int(i % 7) - 3) * 0.01f;
      for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) {
          double dot = 0;
          for (int64_t k = 0; k < K; ++k)
            dot +=
                double(A[size_t(ta ? k * lda + i : i * lda + k)]) * B[size_t(tb ? j * ldb + k : k * ldb + j)];
          C[size_t(i * N + j)] = float(dot);
        }
      }
      const std::string form = std::string(ta ? "T" : "N") + (tb ? "T" : "N");
      EXPECT_NO_THROW(validate_matmul(form, ta, tb, M, N, K, A.data(), lda, B.data(), ldb, C.data(), N))
          << form;

      std::vector<float> wrong_last_row = C, wrong_last_column = C, wrong_corner = C;
      for (int64_t j = 0; j < N; ++j) wrong_last_row[size_t((M - 1) * N + j)] += 1;
      for (int64_t i = 0; i < M; ++i) wrong_last_column[size_t(i * N + N - 1)] += 1;
      wrong_corner.back() += 1;
      std::string msg;
      try {
        validate_matmul(form, ta, tb, M, N, K, A.data(), lda, B.data(), ldb, wrong_last_row.data(), N);
      } catch (const ValidationError& e) {
        msg = e.what();
      }
      EXPECT_NE(msg.find(form + ": C[1023, "), std::string::npos) << msg;
      EXPECT_THROW(
          validate_matmul(form, ta, tb, M, N, K, A.data(), lda, B.data(), ldb, wrong_last_column.data(), N),
          ValidationError)
          << form;
      EXPECT_THROW(
          validate_matmul(form, ta, tb, M, N, K, A.data(), lda, B.data(), ldb, wrong_corner.data(), N),
          ValidationError)
          << form;
    }
  }
}
