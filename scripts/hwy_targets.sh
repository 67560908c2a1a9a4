#!/usr/bin/env bash
# Prints the Highway targets NOT to compile for a build that only needs to run on this machine: every x86
# target but the best one this CPU runs (AVX-512, else AVX2, else SSE4). Highway's portable baseline
# (EMU128) is always built on top. Used by the sanitizer and fuzz builds (scripts/asan.sh, scripts/fuzz.sh)
# to halve their compile time; the release build keeps SSE4, AVX2 and AVX-512 with dynamic dispatch.
#
# Why it is chosen here and not fixed: CI machines of this kind differ (AMD Zen 3 has no AVX-512). A
# sanitizer build with only AVX-512 left such a machine on EMU128, whose every vector op is a loop over
# an array; under ASan the suite then ran for 30 minutes instead of a few and a trainer test timed out
# (CI, 2026-11-24).
#
# Highway's conditions for its targets (hwy/targets.cc): AVX3 = AVX-512 F, VL, DQ and BW; AVX2 = AVX2,
# FMA, BMI, BMI2, F16C, LZCNT (abm) and MOVBE. NORMGRAD_HWY_DISABLED_TARGETS in the environment wins.
#
# `--march [best|sse4]` prints instead the compiler flags that make that target Highway's static one, for a
# build with -DNORMGRAD_HWY_STATIC_ONLY=ON (one target, no portable baseline): x86-64-v4 for AVX-512,
# v3 for AVX2, v2 for SSE4, each with PCLMUL and AES (Highway's SSE4 needs them). It prints nothing when
# this CPU lacks those two: the caller then keeps the dispatching build.
set -euo pipefail
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { for f in "$@"; do [[ " $flags " == *" $f "* ]] || return 1; done; }
if [ "${1:-}" = "--march" ]; then
  has pclmulqdq aes sse4_1 sse4_2 popcnt || exit 0
  if [ "${2:-best}" = "sse4" ]; then
    echo "-march=x86-64-v2 -mpclmul -maes"
  elif has avx512f avx512vl avx512dq avx512bw avx2 fma bmi1 bmi2 f16c abm movbe; then
    echo "-march=x86-64-v4 -mpclmul -maes"
  elif has avx2 fma bmi1 bmi2 f16c abm movbe; then
    echo "-march=x86-64-v3 -mpclmul -maes"
  else
    echo "-march=x86-64-v2 -mpclmul -maes"
  fi
  exit 0
fi
if [ -n "${NORMGRAD_HWY_DISABLED_TARGETS:-}" ]; then
  echo "$NORMGRAD_HWY_DISABLED_TARGETS"
  exit 0
fi
if has avx512f avx512vl avx512dq avx512bw; then
  echo "HWY_SSSE3|HWY_SSE4|HWY_AVX2|HWY_AVX3_DL"
elif has avx2 fma bmi1 bmi2 f16c abm movbe; then
  echo "HWY_SSSE3|HWY_SSE4|HWY_AVX3|HWY_AVX3_DL"
else
  echo "HWY_SSSE3|HWY_AVX2|HWY_AVX3|HWY_AVX3_DL"
fi
