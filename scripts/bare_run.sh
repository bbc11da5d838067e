#!/usr/bin/env bash
# Runs the main job as a new user would on a bare Debian 12, and times it: debootstrap makes a
# minimal bookworm (88 packages: no compiler, cmake, curl or Node.js) in FOLDER, a clean clone of
# this repository's HEAD goes into it, and `bash scripts/run.sh` runs there under chroot as root,
# with nothing of this machine's but the network (and, where a TLS proxy needs one, the CA bundle
# named by XSA_BARE_CA). Needs root and debootstrap (apt-get install debootstrap). The log is
# FOLDER/run.log; the job's stage lines say what took how long.
# Usage: sudo scripts/bare_run.sh FOLDER   (FOLDER is made, or reused when it holds a clean root)
set -euo pipefail
cd "$(dirname "$0")/.."
folder=${1:?usage: scripts/bare_run.sh FOLDER}
[ "$(id -u)" -eq 0 ] || { echo "bare_run: needs root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "bare_run: needs debootstrap" >&2; exit 1; }
mirror=${XSA_BARE_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$folder"
folder=$(cd "$folder" && pwd)
clean=$folder/clean root=$folder/root
# The bare system, made once and copied for each run, so every run starts from the same bare root.
if [ ! -x "$clean/bin/bash" ]; then
  rm -rf "$clean.partial"
  debootstrap --variant=minbase bookworm "$clean.partial" "$mirror" >"$folder/debootstrap.log"
  mv "$clean.partial" "$clean"
fi
unmount() { umount -R "$root/proc" "$root/dev" "$root/sys" 2>/dev/null || true; }
unmount
rm -rf "$root"
cp -a "$clean" "$root"
trap unmount EXIT
cp /etc/resolv.conf "$root/etc/resolv.conf"
ca=()
if [ -n "${XSA_BARE_CA:-}" ]; then
  cp "$XSA_BARE_CA" "$root/etc/bare-run-ca.crt"
  ca=(CURL_CA_BUNDLE=/etc/bare-run-ca.crt NODE_EXTRA_CA_CERTS=/etc/bare-run-ca.crt)
fi
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"
git clone -q . "$root/xsa"
echo "bare_run: $(git rev-parse --short HEAD) in a bare Debian 12 at $root; log in $folder/run.log"
status=0
chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${ca[@]}" \
  /bin/bash -c 'cd /xsa && time bash scripts/run.sh' >"$folder/run.log" 2>&1 || status=$?
grep -E '^run.sh: |^real' "$folder/run.log" || true
exit $status
