"""Orthogonal subspace fine-tuning (OSFT): continual learning without forgetting.

Trains only the low-singular-value subspace of each weight, preserving prior skills; every knob exposed.
"""

# =============================================================================
# PVC Configuration (COMPILE-TIME settings)
# =============================================================================
PVC_SIZE = "50Gi"
PVC_STORAGE_CLASS = "nfs-csi"
PVC_ACCESS_MODES = ["ReadWriteMany"]
PIPELINE_NAME = "osft-pipeline"

# =============================================================================
# Step images (COMPILE-TIME settings): mirror them for a disconnected cluster
# =============================================================================
DATASET_IMAGE = "docker.io/library/python:3.11.11-slim-bookworm"
LAUNCHER_IMAGE = "docker.io/library/python:3.11.11-slim-bookworm"
EVAL_IMAGE = "docker.io/pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"  # CUDA torch inside: not pip-installed
REGISTRY_IMAGE = "docker.io/library/python:3.11.11-slim-bookworm"
RUNTIME_IMAGE = ""  # a Containerfile image here replaces all four and installs nothing at run time

# The steps' other settings are compile-time too (e.g. EVAL_CPU_LIMIT = "8", DATASET_MEMORY_REQUEST = "4Gi"); see
# pipelines/training/finetuning/settings.py for every name (KFP_FINETUNE_<NAME> environment variables and
# `kfp-finetune compile` flags override the constants above).

from pipelines.training.finetuning.definition import PipelineDeclaration  # noqa: E402
from pipelines.training.finetuning.settings import constants_of  # noqa: E402

DECLARATION = PipelineDeclaration("osft", "expert", __doc__, compile_time=constants_of(globals()))
pipeline = DECLARATION.build()

if __name__ == "__main__":
    DECLARATION.compile_beside(__file__)
