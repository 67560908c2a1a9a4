#!/usr/bin/env bash
# Build (release) and run the whole test suite: the README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake --preset release -G Ninja >/dev/null
cmake --build --preset release -j"$(nproc)"
ctest --preset release -j"$(nproc)" --timeout 600
