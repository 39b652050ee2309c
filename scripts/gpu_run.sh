#!/usr/bin/env bash
# One bounded GPU session of benchmarks/gpu_training_hub.py, in priority order: Training Hub 0.11.2 (SFT, OSFT), the
# transformers backend (SFT, OSFT, LoRA), then RHOAI 3.3's Training Hub 0.3.0 (SFT, OSFT) with whatever time is left.
# Run from the repository root on the GPU machine after scripts/gpu_wheels.sh --hub-0.3.0 filled .whl and .whl-0.3.0
# here; it installs them into the machine's Python (pip --no-deps: the image's torch stays). Logs and results go to
# $OUT (default ./gpu-out): main.log, results-*.json, logs.tgz (every pod and direct-run log).
#   BUDGET=560 STEPS=120 ROWS=960 bash scripts/gpu_run.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT="${OUT:-gpu-out}"
BUDGET=${BUDGET:-560}
mkdir -p "$OUT"
start=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - start))); }
say() { echo "[+$(($(date +%s) - start))s] $*" | tee -a "$OUT/main.log"; }
bench() {  # bench TIMEOUT OUTDIR ARGS...: one benchmark run, cut to the time left
  local t=$1 dir=$2 l
  shift 2
  l=$(left)
  ((t > l)) && t=$l
  if ((t < 40)); then say "skipped (only ${l}s left): $*"; return; fi
  say "bench (timeout ${t}s): $*"
  timeout "$t" python3 benchmarks/gpu_training_hub.py --out "$dir" --steps "${STEPS:-120}" --rows "${ROWS:-960}" "$@" 2>&1 \
    | grep -v "Warning\|warn(" | tail -40 | tee -a "$OUT/main.log"
  say "exit ${PIPESTATUS[0]}"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$OUT/main.log"
say install
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile .whl/* 2>&1 | grep -v "WARN" | tail -5
python3 -m pip list 2>/dev/null | grep -iE "^(training-hub|instructlab-training|rhai-innovation-mini-trainer|transformers|torch|peft|datasets|kfp|lm_eval|trl) " \
  | tr -s ' ' | tr '\n' ';' | tee -a "$OUT/main.log"
echo | tee -a "$OUT/main.log"
bench 260 "$OUT/hub-0.11.2" --algorithms sft,osft
bench 150 "$OUT/hub-0.11.2" --backend transformers --algorithms sft,osft,lora
if [ -d .whl-0.3.0 ]; then
  say "install Training Hub 0.3.0 (RHOAI 3.3)"
  python3 -m pip install -q --no-index --no-deps --no-compile .whl-0.3.0/* 2>&1 | grep -v "WARN" | tail -5
  bench 200 "$OUT/hub-0.3.0" --algorithms sft,osft
fi
cp "$OUT/hub-0.11.2/results.json" "$OUT/results-hub-0.11.2.json" 2>/dev/null
cp "$OUT/hub-0.11.2/results-transformers.json" "$OUT/results-transformers.json" 2>/dev/null
cp "$OUT/hub-0.3.0/results.json" "$OUT/results-hub-0.3.0.json" 2>/dev/null
tar czf "$OUT/logs.tgz" "$OUT"/hub-*/*.log 2>/dev/null
say done
