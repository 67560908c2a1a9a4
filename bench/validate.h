// Validation before timing (STYLE.md, item 9): normgrad_bench checks each entry's fast result against a
// reference on the entry's own inputs before it times it (the norms', softmax's and cross-entropy's against
// their scalar reference loops, the matmul's against dot products in double at sampled places of C, Adam's
// first step against its formula, the fused add + LayerNorm against the unfused pair). A mismatch ends the
// run (exit 3), so that no figure is ever printed for a kernel that computes something else. Tested in
// tests/test_bench_validate.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace ng_bench {

struct ValidationError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Worst |fast - ref| / (1 + |ref|) over every element, against tol; a NaN in either is a mismatch.
//
// by_largest: the error is taken relative to the largest |ref| instead (1 where every ref is 0), the scale
// of the whole result. For a sum over many rows (dweight, dbias), which may cancel to near 0 where its terms
// do not, and for a result whose values are all far below 1 (softmax's probabilities, cross-entropy's
// gradient of the mean loss, ~1e-7 per element at 4096 rows), where the 1 of 1 + |ref| would let through
// errors many times the values themselves.
inline void validate(const std::string& what, const ng::Tensor& fast, const ng::Tensor& ref, double tol,
                     bool by_largest = false) {
  if (!ref.defined() && !fast.defined()) return;
  if (fast.defined() != ref.defined() || fast.shape() != ref.shape())
    throw ValidationError(what + ": the fast result has shape " +
                          (fast.defined() ? ng::shape_str(fast.shape()) : "(undefined)") +
                          ", the reference " + (ref.defined() ? ng::shape_str(ref.shape()) : "(undefined)"));
  const std::vector<double> f = fast.to_vector<double>(), r = ref.to_vector<double>();
  double largest = 0;
  for (double v : r) largest = std::max(largest, std::abs(v));
  const double whole_scale = largest > 0 ? largest : 1;  // by_largest's
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const double e = std::abs(f[i] - r[i]) / (by_largest ? whole_scale : 1 + std::abs(r[i]));
    if (std::isnan(e)) {
      worst = e, at = i;
      break;
    }
    if (e > worst) worst = e, at = i;
  }
  if (!(worst <= tol))
    throw ValidationError(what + ": the fast result differs from the reference by " + std::to_string(worst) +
                          (by_largest ? " (relative to the largest |ref|)" : " (relative to 1 + |ref|)") +
                          " at element " + std::to_string(at) + ": " + std::to_string(f[at]) + " against " +
                          std::to_string(r[at]) + ", more than " + std::to_string(tol));
}

// C (M x N, row stride ldc) = op(A) op(B), op(A) M x K, op(B) K x N (A, B stored transposed where ta, tb
// say), against dot products in double at sampled places of C: |C - dot| <= 1e-5 sum |a b|. The places:
// 256 spread over C, then the last row and the last column, 16 places each, their shared corner among them.
// The edge panels, which the GEMM pads up to its register tile (12 or 6 rows: 4 rows of C's 1024 are in the
// last one), need places of their own: the spread ones never went past row 972 of 1024 (or 1928 of 2048).
inline void validate_matmul(const std::string& what, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                            const float* A, int64_t lda, const float* B, int64_t ldb, const float* C,
                            int64_t ldc) {
  std::vector<std::pair<int64_t, int64_t>> places;  // (i, j)
  for (int64_t q = 0; q < 256; ++q) places.push_back({(q * 7919) % M, (q * 104729 + q / 7) % N});
  for (int64_t q = 0; q < 16; ++q) {
    places.push_back({M - 1, N - 1 - (q * 104729) % N});  // q = 0: the last corner
    places.push_back({M - 1 - (q * 7919) % M, N - 1});
  }
  for (const auto& place : places) {
    const int64_t i = place.first, j = place.second;
    double dot = 0, mag = 0;
    for (int64_t k = 0; k < K; ++k) {
      const double a = A[size_t(ta ? k * lda + i : i * lda + k)],
                   b = B[size_t(tb ? j * ldb + k : k * ldb + j)];
      dot += a * b;
      mag += std::abs(a * b);
    }
    const double got = C[size_t(i * ldc + j)];
    if (!(std::abs(got - dot) <= 1e-5 * mag + 1e-30))
      throw ValidationError(what + ": C[" + std::to_string(i) + ", " + std::to_string(j) + "] = " +
                            std::to_string(got) + ", its dot product in double is " + std::to_string(dot));
  }
}

}  // namespace ng_bench
