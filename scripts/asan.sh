#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer, with LeakSanitizer on (ASan's
# default on Linux): the `asan` preset (-O1 -g1 -fsanitize=address,undefined, no CUDA, no bench). To keep CI
# short the preset compiles the Highway kernels for AVX-512 and Highway's portable baseline only (not SSE4 and
# AVX2): on the AVX-512 machines CI runs on, that is the code that runs, and it halves the build (measured:
# 10.3 -> 4.8 min for the whole sanitizer build on 2 cores; the suite then takes about 2.5 min).
# CI runs it after the release suite (.ci/run). Any report fails the test that caused it:
# -fno-sanitize-recover=undefined makes UBSan abort, and ASan/LSan exit non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake --preset asan -G Ninja >/dev/null
cmake --build --preset asan -j"$(nproc)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
ctest --preset asan -j"$(nproc)" --timeout 900
