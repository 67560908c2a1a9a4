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
set -euo pipefail
if [ -n "${NORMGRAD_HWY_DISABLED_TARGETS:-}" ]; then
  echo "$NORMGRAD_HWY_DISABLED_TARGETS"
  exit 0
fi
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { for f in "$@"; do [[ " $flags " == *" $f "* ]] || return 1; done; }
if has avx512f avx512vl avx512dq avx512bw; then
  echo "HWY_SSSE3|HWY_SSE4|HWY_AVX2|HWY_AVX3_DL"
elif has avx2 fma bmi1 bmi2 f16c abm movbe; then
  echo "HWY_SSSE3|HWY_SSE4|HWY_AVX3|HWY_AVX3_DL"
else
  echo "HWY_SSSE3|HWY_AVX2|HWY_AVX3|HWY_AVX3_DL"
fi
