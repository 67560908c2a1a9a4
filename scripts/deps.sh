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
  SUDO=()
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
      echo "normgrad: missing Debian packages: ${missing[*]}" >&2
      echo "normgrad: not root and no sudo here; as root run: apt-get install ${missing[*]}" >&2
      exit 1
    fi
    SUDO=(sudo)
  fi
  echo "normgrad: installing ${missing[*]}" >&2
  "${SUDO[@]}" apt-get update -qq
  # env after sudo: sudo's env_reset would drop a DEBIAN_FRONTEND set before it, and a debconf prompt with
  # apt's output hidden would look like a hang
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
