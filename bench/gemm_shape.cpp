// gemm_shape: one GEMM shape and form, timed. For the shapes normgrad_bench does not have (a product met in
// a trainer's step, say) and for A/Bs of two builds:
//
//   ./build/release/bench/gemm_shape --form TN -m 256 -n 1024 -k 1024 --threads 2
//   ./build/release/bench/gemm_shape --form NT -m 64 -n 64 -k 64 --batch 64   # attention's per-head products
//
// C (M x N) = op(A) op(B), op(A) M x K, op(B) K x N, each stored as the form says (NN, NT, TN, TT: A, B
// transposed or not), random f32 in [-0.5, 0.5], C overwritten. Prints the best and the median of --reps
// calls, on buffers that stay hot in the caches between calls (unlike in a training step). With --batch B,
// each call is one gemm_batched of B such products on B separate A, B and C (as attention's heads are),
// and the figures are for all of them. The first, untimed call's C is checked at sampled places against dot
// products in double (bench/validate.h; with --batch, the first and the last product's): a mismatch is
// exit status 3, and no figure.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench/validate.h"
#include "normgrad.h"
#include "tensor/kernels/gemm.h"

int main(int argc, char** argv) {
  CLI::App app{"gemm_shape: one GEMM shape and form, timed (best and median of --reps calls)"};
  std::string form = "NN";
  int64_t M = 1024, N = 1024, K = 1024;
  int threads = 2, reps = 30;
  int64_t batch = 0;
  app.add_option("--form", form, "NN, NT, TN or TT (op(A), op(B) transposed or not)")
      ->check(CLI::IsMember({"NN", "NT", "TN", "TT"}));
  app.add_option("-m", M, "rows of C")->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  app.add_option("-n", N, "columns of C")->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  app.add_option("-k", K, "the summed dimension")->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  app.add_option("--threads", threads, "threads")->check(CLI::Range(1, 1024));
  app.add_option("--batch", batch, "products per call, through gemm_batched (0: one product, through gemm)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 20));
  app.add_option("--reps", reps, "timed calls (after one untimed)")->check(CLI::Range(1, 1000000));
  CLI11_PARSE(app, argc, argv);

  // A, B and C as f32, in all: refuse a shape whose buffers could not be allocated, rather than die in
  // std::bad_alloc (or overflow the size arithmetic) after the fact.
  const int64_t copies = std::max<int64_t>(batch, 1);  // products: their A, B and C side by side
  const double bytes =
      4.0 * double(copies) * (double(M) * double(K) + double(K) * double(N) + double(M) * double(N));
  constexpr double kMaxBytes = 16.0 * (1 << 30);
  if (bytes > kMaxBytes) {
    std::fprintf(
        stderr,
        "gemm_shape: the buffers of M %lld N %lld K %lld (x %lld) would take %.1f GiB; at most %.0f GiB "
        "is allowed\n",
        static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K),
        static_cast<long long>(copies), bytes / (1 << 30), kMaxBytes / (1 << 30));
    return 2;
  }
  const bool ta = form[0] == 'T', tb = form[1] == 'T';
  ng::set_num_threads(threads);
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  std::vector<float> A(static_cast<size_t>(copies * M * K)), B(static_cast<size_t>(copies * K * N)),
      C(static_cast<size_t>(copies * M * N));
  for (float& v : A) v = dist(gen);
  for (float& v : B) v = dist(gen);
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;  // stored A: M x K (or K x M), B: K x N (or N x K)
  std::vector<int64_t> a_off, b_off;                 // --batch: product b's A and B start here
  for (int64_t b = 0; b < batch; ++b) {
    a_off.push_back(b * M * K);
    b_off.push_back(b * K * N);
  }

  std::vector<double> ms;
  for (int r = 0; r <= reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    if (batch > 0)
      ng::gemm_batched(ta, tb, batch, M, N, K, A.data(), a_off.data(), lda, B.data(), b_off.data(), ldb,
                       C.data(), M * N, N, false);
    else
      ng::gemm(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, C.data(), N, false);
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) {
      ms.push_back(t);
      continue;
    }
    try {  // the untimed call: its C checked
      for (const int64_t b : {int64_t(0), copies - 1})
        ng_bench::validate_matmul(form, ta, tb, M, N, K, A.data() + b * M * K, lda, B.data() + b * K * N, ldb,
                                  C.data() + b * M * N, N);
    } catch (const ng_bench::ValidationError& e) {
      std::fprintf(stderr, "gemm_shape: validation failed, no figure: %s\n", e.what());
      return 3;
    }
  }
  std::sort(ms.begin(), ms.end());
  const double best = ms.front(), median = ms[ms.size() / 2],
               gflop = 2.0 * double(copies) * double(M) * double(N) * double(K) / 1e9;
  const std::string times = batch > 0 ? " x " + std::to_string(batch) : "";
  std::printf(
      "%s M %lld N %lld K %lld%s, %d threads: best %.3f ms (%.0f GFLOP/s), median %.3f ms (%.0f GFLOP/s)\n",
      form.c_str(), static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K),
      times.c_str(), threads, best, gflop / best * 1e3, median, gflop / median * 1e3);
  return 0;
}
