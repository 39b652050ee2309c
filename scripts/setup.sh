#!/usr/bin/env bash
# Creates .venv and installs kfp-finetune with its local (CPU training) and test extras.
# torch==2.13.0 (CPU build) goes in first so that no CUDA wheels are pulled in. Idempotent: re-runs install only
# when pyproject.toml changed since the last successful install.
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
stamp="$VENV/.kfp-finetune-installed"
wanted="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
  exit 0
fi
echo "setup: creating $VENV and installing kfp-finetune (a few minutes the first time)..." >&2
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "torch==2.13.0"
"$VENV/bin/python" -m pip install -q -e ".[local,test]"
"$VENV/bin/python" -m pip check
echo "$wanted" > "$stamp"
echo "setup: done" >&2
