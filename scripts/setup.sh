#!/usr/bin/env bash
# Creates .venv and installs kfp-finetune with its local (CPU training) and test extras, at the exact versions of the
# lock (constraints.txt; refresh with `bash scripts/lock.sh`). torch==2.13.0 (CPU build) goes in first so that no CUDA
# wheels are pulled in. Idempotent: re-runs install only when pyproject.toml, setup.py or the lock changed since the
# last successful install. The install is editable: the clone's top-level packages `components` and `pipelines` (the
# wheel installs them as `kfp_finetune.components` ...: setup.py), and the `kfp-finetune` command (kfp_finetune:main).
set -euo pipefail
cd "$(dirname "$0")/.."
# The oci:// base-model tests run a real OCI registry (CNCF distribution, Debian's docker-registry), push with skopeo
# and make htpasswd (bcrypt) files with apache2-utils. Installed where apt is available; without them those tests skip
# with the reason. Failure here never stops the Python set-up.
if ! command -v docker-registry >/dev/null || ! command -v skopeo >/dev/null || ! command -v htpasswd >/dev/null; then
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
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ] && [ -x "$LATEST_VENV/bin/python" ] \
  && [ -x "$CORE_VENV/bin/python" ]; then
  VENV="$VENV" exec bash scripts/setup_training_hub.sh  # the Training Hub releases of RHOAI's runtimes (idempotent)
fi
echo "setup: creating $VENV and installing kfp-finetune from the lock (a few minutes the first time)..." >&2
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip)
"${pip[@]}" install -q --upgrade pip
"${pip[@]}" install -q -c constraints.txt "torch==2.13.0"
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
echo "$wanted" > "$stamp"
# The Training Hub releases RHOAI's runtime images carry (0.3.0, 0.6.0, 0.9.8), each in its own environment under
# .venv-training-hub/ for the pod command's tests. Measured here (2 shared cores, no pip cache): 0.3.0 (own Python 3.12
# venv, CUDA torch 2.8.0) 243-356 s and 7.2 GB; 0.6.0 and 0.9.8 (overlays on .venv) 2-3 s and 1-2 MB each; a re-run
# with nothing changed 0.07 s.
VENV="$VENV" bash scripts/setup_training_hub.sh
echo "setup: done" >&2
