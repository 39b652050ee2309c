"""Fine-tuning pipelines: one shared definition (``definition.py``), six thin declarations.

``PIPELINES`` maps each pipeline's name to its module.
"""

PIPELINES = {
    "sft": "pipelines.training.finetuning.sft.pipeline",
    "sft-minimal": "pipelines.training.finetuning.sft_minimal.pipeline",
    "osft": "pipelines.training.finetuning.osft.pipeline",
    "osft-minimal": "pipelines.training.finetuning.osft_minimal.pipeline",
    "lora": "pipelines.training.finetuning.lora.pipeline",
    "lora-minimal": "pipelines.training.finetuning.lora_minimal.pipeline",
}
