// step_states: exp2's training step (Pre-LN + RMSNorm, 2 threads by default), one line per step with the
// core-to-core round trip measured just before and just after it, then the step's median in each state.
//
// Why it exists. On the shared AMD EPYC VM this project is measured on, the host moves the two vCPUs
// between one core complex (a round trip of ~55 ns) and two (~330 ns, each with its own L3) every few
// seconds, and the 2-thread step takes ~58-61 ms in the first state and ~65-70 ms in the second
// (docs/performance.md, stop 19). A before/after of two builds means something only state by state: build
// this program at both commits, run the two in alternation, and summarize the lines together:
//
//   for r in 1 2 3 4 5 6 7 8; do /tmp/old/step_states >> old.txt; build/release/bench/step_states >> new.txt;
//   done
//   build/release/bench/step_states --summarize old.txt new.txt
//
// A line is: round trip before (ns), step (ms), round trip after (ns). A step counts as "one CCX" when both
// round trips are under --near-ns (120), "two CCDs" when both are over --far-ns (200); steps during a move
// count for neither. Those two bounds fit the AMD VM; on another host read the round trips the lines carry
// and pass its own (the Intel Xeon VM of stops 34-41 measured 116-189 ns, one state by these bounds). Every
// summary also has an "all steps" row, whatever the states.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/exp2_step.h"
#include "bench/round_trip.h"
#include "normgrad.h"
#include "nn/tinylm.h"
#include "optim/adam.h"

namespace {

struct Sample {
  double rt_before, ms, rt_after;
};

double g_near_ns = 120, g_far_ns = 200;  // --near-ns, --far-ns

// "one CCX", "two CCDs" or "" (the state changed during the step).
std::string state_of(const Sample& s) {
  if (s.rt_before <= 0 || s.rt_after <= 0) return "";  // (no round trip: fewer than two CPUs)
  if (s.rt_before < g_near_ns && s.rt_after < g_near_ns) return "one CCX";
  if (s.rt_before > g_far_ns && s.rt_after > g_far_ns) return "two CCDs";
  return "";
}

void summarize(const std::string& label, const std::vector<Sample>& samples) {
  for (const char* state : {"all steps", "one CCX", "two CCDs"}) {
    std::vector<double> ms;
    for (const auto& s : samples)
      if (std::string(state) == "all steps" || state_of(s) == state) ms.push_back(s.ms);
    if (ms.empty()) {
      if (std::string(state) != "all steps") std::printf("%-24s %-9s steps    0\n", label.c_str(), state);
      continue;
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%-24s %-9s steps %4zu  median %6.2f ms  quartile %6.2f ms  best %6.2f ms\n", label.c_str(),
                state, ms.size(), ms[ms.size() / 2], ms[ms.size() / 4], ms.front());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"step_states: the exp2 training step, with the machine state (core round trip) of each step"};
  int steps = 40, threads = 2;
  std::vector<std::string> files;
  app.add_option("--steps", steps, "steps to time (after 2 untimed ones)")->check(CLI::Range(1, 1000000));
  app.add_option("--threads", threads, "threads")->check(CLI::Range(1, 1024));
  app.add_option("--summarize", files, "instead of running: the medians per state of these files' lines");
  app.add_option("--near-ns", g_near_ns, "round trips under this: one core complex (default 120)")
      ->check(CLI::PositiveNumber);
  app.add_option("--far-ns", g_far_ns, "round trips over this: two (default 200)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (g_near_ns > g_far_ns) {
    std::fprintf(stderr, "step_states: --near-ns %.0f is above --far-ns %.0f\n", g_near_ns, g_far_ns);
    return 2;
  }

  if (!files.empty()) {
    for (const auto& f : files) {
      std::ifstream in(f);
      if (!in) {
        std::fprintf(stderr, "step_states: cannot read %s\n", f.c_str());
        return 1;
      }
      std::vector<Sample> samples;
      for (std::string line; std::getline(in, line);) {
        std::istringstream ls(line);
        Sample s{};
        if (ls >> s.rt_before >> s.ms >> s.rt_after) samples.push_back(s);
      }
      if (samples.empty()) {  // it printed nothing and exited 0 (stop 42)
        std::fprintf(stderr, "step_states: %s has no step lines (round trip ns, step ms, round trip ns)\n",
                     f.c_str());
        return 1;
      }
      summarize(f, samples);
    }
    return 0;
  }

  ng::set_num_threads(threads);
  ng::nn::TinyLM model(ng_bench::exp2_model("pre", "rmsnorm"));
  ng::optim::Adam adam(model.named_parameters(), {.lr = 5e-4});
  const auto [tokens, targets] = ng_bench::exp2_batch();
  auto step = [&] {
    ng::Tensor loss = model.loss(tokens, targets);
    loss.backward();
    adam.step();
    model.zero_grad();
  };
  step();  // Adam's moment buffers
  step();
  for (int i = 0; i < steps; ++i) {
    Sample s{};
    s.rt_before = ng_bench::round_trip_ns();
    const auto t0 = std::chrono::steady_clock::now();
    step();
    s.ms = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3;
    s.rt_after = ng_bench::round_trip_ns();
    std::printf("%.0f %.3f %.0f\n", s.rt_before, s.ms, s.rt_after);
  }
  std::fflush(stdout);
  return 0;
}
