#!/usr/bin/env bash
# Prints the path of a promtool binary, fetching it once if needed: `promtool` on the PATH, or
# PROMTOOL, or a copy extracted from Debian's `prometheus` package into the project cache.
#
# Only the promtool binary is taken from the package (apt-get download + dpkg-deb -x): installing
# the package would add a Prometheus server, its web assets, and on some systems start it.
# Needs Debian's package lists (apt-get update runs once if they are missing) and root-free
# apt-get download; progress goes to stderr, the path to stdout.
set -euo pipefail

log() { printf '[promtool] %s\n' "$*" >&2; }

if [ -n "${PROMTOOL:-}" ] && [ -x "$PROMTOOL" ]; then echo "$PROMTOOL"; exit 0; fi
if command -v promtool >/dev/null; then command -v promtool; exit 0; fi

cache_root=${CONFIG_SYNC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/config-sync}
for candidate in "$cache_root"/promtool-*/promtool; do
  if [ -x "$candidate" ]; then echo "$candidate"; exit 0; fi
done

command -v apt-get >/dev/null || {
  log "error: no promtool on the PATH and no apt-get to fetch Debian's prometheus package"
  log "hint: install promtool (Prometheus >= 2.42) and put it on the PATH, or set PROMTOOL"
  exit 2
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
if ! apt-get download prometheus >/dev/null 2>&1; then
  log "package lists missing or stale: apt-get update"
  apt-get update -qq >&2 || { log "error: apt-get update failed (are you root?)"; exit 2; }
  apt-get download prometheus >&2 || { log "error: apt-get download prometheus failed"; exit 2; }
fi
deb=$(ls prometheus_*.deb)
version=$(dpkg-deb -f "$deb" Version)
dpkg-deb -x "$deb" extracted
dest="$cache_root/promtool-$version"
mkdir -p "$dest"
install -m 0755 extracted/usr/bin/promtool "$dest/promtool"
log "promtool $version extracted from $deb into $dest"
echo "$dest/promtool"
