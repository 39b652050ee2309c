"""The ``osft`` pipeline: OSFT, expert flavor.

Compile it with ``kfp-finetune compile osft``
or ``python -m pipelines.training.finetuning.osft.pipeline``.
"""

from pipelines.training.finetuning.definition import build_pipeline, main

ALGORITHM = "osft"
FLAVOR = "expert"
NAME = "osft"
DESCRIPTION = (
    "Orthogonal subspace fine-tuning (OSFT): continual learning that trains only the low-singular-value "
    "subspace of each weight, preserving prior skills. Every knob exposed."
)
#: Defaults that differ from the shared parameter table (``"<step>.<name>": value``).
DEFAULTS = {}

pipeline = build_pipeline(ALGORITHM, FLAVOR, NAME, DESCRIPTION, DEFAULTS)

if __name__ == "__main__":
    main(__file__, pipeline)
