#!/usr/bin/env bash
# Installs Debian's default clang with the runtimes the sanitizer and fuzz builds need, for whichever clang
# version the Debian release packages: clang 14 on Debian 12, 19 on Debian 13. Its runtimes are versioned
# packages (libclang-rt-N-dev: ASan, UBSan, TSan and libFuzzer; libomp-N-dev: clang's OpenMP), so naming
# "14" by hand worked on Debian 12 only.
#
#   bash scripts/clang_deps.sh            clang + libclang-rt-N-dev
#   bash scripts/clang_deps.sh --openmp   the same + libomp-N-dev (asan.sh, tsan.sh)
#
# N is the installed clang's major version, or else the one the `clang` package depends on (clang-N).
set -euo pipefail
unset CDPATH  # an exported CDPATH sends a relative `cd` elsewhere
cd "$(dirname "$0")/.."
bash scripts/deps.sh clang
major=$(clang -dumpversion 2>/dev/null | cut -d. -f1 || true)
if [ -z "$major" ]; then
  major=$(apt-cache depends clang 2>/dev/null | sed -n 's/^ *Depends: clang-\([0-9][0-9]*\)$/\1/p' | head -1 || true)
fi
if [ -z "$major" ]; then
  echo "clang_deps: cannot tell which clang version Debian installed ('clang -dumpversion' and" \
    "'apt-cache depends clang' both failed)" >&2
  exit 1
fi
pkgs=("libclang-rt-${major}-dev")
[ "${1:-}" = "--openmp" ] && pkgs+=("libomp-${major}-dev")
bash scripts/deps.sh "${pkgs[@]}"
