// Text for the charts: stb_easy_font (public domain, in libstb-dev) turns a string into axis-aligned quads,
// one per stroke of a 7-pixel-tall segment font. We scale each quad and fill it on the supersampled canvas,
// so scaled text is anti-aliased like everything else. A quarter turn maps an axis-aligned quad to another
// axis-aligned quad, which is how y-axis labels are drawn.
#include <cmath>
#include <string>
#include <vector>

#include "plot/canvas.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#if __has_include(<stb/stb_easy_font.h>)
#include <stb/stb_easy_font.h>
#else
#include "stb_easy_font.h"
#endif
#pragma GCC diagnostic pop

namespace ng::plot {
namespace {

// One quad = 4 vertices of {x, y, z: float; rgba: uint8[4]} = 16 bytes each.
struct Quad {
  float x0, y0, x1, y1;
};

// The font has glyphs for ASCII 32..126 only, and stb_easy_font indexes its table with (char - 32): any
// other byte (UTF-8's, as in "σ" or "µs", a tab, DEL) read outside the table. Each such character is
// drawn as '?' instead: one '?' per UTF-8 sequence (its continuation bytes 0x80..0xBF are dropped).
// '\n' is kept (the font starts a new line there).
std::string drawable(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n' || (c >= 32 && c <= 126))
      out.push_back(ch);
    else if ((c & 0xC0) != 0x80)
      out.push_back('?');
  }
  return out;
}

std::vector<Quad> text_quads(const std::string& s) {
  std::vector<Quad> quads;
  if (s.empty()) return quads;
  std::string copy = drawable(s);                      // stb_easy_font takes a non-const char*
  std::vector<char> buffer(copy.size() * 2048 + 256);  // 64 bytes per quad, at most ~20 quads per glyph
  int n = stb_easy_font_print(0, 0, copy.data(), nullptr, buffer.data(), int(buffer.size()));
  for (int q = 0; q < n; ++q) {
    const float* v0 = reinterpret_cast<const float*>(buffer.data() + (q * 4 + 0) * 16);
    const float* v2 = reinterpret_cast<const float*>(buffer.data() + (q * 4 + 2) * 16);
    quads.push_back(
        {std::min(v0[0], v2[0]), std::min(v0[1], v2[1]), std::max(v0[0], v2[0]), std::max(v0[1], v2[1])});
  }
  return quads;
}

}  // namespace

float text_width(const std::string& s, float scale) {
  if (s.empty()) return 0;
  std::string copy = drawable(s);
  return float(stb_easy_font_width(copy.data()) - 1) * scale;
}

// Capitals span 7 font pixels, descenders reach 9.
float text_height(float scale) {
  return 9.0f * scale;
}

void Canvas::text(float x, float y, const std::string& s, float scale, Color c, bool rotated) {
  float k = scale * float(ss_);
  float ox = x * float(ss_), oy = y * float(ss_);
  float w = text_width(s, scale) * float(ss_);
  for (const Quad& q : text_quads(s)) {
    float x0, y0, x1, y1;
    if (!rotated) {
      x0 = ox + q.x0 * k, x1 = ox + q.x1 * k;
      y0 = oy + q.y0 * k, y1 = oy + q.y1 * k;
    } else {
      // Quarter turn counter-clockwise: font (u, v) -> canvas (v, w - u), so the text reads bottom-to-top.
      x0 = ox + q.y0 * k, x1 = ox + q.y1 * k;
      y0 = oy + w - q.x1 * k, y1 = oy + w - q.x0 * k;
    }
    fill_ss_rect(int(std::lround(x0)), int(std::lround(y0)), int(std::lround(x1)), int(std::lround(y1)), c);
  }
}

}  // namespace ng::plot
