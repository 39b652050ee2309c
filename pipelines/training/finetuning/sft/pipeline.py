"""The ``sft`` pipeline: SFT, expert flavor.

Compile it with ``kfp-finetune compile sft``
or ``python -m pipelines.training.finetuning.sft.pipeline``.
"""

from pipelines.training.finetuning.definition import build_pipeline, main

ALGORITHM = "sft"
FLAVOR = "expert"
NAME = "sft"
DESCRIPTION = (
    "Supervised fine-tuning (SFT) of a chat model with Training Hub on Kubeflow Trainer v2: dataset "
    "download and validation, a TrainJob, lm-eval evaluation and Model Registry registration. Every knob "
    "exposed."
)
#: Defaults that differ from the shared parameter table (``"<step>.<name>": value``).
DEFAULTS = {"train.learning_rate": 2e-05}

pipeline = build_pipeline(ALGORITHM, FLAVOR, NAME, DESCRIPTION, DEFAULTS)

if __name__ == "__main__":
    main(__file__, pipeline)
