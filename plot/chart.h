// The charts: a line chart, a bar chart, a table, and a Figure that lays them out in a grid and writes a PNG.
// These are plain data structs: fill them in, then render. Nothing is drawn until render()/save_png().
//
//   plot::LineChart c;
//   c.title = "loss";  c.yscale = plot::Scale::Log;
//   c.series.push_back({.label = "Pre-LN", .x = steps, .y = losses});
//   c.vlines.push_back({.at = 412, .label = "NaN at step 412"});
//   plot::Figure fig;  fig.cols = 2;  fig.panels = {c, table};
//   plot::save_png(fig, "results/loss.png");
//
// Bad input is an ng::Error that names the chart and the series: an empty series, x and y of different
// lengths, a non-positive value on a log axis, a table row with the wrong number of cells.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "plot/axis.h"
#include "plot/canvas.h"

namespace ng::plot {

enum class Marker { None, Circle, Square, Triangle, Diamond };

struct Series {
  std::string label{};           // shown in the legend (empty: not listed)
  std::vector<double> x{};       // empty: 0, 1, 2, ...
  std::vector<double> y{};       // a NaN or Inf leaves a gap (a run that diverged simply stops)
  std::optional<Color> color{};  // default: palette(index of the series)
  Marker marker = Marker::None;
  int marker_every = 0;  // 0: about 15 markers along the series
  float width = 2.0f;    // line width in pixels; 0 draws markers only
  bool dashed = false;
  bool in_legend = true;  // false: drawn (and in a report's CSV) but not listed, e.g. a config's other seeds
};

// A legend entry with no series of its own: a line sample and a label (e.g. "seeds 2 and 7: dashed").
struct LegendKey {
  std::string label{};
  Color color = colors::gray;
  bool dashed = false;
};

// A labelled vertical (at = x value) or horizontal (at = y value) reference line, drawn dashed.
struct RefLine {
  double at = 0;
  std::string label{};
  std::optional<Color> color{};  // default: red for vertical lines, gray for horizontal ones
};

struct LineChart {
  std::string title{}, xlabel{}, ylabel{};
  Scale yscale = Scale::Linear;
  // Log: every x (and every vertical line) must be > 0; the data fill the frame, as on a linear x axis.
  Scale xscale = Scale::Linear;
  std::vector<Series> series{};
  std::vector<RefLine> vlines{}, hlines{};
  std::optional<double> ymin{}, ymax{};  // override the automatic y range (log: must be > 0)
  bool legend = true;
  std::vector<LegendKey> legend_keys{};  // listed after the series' entries
};

struct BarChart {
  struct Group {
    std::string label{};           // legend entry (listed when there are several groups)
    std::vector<double> values{};  // one per category; NaN/Inf: no bar, the label "NaN"/"Inf" instead
    std::optional<Color> color{};  // default: palette(index of the group)
  };
  std::string title{}, xlabel{}, ylabel{};
  Scale yscale = Scale::Linear;
  std::vector<std::string> categories{};
  std::vector<Group> groups{};
  std::string value_format = "%.3g";  // printf format of the value labels above the bars ("" = none)
  std::vector<RefLine> hlines{};
};

struct Table {
  std::string title{};
  std::vector<std::string> header{};
  std::vector<std::vector<std::string>> rows{};  // every row has header.size() cells
  std::vector<Color> row_colors{};               // optional: a colour swatch before each row's first cell
};

using Panel = std::variant<LineChart, BarChart, Table>;

struct Figure {
  std::string title{};  // drawn above the grid (empty: none)
  int cols = 1;         // panels fill rows left to right
  int panel_width = 560, panel_height = 400;
  std::vector<Panel> panels{};
};

// Where a line or bar chart puts its data, for a panel occupying `panel`: the plot area in pixels and the
// two axes. A value v lands at area.x + x.unit(v) * area.w, and area.bottom() - y.unit(v) * area.h.
// Bar charts use x positions 0 .. categories (category i is centred on i + 0.5).
struct Frame {
  Rect area{};
  Axis x{}, y{};
  double px(double v) const { return area.x + x.unit(v) * area.w; }
  double py(double v) const { return area.bottom() - y.unit(v) * area.h; }
};
Frame line_chart_frame(const LineChart& chart, const Rect& panel);
Frame bar_chart_frame(const BarChart& chart, const Rect& panel);

// Draw one panel into `panel` on the canvas (validates its input first).
void draw(Canvas& canvas, const Rect& panel, const LineChart& chart);
void draw(Canvas& canvas, const Rect& panel, const BarChart& chart);
void draw(Canvas& canvas, const Rect& panel, const Table& table);

// The whole figure as an image (panel_width * cols) x (panel_height * rows + title band).
Image render(const Figure& figure);
// render + write_png. Throws ng::Error for bad input or an unwritable path.
void save_png(const Figure& figure, const std::string& path);

}  // namespace ng::plot
