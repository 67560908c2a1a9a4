// A CLI11 check for a floating-point flag: a finite number within [lo, hi].
//
// CLI::Range alone lets NaN through: it refuses a value only when `v < lo || v > hi`, and every comparison
// with NaN is false. So `--lr-scale nan` passed it and failed later, as an optimizer error with exit status
// 1, and `normgrad_bench --norm-mean nan` ran the whole benchmark on NaN inputs. Header-only, so that the
// benchmarks (bench/) use it too.
#pragma once

#include <CLI/CLI.hpp>
#include <cmath>
#include <string>

namespace ng::examples {

inline CLI::Validator FiniteRange(double lo, double hi) {
  const std::string range = "[" + CLI::detail::to_string(lo) + " - " + CLI::detail::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return "Value " + text + " is not a number";
        if (!std::isfinite(v) || v < lo || v > hi)
          return "Value " + text + " is not a finite number in " + range;
        return std::string();
      },
      "FLOAT in " + range);
}

}  // namespace ng::examples
