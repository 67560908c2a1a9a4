// A small timing program for the norm kernels (not a test, not the benchmark: bench/ belongs to the
// performance work). Prints one line per (op, shape, dtype, pass) with GB/s of compulsory traffic and,
// beside it, a same-size memcpy.
//
// Build and run (from the repository root, after building the library in build/release):
//   g++ -O2 -std=c++20 -fopenmp -I. docs/norms/norm_timing.cpp build/release/libnormgrad.a -lhwy \
//       -o build/release/norm_timing && OMP_NUM_THREADS=2 build/release/norm_timing
//
// Compulsory traffic: forward reads x and writes y (2 x bytes(x)); backward reads x and dy and writes dx
// (3 x bytes(x)); memcpy reads and writes (2 x bytes). The best of 7 runs is reported.
//
// Allocation: every call allocates its outputs (16 MB tensors here). glibc returns such blocks to the OS on
// free and the next call page-faults them in again, which can cost more than the kernel itself. By default
// this program asks glibc to keep freed memory (mallopt), so the figures are the kernels'; pass --os-alloc
// to measure with the default allocator behaviour.
//
// On a shared, busy machine wall time mostly measures the other processes. --cpu-time times with the
// process's CPU time instead (run it with OMP_NUM_THREADS=1: CPU time then excludes the time the thread was
// waiting for a core). Memory bandwidth is still shared with whatever else runs.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <malloc.h>
#include <vector>

#include "normgrad.h"

using namespace ng;

static bool g_cpu_time = false;

static double now() {
  if (g_cpu_time) {
    timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static double best_seconds(const std::function<void()>& fn, int reps = 7) {
  fn();  // warm up (page faults, caches)
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const double t0 = now();
    fn();
    best = std::min(best, now() - t0);
  }
  return best;
}

static void line(const char* op, int64_t rows, int64_t cols, DType dt, const char* pass, double s, double bytes,
                 double copy_gbs) {
  const double gbs = bytes / s / 1e9;
  std::printf("{\"op\": \"%s\", \"shape\": [%lld, %lld], \"dtype\": \"%s\", \"pass\": \"%s\", \"seconds\": %.6f, "
              "\"GB/s\": %.2f, \"memcpy_GB/s\": %.2f, \"fraction_of_memcpy\": %.2f}\n",
              op, (long long)rows, (long long)cols, dtype_name(dt), pass, s, gbs, copy_gbs, gbs / copy_gbs);
}

int main(int argc, char** argv) {
  bool os_alloc = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--os-alloc") == 0) os_alloc = true;
    if (std::strcmp(argv[i], "--cpu-time") == 0) g_cpu_time = true;
  }
  if (!os_alloc) {
    mallopt(M_MMAP_THRESHOLD, 1 << 30);  // serve big blocks from the heap...
    mallopt(M_TRIM_THRESHOLD, 1 << 30);  // ...and do not give them back to the OS on free
  }
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{4096, 1024}, {16384, 256}, {1024, 4096}};
  for (auto [rows, cols] : shapes) {
    for (DType dt : {DType::f32, DType::bf16}) {
      const DType acc = compute_dtype(dt);
      Generator gen(1);
      Tensor x = randn({rows, cols}, gen).to(dt), dy = randn({rows, cols}, gen).to(dt);
      Tensor w = randn({cols}, gen, acc), b = randn({cols}, gen, acc);
      const double bytes = double(x.numel()) * double(dtype_size(dt));

      std::vector<char> src(static_cast<size_t>(bytes), 1), dst(static_cast<size_t>(bytes));
      const double copy_s = best_seconds([&] { std::memcpy(dst.data(), src.data(), src.size()); });
      const double copy_gbs = 2 * bytes / copy_s / 1e9;

      // LayerNorm over the last dim
      auto ln = norms::layer_norm_forward(x, cols, w, b, 1e-5);
      line("layer_norm", rows, cols, dt, "fwd",
           best_seconds([&] { norms::layer_norm_forward(x, cols, w, b, 1e-5); }), 2 * bytes, copy_gbs);
      line("layer_norm", rows, cols, dt, "bwd",
           best_seconds([&] { norms::layer_norm_backward(dy, x, ln.mean, ln.rstd, w, true, true, true); }), 3 * bytes,
           copy_gbs);
      line("layer_norm", rows, cols, dt, "fwd+bwd", best_seconds([&] {
             auto s = norms::layer_norm_forward(x, cols, w, b, 1e-5);
             norms::layer_norm_backward(dy, x, s.mean, s.rstd, w, true, true, true);
           }),
           5 * bytes, copy_gbs);

      // RMSNorm over the last dim
      auto rms = norms::rms_norm_forward(x, cols, w, 1e-5);
      line("rms_norm", rows, cols, dt, "fwd", best_seconds([&] { norms::rms_norm_forward(x, cols, w, 1e-5); }),
           2 * bytes, copy_gbs);
      line("rms_norm", rows, cols, dt, "bwd",
           best_seconds([&] { norms::rms_norm_backward(dy, x, rms.rstd, w, true, true); }), 3 * bytes, copy_gbs);
      line("rms_norm", rows, cols, dt, "fwd+bwd", best_seconds([&] {
             auto s = norms::rms_norm_forward(x, cols, w, 1e-5);
             norms::rms_norm_backward(dy, x, s.rstd, w, true, true);
           }),
           5 * bytes, copy_gbs);

      // BatchNorm1d on (N = rows, C = cols), training statistics
      auto bn = norms::batch_norm_forward(x, rows, cols, 1, w, b, Tensor(), Tensor(), 1e-5);
      line("batch_norm", rows, cols, dt, "fwd", best_seconds([&] {
             norms::batch_norm_forward(x, rows, cols, 1, w, b, Tensor(), Tensor(), 1e-5);
           }),
           2 * bytes, copy_gbs);
      line("batch_norm", rows, cols, dt, "fwd+bwd", best_seconds([&] {
             auto s = norms::batch_norm_forward(x, rows, cols, 1, w, b, Tensor(), Tensor(), 1e-5);
             norms::batch_norm_backward(dy, x, s.mean, s.rstd, w, rows, cols, 1, true, true, true, true);
           }),
           5 * bytes, copy_gbs);

      // GroupNorm: (N = rows / 64, C = 64, S = cols), 8 groups
      const int64_t N = rows / 64;
      Tensor w64 = randn({64}, gen, acc), b64 = randn({64}, gen, acc);
      line("group_norm", rows, cols, dt, "fwd", best_seconds([&] {
             norms::group_norm_forward(x, N, 64, cols, 8, w64, b64, 1e-5);
           }),
           2 * bytes, copy_gbs);
      line("group_norm", rows, cols, dt, "fwd+bwd", best_seconds([&] {
             auto s = norms::group_norm_forward(x, N, 64, cols, 8, w64, b64, 1e-5);
             norms::group_norm_backward(dy, x, s.mean, s.rstd, w64, N, 64, cols, 8, true, true, true);
           }),
           5 * bytes, copy_gbs);
      (void)bn;
    }
  }
  return 0;
}
