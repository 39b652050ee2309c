#!/usr/bin/env bash
# Builds (and with --push, pushes) the project's versioned step image from the Containerfile: the image the steps run
# on, the project's code and every step's dependencies baked in (see docs/architecture.md, "How code reaches each pod").
# The tag is the project's version (components/_common/images.py: STEP_IMAGE = STEP_IMAGE_REPOSITORY:PROJECT_VERSION),
# so a clone compiles pipelines that reference the image of its own release, as Google Cloud Pipeline Components do.
#   bash scripts/build_step_image.sh                 # builds quay.io/kfp-finetune/kfp-finetune:<version>
#   bash scripts/build_step_image.sh --push          # ... and pushes it (a release step; needs registry credentials)
#   IMAGE=registry.local/kfp-finetune:0.1.0 bash scripts/build_step_image.sh --push   # a mirror of your own, then
#   compile with --image registry.local/kfp-finetune:0.1.0 (or KFP_FINETUNE_IMAGE)
#   bash scripts/build_step_image.sh --check-tag v0.1.0   # a release's git tag must be v<version>; prints the image
#   bash scripts/build_step_image.sh -- --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128   # after --:
#                                                    # options of the engine's build (build arguments, volumes, ...)
# ENGINE=podman|docker|buildah picks the engine (default: podman, else docker, else buildah); ENGINE_OPTIONS are its
# global options (e.g. "--storage-driver vfs"). The CI image lane (scripts/image_lane/run.sh) builds with
# ENGINE=buildah and a local Debian base (--build-arg BASE_IMAGE=...).
# The release workflow (.github/workflows/release-step-image.yml) runs --check-tag, builds, pushes and inspects it.
set -euo pipefail
cd "$(dirname "$0")/.."
images_py() { PYTHONPATH="$PWD" python3 -c "from components._common.images import $1; print($1)"; }
image="${IMAGE:-$(images_py STEP_IMAGE)}"
if [ "${1:-}" = "--check-tag" ]; then
  version="$(images_py PROJECT_VERSION)"
  if [ "${2:-}" != "v$version" ]; then
    echo "build_step_image: release tag '${2:-}' is not v$version (components/_common/images.py: PROJECT_VERSION," \
      "the package's version and the step image's tag); set PROJECT_VERSION, commit, then tag v<it>" >&2
    exit 1
  fi
  echo "$image"
  exit 0
fi
push=false
if [ "${1:-}" = "--push" ]; then
  push=true
  shift
fi
if [ "${1:-}" = "--" ]; then
  shift
elif [ $# -gt 0 ]; then
  echo "build_step_image: unknown argument '$1'; usage: build_step_image.sh [--push] [-- BUILD OPTIONS...]" >&2
  exit 2
fi
engine="${ENGINE:-$(command -v podman || command -v docker || command -v buildah || true)}"
if [ -z "$engine" ]; then
  echo "build_step_image: none of podman, docker or buildah is installed (Debian: apt-get install -y podman)" >&2
  exit 1
fi
read -r -a global <<<"${ENGINE_OPTIONS:-}"
"$engine" "${global[@]}" build -t "$image" -f Containerfile "$@" .
if $push; then
  "$engine" "${global[@]}" push "$image"
fi
echo "build_step_image: $image" >&2
