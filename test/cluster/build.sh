#!/usr/bin/env bash
# Builds the test cluster from the Go module proxy and caches the binaries outside the checkout,
# keyed by version and by the wrapper's go.sum, so a fresh clone on the same machine does not
# rebuild:
#  - the control plane (etcd, kube-apiserver, kube-controller-manager, kubectl) and the node's
#    Kubernetes parts (kubelet, kube-scheduler), through the wrapper module in test/cluster/go;
#  - the node's container runtime (containerd, its runc shim, ctr), with `go install` at a pinned
#    version (containerd's go.mod has no replace directives, so no wrapper is needed). runc and
#    the CNI plugins come from Debian (test/cluster/node-packages.sh).
#
# Prints the directory holding the binaries on its last line (stdout); progress goes to stderr.
# `build.sh --print-cache-dir` prints where the binaries are (or would be) cached, and builds nothing.
#
# Skipped entirely when KUBEBUILDER_ASSETS names a directory that already has all four binaries
# (the envtest convention) and the node's; TEST_ASSET_* variables override single binaries at start time instead
# (see test/cluster/assets.ts).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
gomod="$here/go"
kube_version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$gomod/go.mod")
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' "$gomod/go.mod")
containerd_version=v2.4.2
binaries=(etcd kube-apiserver kube-controller-manager kubectl kubelet kube-scheduler containerd containerd-shim-runc-v2 ctr)

log() { printf '[cluster:build] %s\n' "$*" >&2; }

has_all() {
  local dir=$1 b
  for b in "${binaries[@]}"; do [ -x "$dir/$b" ] || return 1; done
}

if [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ "${1:-}" != "--print-cache-dir" ]; then
  if has_all "$KUBEBUILDER_ASSETS"; then
    log "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
    echo "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  log "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks one of: ${binaries[*]}; building instead"
fi

command -v go >/dev/null || {
  log "error: Go is not on the PATH. The test control plane is built from source with Go >= 1.26"
  log "hint: install Go 1.26 or newer (it must match 'go' in $gomod/go.mod) and run again"
  exit 2
}

# The cache key covers the Kubernetes version and the exact dependency set: editing the wrapper's
# go.sum (a new etcd, a patched replace) must not reuse binaries built from the old one. Contents
# only: the checkout's path must not matter, or every fresh clone would rebuild.
sum_key=$( (cat "$gomod/go.mod" "$gomod/go.sum"; echo "containerd $containerd_version") | sha256sum | cut -c1-12)
cache_root=${CONFIG_SYNC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/config-sync}
dest="$cache_root/kube/$kube_version-$sum_key"

if [ "${1:-}" = "--print-cache-dir" ]; then
  echo "$dest"
  exit 0
fi

if has_all "$dest"; then
  log "cached: $dest"
  echo "$dest"
  exit 0
fi

log "building kube $kube_version and etcd $etcd_version into $dest (cold build: several minutes on 2 cores)"
start=$(date +%s)
tmp=$(mktemp -d "$cache_root/.build.XXXXXX" 2>/dev/null || { mkdir -p "$cache_root" && mktemp -d "$cache_root/.build.XXXXXX"; })
trap 'rm -rf "$tmp"' EXIT

# /version must report the real release, as kube's own build (hack/lib/version.sh) sets it.
minor=$(echo "$kube_version" | cut -d. -f2)
major=$(echo "$kube_version" | cut -d. -f1 | tr -d v)
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
ldflags="$ldflags -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
ldflags="$ldflags -X $pkg/verflag.programName=kubernetes"

cd "$gomod"
# -mod=readonly: the committed go.sum is the contract; a mismatch must fail, not be rewritten.
export GOFLAGS="${GOFLAGS:-} -mod=readonly"
export CGO_ENABLED=0
log "go build kube-apiserver kube-controller-manager kubectl kubelet kube-scheduler"
go build -trimpath -ldflags "$ldflags" -o "$tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kubectl \
  k8s.io/kubernetes/cmd/kubelet \
  k8s.io/kubernetes/cmd/kube-scheduler
log "go build etcd"
go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
# Outside the wrapper module: `go install pkg@version` resolves containerd's own go.mod. The
# version ldflags are containerd's Makefile's; the tags leave out snapshotters that need cgo.
log "go install containerd $containerd_version"
cd "$tmp"
cpkg=github.com/containerd/containerd/v2
GOFLAGS= GOBIN="$tmp" go install -trimpath -tags 'no_btrfs no_devmapper no_zfs' \
  -ldflags "-s -w -X $cpkg/version.Version=$containerd_version -X $cpkg/version.Revision=$containerd_version" \
  "$cpkg/cmd/containerd@$containerd_version" \
  "$cpkg/cmd/containerd-shim-runc-v2@$containerd_version" \
  "$cpkg/cmd/ctr@$containerd_version"

mkdir -p "$(dirname "$dest")"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
log "cold build took $(( $(date +%s) - start ))s"
echo "$dest"
