"""Supervised fine-tuning (SFT) of a chat model with Training Hub on Kubeflow Trainer v2.

Dataset download and validation, a TrainJob, lm-eval evaluation and Model Registry registration; every knob
exposed.
"""

from pipelines.training.finetuning.definition import PipelineDeclaration

DECLARATION = PipelineDeclaration("sft", "expert", __doc__, {"train.learning_rate": 2e-05})
pipeline = DECLARATION.build()
