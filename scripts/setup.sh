#!/usr/bin/env bash
# Creates .venv and installs kfp-finetune with its local (CPU training) and test extras.
# torch==2.13.0 (CPU build) goes in first so that no CUDA wheels are pulled in. Idempotent: re-runs install only
# when pyproject.toml changed since the last successful install.
set -euo pipefail
cd "$(dirname "$0")/.."
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
