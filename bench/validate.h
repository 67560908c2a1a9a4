// Validation before timing (STYLE.md, item 9): normgrad_bench checks each entry's fast result against a
// reference on the entry's own inputs before it times it (the norms', softmax's and cross-entropy's against
// their scalar reference loops, the matmul's against dot products in double at sampled places of C, Adam's
// first step against its formula). A mismatch ends the run (exit 3), so that no figure is ever printed for
// a kernel that computes something else. Tested in tests/test_bench_validate.cpp.
#pragma once

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace ng_bench {

struct ValidationError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Worst |fast - ref| / (1 + |ref|) over every element, against tol; a NaN in either is a mismatch. A sum
// over many rows (dweight, dbias) may cancel to near 0 where its terms do not: there the error is taken
// relative to 1 + the largest |ref| (by_largest), the scale its rounding has.
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
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const double e = std::abs(f[i] - r[i]) / (1 + (by_largest ? largest : std::abs(r[i])));
    if (std::isnan(e)) {
      worst = e, at = i;
      break;
    }
    if (e > worst) worst = e, at = i;
  }
  if (!(worst <= tol))
    throw ValidationError(what + ": the fast result differs from the reference by " + std::to_string(worst) +
                          (by_largest ? " (relative to 1 + the largest |ref|)" : " (relative to 1 + |ref|)") +
                          " at element " + std::to_string(at) + ": " + std::to_string(f[at]) + " against " +
                          std::to_string(r[at]) + ", more than " + std::to_string(tol));
}

}  // namespace ng_bench
