// plot::Axis: tick selection and value -> position mapping. See axis.h.
#include "plot/axis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tensor/error.h"

namespace ng::plot {

double Axis::unit(double v) const {
  if (scale == Scale::Log) return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
  return (v - lo) / (hi - lo);
}

double nice_step(double span, int target) {
  double raw = span / double(std::max(target, 1));
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double fraction = raw / magnitude;  // in [1, 10)
  double nice = fraction <= 1.0 ? 1.0 : fraction <= 2.0 ? 2.0 : fraction <= 5.0 ? 5.0 : 10.0;
  return nice * magnitude;
}

namespace {

// Near the ends of the doubles the padded, rounded ends overflow (a span of [-1e308, 1e308]) or underflow
// to 0 (a log axis from 1e-320): the axis would be NaN, and its tick loop run away. Checked before the ticks.
void check_ends(double a_lo, double a_hi, double lo, double hi, bool log, const char* op) {
  NG_CHECK(std::isfinite(a_lo) && std::isfinite(a_hi) && a_lo < a_hi && (!log || a_lo > 0), op,
           "cannot make an axis for the values [", lo, ", ", hi,
           "]: its padded ends are not finite doubles (values too large or too small to plot)");
}

// Ends within 1e-9 of each other, relative to their size, are drawn as one value: a range of a few ulps
// (1 and 1.0000000000000002, a loss that did not move but for rounding) has no readable ticks, and a tick
// step under half an ulp of the ends never moved a tick loop along (the log axis's loop ran until memory
// ran out).
bool nearly_equal(double lo, double hi) {
  return hi - lo <= 1e-9 * std::max(std::abs(lo), std::abs(hi));
}

Axis linear_axis(double lo, double hi, int target, const char* op) {
  const double lo0 = lo, hi0 = hi;
  if (nearly_equal(lo, hi)) {
    lo = hi = 0.5 * lo + 0.5 * hi;
    double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  double step = nice_step(hi - lo, target);
  Axis a;
  a.scale = Scale::Linear;
  a.lo = std::floor(lo / step + 1e-9) * step;
  a.hi = std::ceil(hi / step - 1e-9) * step;
  check_ends(a.lo, a.hi, lo0, hi0, false, op);
  NG_CHECK(std::isfinite((a.hi - a.lo) / step), op, "cannot make an axis for the values [", lo0, ", ", hi0,
           "]: its padded ends are not finite doubles (values too large or too small to plot)");
  long n = std::lround((a.hi - a.lo) / step);
  for (long i = 0; i <= n; ++i) {
    double t = a.lo + double(i) * step;
    if (std::abs(t) < step * 1e-9) t = 0;  // no "-0" or "1e-17" from rounding
    a.ticks.push_back(t);
  }
  return a;
}

Axis log_axis(double lo, double hi, int target, const char* op) {
  const double lo0 = lo, hi0 = hi;
  if (nearly_equal(lo, hi)) {
    lo = hi = std::sqrt(lo) * std::sqrt(hi);  // the geometric middle
    lo /= 2;
    hi *= 2;
  }
  // Pad by 5% of the span in log space, so the extreme points are not on the frame.
  double l0 = std::log10(lo), l1 = std::log10(hi);
  double pad = 0.05 * (l1 - l0);
  Axis a;
  a.scale = Scale::Log;
  a.lo = std::pow(10.0, l0 - pad);
  a.hi = std::pow(10.0, l1 + pad);
  check_ends(a.lo, a.hi, lo0, hi0, true, op);
  int d0 = int(std::floor(std::log10(a.lo))), d1 = int(std::ceil(std::log10(a.hi)));
  // Decades; thin them out when there are many (every 2nd, 3rd, ... power of ten).
  int decades = d1 - d0;
  int every = std::max(1, (decades + target - 1) / std::max(target, 1));
  auto collect = [&](const std::vector<double>& mantissas) {
    std::vector<double> ticks;
    for (int d = d0; d <= d1; ++d) {
      if (mantissas.size() == 1 && (d % every) != 0) continue;
      for (double m : mantissas) {
        double t = m * std::pow(10.0, d);
        if (t >= a.lo * (1 - 1e-12) && t <= a.hi * (1 + 1e-12)) ticks.push_back(t);
      }
    }
    return ticks;
  };
  a.ticks = collect({1.0});
  if (a.ticks.size() < 3) a.ticks = collect({1.0, 2.0, 5.0});
  if (a.ticks.size() < 3) {
    // Less than a decade: evenly stepped "nice" values (e.g. 3, 4, 5, 6 ... on a 2.6 .. 10 axis).
    // Each tick is its index times the step (never a running sum), inside the axis up to a billionth of a
    // step.
    double step = nice_step(a.hi - a.lo, target);
    a.ticks.clear();
    const double first = std::ceil(a.lo / step - 1e-9), last = std::floor(a.hi / step + 1e-9);
    for (double i = first; i <= last; ++i) a.ticks.push_back(i * step);
  }
  return a;
}

}  // namespace

Axis make_axis(Scale scale, double lo, double hi, int target, const char* op) {
  NG_CHECK(std::isfinite(lo) && std::isfinite(hi), op, "axis range must be finite, got [", lo, ", ", hi, "]");
  NG_CHECK(lo <= hi, op, "axis range is reversed: [", lo, ", ", hi, "]");
  NG_CHECK(scale != Scale::Log || lo > 0, op, "a log axis needs positive values, got ", lo);
  return scale == Scale::Log ? log_axis(lo, hi, target, op) : linear_axis(lo, hi, target, op);
}

std::string format_tick(double v, Scale scale) {
  char buf[32];
  double a = std::abs(v);
  if (v == 0) return "0";
  if (scale == Scale::Log && (a < 1e-2 || a >= 1e4)) {
    std::snprintf(buf, sizeof(buf), "%.0e", v);  // decades: "1e-05"
    // strtod, not stod: "1e-310" (subnormal) and "2e+308" (overflow) are out of stod's range and throw
    double back = std::strtod(buf, nullptr);
    if (std::abs(back - v) > 1e-9 * a) std::snprintf(buf, sizeof(buf), "%.1e", v);
    return buf;
  }
  if (a >= 1e5 || a < 1e-3) {
    std::snprintf(buf, sizeof(buf), "%.2g", v);
    return buf;
  }
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::vector<std::string> tick_labels(const std::vector<double>& ticks, Scale scale) {
  std::vector<std::string> out;
  for (double t : ticks) out.push_back(format_tick(t, scale));
  auto distinct = [&] {
    for (size_t i = 1; i < out.size(); ++i)
      if (out[i] == out[i - 1]) return false;
    return true;
  };
  for (int digits = 3; digits <= 17 && !distinct(); ++digits)
    for (size_t i = 0; i < ticks.size(); ++i) {
      char buf[40];
      std::snprintf(buf, sizeof(buf), "%.*g", digits, ticks[i]);
      out[i] = ticks[i] == 0 ? "0" : buf;
    }
  return out;
}

}  // namespace ng::plot
