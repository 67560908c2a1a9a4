#!/usr/bin/env bash
# NORMGRAD_CUDA=AUTO with a CUDA compiler older than 12 (a wrapper around this machine's nvcc that reports
# "release 11.8"): the configure builds without the backend and says why; NORMGRAD_CUDA=ON refuses it.
# Exit 77 (ctest: skipped) where there is no nvcc to wrap.
set -euo pipefail
src=$1
nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc" ]; then echo "no nvcc here"; exit 77; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
cat > "$work/bin/nvcc" <<WRAP
#!/usr/bin/env bash
if [ "\${1:-}" = "--version" ]; then echo "Cuda compilation tools, release 11.8, V11.8.89"; exit 0; fi
exec "$nvcc" "\$@"
WRAP
chmod +x "$work/bin/nvcc"
auto=$(cmake -S "$src" -B "$work/auto" -G Ninja -DCMAKE_CUDA_COMPILER="$work/bin/nvcc" \
  -DNORMGRAD_BUILD_TESTS=OFF -DNORMGRAD_BUILD_EXAMPLES=OFF -DNORMGRAD_BUILD_BENCH=OFF 2>&1)
echo "$auto" | grep "normgrad:"
grep -q "building without the CUDA backend: .* is not CUDA 12 or later ('release 11.8'" <<< "$auto"
grep -q "CUDA=OFF" <<< "$auto"
if on=$(cmake -S "$src" -B "$work/on" -G Ninja -DNORMGRAD_CUDA=ON -DCMAKE_CUDA_COMPILER="$work/bin/nvcc" \
  -DNORMGRAD_BUILD_TESTS=OFF -DNORMGRAD_BUILD_EXAMPLES=OFF -DNORMGRAD_BUILD_BENCH=OFF 2>&1); then
  echo "NORMGRAD_CUDA=ON accepted CUDA 11.8"; exit 1
fi
grep -q "NORMGRAD_CUDA=ON, but .* is not CUDA 12 or later" <<< "$on"
echo "cuda auto: ok"
