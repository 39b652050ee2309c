#!/usr/bin/env bash
# The core install of the built wheel in a fresh venv: seconds, MiB added, distributions (issue 34: what importing
# and compiling need, no torch / CUDA / lm-eval). Needs the package index. Not run in CI.
#   bash benchmarks/core_install.sh [--write-figures]    (records the figures in docs/figures.json)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" -m pip wheel -q --no-deps -w "$tmp/wheel" . >/dev/null
rm -rf build
"$PYTHON" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --upgrade pip
before=$(du -sk "$tmp/venv" | cut -f1)
start=$(date +%s.%N)
"$tmp/venv/bin/python" -m pip install -q --no-cache-dir "$tmp"/wheel/kfp_finetune-*.whl
end=$(date +%s.%N)
after=$(du -sk "$tmp/venv" | cut -f1)
count=$("$tmp/venv/bin/python" -m pip list --format=freeze | grep -vc '^pip==')
seconds=$(echo "$end - $start" | bc)
if [ "${1:-}" = --write-figures ]; then
  "$PYTHON" scripts/figures.py --record benchmarks/core_install.sh "core.distributions=$count:distributions" \
    "core.size=$(( (after - before) / 1024 )):MiB" "core.seconds=$(printf '%.0f' "$seconds"):s"
fi
heavy=$("$tmp/venv/bin/python" -m pip list --format=freeze | grep -ci '^torch==\|^nvidia-\|^triton==\|^lm.eval==' || true)
printf 'core install: %.1f s, %d MiB added, %d distributions (kfp-finetune included), %d of torch/nvidia-*/triton/lm-eval\n' \
  "$(echo "$end - $start" | bc)" $(( (after - before) / 1024 )) "$count" "$heavy"
printf 'core install: the wheel %d KiB, installed as %s\n' "$(( $(stat -c %s "$tmp"/wheel/kfp_finetune-*.whl) / 1024 ))" \
  "$("$tmp/venv/bin/python" -c 'import kfp_finetune; print(kfp_finetune.__name__)')"
# The core install compiles every pipeline: the wheel's console script, from a folder outside the clone.
(cd "$tmp" && env -u PYTHONPATH "$tmp/venv/bin/kfp-finetune" compile --all -o "$tmp/compiled" 2>/dev/null)
echo "core install: compiled $(ls "$tmp/compiled" | wc -l) pipelines"
