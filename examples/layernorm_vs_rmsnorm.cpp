// LayerNorm vs RMSNorm on the lesson's input: x ~ N(2, 5^2), shape (1000, 512), f32.
//
//   LayerNorm  y = (x - mean) / sqrt(var + eps) * w + b      params 2C (weight + bias)
//   RMSNorm    y = x / sqrt(mean(x^2) + eps) * w              params C  (weight)
//
// With w = 1, b = 0, LayerNorm's output has mean 0 and std 1 per row; RMSNorm keeps the mean: for mean mu and
// std sigma its output has mean mu / sqrt(mu^2 + sigma^2) (here 2 / sqrt(29) = 0.371) and std
// sigma / sqrt(mu^2 + sigma^2) (0.928).
//
// Speed: the median of --steps repetitions (default 50, --quick 20) of forward alone and of forward+backward
// (upstream gradient of ones, computing dx, dw and db). GB/s counts the bytes an ideal kernel must move:
// forward reads x and writes y (8 bytes per element in f32); forward+backward adds reading x and dy and
// writing dx (20 bytes per element in all). The parameters are negligible (512 floats).
//
// Output in --out: layernorm_vs_rmsnorm.{png,csv,md,cmd.txt}.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "examples/common/cli.h"
#include "examples/common/report.h"
#include "normgrad.h"

using namespace ng;
using namespace ng::examples;

namespace {

constexpr int64_t kRows = 1000, kCols = 512;

struct Result {
  std::string name;
  int64_t params = 0;
  double out_mean = 0, out_std = 0;
  double fwd_ms = 0, fwdbwd_ms = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void stats(const Tensor& y, double& m, double& s) {
  std::vector<double> v = y.to_vector<double>();
  m = 0;
  for (double a : v) m += a;
  m /= double(v.size());
  double ss = 0;
  for (double a : v) ss += (a - m) * (a - m);
  s = std::sqrt(ss / double(v.size()));
}

template <typename Norm>
Result measure(const std::string& name, Norm& norm, const Tensor& x, int64_t reps) {
  Result r;
  r.name = name;
  r.params = norm.num_parameters();
  {
    NoGradGuard no_grad;
    stats(norm.forward(x), r.out_mean, r.out_std);
  }
  using clock = std::chrono::steady_clock;
  std::vector<double> fwd, both;
  Tensor dy = ones({kRows, kCols});
  for (int64_t i = 0; i < reps + 2; ++i) {  // the first two are warm-up
    auto t0 = clock::now();
    {
      NoGradGuard no_grad;
      Tensor y = norm.forward(x);
    }
    auto t1 = clock::now();
    Tensor xg = x.detach();
    xg.requires_grad_();
    norm.zero_grad();
    Tensor y = norm.forward(xg);
    y.backward(dy);
    auto t2 = clock::now();
    if (i >= 2) {
      fwd.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      both.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    }
  }
  r.fwd_ms = median(fwd);
  r.fwdbwd_ms = median(both);
  return r;
}

double gbps(double bytes, double ms) {
  return bytes / (ms * 1e-3) / 1e9;
}

}  // namespace

static int run(int argc, char** argv) {
  CLI::App app{"LayerNorm vs RMSNorm: output statistics, parameter counts, forward and backward speed."};
  CommonOptions opt;
  add_common_flags(app, opt);
  app.get_option("--steps")->description("timing repetitions of each measurement (default 50)");
  app.get_option("--quick")->description("20 timing repetitions instead of 50 (same input, same statistics)");
  const std::vector<std::string> unused = {"--data", "--save", "--resume"};
  const std::string why = "it measures the norms on x ~ N(2, 5^2) and trains no model";
  mark_flags_unused(app, unused, why);
  if (auto rc = parse_flags(app, argc, argv, opt)) return *rc;
  note_unused_flags(app, unused, why);
  Report report(opt, "layernorm_vs_rmsnorm", argc, argv);
  const int64_t reps = opt.steps_or(50, 20);

  Generator gen(opt.seed);
  Tensor x = randn({kRows, kCols}, gen, DType::f32, 2.0, 5.0);
  double xm, xs;
  stats(x, xm, xs);
  nn::LayerNorm ln(kCols);
  nn::RMSNorm rms(kCols);
  std::vector<Result> res = {measure("LayerNorm", ln, x, reps), measure("RMSNorm", rms, x, reps)};

  const double elems = double(kRows * kCols);
  const double fwd_bytes = 8 * elems, both_bytes = 20 * elems;
  std::printf("x ~ N(2, 5^2), (%lld, %lld) f32: measured mean %.4f, std %.4f; %lld repetitions, median\n",
              (long long)kRows, (long long)kCols, xm, xs, (long long)reps);
  std::vector<std::vector<std::string>> rows;
  for (const Result& r : res) {
    rows.push_back({r.name, std::to_string(r.params), num(r.out_mean, 4), num(r.out_std, 4), num(r.fwd_ms, 3),
                    num(gbps(fwd_bytes, r.fwd_ms), 3), num(r.fwdbwd_ms, 3),
                    num(gbps(both_bytes, r.fwdbwd_ms), 3)});
    std::printf(
        "%-10s params %4lld  out mean %8.4f std %7.4f  fwd %7.3f ms (%6.2f GB/s)  fwd+bwd %7.3f ms "
        "(%6.2f GB/s)\n",
        r.name.c_str(), (long long)r.params, r.out_mean, r.out_std, r.fwd_ms, gbps(fwd_bytes, r.fwd_ms),
        r.fwdbwd_ms, gbps(both_bytes, r.fwdbwd_ms));
  }

  plot::BarChart stat;
  stat.title = "Output mean and std (x ~ N(2, 25))";
  stat.categories = {"LayerNorm", "RMSNorm"};
  stat.groups = {{"mean", {res[0].out_mean, res[1].out_mean}, {}},
                 {"std", {res[0].out_std, res[1].out_std}, {}}};
  plot::BarChart time;
  time.title = "Time per call (ms, median)";
  time.categories = {"LayerNorm", "RMSNorm"};
  time.groups = {{"forward", {res[0].fwd_ms, res[1].fwd_ms}, {}},
                 {"forward+backward", {res[0].fwdbwd_ms, res[1].fwdbwd_ms}, {}}};
  plot::BarChart bw;
  bw.title = "Effective bandwidth (GB/s)";
  bw.categories = {"LayerNorm", "RMSNorm"};
  bw.groups = {
      {"forward", {gbps(fwd_bytes, res[0].fwd_ms), gbps(fwd_bytes, res[1].fwd_ms)}, {}},
      {"forward+backward", {gbps(both_bytes, res[0].fwdbwd_ms), gbps(both_bytes, res[1].fwdbwd_ms)}, {}}};
  plot::BarChart params;
  params.title = "Parameters (C = 512)";
  params.categories = {"LayerNorm", "RMSNorm"};
  params.value_format = "%.0f";
  params.groups = {{"parameters", {double(res[0].params), double(res[1].params)}, {}}};
  plot::Figure fig;
  fig.title = "LayerNorm vs RMSNorm, (1000, 512) f32, seed " + std::to_string(opt.seed);
  fig.cols = 2;
  fig.panels = {stat, params, time, bw};
  std::string png = report.add_figure(fig);

  std::string md = "# LayerNorm vs RMSNorm\n\n";
  md += "x ~ N(2, 5^2), shape (1000, 512), f32, seed " + std::to_string(opt.seed) + " (measured mean " +
        num(xm, 4) + ", std " + num(xs, 4) + "). Times: median of " + std::to_string(reps) +
        " calls after 2 warm-up calls, " + "threads as set by --threads.\n\n";
  md += md_table(
      {"norm", "params", "out mean", "out std", "fwd ms", "fwd GB/s", "fwd+bwd ms", "fwd+bwd GB/s"}, rows);
  double pred_m = xm / std::sqrt(xm * xm + xs * xs), pred_s = xs / std::sqrt(xm * xm + xs * xs);
  md += "\n## What the run shows\n\n";
  md += "- LayerNorm output: mean " + num(res[0].out_mean, 3) + ", std " + num(res[0].out_std, 4) +
        " (0 and 1 by construction).\n";
  md += "- RMSNorm output: mean " + num(res[1].out_mean, 3) + ", std " + num(res[1].out_std, 4) +
        "; it does not centre, so the input's mean survives: mu / sqrt(mu^2 + sigma^2) = " + num(pred_m, 3) +
        " and sigma / sqrt(mu^2 + sigma^2) = " + num(pred_s, 3) + " predicted.\n";
  md += "- Parameters: LayerNorm " + std::to_string(res[0].params) + ", RMSNorm " +
        std::to_string(res[1].params) + " (no bias).\n";
  md += "- RMSNorm forward is " + num(res[0].fwd_ms / res[1].fwd_ms, 3) + "x and forward+backward " +
        num(res[0].fwdbwd_ms / res[1].fwdbwd_ms, 3) +
        "x the speed of LayerNorm here (>1 = RMSNorm faster). Timings on a shared machine are noisy.\n";
  report.write_all(md);
  std::printf("Wrote %s (+ .csv, .md, .cmd.txt)\n", png.c_str());
  return 0;
}

int main(int argc, char** argv) {
  return ng::examples::guarded_main(argc, argv, run);
}
