#!/usr/bin/env bash
# Install normgrad's build dependencies from Debian when they are missing (sudo only when not root).
set -euo pipefail
# OpenMP comes with g++ (libgomp); bench/ is self-contained (no Google Benchmark).
pkgs=(cmake ninja-build g++ libhwy-dev libgtest-dev libstb-dev libcli11-dev nlohmann-json3-dev)
pkgs+=("$@")  # extra packages a caller needs (scripts/fuzz.sh: clang and its libFuzzer runtime)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "normgrad: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
