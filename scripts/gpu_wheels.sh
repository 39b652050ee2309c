#!/usr/bin/env bash
# Downloads the wheels benchmarks/gpu_training_hub.py needs on a GPU machine without network into .whl/:
# Training Hub 0.11.2, instructlab-training 0.16.2, rhai-innovation-mini-trainer 0.9.0 and the dependencies of theirs
# that a plain CUDA torch + transformers + peft + accelerate image lacks; manylinux x86_64, CPython 3.12, --no-deps
# (every wheel is listed here, none is resolved, so nothing replaces the image's torch).
#
#   scripts/gpu_wheels.sh            # SFT and OSFT
#   scripts/gpu_wheels.sh --lora     # also Training Hub's LoRA extra (unsloth, trl, xformers, bitsandbytes)
#
# On the GPU machine: pip install --no-deps --no-index .whl/*
# xformers is built against one torch version: check `pip show torch` there against the xformers wheel's
# requirement, and drop LoRA from the benchmark (--algorithms sft,osft) if they differ.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=.whl
mkdir -p "$DEST"

CORE=(
  training-hub==0.11.2
  instructlab-training==0.16.2
  rhai-innovation-mini-trainer==0.9.0
  # their dependencies beyond torch / transformers / peft / accelerate (and what those already pull in)
  numba llvmlite datasets pyarrow dill "multiprocess>=0.70.16" xxhash
  aiofiles aiohttp aiohappyeyeballs aiosignal frozenlist multidict yarl propcache attrs
  rich markdown-it-py mdurl pygments
  typer click shellingham deprecated wrapt ninja py-cpuinfo
  pydantic pydantic-core annotated-types typing-inspection
  pandas python-dateutil pytz tzdata
  matplotlib contourpy cycler fonttools kiwisolver pillow pyparsing
  trl attr pytest iniconfig pluggy
  # the evaluation step's model loading (benchmarks: lm-eval's hf model)
  lm-eval evaluate pytablewriter dataproperty mbstrdecoder tabledata tcolorpy typepy chardet
  sacrebleu portalocker tabulate colorama scikit-learn scipy joblib threadpoolctl nltk absl-py
  more-itertools jsonlines zstandard pathvalidate
)
#: lm-eval dependencies published as source only (pure Python: `pip install --no-deps` builds them offline).
SOURCE_ONLY=(sqlitedict rouge-score word2number)
LORA=(unsloth unsloth-zoo xformers bitsandbytes tyro docstring-parser typeguard shtab hf-transfer sentencepiece
      protobuf cut-cross-entropy msgspec diffusers torchao)

PACKAGES=("${CORE[@]}")
if [[ "${1:-}" == "--lora" ]]; then
  PACKAGES+=("${LORA[@]}")
fi

# The comments above are not packages.
REQUIREMENTS=()
for package in "${PACKAGES[@]}"; do
  [[ "$package" == \#* ]] || REQUIREMENTS+=("$package")
done

python3 -m pip download --no-deps --only-binary=:all: \
  --implementation cp --python-version 3.12 --abi cp312 --abi abi3 --abi none \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform any \
  -d "$DEST" "${REQUIREMENTS[@]}"
python3 -m pip download --no-deps --no-binary=:all: -d "$DEST" "${SOURCE_ONLY[@]}"
echo "wheels in $DEST: $(ls "$DEST" | wc -l)"
