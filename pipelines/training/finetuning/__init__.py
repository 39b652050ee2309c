"""Fine-tuning pipelines: eight explicit ``@dsl.pipeline`` modules in ``pipelines/training/<name>/pipeline.py``.

``PIPELINES`` maps each pipeline's name to its module; :mod:`.tasks` holds the task set-up they share and
:mod:`.settings` their compile-time settings.
"""

PIPELINES = {
    "sft": "pipelines.training.sft.pipeline",
    "sft-minimal": "pipelines.training.sft_minimal.pipeline",
    "osft": "pipelines.training.osft.pipeline",
    "osft-minimal": "pipelines.training.osft_minimal.pipeline",
    "lora": "pipelines.training.lora.pipeline",
    "lora-minimal": "pipelines.training.lora_minimal.pipeline",
    "grpo": "pipelines.training.grpo.pipeline",
    "lora-grpo": "pipelines.training.lora_grpo.pipeline",
}
