#!/usr/bin/env bash
# Download TinyShakespeare (1,115,394 bytes, public domain) into data/ and check its sha256.
# The experiments read it with --data data/tinyshakespeare.txt (the default).
set -euo pipefail
unset CDPATH  # an exported CDPATH sends a relative `cd` elsewhere
cd "$(dirname "$0")/.."
url="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
want="86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
out="data/tinyshakespeare.txt"
mkdir -p data
if [ -f "$out" ] && echo "$want  $out" | sha256sum -c --quiet 2>/dev/null; then
  echo "$out is already here"
  exit 0
fi
tmp="$out.part"
trap 'rm -f "$tmp"' EXIT  # a failed or interrupted download leaves no partial file
fetch_failed() {
  echo "get_data: could not download $url; copy the corpus to $out yourself (sha256 $want)" >&2
  exit 1
}
# Time limits, so an unreachable host fails in a minute instead of hanging (no internet: copy the file).
if command -v curl >/dev/null; then
  curl -fsSL --connect-timeout 20 --max-time 300 "$url" -o "$tmp" || fetch_failed
elif command -v wget >/dev/null; then
  wget -q --timeout=20 --tries=2 "$url" -O "$tmp" || fetch_failed
else
  echo "get_data: neither curl nor wget is installed (Debian: apt-get install curl); or copy the corpus" >&2
  echo "get_data: to $out yourself (sha256 $want)" >&2
  exit 1
fi
echo "$want  $tmp" | sha256sum -c --quiet || { echo "checksum mismatch for $url" >&2; rm -f "$tmp"; exit 1; }
mv "$tmp" "$out"
echo "wrote $out"
