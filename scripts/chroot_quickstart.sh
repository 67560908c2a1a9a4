#!/usr/bin/env bash
# The README's Quick start on a fresh Debian 12: a minimal Debian made by mmdebstrap (minbase: no compiler,
# no Python, no git, no sudo), a clean clone of this repository's HEAD in /root/normgrad (no data/), then
# the two commands, as root. Needs root, network access to a Debian mirror, and about 2 GB in DIR.
#   sudo bash scripts/chroot_quickstart.sh [DIR]      (DIR defaults to /tmp/normgrad_chroot; reused if there)
set -euo pipefail
unset CDPATH  # an exported CDPATH sends a relative `cd` elsewhere
repo=$(cd "$(dirname "$0")/.." && pwd)
root=${1:-/tmp/normgrad_chroot}
[ "$(id -u)" -eq 0 ] || { echo "chroot_quickstart: needs root (chroot, mount)" >&2; exit 1; }
command -v mmdebstrap >/dev/null || apt-get install -y -qq mmdebstrap >/dev/null
[ -x "$root/bin/bash" ] || mmdebstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian
cp /etc/resolv.conf "$root/etc/resolv.conf"
mounted=()
cleanup() { for m in ${mounted[@]+"${mounted[@]}"}; do umount "$m" || true; done; }
trap cleanup EXIT
for m in proc dev sys; do
  if ! mountpoint -q "$root/$m"; then
    if [ "$m" = proc ]; then mount -t proc proc "$root/proc"; else mount --bind "/$m" "$root/$m"; fi
    mounted=("$root/$m" ${mounted[@]+"${mounted[@]}"})
  fi
done
rm -rf "$root/root/normgrad"
git clone -q "$repo" "$root/root/normgrad"
chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb /bin/bash -c '
  set -e
  cd /root/normgrad
  s=$(date +%s); bash scripts/demo.sh; echo "chroot_quickstart: demo.sh passed in $(( $(date +%s) - s )) s"
  s=$(date +%s); bash scripts/test.sh; echo "chroot_quickstart: test.sh passed in $(( $(date +%s) - s )) s"'
