#!/usr/bin/env bash
# Builds the images the test node runs, with no registry and no Docker engine, as docker-archive
# tarballs that containerd imports (`ctr images import`). Prints the directory holding them.
#
#  - registry.k8s.io/pause:3.10: the sandbox image, kubernetes' own build/pause/linux/pause.c
#    (from the Go module cache, the pinned k8s.io/kubernetes) compiled static, FROM scratch.
#    The example Deployment uses it as its app container too.
#  - config-sync.test/busybox:1: Debian's busybox-static, FROM scratch, for test apps that need
#    a shell.
#  - config-sync:<version>: the shipped image (scripts/build-image.sh), from the current dist/.
# The first two depend only on pinned inputs and are cached beside the binaries; the third is
# rebuilt every run, because it is what is under test.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
project=$(cd "$here/../.." && pwd)
log() { printf '[node:images] %s\n' "$*" >&2; }

kube_version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$here/go/go.mod")
cache_root=${CONFIG_SYNC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/config-sync}
busybox_version=$(dpkg-query -W -f='${Version}' busybox-static | tr -c 'A-Za-z0-9.\n' _)
dest="$cache_root/images/$kube_version-busybox-$busybox_version"
out=${1:?usage: node-images.sh <output dir>}
mkdir -p "$dest" "$out"
B=(buildah --storage-driver vfs)

scratch_image() { # name archive rootfs entrypoint-json
  local name=$1 archive=$2 rootfs=$3 entry=$4 c
  c=$("${B[@]}" from scratch)
  "${B[@]}" copy --quiet "$c" "$rootfs" / >/dev/null
  "${B[@]}" config --entrypoint "$entry" --cmd '' "$c"
  "${B[@]}" commit --quiet "$c" "$name" >/dev/null
  "${B[@]}" rm "$c" >/dev/null
  rm -f "$archive.tmp"
  "${B[@]}" push --quiet "$name" "docker-archive:$archive.tmp:$name" >&2
  mv "$archive.tmp" "$archive"
}

if [ ! -s "$dest/pause.tar" ]; then
  src=$(cd "$here/go" && go env GOMODCACHE)/k8s.io/kubernetes@$kube_version/build/pause/linux/pause.c
  [ -f "$src" ] || (cd "$here/go" && go mod download k8s.io/kubernetes)
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  gcc -Os -static -o "$tmp/pause" "$src" -DVERSION="$kube_version"
  strip "$tmp/pause"
  log "pause image from $src"
  scratch_image registry.k8s.io/pause:3.10 "$dest/pause.tar" "$tmp" '["/pause"]'
  rm -rf "$tmp"; trap - EXIT
fi

if [ ! -s "$dest/busybox.tar" ]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/bin" "$tmp/tmp" "$tmp/etc"
  cp /usr/bin/busybox "$tmp/bin/busybox"
  for applet in sh cat sleep ls kill echo env grep wc; do ln -s busybox "$tmp/bin/$applet"; done
  chmod 1777 "$tmp/tmp"
  printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' > "$tmp/etc/passwd"
  log "busybox image from Debian busybox-static $busybox_version"
  scratch_image config-sync.test/busybox:1 "$dest/busybox.tar" "$tmp" '["/bin/sh"]'
  rm -rf "$tmp"; trap - EXIT
fi
cp "$dest/pause.tar" "$dest/busybox.tar" "$out/"

# The shipped image, as `npm run image` builds it (dist/ must be current: npm test builds it).
image=$(bash "$project/scripts/build-image.sh" | tail -1)
rm -f "$out/config-sync.tar"
"${B[@]}" push --quiet "$image" "docker-archive:$out/config-sync.tar:$image" >&2
log "images ready in $out"
echo "$out"
