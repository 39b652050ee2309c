"""A user's own pipeline importing two kfp-finetune components: validate a dataset, then evaluate an existing model.

Compile: ``python -m pipelines.examples.custom_pipeline validate-and-evaluate.yaml``.
"""

import sys

from kfp import compiler, dsl

from components.data_processing.dataset_download import dataset_download
from components.evaluation.lm_eval import lm_eval


@dsl.pipeline(name="validate-and-evaluate", description="Validate a chat dataset and evaluate a model on it.")
def validate_and_evaluate(
    dataset_uri: str,
    model_uri: str = "s3://models/qwen2.5-1.5b-instruct",
    task_names: list = ["arc_easy"],  # noqa: B006 - KFP pipeline parameter default
):
    """Validates every row of a dataset and evaluates an existing model on its held-out split and benchmarks.

    Args:
        dataset_uri: The chat dataset (HF id, s3://, http(s)://, pvc:// or a path).
        model_uri: Where the model to evaluate is (s3:// or another artifact URI KFP can read).
        task_names: lm-eval benchmark tasks.
    """
    data = dataset_download(dataset_uri=dataset_uri, train_split_ratio=0.8)
    model = dsl.importer(artifact_uri=model_uri, artifact_class=dsl.Model, reimport=False)
    lm_eval(model=model.output, eval_dataset=data.outputs["eval_dataset"], task_names=task_names)


if __name__ == "__main__":
    compiler.Compiler().compile(validate_and_evaluate, sys.argv[1] if len(sys.argv) > 1 else "custom_pipeline.yaml")
