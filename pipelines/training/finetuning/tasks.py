"""What the fine-tuning pipelines' tasks share: step images, workspace PVC, secrets, resources, caching, eval GPU.

Secrets are mounted as optional env vars: their values never reach the YAML.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from components.evaluation.lm_eval.devices import REQUESTED_GPUS_ENV
from pipelines.training.finetuning.settings import CompileSettings

#: ``{secret key: env var}`` of each secret.
_S3_KEYS = {
    key: key
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_S3_ENDPOINT", "AWS_DEFAULT_REGION", "AWS_S3_BUCKET")
}
_HF_KEYS = {"HF_TOKEN": "HF_TOKEN"}
_KUBERNETES_KEYS = {key: key for key in ("KUBERNETES_SERVER_URL", "KUBERNETES_AUTH_TOKEN")}
#: The OCI pull and push secrets: the guide's key or a docker-registry secret's (the step reads the first set).
_OCI_PULL_SECRET_KEYS = {
    "OCI_PULL_SECRET_MODEL_DOWNLOAD": "OCI_PULL_SECRET_MODEL_DOWNLOAD",
    ".dockerconfigjson": "OCI_PULL_SECRET_DOCKERCONFIGJSON",
}
_OCI_PUSH_SECRET_KEYS = {
    "OCI_PUSH_SECRET_MODEL_UPLOAD": "OCI_PUSH_SECRET_MODEL_UPLOAD",
    ".dockerconfigjson": "OCI_PUSH_SECRET_DOCKERCONFIGJSON",
}
#: The component of each step (``phase_02_train_...`` feeds ``train_model``), as ``(module, name)``.
STEP_COMPONENTS = {
    "dataset": ("components.data_processing.dataset_download", "dataset_download"),
    "train": ("components.training.finetuning", "train_model"),
    "eval": ("components.evaluation.lm_eval", "lm_eval"),
    "registry": ("components.deployment.kubeflow_model_registry", "model_registry"),
}
#: Run-time parameters that feed no single component argument of the same meaning: their descriptions.
PIPELINE_DESCRIPTIONS = {
    "phase_03_eval_opt_evaluate_base_model": (
        "Evaluate the base model too, on the same tasks with the same settings, before training (it holds the "
        "evaluation's GPU while it runs, so training waits for it: one GPU step at a time, as the guide's hardware "
        "table sizes the cluster; cached on re-runs). The fine-tuned evaluation then reports base, fine-tuned and "
        "delta per task and metric, whether each change is beyond noise, and feeds the registry's improvement and "
        "regression gates. An `oci://`, `s3://` or `pvc://` base model, a local path the evaluation pod lacks, or a "
        "base model without chat template while `phase_03_eval_opt_chat_template` is on is skipped (no deltas). "
        "`False`: the task only writes a skipped result (its pod still starts, briefly)."
    ),
}


def described(function: Callable) -> Callable:
    """``function`` (a pipeline, before ``@dsl.pipeline``) with each run-time parameter described in its ``Args``.

    A description written in ``Args`` stays; any other parameter gets :data:`PIPELINE_DESCRIPTIONS`' or that of the
    component argument it is passed to in the body (``training_num_epochs=phase_02_train_man_train_epochs``).
    """
    import importlib

    import docstring_parser

    doc = inspect.cleandoc(function.__doc__ or "")
    written = {param.arg_name for param in docstring_parser.parse(doc).params}
    inputs = {
        step: getattr(importlib.import_module(module), name).component_spec.inputs
        for step, (module, name) in STEP_COMPONENTS.items()
    }
    fed: dict[str, str] = dict(PIPELINE_DESCRIPTIONS)
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(function)))):
        if isinstance(node, ast.keyword) and isinstance(node.value, ast.Name) and node.arg:
            step = re.match(r"phase_\d\d_([a-z]+)_", node.value.id)
            component = inputs.get(step.group(1), {}) if step else {}
            if node.arg in component and component[node.arg].description:
                fed.setdefault(node.value.id, component[node.arg].description)
    missing = [name for name in inspect.signature(function).parameters if name not in written and name in fed]
    if missing and not re.search(r"^Args:$", doc, re.MULTILINE):
        doc += "\n\nArgs:"
    lines = [f"    {name}: " + fed[name].strip().replace("\n", "\n        ") for name in missing]
    function.__doc__ = "\n".join([doc, *lines]) + "\n"
    return function


def step_components(settings: CompileSettings) -> tuple[Any, Any, Any, Any]:
    """``(dataset_download, train_model, lm_eval, model_registry)``, each built for its step's image."""
    from components.data_processing.dataset_download import dataset_download
    from components.deployment.kubeflow_model_registry import model_registry
    from components.evaluation.lm_eval import lm_eval
    from components.training.finetuning import train_model

    return (
        dataset_download.with_image(settings.image_of("dataset")),
        train_model.with_image(settings.image_of("launcher")),
        lm_eval.with_image(settings.image_of("eval")),
        model_registry.with_image(settings.image_of("registry")),
    )


def pipeline_config(settings: CompileSettings) -> Any:
    """The ``dsl.PipelineConfig`` with the run's workspace PVC (``PVC_SIZE``, ``PVC_STORAGE_CLASS``, ...)."""
    from kfp import dsl

    workspace = dsl.WorkspaceConfig(
        size=settings.pvc_size, kubernetes=dsl.KubernetesWorkspaceConfig(pvcSpecPatch=settings.workspace_pvc_patch())
    )
    return dsl.PipelineConfig(workspace=workspace)


def dataset_step(dataset_download: Any, settings: CompileSettings, **arguments: Any) -> Any:
    """The dataset task on the workspace: cached (same input, same output), ``hf-token`` and ``s3-secret`` mounted."""
    from kfp import dsl

    task = dataset_download(pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER, **arguments)
    task.set_display_name("Download and validate dataset")
    task.set_caching_options(True)
    _mount(task, [(settings.hf_token_secret, _HF_KEYS), (settings.s3_secret, _S3_KEYS)])
    _set_resources(task, settings, "dataset")
    return task


def training_inputs(settings: CompileSettings, dataset_task: Any) -> dict[str, Any]:
    """What every ``train_model`` call gets: the workspace, the dataset step's splits, secret names and run ids."""
    from kfp import dsl

    return {
        "pvc_path": dsl.WORKSPACE_PATH_PLACEHOLDER,
        "dataset": dataset_task.outputs["train_dataset"],
        "eval_dataset": dataset_task.outputs["eval_dataset"],
        "hf_token_secret_name": settings.hf_token_secret,
        "s3_secret_name": settings.s3_secret,
        "run_id": dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        "task_name": dsl.PIPELINE_TASK_NAME_PLACEHOLDER,
    }


def set_up_training(task: Any, settings: CompileSettings, display_name: str) -> None:
    """The ``train_model`` task (the launcher): never cached, every secret it may need mounted, its resources."""
    task.set_display_name(display_name)
    task.set_caching_options(False)
    secrets = [(settings.kubernetes_credentials_secret, _KUBERNETES_KEYS), (settings.hf_token_secret, _HF_KEYS)]
    _mount(task, [*secrets, (settings.s3_secret, _S3_KEYS), (settings.oci_pull_secret, _OCI_PULL_SECRET_KEYS)])
    _set_resources(task, settings, "launcher")


def evaluate_base_and_tuned(
    lm_eval: Any,
    settings: CompileSettings,
    dataset_task: Any,
    training_task: Any,
    base_model: Any,
    evaluate_base_model: Any,
    **evaluation_settings: Any,
) -> Any:
    """The base model's evaluation before training, then the fine-tuned model's against it; returns the latter.

    Both evaluate the held-out split with ``evaluation_settings``. The base model's is cached, skips an ``oci://``,
    ``s3://`` or ``pvc://`` base model rather than failing, runs only when ``evaluate_base_model``, and training waits
    for it (one GPU step at a time: the guide's hardware table).
    """
    from kfp import dsl

    evaluation_settings.update(
        pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER, eval_dataset=dataset_task.outputs["eval_dataset"]
    )
    base_eval_task = lm_eval(
        model_source=base_model, enabled=evaluate_base_model, skip_unusable_model_source=True, **evaluation_settings
    )
    _set_up_evaluation(base_eval_task, settings, "Evaluate base model (lm-eval)", cached=True)
    training_task.after(base_eval_task)
    eval_task = lm_eval(
        model=training_task.outputs["output_model"],
        baseline_results=base_eval_task.outputs["results"],
        **evaluation_settings,
    )
    _set_up_evaluation(eval_task, settings, "Evaluate (lm-eval)", cached=False)
    return eval_task


def _set_up_evaluation(task: Any, settings: CompileSettings, display_name: str, cached: bool) -> None:
    """An evaluation task: ``hf-token``, its resources, and ``eval_gpus`` GPUs on GPU nodes (none when 0)."""
    from kfp import kubernetes

    task.set_display_name(display_name)
    task.set_caching_options(cached)
    _mount(task, [(settings.hf_token_secret, _HF_KEYS)])
    _set_resources(task, settings, "eval")
    if settings.eval_gpus:
        task.set_accelerator_type(settings.eval_gpu_resource).set_accelerator_limit(settings.eval_gpus)
        # The pod fails with "No CUDA GPUs are available" if it sees none, rather than evaluating on CPU.
        task.set_env_variable(REQUESTED_GPUS_ENV, str(settings.eval_gpus))
        if settings.eval_node_selector:
            key, value = settings.eval_node_selector.split("=", 1)
            kubernetes.add_node_selector(task, label_key=key.strip(), label_value=value.strip())


def registry_step(
    model_registry: Any,
    settings: CompileSettings,
    dataset_task: Any,
    training_task: Any,
    eval_task: Any = None,
    **arguments: Any,
) -> Any:
    """The registry task: the trained model with its metrics (and the fine-tuned evaluation's, if any), never cached.

    Mounted as optional env: ``s3-secret`` (``s3_upload_prefix``), the modelcar push secret (``modelcar_uri``) and
    ``kubernetes-credentials`` (``deploy_inference_service``).
    """
    from kfp import dsl

    from components.deployment.kubeflow_model_registry.modelcar import PUSH_SECRET_NAME

    if eval_task is not None:
        arguments.update(eval_metrics=eval_task.outputs["metrics"], eval_results=eval_task.outputs["results"])
    task = model_registry(
        pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER,
        model=training_task.outputs["output_model"],
        train_metrics=training_task.outputs["output_metrics"],
        dataset=dataset_task.outputs["train_dataset"],
        pipeline_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        pipeline_run_name=dsl.PIPELINE_JOB_NAME_PLACEHOLDER,
        **arguments,
    )
    task.set_display_name("Register model")
    task.set_caching_options(False)
    secrets = [(settings.s3_secret, _S3_KEYS), (PUSH_SECRET_NAME, _OCI_PUSH_SECRET_KEYS)]
    _mount(task, [*secrets, (settings.kubernetes_credentials_secret, _KUBERNETES_KEYS)])
    _set_resources(task, settings, "registry")
    return task


def compile_beside(pipeline: Any, module_file: str) -> None:
    """Compiles ``pipeline`` to ``pipeline.yaml`` beside its module (the guide's ``python .../pipeline.py``)."""
    from kfp import compiler

    output = Path(module_file).resolve().with_name("pipeline.yaml")
    compiler.Compiler().compile(pipeline, str(output))
    print(f"Compiled pipeline {pipeline.name!r} to {output}")


def _mount(task: Any, secrets: list[tuple[str, dict[str, str]]]) -> None:
    """Mounts each ``(secret, {key: env var})`` as optional env vars: a missing secret does not stop the pod."""
    from kfp import kubernetes

    for secret_name, key_to_env in secrets:
        kubernetes.use_secret_as_env(task, secret_name=secret_name, secret_key_to_env=key_to_env, optional=True)


def _set_resources(task: Any, settings: CompileSettings, step: str) -> None:
    """The step's CPU and memory requests and limits, and ``imagePullPolicy: IfNotPresent`` (images are pinned)."""
    from kfp import kubernetes

    resources = settings.resources_of(step)
    task.set_cpu_request(resources["cpu_request"]).set_cpu_limit(resources["cpu_limit"])
    task.set_memory_request(resources["memory_request"]).set_memory_limit(resources["memory_limit"])
    kubernetes.set_image_pull_policy(task, "IfNotPresent")
