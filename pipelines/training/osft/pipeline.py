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

# The steps' settings are compile-time too; see pipelines/training/finetuning/settings.py for every name
# (KFP_FINETUNE_<NAME> environment variables and `kfp-finetune compile` flags override the constants above).

from pipelines.training.finetuning.definition import PipelineDeclaration  # noqa: E402
from pipelines.training.finetuning.settings import constants_of  # noqa: E402

DECLARATION = PipelineDeclaration("osft", "expert", __doc__, compile_time=constants_of(globals()))
pipeline = DECLARATION.build()

if __name__ == "__main__":
    DECLARATION.compile_beside(__file__)
