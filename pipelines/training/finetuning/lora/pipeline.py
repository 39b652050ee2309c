"""LoRA fine-tuning: trains low-rank adapters on a frozen base model.

Dataset download and validation, a TrainJob, lm-eval evaluation and Model Registry registration; every knob
exposed.
"""

from pipelines.training.finetuning.definition import PipelineDeclaration

DECLARATION = PipelineDeclaration("lora", "expert", __doc__, {"train.learning_rate": 0.0002})
pipeline = DECLARATION.build()
