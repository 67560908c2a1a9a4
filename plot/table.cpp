// plot::Table: a small table panel (header row, body rows, optional colour swatches), sized to fit.
#include <algorithm>

#include "plot/frame.h"
#include "tensor/error.h"

namespace ng::plot {

void draw(Canvas& c, const Rect& panel, const Table& table) {
  constexpr const char* kOp = "plot::Table";
  NG_CHECK(!table.header.empty(), kOp, "'", table.title, "' has no header");
  for (size_t r = 0; r < table.rows.size(); ++r)
    NG_CHECK(table.rows[r].size() == table.header.size(), kOp, "row ", r, " has ", table.rows[r].size(),
             " cells, expected ", table.header.size(), " (one per header column)");
  NG_CHECK(table.row_colors.empty() || table.row_colors.size() == table.rows.size(), kOp, "row_colors has ",
           table.row_colors.size(), " entries for ", table.rows.size(), " rows");

  float top = panel.y + detail::kPad;
  if (!table.title.empty()) {
    float w = text_width(table.title, detail::kTitleScale);
    c.text(panel.x + 0.5f * (panel.w - w), top, table.title, detail::kTitleScale, colors::black);
    top += text_height(detail::kTitleScale) + 12;
  }

  // Column widths at a trial scale, then one scale for everything so that the table fits the panel.
  size_t n_col = table.header.size();
  bool swatch = !table.row_colors.empty();
  auto widths_at = [&](float scale) {
    std::vector<float> w(n_col, 0.0f);
    for (size_t j = 0; j < n_col; ++j) {
      w[j] = text_width(table.header[j], scale);
      for (const auto& row : table.rows) w[j] = std::max(w[j], text_width(row[j], scale));
      w[j] += 16 * scale / 1.4f;
    }
    if (swatch) w[0] += 14;
    return w;
  };
  float scale = 1.6f;
  float avail_w = panel.w - 2 * detail::kPad, avail_h = panel.bottom() - detail::kPad - top;
  std::vector<float> widths;
  float row_h = 0;
  for (; scale > 0.6f; scale -= 0.1f) {
    widths = widths_at(scale);
    float total = 0;
    for (float w : widths) total += w;
    row_h = text_height(scale) + 10;
    if (total <= avail_w && row_h * float(table.rows.size() + 1) <= avail_h) break;
  }
  float total_w = 0;
  for (float w : widths) total_w += w;
  float x0 = panel.x + 0.5f * (panel.w - total_w);

  auto draw_row = [&](const std::vector<std::string>& cells, float y, bool header, const Color* sw) {
    float x = x0;
    for (size_t j = 0; j < n_col; ++j) {
      float tx = x + 8 * scale / 1.4f;
      if (j == 0 && sw) {
        c.fill_rect({tx, y + 0.5f * row_h - 5, 10, 10}, *sw);
        tx += 14;
      }
      if (j == 0 && !sw && swatch) tx += 14;
      float ty = y + 0.5f * (row_h - 7 * scale);
      c.text(tx, ty, cells[j], scale, colors::text);
      if (header) c.text(tx + 0.5f, ty, cells[j], scale, colors::text);  // bold: draw twice, offset
      x += widths[j];
    }
  };

  c.fill_rect({x0, top, total_w, row_h}, Color{235, 235, 235});
  draw_row(table.header, top, true, nullptr);
  c.line(x0, top + row_h, x0 + total_w, top + row_h, 1.0f, colors::axis);
  for (size_t r = 0; r < table.rows.size(); ++r) {
    float y = top + row_h * float(r + 1);
    if (r % 2 == 1) c.fill_rect({x0, y, total_w, row_h}, Color{247, 247, 247});
    draw_row(table.rows[r], y, false, swatch ? &table.row_colors[r] : nullptr);
  }
  float bottom = top + row_h * float(table.rows.size() + 1);
  c.line(x0, top, x0 + total_w, top, 1.0f, colors::axis);
  c.line(x0, bottom, x0 + total_w, bottom, 1.0f, colors::axis);
}

}  // namespace ng::plot
