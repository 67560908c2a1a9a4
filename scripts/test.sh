#!/usr/bin/env bash
# Build (release) and run the whole test suite: the README's test command.
set -euo pipefail
unset CDPATH  # an exported CDPATH sends a relative `cd` elsewhere (and makes it print the folder)
cd "$(dirname "$0")/.."
bash scripts/deps.sh
# CMake cannot switch a build folder to another generator in place: one configured earlier with another
# (`cmake -B build/release` uses make) is configured afresh, with the preset's Ninja.
gen=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' build/release/CMakeCache.txt 2>/dev/null || true)
fresh=()
if [ -n "$gen" ] && [ "$gen" != Ninja ]; then
  echo "normgrad: build/release was configured with $gen, not Ninja: configuring it afresh" >&2
  fresh=(--fresh)
fi
# The whole suite, whatever an earlier configure left in the cache (-DNORMGRAD_BUILD_TESTS=OFF made this
# script build nothing to test and exit 0; test_examples* need the examples, bench/ has tests too).
cmake --preset release ${fresh[@]+"${fresh[@]}"} -DNORMGRAD_BUILD_TESTS=ON -DNORMGRAD_BUILD_EXAMPLES=ON \
  -DNORMGRAD_BUILD_BENCH=ON >/dev/null
cmake --build --preset release -j"$(nproc)"
ctest --preset release -j"$(nproc)" --timeout 600 --no-tests=error
