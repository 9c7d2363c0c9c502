#!/usr/bin/env bash
# Builds a local Node 24 base image from this machine's own `node` binary (and npm, which the
# Dockerfile's build stage runs), with `docker import`: no image registry is reachable here, so
# the official node:24-slim cannot be pulled. Use the tag as the Dockerfile's NODE_IMAGE:
#   docker build --build-arg NODE_IMAGE="$(scripts/build-node-base-image.sh)" -f deploy/docker/Dockerfile .
# Usage: scripts/build-node-base-image.sh [TAG]   (default tickwarden/node-base:24-local)
# Prints the tag. The rootfs holds only what the Dockerfile needs: node, npm, /bin/sh (npm runs
# scripts through it), /usr/bin/env (the npm and CLI shebangs), their shared libraries, /tmp,
# a minimal /etc/passwd, and this machine's CA bundle (below).
set -euo pipefail
tag="${1:-tickwarden/node-base:24-local}"

node_bin="$(readlink -f "$(command -v node)")" # .bin/node is a symlink
major="$("$node_bin" -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 24 ]; then
  echo "build-node-base-image: node on PATH is $("$node_bin" -v) ($node_bin); Node 24 is needed" >&2
  exit 1
fi
npm_cli="$(readlink -f "$(command -v npm)")" # .../node_modules/npm/bin/npm-cli.js
npm_root="$(dirname "$(dirname "$npm_cli")")"

root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT

copy_with_libs() { # binary, destination inside the rootfs
  mkdir -p "$root$(dirname "$2")"
  cp -L "$1" "$root$2"
  for lib in $(ldd "$1" | grep -o '/[^ ]*'); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
}

copy_with_libs "$node_bin" /usr/local/bin/node
copy_with_libs "$(readlink -f /bin/sh)" /bin/sh
copy_with_libs "$(readlink -f "$(command -v env)")" /usr/bin/env

mkdir -p "$root/usr/local/lib/node_modules"
cp -a "$npm_root" "$root/usr/local/lib/node_modules/npm"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"

mkdir -p "$root/etc" "$root/tmp" "$root/root"
chmod 1777 "$root/tmp"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"

changes=(--change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' --change 'CMD ["node"]')
# The CA bundle this machine's Node and npm trust (NODE_EXTRA_CA_CERTS, else npm's cafile), at the
# same path, so npm in the build stage reaches the registry exactly as it does on this machine.
ca="${NODE_EXTRA_CA_CERTS:-$(npm config get cafile 2>/dev/null || true)}"
if [ -n "$ca" ] && [ -f "$ca" ]; then
  mkdir -p "$root$(dirname "$ca")"
  cp -L "$ca" "$root$ca"
  changes+=(--change "ENV NODE_EXTRA_CA_CERTS=$ca")
fi

previous="$(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)"
tar -C "$root" -c . | docker import "${changes[@]}" - "$tag" >/dev/null
# A rebuild moves the tag: drop the image it leaves untagged (kept if a container still uses it).
if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect --format '{{.Id}}' "$tag")" ]; then
  docker rmi "$previous" >/dev/null 2>&1 || true
fi
echo "$tag"
