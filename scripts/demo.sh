#!/usr/bin/env bash
# The README's demo command: build, then run experiment 1 (gradient vanishing) and a quick experiment 2
# (the four-way norm comparison), and say where the plots are.
set -euo pipefail
unset CDPATH  # an exported CDPATH sends a relative `cd` elsewhere (and makes it print the folder)
# OUT is taken relative to where the command was run (it was taken relative to the repository, after the
# cd below); the default is the repository's results/.
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${OUT:-$root/results}")
cd "$root"
bash scripts/deps.sh
# CMake cannot switch a build folder to another generator in place: one configured earlier with another
# (`cmake -B build/release` uses make) is configured afresh, with the preset's Ninja.
gen=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' build/release/CMakeCache.txt 2>/dev/null || true)
fresh=()
if [ -n "$gen" ] && [ "$gen" != Ninja ]; then
  echo "normgrad: build/release was configured with $gen, not Ninja: configuring it afresh" >&2
  fresh=(--fresh)
fi
cmake --preset release ${fresh[@]+"${fresh[@]}"} -DNORMGRAD_BUILD_EXAMPLES=ON >/dev/null
cmake --build --preset release -j"$(nproc)" --target exp1_gradient_vanishing exp2_norm_comparison
mkdir -p "$out"
./build/release/examples/exp1_gradient_vanishing --out "$out"
if [ ! -f data/tinyshakespeare.txt ]; then
  echo "(no data/tinyshakespeare.txt: exp2 uses its synthetic copy task; bash scripts/get_data.sh fetches the corpus)"
fi
./build/release/examples/exp2_norm_comparison --quick --out "$out"
echo
echo "Plots, CSV data and summaries are in $out/:"
for f in "$out"/*.png "$out"/*.csv "$out"/*.md; do
  if [ -e "$f" ]; then echo "  $f"; fi
done
