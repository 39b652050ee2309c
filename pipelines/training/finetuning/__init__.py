"""Fine-tuning pipelines: one shared definition (``definition.py``), six declarations in ``pipelines/training/<name>/``.

``PIPELINES`` maps each pipeline's name to its module.
"""

PIPELINES = {
    "sft": "pipelines.training.sft.pipeline",
    "sft-minimal": "pipelines.training.sft_minimal.pipeline",
    "osft": "pipelines.training.osft.pipeline",
    "osft-minimal": "pipelines.training.osft_minimal.pipeline",
    "lora": "pipelines.training.lora.pipeline",
    "lora-minimal": "pipelines.training.lora_minimal.pipeline",
}
