// plot::LineChart: validation, axis ranges, and drawing (series with gaps at non-finite values, markers,
// reference lines, legend).
#include <algorithm>
#include <cmath>
#include <limits>

#include "plot/frame.h"
#include "tensor/error.h"

namespace ng::plot {
namespace {

constexpr const char* kOp = "plot::LineChart";

double x_at(const Series& s, size_t i) {
  return s.x.empty() ? double(i) : s.x[i];
}

std::string series_name(const Series& s, size_t index) {
  return s.label.empty() ? "series " + std::to_string(index) : "series '" + s.label + "'";
}

void validate(const LineChart& chart) {
  NG_CHECK(!chart.series.empty(), kOp, "'", chart.title, "' has no series");
  for (size_t k = 0; k < chart.series.size(); ++k) {
    const Series& s = chart.series[k];
    NG_CHECK(!s.y.empty(), kOp, series_name(s, k), " is empty");
    NG_CHECK(s.x.empty() || s.x.size() == s.y.size(), kOp, series_name(s, k), " has ", s.x.size(),
             " x values but ", s.y.size(), " y values");
    NG_CHECK(std::isfinite(s.width) && s.width >= 0 && s.width <= 64, kOp, series_name(s, k),
             " has line width ", s.width, ", expected a width in [0, 64] pixels (0: markers only)");
    for (size_t i = 0; i < s.y.size(); ++i) {
      NG_CHECK(std::isfinite(x_at(s, i)), kOp, series_name(s, k), " has a non-finite x[", i, "]");
      if (chart.xscale == Scale::Log)
        NG_CHECK(x_at(s, i) > 0, kOp, series_name(s, k), " has x[", i, "] = ", x_at(s, i),
                 ", but a log x axis needs positive values");
      if (chart.yscale == Scale::Log && std::isfinite(s.y[i]))
        NG_CHECK(s.y[i] > 0, kOp, series_name(s, k), " has y[", i, "] = ", s.y[i],
                 ", but a log axis needs positive values");
    }
  }
  // Reference lines and limits place the axes too: a non-finite one is named here (it used to surface as
  // "no finite y value to plot", or as an axis range naming neither the line nor its label).
  detail::check_ref_lines(kOp, chart.hlines, chart.vlines, chart.yscale, chart.xscale);
  if (chart.ymin)
    NG_CHECK(std::isfinite(*chart.ymin), kOp, "ymin = ", *chart.ymin, ", expected a finite value");
  if (chart.ymax)
    NG_CHECK(std::isfinite(*chart.ymax), kOp, "ymax = ", *chart.ymax, ", expected a finite value");
  if (chart.yscale == Scale::Log && chart.ymin)
    NG_CHECK(*chart.ymin > 0, kOp, "ymin = ", *chart.ymin, " on a log axis (needs > 0)");
  if (chart.ymin && chart.ymax)
    NG_CHECK(*chart.ymin < *chart.ymax, kOp, "ymin = ", *chart.ymin, " is not below ymax = ", *chart.ymax);
}

}  // namespace

Frame line_chart_frame(const LineChart& chart, const Rect& panel) {
  validate(chart);
  double inf = std::numeric_limits<double>::infinity();
  double xlo = inf, xhi = -inf, ylo = inf, yhi = -inf;
  for (const Series& s : chart.series)
    for (size_t i = 0; i < s.y.size(); ++i) {
      xlo = std::min(xlo, x_at(s, i));
      xhi = std::max(xhi, x_at(s, i));
      if (!std::isfinite(s.y[i])) continue;
      ylo = std::min(ylo, s.y[i]);
      yhi = std::max(yhi, s.y[i]);
    }
  for (const RefLine& v : chart.vlines) xlo = std::min(xlo, v.at), xhi = std::max(xhi, v.at);
  for (const RefLine& h : chart.hlines) ylo = std::min(ylo, h.at), yhi = std::max(yhi, h.at);
  if (chart.ymin) ylo = *chart.ymin;
  if (chart.ymax) yhi = *chart.ymax;
  NG_CHECK(std::isfinite(ylo) && std::isfinite(yhi), kOp, "'", chart.title,
           "' has no finite y value to plot (every point is NaN or Inf)");

  Frame f;
  f.x = make_axis(chart.xscale, xlo, xhi, 6, kOp);
  // x: the data fill the frame exactly (steps 0..N), with ticks only inside it (up to a billionth of the
  // axis: of its decades on a log axis).
  if (xlo < xhi) {
    f.x.lo = xlo, f.x.hi = xhi;
    const bool log = f.x.scale == Scale::Log;
    auto at = [&](double v) { return log ? std::log10(v) : v; };
    const double lo = at(xlo), hi = at(xhi), eps = 1e-9 * (hi - lo);
    std::erase_if(f.x.ticks, [&](double t) { return at(t) < lo - eps || at(t) > hi + eps; });
  }
  f.y = make_axis(chart.yscale, ylo, yhi, 6, kOp);
  if (chart.ymin) f.y.lo = *chart.ymin;
  if (chart.ymax) f.y.hi = *chart.ymax;
  // Ticks outside the limits go, up to a billionth of the axis (of its decades on a log axis). The old
  // tolerance, lo * (1 - 1e-9), leaned the wrong way for a negative limit and dropped a tick sitting on it.
  if (chart.ymin || chart.ymax) {
    const bool log = f.y.scale == Scale::Log;
    auto at = [&](double v) { return log ? std::log10(v) : v; };
    const double lo = at(f.y.lo), hi = at(f.y.hi), eps = 1e-9 * (hi - lo);
    std::erase_if(f.y.ticks, [&](double t) { return at(t) < lo - eps || at(t) > hi + eps; });
  }
  f.area = detail::plot_area(panel, chart.title, chart.xlabel, chart.ylabel, f.y);
  return f;
}

void draw(Canvas& c, const Rect& panel, const LineChart& chart) {
  Frame f = line_chart_frame(chart, panel);
  detail::draw_frame(c, panel, f, chart.title, chart.xlabel, chart.ylabel, /*x_ticks=*/true);

  for (const RefLine& h : chart.hlines) detail::draw_hline(c, f, h, /*label=*/false);
  for (size_t i = 0; i < chart.vlines.size(); ++i) detail::draw_vline(c, f, chart.vlines[i], int(i), false);

  std::vector<std::pair<float, float>> points;  // every drawn point, for the legend placement
  std::vector<detail::LegendEntry> legend;
  for (size_t k = 0; k < chart.series.size(); ++k) {
    const Series& s = chart.series[k];
    Color color = s.color.value_or(palette(int(k)));
    size_t n = s.y.size();
    // Line: consecutive finite points are joined; a non-finite y breaks the line.
    for (size_t i = 0; i + 1 < n; ++i) {
      if (s.width <= 0 || !std::isfinite(s.y[i]) || !std::isfinite(s.y[i + 1])) continue;
      float x0 = float(f.px(x_at(s, i))), y0 = float(f.py(s.y[i]));
      float x1 = float(f.px(x_at(s, i + 1))), y1 = float(f.py(s.y[i + 1]));
      if (!detail::clip_segment(f.area, x0, y0, x1, y1)) continue;
      // Points every 4 pixels along the segment, so the legend keeps off the lines, not just the vertices.
      float len = std::hypot(x1 - x0, y1 - y0);
      for (float t = 0; t < len; t += 4)
        points.emplace_back(x0 + (x1 - x0) * t / len, y0 + (y1 - y0) * t / len);
      if (s.dashed)
        c.dashed_line(x0, y0, x1, y1, s.width, color);
      else
        c.line(x0, y0, x1, y1, s.width, color);
    }
    int every = s.marker_every > 0 ? s.marker_every : std::max(1, int((n + 14) / 15));
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(s.y[i])) continue;
      float x = float(f.px(x_at(s, i))), y = float(f.py(s.y[i]));
      bool inside = x >= f.area.x - 0.5f && x <= f.area.right() + 0.5f && y >= f.area.y - 0.5f &&
                    y <= f.area.bottom() + 0.5f;
      if (!inside) continue;
      points.emplace_back(x, y);
      // A lone finite point between gaps gets a marker too, or it would be invisible.
      bool lone = (i == 0 || !std::isfinite(s.y[i - 1])) && (i + 1 == n || !std::isfinite(s.y[i + 1]));
      if (s.marker != Marker::None && (i % size_t(every) == 0 || i + 1 == n))
        detail::draw_marker(c, s.marker, x, y, 3.5f, color);
      else if (lone)
        c.disc(x, y, std::max(2.0f, s.width), color);
    }
    if (!s.label.empty() && s.in_legend) legend.push_back({s.label, color, s.marker, true, s.dashed});
  }
  for (const LegendKey& k : chart.legend_keys)
    legend.push_back({k.label, k.color, Marker::None, true, k.dashed});

  // Labels over the data, where they hide the fewest points; the legend keeps clear of every label.
  for (const RefLine& h : chart.hlines) {
    if (h.label.empty()) continue;
    const float y = float(f.py(h.at));
    if (y < f.area.y - 0.5f || y > f.area.bottom() + 0.5f) continue;  // off the chart: neither line nor label
    Rect box = detail::hline_label_box(f, h, points);
    detail::draw_hline(c, f, h, /*label=*/true, points);
    for (float py = box.y; py <= box.bottom(); py += 4)
      for (float px = box.x; px <= box.right(); px += 4)
        for (int repeat = 0; repeat < 20; ++repeat) points.emplace_back(px, py);  // weigh labels heavily
  }
  for (size_t i = 0; i < chart.vlines.size(); ++i) {
    detail::draw_vline(c, f, chart.vlines[i], int(i), /*label=*/true);
    if (chart.vlines[i].label.empty()) continue;
    Rect box = detail::vline_label_box(f, chart.vlines[i], int(i));
    for (float y = box.y; y <= box.bottom(); y += 4)
      for (float x = box.x; x <= box.right(); x += 4)
        for (int repeat = 0; repeat < 20; ++repeat) points.emplace_back(x, y);  // weigh labels heavily
  }
  if (chart.legend) detail::draw_legend(c, f.area, legend, points);
}

}  // namespace ng::plot
