"""Orthogonal subspace fine-tuning (OSFT): continual learning without forgetting.

Trains only the low-singular-value subspace of each weight, preserving prior skills; every knob exposed.
"""

from pipelines.training.finetuning.definition import PipelineDeclaration

DECLARATION = PipelineDeclaration("osft", "expert", __doc__)
pipeline = DECLARATION.build()
