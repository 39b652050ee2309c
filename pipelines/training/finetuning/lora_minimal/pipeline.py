"""LoRA fine-tuning, minimal flavor.

Only the parameters that matter are exposed; everything else keeps the recommended defaults.
"""

from pipelines.training.finetuning.definition import PipelineDeclaration

DECLARATION = PipelineDeclaration("lora", "minimal", __doc__, {"train.learning_rate": 0.0002})
pipeline = DECLARATION.build()
