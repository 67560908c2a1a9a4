// plot::BarChart: grouped bars (one slot per category, one bar per group inside it), value labels above
// the bars, "NaN" where a value is not finite, linear or log y axis.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

#include "plot/frame.h"
#include "tensor/error.h"

namespace ng::plot {
namespace {

constexpr const char* kOp = "plot::BarChart";

// value_format goes to snprintf with one double: anything but literal text, "%%", and exactly one floating
// conversion (%[flags][width][.precision] then one of e E f F g G a A) would be undefined behaviour ("%s"
// reads a pointer that is not there, "%n" writes through one).
void check_value_format(const std::string& format) {
  size_t conversions = 0;
  bool ok = true;
  for (size_t i = 0; i < format.size() && ok; ++i) {
    if (format[i] != '%') continue;
    if (i + 1 < format.size() && format[i + 1] == '%') {
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < format.size() && std::string("-+ #0").find(format[j]) != std::string::npos) ++j;
    while (j < format.size() && std::isdigit(static_cast<unsigned char>(format[j]))) ++j;
    if (j < format.size() && format[j] == '.') {
      ++j;
      while (j < format.size() && std::isdigit(static_cast<unsigned char>(format[j]))) ++j;
    }
    ok = j < format.size() && std::string("eEfFgGaA").find(format[j]) != std::string::npos;
    ++conversions;
    i = j;
  }
  NG_CHECK(ok && conversions == 1, kOp, "value_format \"", format,
           "\" must hold exactly one floating-point conversion such as %.3g (flags, width and precision "
           "allowed; %% for a percent sign), and nothing else taking an argument");
}

void validate(const BarChart& chart) {
  NG_CHECK(!chart.categories.empty(), kOp, "'", chart.title, "' has no categories");
  if (!chart.value_format.empty()) check_value_format(chart.value_format);
  detail::check_ref_lines(kOp, chart.hlines, {}, chart.yscale);
  NG_CHECK(!chart.groups.empty(), kOp, "'", chart.title, "' has no bar groups");
  for (size_t g = 0; g < chart.groups.size(); ++g) {
    const BarChart::Group& group = chart.groups[g];
    NG_CHECK(group.values.size() == chart.categories.size(), kOp, "group ", g, " ('", group.label, "') has ",
             group.values.size(), " values for ", chart.categories.size(), " categories");
    if (chart.yscale == Scale::Log)
      for (size_t i = 0; i < group.values.size(); ++i)
        if (std::isfinite(group.values[i]))
          NG_CHECK(group.values[i] > 0, kOp, "group ", g, " ('", group.label, "') has value ",
                   group.values[i], " for '", chart.categories[i], "', but a log axis needs positive values");
  }
}

std::string value_label(const std::string& format, double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Inf" : "-Inf";
  char buf[64];
  std::snprintf(buf, sizeof(buf), format.c_str(), v);
  return buf;
}

}  // namespace

Frame bar_chart_frame(const BarChart& chart, const Rect& panel) {
  validate(chart);
  double inf = std::numeric_limits<double>::infinity();
  double lo = inf, hi = -inf;
  for (const auto& g : chart.groups)
    for (double v : g.values)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  for (const RefLine& h : chart.hlines) lo = std::min(lo, h.at), hi = std::max(hi, h.at);
  Frame f;
  if (chart.yscale == Scale::Log) {
    if (!std::isfinite(lo)) lo = 1, hi = 10;
    // Bars rise from below the smallest value, and leave headroom for the labels above the tallest.
    // With a legend (several groups), about 40% more headroom so it can sit above the bars.
    double decades = std::log10(hi / lo) + 0.5;
    double headroom = chart.groups.size() > 1 ? std::pow(10.0, 0.4 * decades) : 2.0;
    f.y = make_axis(Scale::Log, lo / 3, hi * headroom, 6, kOp);
  } else {
    if (!std::isfinite(lo)) lo = 0, hi = 1;
    lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
    double headroom = chart.groups.size() > 1 ? 0.4 : 0.12;
    f.y = make_axis(Scale::Linear, lo, hi + headroom * (hi - lo), 6, kOp);
  }
  f.x.scale = Scale::Linear;
  f.x.lo = 0;
  f.x.hi = double(chart.categories.size());
  f.area = detail::plot_area(panel, chart.title, chart.xlabel, chart.ylabel, f.y);
  return f;
}

void draw(Canvas& c, const Rect& panel, const BarChart& chart) {
  Frame f = bar_chart_frame(chart, panel);
  detail::draw_frame(c, panel, f, chart.title, chart.xlabel, chart.ylabel, /*x_ticks=*/false);
  for (const RefLine& h : chart.hlines) detail::draw_hline(c, f, h, /*label=*/false);

  size_t n_cat = chart.categories.size(), n_group = chart.groups.size();
  float slot = f.area.w / float(n_cat);
  float bar_w = 0.8f * slot / float(n_group);
  float base = chart.yscale == Scale::Log ? f.area.bottom() : float(f.py(0.0));

  // Category labels: shrink the font until the widest fits its slot (not below half size).
  float cat_scale = detail::kTickScale;
  for (const auto& name : chart.categories)
    while (cat_scale > 0.7f && text_width(name, cat_scale) > slot - 4) cat_scale -= 0.1f;
  for (size_t i = 0; i < n_cat; ++i) {
    float cx = f.area.x + slot * (float(i) + 0.5f);
    const std::string& name = chart.categories[i];
    c.text(cx - 0.5f * text_width(name, cat_scale), f.area.bottom() + 7, name, cat_scale, colors::text);
  }

  float label_scale = std::min(detail::kNoteScale, std::max(0.8f, bar_w / 30.0f));
  for (size_t g = 0; g < n_group; ++g) {
    const BarChart::Group& group = chart.groups[g];
    Color color = group.color.value_or(palette(int(g)));
    for (size_t i = 0; i < n_cat; ++i) {
      double v = group.values[i];
      float x0 = f.area.x + slot * float(i) + 0.1f * slot + bar_w * float(g);
      float label_y;
      if (std::isfinite(v)) {
        float top = float(f.py(v));
        c.fill_rect({x0, std::min(top, base), bar_w, std::abs(base - top)}, color);
        label_y = std::min(top, base) - text_height(label_scale) - 2;
      } else {
        label_y = base - text_height(label_scale) - 4;
      }
      if (!chart.value_format.empty() || !std::isfinite(v)) {
        std::string s = value_label(chart.value_format, v);
        Color tc = std::isfinite(v) ? colors::text : colors::red;
        c.text(x0 + 0.5f * (bar_w - text_width(s, label_scale)), label_y, s, label_scale, tc);
      }
    }
  }
  for (const RefLine& h : chart.hlines) detail::draw_hline(c, f, h, /*label=*/true);
  c.stroke_rect(f.area, 1.0f, colors::axis);

  if (n_group > 1) {
    std::vector<detail::LegendEntry> legend;
    for (size_t g = 0; g < n_group; ++g)
      if (!chart.groups[g].label.empty())
        legend.push_back({chart.groups[g].label, chart.groups[g].color.value_or(palette(int(g))),
                          Marker::None, false, false});
    // Bars occupy the bottom of the frame: treat their tops as the points to avoid.
    std::vector<std::pair<float, float>> points;
    for (size_t g = 0; g < n_group; ++g)
      for (size_t i = 0; i < n_cat; ++i) {
        double v = chart.groups[g].values[i];
        float x = f.area.x + slot * float(i) + 0.1f * slot + bar_w * (float(g) + 0.5f);
        float top = std::isfinite(v) ? float(f.py(v)) : base;
        for (float y = std::min(top, base) - 16; y <= f.area.bottom(); y += 4)
          for (float dx = -0.5f * bar_w; dx <= 0.5f * bar_w; dx += 4) points.emplace_back(x + dx, y);
      }
    detail::draw_legend(c, f.area, legend, points);
  }
}

}  // namespace ng::plot
