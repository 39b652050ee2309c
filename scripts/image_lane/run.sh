#!/usr/bin/env bash
# The image lane (run by .ci/run after pytest): builds the step image from the Containerfile and runs the four steps'
# compiled commands inside it against the test servers on 127.0.0.1 (tests/image_lane/lane.py says what each checks).
#   bash scripts/image_lane/run.sh
# Root only (debootstrap, buildah's container storage); installs buildah, podman and debootstrap with apt if missing.
#  1. base: a Debian bookworm minbase with Debian's python3 (scripts/image_lane/make_debian_base.sh) stands in for the
#     public python:3.11.11-slim-bookworm, which cannot be pulled here (the release builds on the public one);
#  2. wheels: `pip download` of the lock (constraints.txt, torch first) with this machine's pip configuration (its
#     index or mirror, CA bundle), for Python 3.11 on linux x86_64 like the image; the build installs from them only
#     (--no-index --find-links), so it needs no network but the Debian mirror its apt-get uses;
#  3. build: `buildah build --isolation chroot` (vfs storage) through scripts/build_step_image.sh;
#  4. run: python -m tests.image_lane.lane (buildah run --isolation chroot; `podman run` cannot set rlimits here).
# Cached between runs in KFP_FINETUNE_LANE_CACHE (default .image-lane-cache/, ignored by git): the base tarball and
# the wheels (keyed by the lock's hash). A fresh clone builds them (~1 min with a nearby index).
# KFP_FINETUNE_LANE_TORCH_INDEX: an extra index for the CPU torch wheel where the pip configuration has none (e.g.
# https://download.pytorch.org/whl/cpu).
set -euo pipefail
cd "$(dirname "$0")/../.."
cache="$(mkdir -p "${KFP_FINETUNE_LANE_CACHE:-.image-lane-cache}" && cd "${KFP_FINETUNE_LANE_CACHE:-.image-lane-cache}" && pwd)"
python="${PYTHON:-$PWD/.venv/bin/python}"
image="localhost/kfp-finetune:lane"
base="localhost/kfp-finetune-lane-base:bookworm"
storage=(--storage-driver vfs)
say() { echo "image lane: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
  say "needs root (debootstrap and buildah's container storage); run it as root or in a root container" >&2
  exit 1
fi
missing=()
for tool in buildah podman debootstrap; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]} (apt-get)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    buildah podman debootstrap >/dev/null
fi

step=$SECONDS
bash scripts/image_lane/make_debian_base.sh "$cache" "$base"
base_s=$((SECONDS - step))

step=$SECONDS
key="$(cat constraints.txt pyproject.toml setup.py | sha256sum | cut -c1-16)"
wheels="$cache/wheels-$key"
if [ ! -f "$wheels/.complete" ]; then
  rm -rf "$cache"/wheels-*
  mkdir -p "$wheels"
  torch_index=()
  [ -n "${KFP_FINETUNE_LANE_TORCH_INDEX:-}" ] && torch_index=(--extra-index-url "$KFP_FINETUNE_LANE_TORCH_INDEX")
  "$python" -m pip download -q -d "$wheels" -c constraints.txt "${torch_index[@]}" \
    "torch==2.13.0" ".[local]" "setuptools>=68" wheel 2>"$cache/pip-download.log" \
    || { say "pip download failed; last lines of $cache/pip-download.log:"; tail -n 20 "$cache/pip-download.log" >&2
         exit 1; }
  touch "$wheels/.complete"
fi
wheels_s=$((SECONDS - step))

step=$SECONDS
ENGINE=buildah ENGINE_OPTIONS="--storage-driver vfs" IMAGE="$image" bash scripts/build_step_image.sh -- \
  --isolation chroot --build-arg "BASE_IMAGE=$base" --build-arg "PIP_INSTALL_OPTIONS=--no-index --find-links /wheels" \
  --volume "$wheels:/wheels:ro" >"$cache/build.log" 2>&1 \
  || { say "the image build failed; last lines of $cache/build.log:"; tail -n 30 "$cache/build.log" >&2; exit 1; }
build_s=$((SECONDS - step))
podman "${storage[@]}" image prune -f >/dev/null 2>&1 || true  # the previous lane image, now untagged
size="$(podman "${storage[@]}" image inspect --format '{{.Size}}' "$image")"

step=$SECONDS
work="$(mktemp -d "${TMPDIR:-/tmp}/kfp-finetune-image-lane.XXXXXX")"
if ! "$python" -m tests.image_lane.lane --image "$image" --work "$work"; then
  say "the step files and logs are kept in $work"
  exit 1
fi
rm -rf "$work"
run_s=$((SECONDS - step))
say "image $image: $(awk -v b="$size" 'BEGIN { printf "%.2f GB", b / 1e9 }'); base ${base_s}s, wheels ${wheels_s}s," \
  "build ${build_s}s, steps ${run_s}s; lane ${SECONDS}s in all"
# The README's figures (docs/figures.json): IMAGE_LANE_FIGURES=cold (an empty .image-lane-cache/) or warm records this run.
if [ -n "${IMAGE_LANE_FIGURES:-}" ]; then
  kind="$IMAGE_LANE_FIGURES"
  "$python" scripts/figures.py --record scripts/image_lane/run.sh \
    "lane.image_size=$(awk -v b="$size" 'BEGIN { printf "%.2f", b / 1e9 }'):GB" "lane.$kind.seconds=$SECONDS:s" \
    "lane.$kind.build_seconds=$build_s:s" "lane.$kind.steps_seconds=$run_s:s" \
    ${base_s:+"lane.$kind.base_seconds=$base_s:s"} ${wheels_s:+"lane.$kind.wheels_seconds=$wheels_s:s"}
fi
