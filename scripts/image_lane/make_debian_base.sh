#!/usr/bin/env bash
# Makes a local Debian bookworm base image with Debian's python3 (3.11), standing in for the public
# docker.io/library/python:3.11.11-slim-bookworm where public images cannot be pulled (the image lane, CI).
#   bash scripts/image_lane/make_debian_base.sh CACHE_DIR IMAGE_NAME
# debootstrap --variant=minbase into a root file system (~30 s), packed once as CACHE_DIR/debian-bookworm-base.tar
# (reused while it exists), then imported as IMAGE_NAME into the vfs container storage (`podman import`).
# The Debian mirror is the one apt already uses on this machine (read from /etc/apt/sources.list*, never written in
# the repository). Root only (debootstrap, the container storage).
set -euo pipefail
cache="${1:?usage: make_debian_base.sh CACHE_DIR IMAGE_NAME}"
image="${2:?usage: make_debian_base.sh CACHE_DIR IMAGE_NAME}"
tarball="$cache/debian-bookworm-base.tar"
storage=(--storage-driver vfs)

debian_mirror() {
  # deb822 (URIs: ...) first, then one-line sources (deb URL bookworm main); the first Debian archive named.
  local found
  found="$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' \
    | grep -v -- '-security' | head -n1 || true)"
  if [ -z "$found" ]; then
    found="$(grep -hsE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
      | grep -E ' (bookworm|stable) ' | grep -v -- '-security' | awk '{print $2}' | head -n1 || true)"
  fi
  if [ -z "$found" ]; then
    echo "make_debian_base: no Debian mirror in /etc/apt/sources.list*; set DEBIAN_MIRROR=<archive URL>" >&2
    return 1
  fi
  printf '%s\n' "$found"
}

if [ ! -s "$tarball" ]; then
  mirror="${DEBIAN_MIRROR:-$(debian_mirror)}"
  mkdir -p "$cache"
  rootfs="$(mktemp -d "$cache/rootfs.XXXXXX")"
  trap 'rm -rf "$rootfs"' EXIT
  started=$SECONDS
  # python3 only: the Containerfile adds python3-venv (its venv at /opt/venv) and skopeo with apt, as on any base.
  debootstrap --variant=minbase --include=python3,ca-certificates bookworm "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 \
    || { echo "make_debian_base: debootstrap failed; last lines of $cache/debootstrap.log:" >&2
         tail -n 20 "$cache/debootstrap.log" >&2; exit 1; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  chmod 755 "$rootfs"  # mktemp's 0700 would become the image's /: no user but root could run anything in it
  tar -C "$rootfs" --numeric-owner -cf "$tarball.partial" .
  mv "$tarball.partial" "$tarball"
  echo "make_debian_base: debootstrap bookworm (minbase + python3) in $((SECONDS - started)) s -> $tarball" >&2
fi
if ! podman "${storage[@]}" image exists "$image"; then
  podman "${storage[@]}" import -q --change 'CMD ["/bin/bash"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    "$tarball" "$image" >/dev/null
fi
echo "make_debian_base: $image" >&2
