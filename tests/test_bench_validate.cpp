// bench/validate.h: the check normgrad_bench runs on each entry before timing it. It must pass equal
// results, and name the entry, the element and both values when they differ, or when one is NaN.
#include <cmath>

#include "bench/validate.h"
#include "ops_test_util.h"

using namespace ng;
using namespace ng::testing;
using ng_bench::validate;
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
  EXPECT_EQ(validation_error(fast, ref, 1e-4, true), "");  // 5e-4 against 1 + 100
}
