#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer, with LeakSanitizer on (ASan's
# default on Linux): the `asan` preset (clang, -O1 -g1 -fsanitize=address,undefined, no CUDA, no bench).
#
# Clang, since stop 42 (GCC before): it builds this preset in 4.8 min instead of 7.7 on 2 cores (GCC took
# 92 s for group_norm.cpp alone), and its UBSan checks pointer arithmetic against array bounds, which
# found a pointer formed past a one-element buffer in GroupNorm's backward that GCC's had let through.
# The release suite is GCC's, so CI builds with both compilers. For GCC's sanitizers instead:
#   cmake --preset asan -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ (in a fresh build folder)
#
# To keep CI short the sanitizer build compiles the Highway kernels for one SIMD target, the best this
# machine runs (scripts/hwy_targets.sh says why it is chosen per machine): that is the code that runs here,
# and it halves the build (10.3 -> 4.8 min on 2 cores). Since stop 41 that target is the compiler's own
# (-march=x86-64-v4 for AVX-512, NORMGRAD_HWY_STATIC_ONLY), so Highway's portable baseline is not compiled
# beside it either; on a CPU without PCLMUL/AES the baseline stays, as before.
# CI runs it after the release suite (.ci/run). Any report fails the test that caused it:
# -fno-sanitize-recover=undefined makes UBSan abort, and ASan/LSan exit non-zero.
set -euo pipefail
unset CDPATH  # an exported CDPATH sends a relative `cd` elsewhere
cd "$(dirname "$0")/.."
bash scripts/clang_deps.sh --openmp  # clang, its sanitizer runtimes and its OpenMP
disabled=$(bash scripts/hwy_targets.sh)
# Where the CPU allows (scripts/hwy_targets.sh --march), only that best target, as the compiler's own: no
# portable baseline beside it (NORMGRAD_HWY_STATIC_ONLY; a quarter less compile, stop 41).
march=$(bash scripts/hwy_targets.sh --march)
if [ -n "$march" ]; then
  echo "asan: the SIMD kernels for this machine's best target only (${march})"
  static=(-DNORMGRAD_HWY_STATIC_ONLY=ON "-DCMAKE_CXX_FLAGS=${march}")
else
  echo "asan: Highway targets not compiled: ${disabled} (the best one this machine runs, and EMU128, are)"
  static=(-DNORMGRAD_HWY_STATIC_ONLY=OFF "-DCMAKE_CXX_FLAGS=")
fi
cmake --preset asan -G Ninja -DNORMGRAD_HWY_DISABLED_TARGETS="${disabled}" "${static[@]}" >/dev/null
cmake --build --preset asan -j"$(nproc)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
ctest --preset asan -j"$(nproc)" --timeout 900
