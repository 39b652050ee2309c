#!/usr/bin/env bash
# Downloads the wheels benchmarks/gpu_training_hub.py needs on a GPU machine without network into .whl/:
# Training Hub 0.11.2, instructlab-training 0.16.2, rhai-innovation-mini-trainer 0.9.0 and the dependencies of theirs
# that a plain CUDA torch + transformers + peft + accelerate image lacks; manylinux x86_64, CPython 3.12, --no-deps
# (every wheel is listed here, none is resolved, so nothing replaces the image's torch).
#
#   scripts/gpu_wheels.sh            # SFT and OSFT
#   scripts/gpu_wheels.sh --lora     # also Training Hub's LoRA extra (unsloth, trl, xformers, bitsandbytes)
#   scripts/gpu_wheels.sh --hub-0.3.0   # also RHOAI 3.3's Training Hub stack into .whl-0.3.0 (scripts/gpu_run.sh)
#
# On the GPU machine: pip install --no-deps --no-index --no-build-isolation .whl/* (the sdists build offline).
# An image that already carries some of these (pyarrow, scipy, pandas, llvmlite, ...) needs only the others: remove
# those wheels first where the transfer is limited (measured 2026-11-27: 33 MiB left of 221 MiB on a CUDA image).
# xformers is built against one torch version: check `pip show torch` there against the xformers wheel's
# requirement, and drop LoRA from the benchmark (--algorithms sft,osft) if they differ.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST="${DEST:-.whl}"
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
  # the benchmark process itself imports the project (kfp, the components' shared code): their pins
  kfp==2.15.2 kfp-kubernetes==2.15.2 kfp-pipeline-spec==2.17.3 kubernetes==30.1.0 protobuf==6.33.6
  google-api-core google-auth google-cloud-core google-cloud-storage google-crc32c google-resumable-media
  googleapis-common-protos proto-plus docstring-parser requests-toolbelt requests-oauthlib oauthlib
  websocket-client durationpy cachetools pyasn1 pyasn1-modules rsa click-option-group cryptography cffi pycparser
  opentelemetry-api importlib-metadata defusedxml msgspec==0.22.0 tenacity croniter pytz
  # the evaluation step's model loading (benchmarks: lm-eval's hf model)
  lm-eval evaluate pytablewriter dataproperty mbstrdecoder tabledata tcolorpy typepy chardet
  sacrebleu portalocker tabulate colorama scikit-learn scipy joblib threadpoolctl nltk absl-py
  more-itertools jsonlines zstandard pathvalidate
)
#: lm-eval dependencies published as source only (pure Python: `pip install --no-deps` builds them offline).
SOURCE_ONLY=(sqlitedict rouge-score word2number kfp-server-api==2.17.3)
LORA=(unsloth unsloth-zoo xformers bitsandbytes tyro docstring-parser typeguard shtab hf-transfer sentencepiece
      protobuf cut-cross-entropy msgspec diffusers torchao)

#: RHOAI 3.3's runtime stack (image quay.io/modh/training:py312-cuda128-torch280, torch excepted), into "$DEST-0.3.0":
#: installed over the first set, it turns the machine into that image's Training Hub for a second benchmark run.
HUB_030=(training-hub==0.3.0 instructlab-training==0.13.0 rhai-innovation-mini-trainer==0.5.1 transformers==4.57.6
         tokenizers==0.22.2 huggingface_hub==0.36.2 datasets==5.0.1)

PACKAGES=("${CORE[@]}")
WITH_HUB_030=no
for option in "$@"; do
  case "$option" in
    --lora) PACKAGES+=("${LORA[@]}") ;;
    --hub-0.3.0) WITH_HUB_030=yes ;;
    *) echo "gpu_wheels.sh: unknown option $option (expected --lora, --hub-0.3.0)" >&2; exit 2 ;;
  esac
done

# The comments above are not packages.
REQUIREMENTS=()
for package in "${PACKAGES[@]}"; do
  [[ "$package" == \#* ]] || REQUIREMENTS+=("$package")
done

wheels() {  # wheels DEST PACKAGES...: CPython 3.12 manylinux x86_64 wheels, no dependencies resolved
  local dest="$1"
  shift
  python3 -m pip download --no-deps --only-binary=:all: \
    --implementation cp --python-version 3.12 --abi cp312 --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any \
    -d "$dest" "$@"
}

wheels "$DEST" "${REQUIREMENTS[@]}"
python3 -m pip download --no-deps --no-binary=:all: -d "$DEST" "${SOURCE_ONLY[@]}"
if [[ "$WITH_HUB_030" == yes ]]; then
  wheels "$DEST-0.3.0" "${HUB_030[@]}"
fi
echo "wheels in $DEST: $(ls "$DEST" | wc -l)"
