// Internal to plot/: the pieces line and bar charts share. The layout of a panel (title on top, y label and
// tick labels on the left, x tick labels and x label below, the plot area in the rest), the frame with its
// grid and ticks, and the legend box.
#pragma once

#include <string>
#include <vector>

#include "plot/chart.h"

namespace ng::plot::detail {

// Text sizes (multiples of the 7-pixel font), the same in every chart.
inline constexpr float kTitleScale = 2.0f;
inline constexpr float kLabelScale = 1.5f;
inline constexpr float kTickScale = 1.4f;
inline constexpr float kLegendScale = 1.4f;
inline constexpr float kNoteScale = 1.3f;
inline constexpr float kPad = 8.0f;

// A title in `room` pixels: drawn at `scale` when it fits, else smaller, down to the font's own size, and
// then cut short with "...". Panel titles and the figure's title use it.
struct FittedText {
  std::string text;
  float scale = 1.0f;
  float width = 0;  // text_width(text, scale)
};
FittedText fit_text(const std::string& text, float scale, float room);

// Reference lines place the axes too, so a bad one is named before any axis is made: every line at a finite
// value (an hline at inf used to surface as "no finite y value to plot"), an hline above 0 on a log y
// axis, and a vline above 0 on a log x axis.
void check_ref_lines(const char* op, const std::vector<RefLine>& hlines, const std::vector<RefLine>& vlines,
                     Scale yscale, Scale xscale = Scale::Linear);

// The plot area inside `panel`, leaving room for the title, the axis labels and the y tick labels.
Rect plot_area(const Rect& panel, const std::string& title, const std::string& xlabel,
               const std::string& ylabel, const Axis& y);

// Grid lines, frame, ticks and tick labels of both axes (x ticks only when `x_ticks`), title, axis labels.
void draw_frame(Canvas& c, const Rect& panel, const Frame& f, const std::string& title,
                const std::string& xlabel, const std::string& ylabel, bool x_ticks);

struct LegendEntry {
  std::string label;
  Color color;
  Marker marker = Marker::None;
  bool line = true;  // a line sample (line charts) or a filled square (bar charts)
  bool dashed = false;
};
// Legend box in whichever corner of the plot area covers the fewest of `points` (pixel positions).
void draw_legend(Canvas& c, const Rect& area, const std::vector<LegendEntry>& entries,
                 const std::vector<std::pair<float, float>>& points);

void draw_marker(Canvas& c, Marker m, float x, float y, float radius, Color color);

// Clip the segment to the rectangle (Liang-Barsky). False when nothing of it is inside.
bool clip_segment(const Rect& r, float& x0, float& y0, float& x1, float& y1);

// Horizontal and vertical reference lines. The dashed line is drawn under the data; the label over it
// (call again with label = true after the data). A horizontal line's label goes above or below the line, at
// the right or the left end, wherever it covers the fewest of `avoid` (the data's pixel positions and the
// labels already drawn). The label_box functions give the rectangle a label takes, so the legend can avoid
// it.
Rect hline_label_box(const Frame& f, const RefLine& line, const std::vector<std::pair<float, float>>& avoid);
void draw_hline(Canvas& c, const Frame& f, const RefLine& line, bool label,
                const std::vector<std::pair<float, float>>& avoid = {});
void draw_vline(Canvas& c, const Frame& f, const RefLine& line, int index, bool label);
Rect vline_label_box(const Frame& f, const RefLine& line, int index);

}  // namespace ng::plot::detail
