// plot::Canvas: an RGB raster we draw charts on, anti-aliased by supersampling.
//
// Every drawing call takes coordinates in OUTPUT pixels (floats, x to the right, y down). Inside, the canvas
// is `ss` times larger in each direction; shapes are filled with a plain inside/outside test at that
// resolution, and resolve() averages each ss x ss block into one output pixel. An edge that crosses a pixel
// therefore gets a blend of the two colours in proportion to how much of the pixel it covers (with ss = 3,
// in 10 steps). That is all the anti-aliasing there is: simple, and it works the same for lines, discs,
// polygons and text.
//
//   Canvas c(640, 480);                  // white
//   c.line(10, 10, 300, 200, 2.0f, colors::blue);
//   c.text(20, 20, "hello", 2.0f, colors::black);
//   Image img = c.resolve();             // 640 x 480 RGB, what save_png writes
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ng::plot {

struct Color {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Color&) const = default;
};

namespace colors {
inline constexpr Color white{255, 255, 255};
inline constexpr Color black{0, 0, 0};
inline constexpr Color grid{225, 225, 225};
inline constexpr Color axis{60, 60, 60};
inline constexpr Color text{30, 30, 30};
inline constexpr Color blue{31, 119, 180};
inline constexpr Color orange{255, 127, 14};
inline constexpr Color green{44, 160, 44};
inline constexpr Color red{214, 39, 40};
inline constexpr Color purple{148, 103, 189};
inline constexpr Color brown{140, 86, 75};
inline constexpr Color gray{127, 127, 127};
}  // namespace colors

// The i-th colour of a fixed qualitative palette (matplotlib's "tab10" order), cycling.
Color palette(int i);

// A resolved picture: width * height RGB triples, row-major, top row first.
struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
  Color at(int x, int y) const {
    size_t i = (size_t(y) * size_t(width) + size_t(x)) * 3;
    return {rgb[i], rgb[i + 1], rgb[i + 2]};
  }
};

// An Image as the bytes of a PNG file.
std::string encode_png(const Image& image);
// Write an Image as PNG, atomically (io/whole_file.h: a failed write leaves any old file as it was).
// Throws ng::Error naming the path when it cannot be written.
void write_png(const std::string& path, const Image& image);

struct Rect {
  float x = 0, y = 0, w = 0, h = 0;
  float right() const { return x + w; }
  float bottom() const { return y + h; }
};

// The largest side of a canvas, in output pixels.
inline constexpr int kMaxCanvasSide = 16384;

class Canvas {
 public:
  // width, height: output size in pixels (each in [1, kMaxCanvasSide]); ss: supersampling factor in [1, 8].
  Canvas(int width, int height, int ss = 3, Color background = colors::white);

  int width() const { return width_; }
  int height() const { return height_; }

  // Axis-aligned filled rectangle.
  void fill_rect(const Rect& r, Color c);
  // Rectangle outline of the given stroke width.
  void stroke_rect(const Rect& r, float width, Color c);
  // Thick segment with round caps: every point within width/2 of the segment is painted.
  void line(float x0, float y0, float x1, float y1, float width, Color c);
  // The same segment drawn as dashes of `dash` pixels with gaps of `gap` pixels.
  void dashed_line(float x0, float y0, float x1, float y1, float width, Color c, float dash = 6,
                   float gap = 4);
  // Connected polyline (round joins come from the round caps).
  void polyline(const std::vector<float>& xs, const std::vector<float>& ys, float width, Color c);
  // Filled disc.
  void disc(float cx, float cy, float radius, Color c);
  // Filled convex or concave polygon (even-odd rule).
  void polygon(const std::vector<float>& xs, const std::vector<float>& ys, Color c);

  // Text (plot/text.cpp). (x, y) is the top-left corner of the text box; `scale` multiplies the built-in
  // font, whose capital letters are 7 pixels tall at scale 1. Rotated text runs bottom-to-top, as a y-axis
  // label does; then (x, y) is the top-left of the rotated box.
  void text(float x, float y, const std::string& s, float scale, Color c, bool rotated = false);

  // Average each ss x ss block: the final anti-aliased image.
  Image resolve() const;

  // Raw supersampled access, used by the text renderer.
  void fill_ss_rect(int x0, int y0, int x1, int y1, Color c);  // [x0, x1) x [y0, y1) in supersampled pixels
  int ss() const { return ss_; }

 private:
  int width_, height_, ss_;
  int sw_, sh_;  // supersampled size
  std::vector<uint8_t> px_;
  void set(int sx, int sy, Color c) {
    size_t i = (size_t(sy) * size_t(sw_) + size_t(sx)) * 3;
    px_[i] = c.r;
    px_[i + 1] = c.g;
    px_[i + 2] = c.b;
  }
};

// Text metrics in output pixels for the given scale (single line).
float text_width(const std::string& s, float scale);
float text_height(float scale);

}  // namespace ng::plot
