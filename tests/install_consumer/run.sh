#!/usr/bin/env bash
# Install normgrad from the build tree into a scratch prefix, then build and run an outside consumer.
# The prefix is moved before the consumer uses it: the installed package must be relocatable, and must name
# neither the build tree nor the source tree (the test ran while both were still there to be found).
set -euo pipefail
unset CDPATH
build_dir=$(cd "$1" && pwd)
version=${2:-}
src_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A step's output is shown only when it fails (ctest --output-on-failure then has the compiler's message).
quiet() { "$@" >"$work/log" 2>&1 || { cat "$work/log"; return 1; }; }
quiet cmake --install "$build_dir" --prefix "$work/staged"
source_dir=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build_dir/CMakeCache.txt")
if grep -rlF --include='*.cmake' -e "$build_dir" -e "$source_dir" -e "$work/staged" "$work/staged"; then
  echo "install consumer: the installed CMake files above name a build-time path"
  exit 1
fi
mv "$work/staged" "$work/prefix"
# The library's own compiler: a clang build (the ThreadSanitizer one, scripts/tsan.sh) links clang's
# sanitizer runtime and libomp, which GCC's would not match.
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build_dir/CMakeCache.txt")
# A sanitizer build's installed headers are the release build's: its run leaves compiling each on its own
# to that one (tests/install_consumer/CMakeLists.txt, NG_EACH_HEADER).
each_header=ON
if grep -qE '^NORMGRAD_(SANITIZE|TSAN):BOOL=ON$' "$build_dir/CMakeCache.txt"; then each_header=OFF; fi
# Ninja, as the main build: it is one of scripts/deps.sh's packages, where make may not be (Debian's cmake
# only recommends it, and an image installed without recommends has none).
quiet cmake -G Ninja -S "$src_dir" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DNG_VERSION="$version" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DNG_EACH_HEADER="$each_header" ${cxx:+-DCMAKE_CXX_COMPILER="$cxx"}
# The package just installed, not another normgrad on this machine.
found=$(sed -n 's/^normgrad_DIR:PATH=//p' "$work/build/CMakeCache.txt")
if [[ "$found" != "$work/prefix/"* ]]; then
  echo "install consumer: found normgrad at $found, not in $work/prefix"
  exit 1
fi
quiet cmake --build "$work/build"
# ctest's PASS_REGULAR_EXPRESSION ignores the exit status: the last line is printed only when all of the
# above, and the consumer itself (its exit status included), succeeded.
status=0
out=$("$work/build/outside") || status=$?
echo "$out"
if [ "$status" -ne 0 ] || ! grep -qx 'grad 2 4 6' <<<"$out"; then
  echo "install consumer: the consumer failed (exit status $status)"
  exit 1
fi
echo "install consumer: ok"
