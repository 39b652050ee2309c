#!/usr/bin/env bash
# A fresh venv with the core install's dependencies only: pyproject.toml's [project] dependencies at the lock's
# versions (constraints.txt), nothing of the extras. tests/test_core_install.py installs the built wheel --no-deps on
# an overlay of it, so that a command importing an extra's package is caught as a user's `pip install kfp-finetune`
# would meet it.
#   bash scripts/setup_core_venv.sh [.venv-core]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
CORE_VENV="${1:-.venv-core}"
rm -rf "$CORE_VENV"
"$PYTHON" -m venv "$CORE_VENV"
mapfile -t core < <("$PYTHON" -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))')
"$CORE_VENV/bin/python" -m pip install -q --upgrade pip
"$CORE_VENV/bin/python" -m pip install -q -c constraints.txt "${core[@]}"
"$CORE_VENV/bin/python" -m pip check >&2
