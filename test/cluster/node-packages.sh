#!/usr/bin/env bash
# Installs what the test node takes from Debian rather than building: runc (containerd's OCI
# runtime), the CNI plugins (bridge, host-local, loopback), iproute2 (the bridge), buildah (the
# images, without a Docker engine), busybox-static (the small app image), gcc (the pause binary)
# and openssl (the kubelet client certificate). Root only; prints nothing when all are there.
set -euo pipefail
log() { printf '[node:packages] %s\n' "$*" >&2; }

want=(runc containernetworking-plugins iproute2 buildah busybox-static gcc libc6-dev openssl)
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

[ "$(id -u)" -eq 0 ] || { log "error: missing ${missing[*]}, and installing them needs root"; exit 2; }
command -v apt-get >/dev/null || { log "error: missing ${missing[*]}, and there is no apt-get"; exit 2; }
log "installing ${missing[*]}"
install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; }
if ! install 2>/dev/null; then
  log "package lists missing or stale: apt-get update"
  apt-get update -qq >&2 || { log "error: apt-get update failed"; exit 2; }
  install || { log "error: apt-get install ${missing[*]} failed"; exit 2; }
fi
