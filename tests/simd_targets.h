// Running a test body once per SIMD target: every Highway kernel is compiled for several targets (SSE4,
// AVX2, AVX-512 ...) and the dispatch picks the best one the CPU has, so without this only that one is
// tested.
#pragma once

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cstdint>

namespace ng::testing {

// Run `body` once per SIMD target the CPU supports (Highway's dispatch mock: the fast kernels then run their
// SSE4, AVX2, AVX-512 ... versions), then restore the real CPU. Returns how many targets ran.
//
// NOTE: the supported set is read once, before the first mock. Reading hwy::SupportedTargets() inside the
// loop returns the previous iteration's mock (one target), so every later target looks unsupported and is
// skipped silently: three tests did that until 2026-11-24 and never ran their SSE4 leg (nor, on AVX-512
// machines, their AVX2 leg).
template <typename F>
int for_each_target(F&& body) {
  int ran = 0;
  const int64_t supported = hwy::SupportedTargets();  // before the mock narrows it
  for (int64_t t : {int64_t(HWY_EMU128), int64_t(HWY_SSE4), int64_t(HWY_AVX2), int64_t(HWY_AVX3)}) {
    if ((supported & t) == 0) continue;
    hwy::SetSupportedTargetsForTest(t);
    hwy::SupportedTargets();  // updates the chosen target
    SCOPED_TRACE(hwy::TargetName(t));
    body();
    ++ran;
  }
  hwy::SetSupportedTargetsForTest(0);
  hwy::SupportedTargets();
  return ran;
}

}  // namespace ng::testing
