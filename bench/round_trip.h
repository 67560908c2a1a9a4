// The core-to-core round trip: a baseline of normgrad_bench, and the machine-state probe of step_states.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace ng_bench {

// The round trip between two cores, in ns: one cache line passed back and forth between two threads
// pinned to the first two CPUs this process may use (each waits for the other's increment of an atomic
// counter; the median of 15 rounds of 4000 round trips). It is what every barrier and every line written by
// one thread and read by the other costs, so it tells what state the machine was in: on this project's
// VM, ~55 ns while its two vCPUs sit on one core complex of the AMD EPYC (a shared L3) and ~330 ns while
// the host has put them on two (each its own L3), which it does and undoes every few seconds. That second
// state is the "slow state" of earlier runs: the 2-thread training step takes ~70 ms instead of ~60 ms
// (docs/performance.md, stop 19). 0 where there are fewer than two CPUs to pin to.
inline double round_trip_ns() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return 0;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (cpus.size() < 2) return 0;
  auto pin = [](int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
  };
  constexpr int kTrips = 4000, kRounds = 15;
  // The line alone in its 64 bytes: on the stack, next to the other locals, it measured 65-87 ns for 54.
  struct alignas(64) Line {
    std::atomic<int64_t> value{0};
    char pad[64 - sizeof(std::atomic<int64_t>)];
  };
  static Line padded;
  std::atomic<int64_t>& line = padded.value;
  line.store(0);
  std::vector<double> ns;
  std::thread echo([&] {  // answers every odd value with the next even one
    pin(cpus[1]);
    for (int64_t i = 0; i < int64_t(kTrips) * kRounds; ++i) {
      while (line.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      line.store(2 * i + 2, std::memory_order_release);
    }
  });
  std::thread serve([&] {
    pin(cpus[0]);
    for (int64_t r = 0, i = 0; r < kRounds; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int k = 0; k < kTrips; ++k, ++i) {
        line.store(2 * i + 1, std::memory_order_release);
        while (line.load(std::memory_order_acquire) != 2 * i + 2) {
        }
      }
      ns.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kTrips *
                   1e9);
    }
  });
  serve.join();
  echo.join();
  std::sort(ns.begin(), ns.end());
  return ns[ns.size() / 2];
}

}  // namespace ng_bench
