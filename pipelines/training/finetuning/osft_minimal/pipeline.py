"""The ``osft-minimal`` pipeline: OSFT, minimal flavor.

Compile it with ``kfp-finetune compile osft-minimal``
or ``python -m pipelines.training.finetuning.osft_minimal.pipeline``.
"""

from pipelines.training.finetuning.definition import build_pipeline, main

ALGORITHM = "osft"
FLAVOR = "minimal"
NAME = "osft-minimal"
DESCRIPTION = (
    "Orthogonal subspace fine-tuning (OSFT), minimal flavor: only the parameters that matter; everything "
    "else at the recommended defaults."
)
#: Defaults that differ from the shared parameter table (``"<step>.<name>": value``).
DEFAULTS = {}

pipeline = build_pipeline(ALGORITHM, FLAVOR, NAME, DESCRIPTION, DEFAULTS)

if __name__ == "__main__":
    main(__file__, pipeline)
