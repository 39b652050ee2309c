"""The ``lm_eval`` KFP component: a thin typed wrapper building one ``LmEvalRequest`` (``config.py``) to run."""

from kfp import dsl

from components._common.images import STEP_IMAGE_CUDA
from components._common.runtime import runtime_component
from components.evaluation.lm_eval.parameter_docs import PARAMETER_DOCS


# The CUDA step image: the evaluation requests a GPU by default (the pipelines pick the CPU one for ``eval_gpus=0``).
@runtime_component(parameter_docs=PARAMETER_DOCS, base_image=STEP_IMAGE_CUDA)
def lm_eval(
    metrics: dsl.Output[dsl.Metrics],
    results: dsl.Output[dsl.Artifact],
    report: dsl.Output[dsl.HTML],
    model: dsl.Input[dsl.Model] = None,
    task_names: list = [],
    eval_dataset: dsl.Input[dsl.Dataset] = None,
    baseline_results: dsl.Input[dsl.Artifact] = None,
    model_source: str = "",
    batch_size: str = "auto",
    limit: int = -1,
    num_fewshot: int = -1,
    gen_kwargs: dict = {},
    model_args: dict = {},
    apply_chat_template: bool = True,
    backend: str = "hf",
    seed: int = 42,
    log_samples: bool = False,
    max_samples: int = 200,
    max_new_tokens: int = 64,
    custom_tasks: dsl.Input[dsl.Artifact] = None,
    device: str = "",
    bootstrap_iters: int = 100000,
    allow_empty_eval_dataset: bool = False,
    enabled: bool = True,
    skip_unusable_model_source: bool = False,
    pvc_path: str = "",
    eval_backend: str = "lm-eval",
    hardware_profile: str = "",
    evalhub_url: str = "",
    eval_timeout_seconds: int = 14400,
    eval_cleanup_policy: str = "delete",
) -> None:
    """Evaluates a model with lm-eval on benchmark tasks and on the held-out split (see the component README)."""
    arguments = dict(locals())  # every argument by name, taken before the imports below add names
    from components._common.files import with_extension
    from components.evaluation.lm_eval.config import lm_eval_request
    from components.evaluation.lm_eval.run import run_lm_eval

    outcome = run_lm_eval(lm_eval_request(arguments), results.path, with_extension(report, ".html"))
    for name, value in outcome.metrics.items():
        metrics.log_metric(name, value)
    results.metadata.update(outcome.results_metadata)
