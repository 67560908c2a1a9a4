#!/usr/bin/env bash
# The test suite under ThreadSanitizer: the `tsan` preset (clang, -O1 -g1 -fsanitize=thread, no CUDA, no
# bench), run with LLVM's OpenMP runtime and its Archer tool.
#
#   bash scripts/tsan.sh                                   # every test (~11 min on 2 cores)
#   TSAN_TESTS="test_user_threads test_gemm" bash scripts/tsan.sh   # only these test executables
#
# Why clang and libomp: GCC's libgomp synchronises its threads with futexes that ThreadSanitizer cannot see,
# so every parallel region would be reported as a race. LLVM's libomp tells ThreadSanitizer about its
# barriers, locks and task ends through Archer (OMP_TOOL_LIBRARIES below), so what is left is a real race:
# two threads touching one location, at least one writing, with nothing ordering them.
#
# What it covers: the kernels' own teams (each test's ctest environment has OMP_NUM_THREADS=2), and the
# std::threads of tests/test_user_threads.cpp and the other Threads* tests. A report makes the test's
# process exit with 66, so ctest fails it. CI (.ci/run) runs it on the tests that start threads of their own,
# coordinate OpenMP threads by hand or merge per-thread partial sums; docs/reliability.md has the list.
#
# Why the SIMD kernels are built for SSE4 only (as the compiler's own target, -march=x86-64-v2; where the
# CPU lacks PCLMUL/AES, with Highway's portable EMU128 beside it), and not for this machine's
# best target as in scripts/asan.sh: ThreadSanitizer sees accesses of 1, 2, 4, 8 and 16 bytes, and AVX2's
# 32-byte and AVX-512's 64-byte loads and stores are invisible to it. With AVX-512 a GEMM that skipped the
# barrier before repacking B gave wrong products and no report; built for SSE4 the same mutant gave 42
# reports (stop 40). Every x86-64 machine CI runs on has SSE4.
set -euo pipefail
unset CDPATH  # an exported CDPATH sends a relative `cd` elsewhere
cd "$(dirname "$0")/.."
bash scripts/clang_deps.sh --openmp  # the TSan runtime; libomp and Archer
# SSE4 as the compiler's own target where the CPU allows: no portable baseline beside it (stop 41).
march=$(bash scripts/hwy_targets.sh --march sse4)
if [ -n "$march" ]; then
  static=(-DNORMGRAD_HWY_STATIC_ONLY=ON "-DCMAKE_CXX_FLAGS=${march}")
else
  static=(-DNORMGRAD_HWY_STATIC_ONLY=OFF "-DCMAKE_CXX_FLAGS=")
fi
cmake --preset tsan -G Ninja "${static[@]}" >/dev/null
targets=${TSAN_TESTS:-}
if [ -n "$targets" ]; then
  # shellcheck disable=SC2086
  cmake --build --preset tsan -j"$(nproc)" --target normgrad $targets
  regex=""
  for t in $targets; do
    # the tests of these executables: gtest_discover_tests writes each one's list beside it
    names=$(sed -n 's/^add_test( *\[=\[\([^]]*\)\]=\].*/\1/p' "build/tsan/tests/${t}[1]_tests.cmake")
    for n in $names; do regex+="${regex:+|}^${n}\$"; done
  done
  # an empty regex would select every test (the whole suite, ~11 min) instead of the ones asked for
  [ -n "$regex" ] || { echo "tsan: TSAN_TESTS ($targets) names no executable with tests" >&2; exit 1; }
  select=(-R "$regex")
else
  cmake --build --preset tsan -j"$(nproc)"
  select=()
fi
archer="$(dirname "$(readlink -f "$(command -v clang++)")")/../lib/libarcher.so"
[ -f "$archer" ] || { echo "tsan: Archer not found at $archer (Debian: libomp-N-dev for clang N, scripts/clang_deps.sh --openmp)" >&2; exit 1; }
export OMP_TOOL_LIBRARIES="$archer"
# ignore_noninstrumented_modules: libomp's own accesses are not instrumented and not ours to report.
export TSAN_OPTIONS=${TSAN_OPTIONS:-ignore_noninstrumented_modules=1:halt_on_error=0:second_deadlock_stack=1}
ctest --preset tsan -j"$(nproc)" --timeout 900 "${select[@]}"
