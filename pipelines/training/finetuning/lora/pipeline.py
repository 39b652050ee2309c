"""The ``lora`` pipeline: LORA, expert flavor.

Compile it with ``kfp-finetune compile lora``
or ``python -m pipelines.training.finetuning.lora.pipeline``.
"""

from pipelines.training.finetuning.definition import build_pipeline, main

ALGORITHM = "lora"
FLAVOR = "expert"
NAME = "lora"
DESCRIPTION = "LoRA fine-tuning: trains low-rank adapters on a frozen base model. Every knob exposed."
#: Defaults that differ from the shared parameter table (``"<step>.<name>": value``).
DEFAULTS = {"train.learning_rate": 0.0002}

pipeline = build_pipeline(ALGORITHM, FLAVOR, NAME, DESCRIPTION, DEFAULTS)

if __name__ == "__main__":
    main(__file__, pipeline)
