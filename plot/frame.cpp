// Panel layout, axes frame, legend and reference lines shared by the line and bar charts. See frame.h.
#include "plot/frame.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "tensor/error.h"

namespace ng::plot::detail {

void check_ref_lines(const char* op, const std::vector<RefLine>& hlines, const std::vector<RefLine>& vlines,
                     Scale yscale, Scale xscale) {
  for (const RefLine& h : hlines) {
    NG_CHECK(std::isfinite(h.at), op, "horizontal line '", h.label, "' is at ", h.at,
             ", expected a finite y");
    NG_CHECK(yscale != Scale::Log || h.at > 0, op, "horizontal line '", h.label, "' at ", h.at,
             " on a log axis (needs > 0)");
  }
  for (const RefLine& v : vlines) {
    NG_CHECK(std::isfinite(v.at), op, "vertical line '", v.label, "' is at ", v.at, ", expected a finite x");
    NG_CHECK(xscale != Scale::Log || v.at > 0, op, "vertical line '", v.label, "' at ", v.at,
             " on a log x axis (needs > 0)");
  }
}

Rect plot_area(const Rect& panel, const std::string& title, const std::string& xlabel,
               const std::string& ylabel, const Axis& y) {
  float top = panel.y + kPad + (title.empty() ? 4.0f : text_height(kTitleScale) + kPad);
  float bottom = panel.bottom() - kPad - text_height(kTickScale) - 6.0f -
                 (xlabel.empty() ? 0.0f : text_height(kLabelScale) + 6.0f);
  float tick_w = 0;
  for (const std::string& s : tick_labels(y.ticks, y.scale))
    tick_w = std::max(tick_w, text_width(s, kTickScale));
  float left = panel.x + kPad + tick_w + 8.0f + (ylabel.empty() ? 0.0f : text_height(kLabelScale) + 6.0f);
  float right = panel.right() - kPad - 10.0f;  // room for the last x tick label's second half
  return {left, top, std::max(right - left, 10.0f), std::max(bottom - top, 10.0f)};
}

void draw_frame(Canvas& c, const Rect& panel, const Frame& f, const std::string& title,
                const std::string& xlabel, const std::string& ylabel, bool x_ticks) {
  const Rect& a = f.area;
  c.fill_rect(a, colors::white);

  // Grid and y ticks.
  const std::vector<std::string> y_labels = tick_labels(f.y.ticks, f.y.scale);
  for (size_t i = 0; i < f.y.ticks.size(); ++i) {
    float y = float(f.py(f.y.ticks[i]));
    c.line(a.x, y, a.right(), y, 1.0f, colors::grid);
    c.line(a.x - 4, y, a.x, y, 1.0f, colors::axis);
    const std::string& s = y_labels[i];
    float w = text_width(s, kTickScale);
    c.text(a.x - 7 - w, y - 0.5f * 7 * kTickScale, s, kTickScale, colors::text);
  }
  if (x_ticks) {
    const std::vector<std::string> x_labels = tick_labels(f.x.ticks, f.x.scale);
    for (size_t i = 0; i < f.x.ticks.size(); ++i) {
      float x = float(f.px(f.x.ticks[i]));
      c.line(x, a.y, x, a.bottom(), 1.0f, colors::grid);
      c.line(x, a.bottom(), x, a.bottom() + 4, 1.0f, colors::axis);
      const std::string& s = x_labels[i];
      c.text(x - 0.5f * text_width(s, kTickScale), a.bottom() + 7, s, kTickScale, colors::text);
    }
  }
  c.stroke_rect(a, 1.0f, colors::axis);

  if (!title.empty()) {
    // Centred over the plot area, but kept inside the panel: the plot area sits right of the y tick labels,
    // so a long title over wide labels ran past the panel's right edge (and off the canvas). A title wider
    // than the panel is drawn smaller, down to the font's own size, and then cut short with "...".
    const FittedText t = fit_text(title, kTitleScale, panel.w - 2 * kPad);
    const float x = std::clamp(a.x + 0.5f * (a.w - t.width), panel.x + kPad,
                               std::max(panel.x + kPad, panel.right() - kPad - t.width));
    c.text(x, panel.y + kPad, t.text, t.scale, colors::black);
  }
  if (!xlabel.empty()) {
    float w = text_width(xlabel, kLabelScale);
    c.text(a.x + 0.5f * (a.w - w), panel.bottom() - kPad - text_height(kLabelScale), xlabel, kLabelScale,
           colors::text);
  }
  if (!ylabel.empty()) {
    float w = text_width(ylabel, kLabelScale);
    c.text(panel.x + kPad, a.y + 0.5f * (a.h - w), ylabel, kLabelScale, colors::text, /*rotated=*/true);
  }
}

FittedText fit_text(const std::string& text, float scale, float room) {
  FittedText t{text, scale, text_width(text, scale)};
  while (t.width > room && t.scale > 1.05f) t.scale -= 0.1f, t.width = text_width(t.text, t.scale);
  if (t.width > room) {
    while (!t.text.empty() && text_width(t.text + "...", t.scale) > room) t.text.pop_back();
    t.text += "...";
    t.width = text_width(t.text, t.scale);
  }
  return t;
}

void draw_marker(Canvas& c, Marker m, float x, float y, float r, Color color) {
  switch (m) {
    case Marker::None:
      return;
    case Marker::Circle:
      return c.disc(x, y, r, color);
    case Marker::Square:
      return c.fill_rect({x - r * 0.85f, y - r * 0.85f, 1.7f * r, 1.7f * r}, color);
    case Marker::Triangle:
      return c.polygon({x - r, x + r, x}, {y + 0.8f * r, y + 0.8f * r, y - 1.1f * r}, color);
    case Marker::Diamond:
      return c.polygon({x, x + r, x, x - r}, {y - 1.2f * r, y, y + 1.2f * r, y}, color);
  }
}

void draw_legend(Canvas& c, const Rect& area, const std::vector<LegendEntry>& entries,
                 const std::vector<std::pair<float, float>>& points) {
  if (entries.empty()) return;
  float line_h = text_height(kLegendScale) + 6.0f;
  float text_w = 0;
  for (const auto& e : entries) text_w = std::max(text_w, text_width(e.label, kLegendScale));
  float w = 10 + 28 + 8 + text_w + 10, h = 8 + line_h * float(entries.size()) + 2;
  w = std::min(w, area.w - 8);

  // Candidate places, in order of preference: the four corners, then the middle of each side (inset by
  // 6 pixels). Keep the first one that hides the fewest data points.
  float cx = area.x + 0.5f * (area.w - w), cy = area.y + 0.5f * (area.h - h);
  Rect corners[8] = {{area.right() - 6 - w, area.y + 6, w, h},
                     {area.x + 6, area.y + 6, w, h},
                     {area.right() - 6 - w, area.bottom() - 6 - h, w, h},
                     {area.x + 6, area.bottom() - 6 - h, w, h},
                     {area.right() - 6 - w, cy, w, h},
                     {area.x + 6, cy, w, h},
                     {cx, area.y + 6, w, h},
                     {cx, area.bottom() - 6 - h, w, h}};
  int best = 0;
  size_t best_count = SIZE_MAX;
  for (int i = 0; i < 8; ++i) {
    const Rect& r = corners[i];
    size_t n = std::count_if(points.begin(), points.end(), [&](const auto& p) {
      return p.first >= r.x && p.first <= r.right() && p.second >= r.y && p.second <= r.bottom();
    });
    if (n < best_count) best_count = n, best = i;
  }
  Rect box = corners[best];
  c.fill_rect(box, colors::white);
  c.stroke_rect(box, 1.0f, Color{180, 180, 180});
  for (size_t i = 0; i < entries.size(); ++i) {
    const LegendEntry& e = entries[i];
    float cy = box.y + 8 + line_h * float(i) + 0.5f * 7 * kLegendScale;
    float x0 = box.x + 10;
    if (e.line) {
      if (e.dashed)
        c.dashed_line(x0, cy, x0 + 28, cy, 2.0f, e.color, 5, 3);
      else
        c.line(x0, cy, x0 + 28, cy, 2.0f, e.color);
      draw_marker(c, e.marker, x0 + 14, cy, 3.5f, e.color);
    } else {
      c.fill_rect({x0 + 6, cy - 6, 14, 12}, e.color);
    }
    c.text(x0 + 36, cy - 0.5f * 7 * kLegendScale, e.label, kLegendScale, colors::text);
  }
}

// Liang-Barsky: the segment p(t) = p0 + t (p1 - p0), t in [0, 1], is inside when for each edge
// t satisfies p_k t <= q_k; tighten [t0, t1] edge by edge.
bool clip_segment(const Rect& r, float& x0, float& y0, float& x1, float& y1) {
  float dx = x1 - x0, dy = y1 - y0;
  float p[4] = {-dx, dx, -dy, dy};
  float q[4] = {x0 - r.x, r.right() - x0, y0 - r.y, r.bottom() - y0};
  float t0 = 0, t1 = 1;
  for (int k = 0; k < 4; ++k) {
    if (p[k] == 0) {
      if (q[k] < 0) return false;
      continue;
    }
    float t = q[k] / p[k];
    if (p[k] < 0)
      t0 = std::max(t0, t);
    else
      t1 = std::min(t1, t);
    if (t0 > t1) return false;
  }
  float nx0 = x0 + t0 * dx, ny0 = y0 + t0 * dy;
  x1 = x0 + t1 * dx, y1 = y0 + t1 * dy;
  x0 = nx0, y0 = ny0;
  return true;
}

Rect hline_label_box(const Frame& f, const RefLine& line, const std::vector<std::pair<float, float>>& avoid) {
  const float y = float(f.py(line.at));
  const float w = text_width(line.label, kNoteScale) + 4, h = text_height(kNoteScale) + 1;
  const float above = y - h - 2, below = y + 3;
  const float right = f.area.right() - 6 - w, left = f.area.x + 6;
  // Candidates in order of preference: above the line on the right, below it on the right, then the same
  // on the left. Keep the first that covers the fewest points of `avoid`, and stay inside the plot area.
  const Rect candidates[4] = {
      {right, above, w, h}, {right, below, w, h}, {left, above, w, h}, {left, below, w, h}};
  Rect best = candidates[0];
  size_t best_count = SIZE_MAX;
  for (const Rect& r : candidates) {
    if (r.y < f.area.y + 1 || r.bottom() > f.area.bottom() - 1) continue;
    size_t n = std::count_if(avoid.begin(), avoid.end(), [&](const auto& p) {
      return p.first >= r.x && p.first <= r.right() && p.second >= r.y && p.second <= r.bottom();
    });
    if (n < best_count) best_count = n, best = r;
  }
  return best;
}

void draw_hline(Canvas& c, const Frame& f, const RefLine& line, bool label,
                const std::vector<std::pair<float, float>>& avoid) {
  Color color = line.color.value_or(colors::gray);
  float y = float(f.py(line.at));
  if (y < f.area.y - 0.5f || y > f.area.bottom() + 0.5f) return;
  if (!label) return c.dashed_line(f.area.x, y, f.area.right(), y, 1.5f, color, 7, 4);
  if (line.label.empty()) return;
  Rect box = hline_label_box(f, line, avoid);
  c.fill_rect(box, colors::white);
  c.text(box.x + 2, box.y + 1, line.label, kNoteScale, color);
}

Rect vline_label_box(const Frame& f, const RefLine& line, int index) {
  float x = float(f.px(line.at));
  float w = text_width(line.label, kNoteScale);
  float ty = f.area.y + 6 + float(index) * (text_height(kNoteScale) + 4);
  float tx = x + 5;
  if (tx + w > f.area.right() - 4) tx = x - 5 - w;  // no room on the right: write it on the left
  return {tx - 2, ty - 1, w + 4, text_height(kNoteScale) + 1};
}

void draw_vline(Canvas& c, const Frame& f, const RefLine& line, int index, bool label) {
  Color color = line.color.value_or(colors::red);
  float x = float(f.px(line.at));
  if (x < f.area.x - 0.5f || x > f.area.right() + 0.5f) return;
  if (!label) return c.dashed_line(x, f.area.y, x, f.area.bottom(), 1.5f, color, 7, 4);
  if (line.label.empty()) return;
  Rect box = vline_label_box(f, line, index);
  c.fill_rect(box, colors::white);
  c.text(box.x + 2, box.y + 1, line.label, kNoteScale, color);
}

}  // namespace ng::plot::detail
