#!/usr/bin/env bash
# Builds one Go tool the tests drive, from the Go module proxy at a pinned version, and caches it
# outside the checkout, so a fresh clone on the same machine does not rebuild:
#   build-tool.sh helm  -> helm.sh/helm/v4/cmd/helm@v4.3.2   (the Helm chart's tests)
#   build-tool.sh opa   -> github.com/open-policy-agent/opa@v1.22.4  (the policy gate's tests)
#   build-tool.sh kubelet-writer -> test/cluster/go/kubelet-writer, kubelet's own AtomicWriter
#                          (the benchmark's reload row and the volume tests), built in the wrapper
#                          module at its pinned Kubernetes, keyed by its source and go.sum
# Prints the binary's path on its last line (stdout); progress goes to stderr. No Go code of
# these tools ships in the product.
set -euo pipefail

case "${1:-}" in
  helm)
    pkg=helm.sh/helm/v4/cmd/helm
    version=v4.3.2
    # What Helm's own Makefile stamps, so `helm version` tells the truth.
    ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=$version"
    ;;
  opa)
    pkg=github.com/open-policy-agent/opa
    version=v1.22.4
    ldflags="-s -w -X github.com/open-policy-agent/opa/v1/version.Version=${version#v}"
    ;;
  kubelet-writer)
    here=$(cd "$(dirname "$0")" && pwd)
    gomod="$here/go"
    pkg=./kubelet-writer
    version=$(cat "$gomod"/kubelet-writer/*.go "$gomod/go.mod" "$gomod/go.sum" | sha256sum | cut -c1-12)
    ldflags="-s -w"
    ;;
  *)
    echo "usage: build-tool.sh helm|opa|kubelet-writer" >&2
    exit 2
    ;;
esac
name=$1

log() { printf '[tool:build] %s\n' "$*" >&2; }

cache_root=${CONFIG_SYNC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/config-sync}
dest="$cache_root/tools/$name-$version"
if [ -x "$dest/$name" ]; then
  log "cached: $dest/$name"
  echo "$dest/$name"
  exit 0
fi

command -v go >/dev/null || {
  log "error: Go is not on the PATH; $name is built from the Go module proxy with Go >= 1.26"
  exit 2
}

log "building $pkg@$version (cold build: a few minutes on 2 cores)"
start=$(date +%s)
mkdir -p "$cache_root/tools"
tmp=$(mktemp -d "$cache_root/tools/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if [ "$name" = kubelet-writer ]; then
  # In the wrapper module (its replaces resolve kubernetes' staging modules); -mod=readonly: the
  # committed go.sum is the contract, as in build.sh.
  (cd "$gomod" && GOFLAGS='-trimpath -mod=readonly' CGO_ENABLED=0 go build -ldflags "$ldflags" -o "$tmp/$name" "$pkg") >&2
else
  GOBIN="$tmp" GOFLAGS=-trimpath CGO_ENABLED=0 go install -ldflags "$ldflags" "$pkg@$version" >&2
fi
mkdir -p "$dest"
mv "$tmp/$name" "$dest/$name"
log "built $name in $(($(date +%s) - start)) s: $dest/$name"
echo "$dest/$name"
