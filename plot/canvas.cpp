// plot::Canvas: supersampled shape filling and the box-filter resolve. See canvas.h for the idea.
#include "plot/canvas.h"

#include <algorithm>
#include <cmath>

#include "tensor/error.h"

namespace ng::plot {

Color palette(int i) {
  static const Color kTab10[] = {colors::blue,        colors::orange,     colors::green,        colors::red,
                                 colors::purple,      colors::brown,      Color{227, 119, 194}, colors::gray,
                                 Color{188, 189, 34}, Color{23, 190, 207}};
  int n = int(sizeof(kTab10) / sizeof(kTab10[0]));
  return kTab10[((i % n) + n) % n];
}

Canvas::Canvas(int width, int height, int ss, Color background) : width_(width), height_(height), ss_(ss) {
  NG_CHECK(width >= 1 && width <= kMaxCanvasSide && height >= 1 && height <= kMaxCanvasSide, "plot::Canvas",
           "size must be in [1, ", kMaxCanvasSide, "] x [1, ", kMaxCanvasSide, "] pixels, got ", width, " x ",
           height);
  NG_CHECK(ss >= 1 && ss <= 8, "plot::Canvas", "supersampling factor must be in [1, 8], got ", ss);
  sw_ = width * ss;
  sh_ = height * ss;
  px_.resize(size_t(sw_) * size_t(sh_) * 3);
  for (size_t i = 0; i < px_.size(); i += 3) {
    px_[i] = background.r;
    px_[i + 1] = background.g;
    px_[i + 2] = background.b;
  }
}

void Canvas::fill_ss_rect(int x0, int y0, int x1, int y1, Color c) {
  x0 = std::max(x0, 0);
  y0 = std::max(y0, 0);
  x1 = std::min(x1, sw_);
  y1 = std::min(y1, sh_);
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x) set(x, y, c);
}

// A supersample at integer index i covers [i, i+1) and is "inside" when its centre i + 0.5 is.
void Canvas::fill_rect(const Rect& r, Color c) {
  float s = float(ss_);
  fill_ss_rect(int(std::lround(r.x * s)), int(std::lround(r.y * s)), int(std::lround(r.right() * s)),
               int(std::lround(r.bottom() * s)), c);
}

void Canvas::stroke_rect(const Rect& r, float w, Color c) {
  fill_rect({r.x, r.y, r.w, w}, c);
  fill_rect({r.x, r.bottom() - w, r.w, w}, c);
  fill_rect({r.x, r.y, w, r.h}, c);
  fill_rect({r.right() - w, r.y, w, r.h}, c);
}

// Thick segment: paint every supersample whose centre p has distance(p, segment) <= width / 2.
//   t = clamp(((p - a) . (b - a)) / |b - a|^2, 0, 1),   distance = |p - (a + t (b - a))|
void Canvas::line(float x0, float y0, float x1, float y1, float width, Color c) {
  if (!std::isfinite(x0) || !std::isfinite(y0) || !std::isfinite(x1) || !std::isfinite(y1)) return;
  if (!std::isfinite(width)) return;  // (a NaN width went on into a float -> int conversion: undefined)
  float s = float(ss_);
  float ax = x0 * s, ay = y0 * s, bx = x1 * s, by = y1 * s;
  float half = 0.5f * std::clamp(width, 0.5f, float(kMaxCanvasSide)) * s;
  float dx = bx - ax, dy = by - ay;
  float len2 = dx * dx + dy * dy;
  int sx0 = std::max(0, int(std::floor(std::min(ax, bx) - half)));
  int sx1 = std::min(sw_ - 1, int(std::ceil(std::max(ax, bx) + half)));
  int sy0 = std::max(0, int(std::floor(std::min(ay, by) - half)));
  int sy1 = std::min(sh_ - 1, int(std::ceil(std::max(ay, by) + half)));
  float half2 = half * half;
  for (int y = sy0; y <= sy1; ++y) {
    float py = float(y) + 0.5f;
    for (int x = sx0; x <= sx1; ++x) {
      float px = float(x) + 0.5f;
      float t = len2 > 0 ? ((px - ax) * dx + (py - ay) * dy) / len2 : 0.0f;
      t = std::clamp(t, 0.0f, 1.0f);
      float ex = px - (ax + t * dx), ey = py - (ay + t * dy);
      if (ex * ex + ey * ey <= half2) set(x, y, c);
    }
  }
}

void Canvas::dashed_line(float x0, float y0, float x1, float y1, float width, Color c, float dash,
                         float gap) {
  float dx = x1 - x0, dy = y1 - y0;
  float len = std::sqrt(dx * dx + dy * dy);
  if (len == 0 || dash <= 0) return line(x0, y0, x1, y1, width, c);
  float ux = dx / len, uy = dy / len;
  for (float t = 0; t < len; t += dash + gap) {
    float e = std::min(t + dash, len);
    line(x0 + ux * t, y0 + uy * t, x0 + ux * e, y0 + uy * e, width, c);
  }
}

void Canvas::polyline(const std::vector<float>& xs, const std::vector<float>& ys, float width, Color c) {
  NG_CHECK(xs.size() == ys.size(), "plot::Canvas::polyline", "xs has ", xs.size(), " points but ys has ",
           ys.size());
  for (size_t i = 0; i + 1 < xs.size(); ++i) line(xs[i], ys[i], xs[i + 1], ys[i + 1], width, c);
}

void Canvas::disc(float cx, float cy, float radius, Color c) {
  line(cx, cy, cx, cy, 2 * radius, c);
}

// Even-odd rule: a point is inside when a ray to the right crosses the boundary an odd number of times.
void Canvas::polygon(const std::vector<float>& xs, const std::vector<float>& ys, Color c) {
  NG_CHECK(xs.size() == ys.size() && xs.size() >= 3, "plot::Canvas::polygon",
           "expected at least 3 points with as many xs as ys, got ", xs.size(), " xs and ", ys.size(), " ys");
  float s = float(ss_);
  float minx = *std::min_element(xs.begin(), xs.end()) * s,
        maxx = *std::max_element(xs.begin(), xs.end()) * s;
  float miny = *std::min_element(ys.begin(), ys.end()) * s,
        maxy = *std::max_element(ys.begin(), ys.end()) * s;
  size_t n = xs.size();
  for (int y = std::max(0, int(miny)); y <= std::min(sh_ - 1, int(maxy) + 1); ++y) {
    float py = (float(y) + 0.5f) / s;
    for (int x = std::max(0, int(minx)); x <= std::min(sw_ - 1, int(maxx) + 1); ++x) {
      float px = (float(x) + 0.5f) / s;
      bool inside = false;
      for (size_t i = 0, j = n - 1; i < n; j = i++) {
        bool crosses = (ys[i] > py) != (ys[j] > py);
        if (crosses && px < (xs[j] - xs[i]) * (py - ys[i]) / (ys[j] - ys[i]) + xs[i]) inside = !inside;
      }
      if (inside) set(x, y, c);
    }
  }
}

// Box filter: output pixel = mean of its ss x ss supersamples (rounded to nearest).
Image Canvas::resolve() const {
  Image img;
  img.width = width_;
  img.height = height_;
  img.rgb.resize(size_t(width_) * size_t(height_) * 3);
  int n = ss_ * ss_;
  for (int y = 0; y < height_; ++y)
    for (int x = 0; x < width_; ++x)
      for (int ch = 0; ch < 3; ++ch) {
        int acc = 0;
        for (int j = 0; j < ss_; ++j)
          for (int i = 0; i < ss_; ++i)
            acc += px_[(size_t(y * ss_ + j) * size_t(sw_) + size_t(x * ss_ + i)) * 3 + ch];
        img.rgb[(size_t(y) * size_t(width_) + size_t(x)) * 3 + ch] = uint8_t((acc + n / 2) / n);
      }
  return img;
}

}  // namespace ng::plot
