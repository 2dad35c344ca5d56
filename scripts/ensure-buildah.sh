#!/usr/bin/env bash
# Makes sure buildah is installed (Debian's package; root), for the image test and npm run image.
set -euo pipefail
command -v buildah >/dev/null && exit 0
log() { printf '[buildah] %s\n' "$*" >&2; }
command -v apt-get >/dev/null || { log "error: buildah is missing and there is no apt-get; install buildah"; exit 2; }
install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends buildah >&2; }
if ! install 2>/dev/null; then
  log "package lists missing or stale: apt-get update"
  apt-get update -qq >&2 || { log "error: apt-get update failed (are you root?)"; exit 2; }
  install || { log "error: apt-get install buildah failed"; exit 2; }
fi
log "installed $(buildah --version)"
