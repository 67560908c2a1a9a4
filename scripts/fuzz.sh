#!/usr/bin/env bash
# Build the libFuzzer targets (fuzz/) with clang and run each for a bounded time.
#
#   bash scripts/fuzz.sh                 # 60 s per target
#   FUZZ_SECONDS=20 bash scripts/fuzz.sh # shorter
#   FUZZ_TARGETS="fuzz_npy" bash scripts/fuzz.sh
#
# A separate build tree, build/fuzz (clang, -DNORMGRAD_FUZZ=ON: ASan + UBSan + coverage; no OpenMP,
# CUDA, tests, examples or benchmarks). Each target starts from its committed seed corpus fuzz/corpus/<name>/
# (never written to) and keeps what it finds in build/fuzz/corpus/<name>/. -malloc_limit_mb makes any single
# allocation above 64 MiB a failure: inputs are at most 64 KiB, so that would be a reader believing a
# header that lies about sizes. A crash leaves its input in build/fuzz/artifacts/ and fails the script.
#
# The targets run at the same time (each is one process; -max_total_time bounds each one's wall time), so
# the whole run takes about FUZZ_SECONDS, not three times that. Each target's log is build/fuzz/<target>.log.
set -euo pipefail
unset CDPATH  # an exported CDPATH sends a relative `cd` elsewhere
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-"fuzz_npy fuzz_safetensors fuzz_tokenizer"}
jobs=${FUZZ_BUILD_JOBS:-$(nproc)}
bash scripts/clang_deps.sh  # clang and libFuzzer's runtime (libclang-rt-N-dev)

# The fuzz core compiles Highway for one static target (HWY_COMPILE_ONLY_STATIC, fuzz/CMakeLists.txt): this
# machine's best, given by -march (scripts/hwy_targets.sh --march; empty where the CPU lacks what Highway's
# x86 targets need). Without it the one target was the portable EMU128, not the code the library runs.
# (NORMGRAD_HWY_DISABLED_TARGETS, passed here until stop 44, applies to the normgrad target only, which this
# build does not make.)
cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="$(bash scripts/hwy_targets.sh --march)" \
  -DCMAKE_CXX_COMPILER=clang++ -DNORMGRAD_FUZZ=ON \
  -DNORMGRAD_OPENMP=OFF -DNORMGRAD_CUDA=OFF -DNORMGRAD_BUILD_TESTS=OFF -DNORMGRAD_BUILD_EXAMPLES=OFF \
  -DNORMGRAD_BUILD_BENCH=OFF >/dev/null
# shellcheck disable=SC2086
cmake --build build/fuzz -j"$jobs" --target $targets

rm -rf build/fuzz/artifacts
mkdir -p build/fuzz/artifacts
pids=()
for t in $targets; do
  name=${t#fuzz_}
  mkdir -p "build/fuzz/corpus/$name"
  echo "== $t: ${seconds} s"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "build/fuzz/fuzz/$t" "build/fuzz/corpus/$name" "fuzz/corpus/$name" \
    -max_total_time="$seconds" -max_len=65536 -malloc_limit_mb=64 -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="build/fuzz/artifacts/$t-" -print_final_stats=1 >"build/fuzz/$t.log" 2>&1 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
for t in $targets; do
  echo "== $t:"
  grep -E "^#[0-9]+ *DONE|stat::number_of_executed_units|stat::peak_rss|ERROR|SUMMARY|Test unit written|==[0-9]+==" \
    "build/fuzz/$t.log" || true
done
# A written crash artifact, or a non-zero exit of any target, is a failure.
if ls build/fuzz/artifacts/* >/dev/null 2>&1; then
  echo "FAIL: a fuzz target found a crashing input:"; ls build/fuzz/artifacts/
  exit 1
fi
if [ "$status" -ne 0 ]; then
  echo "FAIL: a fuzz target exited with an error (see build/fuzz/*.log)"
  exit 1
fi
echo "fuzz: all targets ran ${seconds} s without a finding"
