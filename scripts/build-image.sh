#!/usr/bin/env bash
# Builds the config-sync image from deploy/image/Dockerfile with buildah (no Docker engine
# needed): `npm run image`. Prints the image name on its last line.
#
# Steps: (1) lay out the root filesystem: the Node binary npm installed (node_modules/node, the
# pinned Node 24), every shared library `ldd` lists for it at the same path, the bundle
# (dist/config-sync.js, the chunks it loads lazily from dist/chunks/, their legal notices), an
# /etc/passwd with the non-root user 65532; (2) buildah bud with the chroot isolation and the
# vfs storage driver, which work as root with no daemon and no overlay support; (3) report the
# size.
set -euo pipefail
cd "$(dirname "$0")/.."

image=${CONFIG_SYNC_IMAGE:-config-sync:$(node -p "require('./package.json').version")}
log() { printf '[image] %s\n' "$*" >&2; }
command -v buildah >/dev/null || { log "error: buildah is not installed (Debian: apt-get install buildah)"; exit 2; }
[ -f dist/config-sync.js ] || { log "error: dist/config-sync.js is missing; run npm run build first"; exit 2; }

# (1)
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
root="$ctx/rootfs"
node_bin=$(readlink -f node_modules/node/bin/node)
mkdir -p "$root/nodejs/bin" "$root/app" "$root/etc" "$root/tmp"
cp "$node_bin" "$root/nodejs/bin/node"
for lib in $(ldd "$node_bin" | grep -oE '/[^ ]+\.so[^ ]*'); do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
mkdir -p "$root/app/chunks"
cp dist/config-sync.js "$root/app/"
cp dist/chunks/*.js "$root/app/chunks/"
for notice in dist/*.LEGAL.txt dist/chunks/*.LEGAL.txt; do
  if [ -f "$notice" ]; then cp "$notice" "$root/app/${notice#dist/}"; fi
done
# `kubectl exec <pod> -c config-sync -- config-sync heal --dry-run`: the kernel runs this through
# its #! line, so the image still needs no shell.
mkdir -p "$root/usr/local/bin"
printf '#!/nodejs/bin/node\nimport("/app/config-sync.js");\n' > "$root/usr/local/bin/config-sync"
chmod 755 "$root/usr/local/bin/config-sync"
printf 'root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n' > "$root/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' > "$root/etc/group"
chmod 1777 "$root/tmp"
cp deploy/image/Dockerfile "$ctx/Dockerfile"

# (2)
log "buildah bud -t $image"
buildah --storage-driver vfs bud --isolation chroot --quiet -t "$image" -f "$ctx/Dockerfile" "$ctx" >&2

# (3)
size=$(buildah --storage-driver vfs images --format '{{.Size}}' "$image" | head -1)
log "$image: $size (node $("$node_bin" --version) binary $(du -h "$node_bin" | cut -f1), bundle $(du -ch dist/config-sync.js dist/chunks/*.js | tail -1 | cut -f1))"
echo "$image"
