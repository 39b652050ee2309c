"""The ``sft-minimal`` pipeline: SFT, minimal flavor.

Compile it with ``kfp-finetune compile sft-minimal``
or ``python -m pipelines.training.finetuning.sft_minimal.pipeline``.
"""

from pipelines.training.finetuning.definition import build_pipeline, main

ALGORITHM = "sft"
FLAVOR = "minimal"
NAME = "sft-minimal"
DESCRIPTION = (
    "Supervised fine-tuning (SFT), minimal flavor: only the parameters that matter; everything else at "
    "the recommended defaults."
)
#: Defaults that differ from the shared parameter table (``"<step>.<name>": value``).
DEFAULTS = {"train.learning_rate": 2e-05}

pipeline = build_pipeline(ALGORITHM, FLAVOR, NAME, DESCRIPTION, DEFAULTS)

if __name__ == "__main__":
    main(__file__, pipeline)
