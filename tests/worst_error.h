// The running worst error of a comparison, kept NaN-aware. `worst = std::max(worst, err)` drops a NaN err
// (max(a, b) is `a < b ? b : a`, and `a < NaN` is false), so a kernel writing NaN would pass an
// EXPECT_LT(worst, tol). Here a NaN err makes the worst NaN, and it stays NaN: every EXPECT_LT then fails.
#pragma once

#include <cmath>

namespace ng::test {

inline double worse(double worst, double err) {
  if (std::isnan(worst)) return worst;
  return std::isnan(err) || err > worst ? err : worst;
}

}  // namespace ng::test
