#!/usr/bin/env bash
# Install normgrad's build dependencies from Debian when they are missing (sudo only when not root).
set -euo pipefail
# OpenMP comes with g++ (libgomp); bench/ is self-contained (no Google Benchmark).
# python3: the test of the benchmark's scripts (BenchScripts.BadInputAndMedians), which CMake leaves out of
# the suite where it finds no Python (a fresh minimal Debian has none).
pkgs=(cmake ninja-build g++ libhwy-dev libgtest-dev libstb-dev libcli11-dev nlohmann-json3-dev python3)
pkgs+=("$@")  # extra packages a caller needs (scripts/fuzz.sh: clang and its libFuzzer runtime)
if ! command -v dpkg-query >/dev/null; then
  # Not Debian: nothing to check or install with. Go on; CMake names whatever it cannot find.
  echo "normgrad: no dpkg here, so not checking for (or installing) the Debian packages ${pkgs[*]};" \
    "install their equivalents yourself if CMake cannot find them" >&2
  exit 0
fi
missing=()
for p in "${pkgs[@]}"; do
  # Installed, not merely known to dpkg: `dpkg -s` also succeeds for a package removed with its config files.
  st=$(dpkg-query -W -f=' ${db:Status-Status} ' "$p" 2>/dev/null) || st=""
  [[ "$st" == *" installed "* ]] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null; then
    echo "normgrad: missing Debian packages: ${missing[*]}; and no apt-get here to install them" >&2
    exit 1
  fi
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
  # (a failed update, e.g. offline, may still leave the packages installable from the local cache)
  "${SUDO[@]}" apt-get update -qq || echo "normgrad: apt-get update failed; trying the install anyway" >&2
  # env after sudo: sudo's env_reset would drop a DEBIAN_FRONTEND set before it, and a debconf prompt with
  # apt's output hidden would look like a hang
  if ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; then
    echo "normgrad: apt-get could not install ${missing[*]} (its message is above): normgrad needs them" >&2
    exit 1
  fi
fi
