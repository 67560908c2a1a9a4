// PNG output through stb_image_write (public domain, in libstb-dev). This is the one translation unit that
// compiles its implementation.
#include <cstdio>
#include <filesystem>
#include <mutex>

#include "io/whole_file.h"
#include "plot/canvas.h"
#include "tensor/error.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-function"
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#if __has_include(<stb/stb_image_write.h>)
#include <stb/stb_image_write.h>
#else
#include "stb_image_write.h"
#endif
#pragma GCC diagnostic pop

namespace ng::plot {

std::string encode_png(const Image& image) {
  NG_CHECK(image.width > 0 && image.height > 0 &&
               image.rgb.size() == size_t(image.width) * size_t(image.height) * 3,
           "plot::write_png", "image of ", image.width, " x ", image.height, " needs ",
           size_t(std::max(image.width, 0)) * size_t(std::max(image.height, 0)) * 3, " RGB bytes, has ",
           image.rgb.size());
  // Highest zlib effort: charts are flat colours and compress well, which keeps the README images small.
  // stb keeps it in a global: set once, so that threads writing PNGs at the same time do not race on it.
  static std::once_flag level_set;
  std::call_once(level_set, [] { stbi_write_png_compression_level = 9; });
  std::string bytes;
  auto append = [](void* context, void* data, int size) {
    static_cast<std::string*>(context)->append(static_cast<const char*>(data), size_t(size));
  };
  const int ok =
      stbi_write_png_to_func(append, &bytes, image.width, image.height, 3, image.rgb.data(), image.width * 3);
  NG_CHECK(ok != 0, "plot::write_png", "stb_image_write could not encode the image");
  return bytes;
}

void write_png(const std::string& path, const Image& image) {
  const std::string bytes = encode_png(image);
  try {
    io::atomic_write_file(path, bytes);  // a failed write leaves any old file as it was
  } catch (const Error& e) {
    fail("plot::write_png", "cannot write '", path, "' (", e.what(), ")");
  }
}

}  // namespace ng::plot
