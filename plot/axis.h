// plot::Axis: maps data values to a [0, 1] position along an axis, and chooses the tick marks.
//
// Linear axis: ticks at "nice" steps 1, 2 or 5 times a power of ten, about `target` of them, and the range
// widened to whole steps, so the first and last ticks sit on the frame.
//   unit(v) = (v - lo) / (hi - lo)
// Log axis (base 10): ticks at the powers of ten inside the range; when the range spans less than two
// decades, 2x and 5x are added; inside a single decade the ticks are evenly stepped nice values instead,
// so there are always a few labels.
//   unit(v) = (log10 v - log10 lo) / (log10 hi - log10 lo)
// A log axis needs positive data: make_axis refuses anything else, naming the offending value.
#pragma once

#include <string>
#include <vector>

namespace ng::plot {

enum class Scale { Linear, Log };

struct Axis {
  Scale scale = Scale::Linear;
  double lo = 0, hi = 1;
  std::vector<double> ticks;

  double unit(double v) const;  // 0 at lo, 1 at hi (values outside map outside [0, 1])
};

// Axis covering [data_lo, data_hi] (finite; for Log both > 0). Equal ends get a small range around them.
// `op` names the caller in error messages.
Axis make_axis(Scale scale, double data_lo, double data_hi, int target_ticks = 6,
               const char* op = "plot::Axis");

// "Nice" step for covering `span` with about `target` steps: 1, 2 or 5 x 10^k.
double nice_step(double span, int target);

// Short tick label: "0", "0.25", "1500", "1e-05", "2e+06". Same value, same text.
std::string format_tick(double v, Scale scale);
// The labels of an axis's ticks: format_tick's, unless two neighbours would read the same (a narrow range
// far from 0, as [100000, 100010] gave "1e+05" six times); then every label gets the fewest significant
// digits (%.Ng) that tell all the neighbours apart.
std::vector<std::string> tick_labels(const std::vector<double>& ticks, Scale scale);

}  // namespace ng::plot
