#!/usr/bin/env bash
# Install normgrad from the build tree into a scratch prefix, then build and run an outside consumer.
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
# The library's own compiler: a clang build (the ThreadSanitizer one, scripts/tsan.sh) links clang's
# sanitizer runtime and libomp, which GCC's would not match.
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build_dir/CMakeCache.txt")
# Ninja, as the main build: it is one of scripts/deps.sh's packages, where make may not be (Debian's cmake
# only recommends it, and an image installed without recommends has none).
cmake -G Ninja -S "$src_dir" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" ${cxx:+-DCMAKE_CXX_COMPILER="$cxx"} >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/outside"
