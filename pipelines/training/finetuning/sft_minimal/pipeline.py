"""Supervised fine-tuning (SFT), minimal flavor.

Only the parameters that matter are exposed; everything else keeps the recommended defaults.
"""

from pipelines.training.finetuning.definition import PipelineDeclaration

DECLARATION = PipelineDeclaration("sft", "minimal", __doc__, {"train.learning_rate": 2e-05})
pipeline = DECLARATION.build()
