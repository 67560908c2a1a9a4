// CUDA norm benchmark: GB/s of each norm's forward and backward on the GPU, beside a device-to-device copy
// of the same size, one JSON object per line. Built only with the CUDA backend.
//
//   ./build/release/bench/cuda_bench [--reps N]
//
// Bandwidth counts compulsory traffic only: forward reads x and writes y (2 x bytes(x)); backward reads x and
// dy and writes dx (3 x bytes(x)); the copy reads and writes (2 x bytes(x)). The small per-row and
// per-channel tensors (weight, mean, rstd, partial sums) are not counted. LayerNorm's forward is checked
// against the CPU reference once per shape before timing (a smoke check that the device computes at all);
// every norm's forward and backward are checked against the CPU by the CudaNorms tests in ctest.
// Target (issue 7): each norm at >= 80% of the copy's GB/s.
#include <cuda_runtime_api.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include "cuda/backend.h"
#include "nn/norms/layer_norm.h"
#include "normgrad.h"

using ng::DType;
using ng::Tensor;

namespace {

// Median-free simple timing: warm up, then the mean of `reps` runs between two CUDA events.
double time_seconds(const std::function<void()>& fn, int reps) {
  fn();
  ng::cuda::synchronize();
  cudaEvent_t start, stop;
  NG_CUDA_CHECK(cudaEventCreate(&start));
  NG_CUDA_CHECK(cudaEventCreate(&stop));
  NG_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < reps; ++i) fn();
  NG_CUDA_CHECK(cudaEventRecord(stop));
  NG_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  NG_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  NG_CUDA_CHECK(cudaEventDestroy(start));
  NG_CUDA_CHECK(cudaEventDestroy(stop));
  return double(ms) / 1e3 / reps;
}

void print(const char* op, int64_t rows, int64_t C, DType dt, const char* pass, double seconds, double bytes,
           double copy_gbs) {
  const double gbs = bytes / seconds / 1e9;
  std::printf(
      "{\"op\": \"%s\", \"shape\": [%lld, %lld], \"dtype\": \"%s\", \"pass\": \"%s\", \"seconds\": %.3e, "
      "\"GB/s\": %.1f, \"copy_GB/s\": %.1f, \"fraction_of_copy\": %.3f}\n",
      op, (long long)rows, (long long)C, ng::dtype_name(dt), pass, seconds, gbs, copy_gbs, gbs / copy_gbs);
}

}  // namespace

int main(int argc, char** argv) {
  // --reps through CLI11: atoi gave 0 for "abc" and the timings divided by it (nan and inf in the JSON),
  // and unknown flags were ignored.
  CLI::App app{"cuda_bench: GB/s of each norm on the GPU beside a device-to-device copy, JSON lines"};
  int reps = 50;
  app.add_option("--reps", reps, "timed repetitions per entry (default 50)")->check(CLI::Range(1, 1000000));
  CLI11_PARSE(app, argc, argv);
  if (!ng::cuda::is_available()) {
    std::printf("{\"skipped\": \"no CUDA device available\"}\n");
    return 0;
  }
  const ng::Device dev = ng::Device::cuda(0);
  ng::Generator gen(1);
  const std::pair<int64_t, int64_t> shapes[] = {{4096, 1024}, {16384, 256}, {1024, 4096}};
  for (DType dt : {DType::f32, DType::bf16}) {
    for (auto [rows, C] : shapes) {
      const DType acc = ng::compute_dtype(dt);
      Tensor x = ng::randn({rows, C}, gen, dt).to(dev), dy = ng::randn({rows, C}, gen, dt).to(dev);
      Tensor w = ng::randn({C}, gen, acc).to(dev), b = ng::randn({C}, gen, acc).to(dev);
      const double nbytes = double(x.numel()) * double(ng::dtype_size(dt));

      // The copy, the yardstick.
      Tensor dst = ng::cuda::empty({rows, C}, dt, dev);
      const double t_copy = time_seconds([&] { ng::cuda::copy_bytes(dst, x); }, reps);
      const double copy_gbs = 2 * nbytes / t_copy / 1e9;
      print("copy", rows, C, dt, "d2d", t_copy, 2 * nbytes, copy_gbs);

      // Validate LayerNorm once against the CPU reference before timing anything.
      {
        Tensor xc = x.to(ng::Device::cpu());
        auto ref = ng::norms::layer_norm_forward(xc, C, w.to(ng::Device::cpu()), b.to(ng::Device::cpu()),
                                                 1e-5, ng::norms::Impl::reference);
        auto got = ng::cuda::layer_norm_forward(x, C, w, b, 1e-5);
        auto gv = got.y.to(ng::Device::cpu()).to_vector<double>(), rv = ref.y.to_vector<double>();
        double worst = 0;
        for (size_t i = 0; i < gv.size(); ++i) {
          const double d = std::abs(gv[i] - rv[i]);
          if (std::isnan(d) || d > worst) worst = d;  // a NaN stays (std::max would drop it)
          if (std::isnan(worst)) break;
        }
        if (!(worst <= (dt == DType::f32 ? 1e-3 : 0.1))) {
          std::fprintf(stderr, "cuda_bench: LayerNorm differs from the CPU reference by %g\n", worst);
          return 1;
        }
      }

      auto ln = ng::cuda::layer_norm_forward(x, C, w, b, 1e-5);
      print("layer_norm", rows, C, dt, "fwd",
            time_seconds([&] { ng::cuda::layer_norm_forward(x, C, w, b, 1e-5); }, reps), 2 * nbytes,
            copy_gbs);
      print("layer_norm", rows, C, dt, "bwd",
            time_seconds([&] { ng::cuda::layer_norm_backward(dy, x, ln.mean, ln.rstd, w, true, true, true); },
                         reps),
            3 * nbytes, copy_gbs);

      auto rms = ng::cuda::rms_norm_forward(x, C, w, 1e-5);
      print("rms_norm", rows, C, dt, "fwd",
            time_seconds([&] { ng::cuda::rms_norm_forward(x, C, w, 1e-5); }, reps), 2 * nbytes, copy_gbs);
      print("rms_norm", rows, C, dt, "bwd",
            time_seconds([&] { ng::cuda::rms_norm_backward(dy, x, rms.rstd, w, true, true); }, reps),
            3 * nbytes, copy_gbs);

      // BatchNorm on (N = rows, C): statistics per column. GroupNorm with 32 groups on (N = rows, C).
      auto bn = ng::cuda::batch_norm_forward_train(x, w, b, 1e-5, Tensor(), Tensor(), 0.1);
      print("batch_norm", rows, C, dt, "fwd",
            time_seconds([&] { ng::cuda::batch_norm_forward_train(x, w, b, 1e-5, Tensor(), Tensor(), 0.1); },
                         reps),
            2 * nbytes, copy_gbs);
      print("batch_norm", rows, C, dt, "bwd",
            time_seconds(
                [&] { ng::cuda::batch_norm_backward(dy, x, bn.mean, bn.rstd, w, true, true, true, true); },
                reps),
            3 * nbytes, copy_gbs);
      auto gn = ng::cuda::group_norm_forward(x, 32, w, b, 1e-5);
      print("group_norm", rows, C, dt, "fwd",
            time_seconds([&] { ng::cuda::group_norm_forward(x, 32, w, b, 1e-5); }, reps), 2 * nbytes,
            copy_gbs);
      print(
          "group_norm", rows, C, dt, "bwd",
          time_seconds(
              [&] { ng::cuda::group_norm_backward(dy, x, gn.mean, gn.rstd, 32, w, true, true, true); }, reps),
          3 * nbytes, copy_gbs);
    }
  }
  return 0;
}
