"""Orthogonal subspace fine-tuning (OSFT), minimal flavor.

Only the parameters that matter are exposed (RHOAI defaults: unfreeze ratio 0.25, lr 5e-6, batch 128).
"""

from pipelines.training.finetuning.definition import PipelineDeclaration

DECLARATION = PipelineDeclaration("osft", "minimal", __doc__)
pipeline = DECLARATION.build()
