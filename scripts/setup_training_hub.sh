#!/usr/bin/env bash
# Builds the Training Hub environments the pod command is tested against besides the main .venv (which carries the
# newest, 0.11.2): the versions RHOAI's `training-hub` runtime images carry. Called by scripts/setup.sh after the main
# .venv is ready; idempotent (a stamp per environment, like the main .venv's). Each line of
# scripts/training-hub-envs.txt is one environment under .venv-training-hub/<version>:
#   * base "own": a venv of its own on that Python, installed from its lock scripts/training-hub-envs/<version>.txt
#     (written from `pip freeze` the first time, committed; delete it to re-resolve);
#   * base ".venv": an overlay on the main .venv (Python 3.11, CPU torch 2.13.0): only the listed wheels, installed
#     with --no-deps under the overlay's site-packages, which come first on sys.path; everything else (torch,
#     transformers, datasets, ...) is the main .venv's, read through a .pth file. A `torchrun` is written into the
#     overlay's bin/ so the processes Training Hub launches run the overlay's Python.
# An environment that cannot be built leaves .venv-training-hub/<version>.unavailable with the reason; its tests skip
# with that reason (and fail when neither the environment nor a reason is there, i.e. the set-up did not run).
#
# Measured on the 2-core build machine (no pip cache; see the report of issue 33):
#   0.3.0  own venv, Python 3.12 (0.3.0 imports typing.override), torch 2.8.0 as the RHOAI 3.3 image (the index
#          serves only the CUDA build for 3.12; it runs on CPU): 243 s (first resolve) / 356 s (from the lock, busy
#          machine), 7.2 GB (4.1 GB of it the nvidia-* CUDA libraries torch loads at import)
#   0.6.0  overlay on .venv: 2 s, 1.1 MB
#   0.9.8  overlay on .venv: 2 s, 1.6 MB
set -euo pipefail
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
ROOT=".venv-training-hub"
mkdir -p "$ROOT"
spec_hash() {  # spec_hash VERSION BASE: what an environment is built from (script, list, lock or the main .venv)
  local lock="scripts/training-hub-envs/$1.txt"
  {
    cat "$self" scripts/training-hub-envs.txt
    if [ -f "$lock" ]; then cat "$lock"; fi
    if [ "$2" != own ]; then cat "$VENV/.kfp-finetune-installed"; fi
  } | sha256sum | cut -d' ' -f1
}

find_python() {  # find_python 3.12 -> an interpreter of that minor version, or nothing
  local candidate
  for candidate in "$(command -v "python$1" || true)" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$1".*/bin/python"$1"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ] && "$candidate" -c "import sys; assert sys.version_info[:2] == tuple(map(int, '$1'.split('.')))" 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
}

build_own() {  # build_own VERSION PYTHON PACKAGES...
  local version="$1" python="$2" env="$ROOT/$1" lock="scripts/training-hub-envs/$1.txt"
  shift 2
  rm -rf "$env"
  "$python" -m venv "$env"
  local pip=("$env/bin/python" -m pip)
  "${pip[@]}" install -q --upgrade pip
  if [ -f "$lock" ]; then
    "${pip[@]}" install -q -c "$lock" "$@"
  else
    "${pip[@]}" install -q "$@"
    { echo "# Lock of .venv-training-hub/$version (pip freeze of its first build by scripts/setup_training_hub.sh)."
      "${pip[@]}" freeze | LC_ALL=C sort -f; } >"$lock"
  fi
}

build_overlay() {  # build_overlay VERSION PACKAGES...
  local version="$1" env="$ROOT/$1"
  shift
  rm -rf "$env"
  local base_python site base_site
  base_python="$(cd "$VENV" && pwd)/bin/python"
  base_site="$("$base_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  "$base_python" -m venv --without-pip "$env"
  site="$("$env/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  # --target: installs into the overlay only, never uninstalling the main .venv's copies of the same packages.
  "$base_python" -m pip install -q --no-deps --no-compile --target "$site" "$@"
  rm -rf "$site/bin"
  echo "$base_site" >"$site/zz-kfp-finetune-base-venv.pth"
  printf '#!%s\nimport sys\nfrom torch.distributed.run import main\nsys.exit(main())\n' \
    "$(cd "$env" && pwd)/bin/python" >"$env/bin/torchrun"
  chmod +x "$env/bin/torchrun"
}

while read -r version python base packages; do
  case "$version" in '' | '#'*) continue ;; esac
  stamp="$ROOT/$version/.kfp-finetune-installed"
  wanted="$(spec_hash "$version" "$base")"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
    continue
  fi
  rm -f "$ROOT/$version.unavailable"
  started=$SECONDS
  echo "setup: building $ROOT/$version (training-hub $version on Python $python, base $base)..." >&2
  # shellcheck disable=SC2086
  if [ "$base" = own ]; then
    interpreter="$(find_python "$python")"
    if [ -z "$interpreter" ]; then
      echo "Python $python is not installed (training-hub $version needs it; install it, e.g. pyenv install $python)" \
        >"$ROOT/$version.unavailable"
    elif ! build_own "$version" "$interpreter" $packages >"$ROOT/$version.log" 2>&1; then
      echo "pip could not build it: $(tail -1 "$ROOT/$version.log")" >"$ROOT/$version.unavailable"
    fi
  elif ! build_overlay "$version" $packages >"$ROOT/$version.log" 2>&1; then
    echo "pip could not build it: $(tail -1 "$ROOT/$version.log")" >"$ROOT/$version.unavailable"
  fi
  if [ -f "$ROOT/$version.unavailable" ]; then
    echo "setup: training-hub $version unavailable, its tests will skip: $(cat "$ROOT/$version.unavailable")" >&2
    rm -rf "${ROOT:?}/$version"
    continue
  fi
  spec_hash "$version" "$base" >"$stamp"  # after the build: a first build writes the lock
  echo "setup: $ROOT/$version built in $((SECONDS - started))s, $(du -sh "$ROOT/$version" | cut -f1)" >&2
done <scripts/training-hub-envs.txt
