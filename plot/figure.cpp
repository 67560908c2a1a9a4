// plot::Figure: panels in a grid under an optional title, rendered to an Image or a PNG file.
#include <algorithm>
#include <cstdint>
#include <variant>

#include "plot/frame.h"
#include "tensor/error.h"

namespace ng::plot {

Image render(const Figure& fig) {
  constexpr const char* kOp = "plot::Figure";
  NG_CHECK(!fig.panels.empty(), kOp, "'", fig.title, "' has no panels");
  NG_CHECK(fig.cols >= 1, kOp, "cols must be >= 1, got ", fig.cols);
  NG_CHECK(fig.panel_width >= 100 && fig.panel_height >= 80, kOp,
           "panels must be at least 100 x 80 pixels, got ", fig.panel_width, " x ", fig.panel_height);
  const int64_t cols = std::min<int64_t>(fig.cols, int64_t(fig.panels.size()));
  const int64_t rows = (int64_t(fig.panels.size()) + cols - 1) / cols;
  // The canvas's size in 64 bits, checked here: panel_width * cols in int overflowed (undefined) for
  // panel_width 2^30 and 2 columns, and reached the canvas as a negative width.
  const int64_t width = int64_t(fig.panel_width) * cols, height = int64_t(fig.panel_height) * rows;
  NG_CHECK(width <= kMaxCanvasSide && height <= kMaxCanvasSide, kOp, "a figure of ", cols, " x ", rows,
           " panels of ", fig.panel_width, " x ", fig.panel_height, " pixels is ", width, " x ", height,
           " pixels, more than the ", kMaxCanvasSide, " allowed on a side");
  float band = fig.title.empty() ? 0.0f : text_height(2.4f) + 16;
  Canvas c(int(width), int(height) + int(band));
  if (!fig.title.empty()) {
    // Centred; a title wider than the canvas is drawn smaller, then cut short (it was cut at both edges:
    // "periment 3: ... seeds 42, 2 and" over two panels).
    const detail::FittedText t = detail::fit_text(fig.title, 2.4f, float(c.width()) - 2 * detail::kPad);
    c.text(0.5f * (float(c.width()) - t.width), 10, t.text, t.scale, colors::black);
  }
  for (size_t i = 0; i < fig.panels.size(); ++i) {
    Rect r{float(int64_t(i) % cols * fig.panel_width), band + float(int64_t(i) / cols * fig.panel_height),
           float(fig.panel_width), float(fig.panel_height)};
    std::visit([&](const auto& panel) { draw(c, r, panel); }, fig.panels[i]);
  }
  return c.resolve();
}

void save_png(const Figure& fig, const std::string& path) {
  write_png(path, render(fig));
}

}  // namespace ng::plot
