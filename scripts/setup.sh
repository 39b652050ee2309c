#!/usr/bin/env bash
# Creates .venv and installs kfp-finetune at the exact versions of the lock (constraints.txt; refresh with
# `bash scripts/lock.sh`). torch==2.13.0 (CPU build) goes in first so that no CUDA wheels are pulled in.
#   bash scripts/setup.sh          the demo's set-up (README's first command): .venv with the `demo` extra only
#   bash scripts/setup.sh --test   the tests' set-up: the `test` extra on top, the newest kfp's venv, the core
#                                  install's venv and the Training Hub releases' environments (.venv-training-hub/)
# Sizes and times measured on 2026-12-06 are in README.md ("Quickstart", "Tests"). Idempotent: a re-run installs only
# when pyproject.toml, setup.py or the lock changed since the last successful install of that mode (a test set-up
# serves the demo too). The install is editable: the clone's top-level packages `components` and `pipelines` (the
# wheel installs them as `kfp_finetune.components` ...: setup.py), and the `kfp-finetune` command (kfp_finetune:main).
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=demo
case "${1:-}" in
  "") ;;
  --test) MODE=test ;;
  *) echo "setup: unknown option '$1' (use no option for the demo's set-up, --test for the tests')" >&2; exit 2 ;;
esac
# The oci:// base-model tests (--test) run a real OCI registry (CNCF distribution, Debian's docker-registry), push with skopeo
# and make htpasswd (bcrypt) files with apache2-utils. Installed where apt is available; without them those tests skip
# with the reason. Failure here never stops the Python set-up.
if [ "$MODE" = test ] && { ! command -v docker-registry >/dev/null || ! command -v skopeo >/dev/null \
  || ! command -v htpasswd >/dev/null; }; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "setup: installing docker-registry, skopeo, apache2-utils (OCI registry tests)..." >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry skopeo apache2-utils; } \
      >/dev/null 2>&1 || echo "setup: could not install the OCI registry tools; those tests will skip" >&2
  else
    echo "setup: docker-registry/skopeo/htpasswd missing and apt unavailable; the OCI registry tests will skip" >&2
  fi
fi
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"
# kfp's newest release, beside the guide's pinned one (tests/test_kfp_releases.py runs the components, the six pipelines
# and the demo under both): a second venv layered on $VENV by a .pth file, with only kfp, kfp-kubernetes and the one
# pin kfp adds (requests==2.33.0) installed on top (about 10 s and 32 MB; measured in docs/architecture.md).
KFP_LATEST="2.17.3"
LATEST_VENV="${VENV}-kfp-latest"
# The core install (the wheel without extras: `pip install kfp-finetune`): a venv of its own with only the project's
# declared core dependencies, at the lock's versions; tests/test_core_install.py installs the freshly built wheel
# --no-deps on an overlay of it (tests never download).
CORE_VENV="${VENV}-core"
stamp="$VENV/.kfp-finetune-installed"
wanted="$(cat pyproject.toml setup.py constraints.txt | sha256sum | cut -d' ' -f1)-kfp-$KFP_LATEST"
installed="$(cat "$stamp" 2>/dev/null || true)"
if [ "$MODE" = demo ] && { [ "$installed" = "$wanted-demo" ] || [ "$installed" = "$wanted-test" ]; }; then
  echo "setup: $VENV is up to date" >&2
  exit 0
fi
if [ "$MODE" = test ] && [ "$installed" = "$wanted-test" ] && [ -x "$LATEST_VENV/bin/python" ] \
  && [ -x "$CORE_VENV/bin/python" ]; then
  VENV="$VENV" exec bash scripts/setup_training_hub.sh  # the Training Hub releases of RHOAI's runtimes (idempotent)
fi
echo "setup: creating $VENV and installing kfp-finetune's $MODE set-up from the lock (minutes the first time)..." >&2
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip)
"${pip[@]}" install -q --upgrade pip
"${pip[@]}" install -q -c constraints.txt "torch==2.13.0"
if [ "$MODE" = demo ]; then
  "${pip[@]}" install -q -c constraints.txt -e ".[demo]"
  "${pip[@]}" check >&2
  echo "$wanted-demo" > "$stamp"
  echo "setup: done ($VENV: $(du -sh "$VENV" | cut -f1); the tests' set-up: bash scripts/setup.sh --test)" >&2
  exit 0
fi
"${pip[@]}" install -q -c constraints.txt -e ".[local,test]"
# training-hub -> timm -> torchvision, whose only wheel is a CUDA build: on CPU torch it breaks transformers' imports
# ("operator torchvision::nms does not exist"). Nothing here uses it; scripts/lock.sh removes it the same way.
"${pip[@]}" uninstall -q -y torchvision
# pip check, less the one requirement removed on purpose above.
if ! problems="$("${pip[@]}" check 2>&1)"; then
  rest="$(printf '%s\n' "$problems" | grep -v '^timm .* requires torchvision, which is not installed\.$' || true)"
  if [ -n "$rest" ]; then
    printf '%s\n' "$rest" >&2
    exit 1
  fi
fi
echo "setup: $LATEST_VENV: kfp $KFP_LATEST layered on $VENV..." >&2
rm -rf "$LATEST_VENV"
"$PYTHON" -m venv "$LATEST_VENV"
"$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
  > "$("$LATEST_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz-base-venv.pth"
"$LATEST_VENV/bin/python" -m pip uninstall -q -y setuptools  # the base venv's newer one shows through
"$LATEST_VENV/bin/python" -m pip install -q "kfp==$KFP_LATEST" "kfp-kubernetes==$KFP_LATEST" 2>&1 \
  | grep -v "requires kfp==\|requires kfp-kubernetes==\|dependency resolver\|incompatible\|WARNING: Location" >&2 || true
"$LATEST_VENV/bin/python" -c "import kfp; assert kfp.__version__ == '$KFP_LATEST', kfp.__version__"
echo "setup: $CORE_VENV: the core dependencies only (pyproject's dependencies, from the lock)..." >&2
bash scripts/setup_core_venv.sh "$CORE_VENV"
echo "$wanted-test" > "$stamp"
# The Training Hub releases RHOAI's runtime images carry (0.3.0, 0.6.0, 0.9.8), each in its own environment under
# .venv-training-hub/ for the pod command's tests. Measured here (2 shared cores, no pip cache): 0.3.0 (own Python 3.12
# venv, CUDA torch 2.8.0) 243-356 s and 7.2 GB; 0.6.0 and 0.9.8 (overlays on .venv) 2-3 s and 1-2 MB each; a re-run
# with nothing changed 0.07 s.
VENV="$VENV" bash scripts/setup_training_hub.sh
echo "setup: done" >&2
