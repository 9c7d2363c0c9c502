#!/usr/bin/env bash
# Builds a local Redis image from this machine's own redis-server binary and the
# shared libraries it links, with `docker import` (no registry is needed).
# Usage: scripts/build-test-redis-image.sh [TAG]   (default tickwarden/test-redis:local)
# Prints the tag; use it as TICKWARDEN_TEST_REDIS_IMAGE for the container driver.
set -euo pipefail
tag="${1:-tickwarden/test-redis:local}"
binary="$(readlink -f "$(command -v redis-server)")" # /usr/bin/redis-server is a symlink
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/local/bin" "$root/data" "$root/tmp"
cp "$binary" "$root/usr/local/bin/redis-server"
for lib in $(ldd "$binary" | grep -o '/[^ ]*'); do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
chmod 1777 "$root/tmp"
tar -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/bin' \
  --change 'WORKDIR /data' \
  --change 'CMD ["redis-server"]' \
  - "$tag" >/dev/null
echo "$tag"
