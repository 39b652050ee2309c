"""The ``lora-minimal`` pipeline: LORA, minimal flavor.

Compile it with ``kfp-finetune compile lora-minimal``
or ``python -m pipelines.training.finetuning.lora_minimal.pipeline``.
"""

from pipelines.training.finetuning.definition import build_pipeline, main

ALGORITHM = "lora"
FLAVOR = "minimal"
NAME = "lora-minimal"
DESCRIPTION = (
    "LoRA fine-tuning, minimal flavor: only the parameters that matter; everything else at the recommended defaults."
)
#: Defaults that differ from the shared parameter table (``"<step>.<name>": value``).
DEFAULTS = {"train.learning_rate": 0.0002}

pipeline = build_pipeline(ALGORITHM, FLAVOR, NAME, DESCRIPTION, DEFAULTS)

if __name__ == "__main__":
    main(__file__, pipeline)
