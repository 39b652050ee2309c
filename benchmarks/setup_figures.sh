#!/usr/bin/env bash
# The set-up figures the README states: in a fresh clone (`git archive HEAD`), `bash scripts/setup.sh` (the demo's
# set-up) and then `bash scripts/setup.sh --test`, each timed, and the size of every venv they build. Needs the package
# index, many minutes and ~12 GB of disk; not run in CI.
#   bash benchmarks/setup_figures.sh [--write-figures]    (records the figures in docs/figures.json)
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
git archive HEAD | tar -x -C "$tmp"
gigabytes() { du -sb "$1" | awk '{ printf "%.1f", $1 / 1e9 }'; }
megabytes() { du -sb "$1" | awk '{ printf "%.0f", $1 / 1e6 }'; }

cd "$tmp"
start=$SECONDS
bash scripts/setup.sh >"$tmp/setup.log" 2>&1 || { tail -n 30 "$tmp/setup.log" >&2; exit 1; }
demo_seconds=$((SECONDS - start))
demo_size=$(gigabytes .venv)
start=$SECONDS
bash scripts/setup.sh --test >>"$tmp/setup.log" 2>&1 || { tail -n 30 "$tmp/setup.log" >&2; exit 1; }
test_seconds=$((SECONDS - start))
figures=(
  "setup.demo.venv_size=$demo_size:GB" "setup.demo.seconds=$demo_seconds:s"
  "setup.test.seconds=$test_seconds:s" "setup.test.venv_size=$(gigabytes .venv):GB"
  "setup.kfp_latest.size=$(megabytes .venv-kfp-latest):MB" "setup.core.size=$(megabytes .venv-core):MB"
)
[ -d .venv-training-hub/0.3.0 ] && figures+=("setup.training_hub_0_3_0.size=$(gigabytes .venv-training-hub/0.3.0):GB")
overlays=$(for venv in .venv-training-hub/*/; do [ "$venv" = .venv-training-hub/0.3.0/ ] || megabytes "$venv"; done | sort -n)
low=$(head -n1 <<<"$overlays"); high=$(tail -n1 <<<"$overlays")
[ -n "$overlays" ] && figures+=("setup.training_hub_overlays.size=$low$([ "$low" = "$high" ] || echo "–$high"):MB")
printf '%s\n' "${figures[@]}"
if [ "${1:-}" = --write-figures ]; then
  cd "$repo" && "${PYTHON:-python3}" scripts/figures.py --record benchmarks/setup_figures.sh "${figures[@]}"
fi
