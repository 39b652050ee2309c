"""The one pipeline definition shared by every fine-tuning pipeline.

``dataset_download → train_model → lm_eval → model_registry``, with a second ``lm_eval`` of the base model beside
``train_model`` whose results are the fine-tuned evaluation's ``baseline_results``, parameterised by algorithm
(``sft`` / ``osft`` / ``lora``) and flavor (``expert`` / ``minimal``). A pipeline module
(``pipelines/training/<name>/pipeline.py``, the RHOAI guide's paths) declares its compile-time constants
(``PVC_SIZE``, ``PVC_STORAGE_CLASS``, ...), algorithm and flavor in a :class:`PipelineDeclaration`; run as a script it
compiles ``pipeline.yaml`` beside itself.

KFP reads a pipeline's parameters from its function signature, so :func:`build_pipeline` synthesises a function whose
signature is the selected rows of :data:`~pipelines.training.finetuning.parameters.PARAMETERS`. Parameters a flavor
does not expose are passed to the components as constants (their defaults).
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import sys
from collections.abc import Callable, Iterator
from typing import Any

from pipelines.training.finetuning.parameters import REQUIRED, PipelineParameter, parameters_for, with_defaults
from pipelines.training.finetuning.settings import CompileSettings

_AWS_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_S3_ENDPOINT", "AWS_DEFAULT_REGION", "AWS_S3_BUCKET")
#: The OCI pull secret: the guide's key, and ``.dockerconfigjson`` of a kubernetes.io/dockerconfigjson pull secret
#: (``oc create secret docker-registry``), each optional; train_model reads the first that is set.
_OCI_PULL_SECRET_KEYS = {
    "OCI_PULL_SECRET_MODEL_DOWNLOAD": "OCI_PULL_SECRET_MODEL_DOWNLOAD",
    ".dockerconfigjson": "OCI_PULL_SECRET_DOCKERCONFIGJSON",
}


def _docstring(title: str, exposed: list[PipelineParameter]) -> str:
    """A Google-style docstring; KFP turns its ``Args`` into the dashboard's parameter descriptions."""
    lines = [title, "", "Args:"]
    lines += [f"    {p.dashboard_name}: {p.description}" for p in exposed]
    return "\n".join(lines) + "\n"


def _signature(exposed: list[PipelineParameter]) -> inspect.Signature:
    """The pipeline function's signature: required parameters first (Python's rule), then the rest in order."""
    params = [
        inspect.Parameter(
            p.dashboard_name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            annotation=p.annotation,
            default=inspect.Parameter.empty if p.default is REQUIRED else p.default,
        )
        for p in exposed
    ]
    return inspect.Signature(sorted(params, key=lambda p: p.default is not inspect.Parameter.empty))


def _apply_secrets(tasks: dict[str, Any], settings: CompileSettings) -> None:
    """Mounts the RHOAI secrets as env vars (all optional) on the steps that need them; values never reach YAML."""
    from kfp import kubernetes

    hf = {"HF_TOKEN": "HF_TOKEN"}
    s3 = {key: key for key in _AWS_KEYS}
    kube = {"KUBERNETES_SERVER_URL": "KUBERNETES_SERVER_URL", "KUBERNETES_AUTH_TOKEN": "KUBERNETES_AUTH_TOKEN"}
    mounts = {
        "dataset": [(settings.hf_token_secret, hf), (settings.s3_secret, s3)],
        "train": [
            (settings.kubernetes_credentials_secret, kube),
            (settings.hf_token_secret, hf),
            (settings.s3_secret, s3),
            (settings.oci_pull_secret, _OCI_PULL_SECRET_KEYS),
        ],
        "base_eval": [(settings.hf_token_secret, hf)],
        "eval": [(settings.hf_token_secret, hf)],
        "registry": [(settings.s3_secret, s3)],
    }
    for step, secrets in mounts.items():
        for secret_name, key_to_env in secrets:
            kubernetes.use_secret_as_env(
                tasks[step], secret_name=secret_name, secret_key_to_env=key_to_env, optional=True
            )


def _place_evaluation(task: Any, settings: CompileSettings) -> None:
    """Requests the evaluation step's accelerator and pins it to GPU nodes (nothing when ``eval_gpus`` is 0)."""
    from kfp import kubernetes

    if not settings.eval_gpus:
        return
    task.set_accelerator_type(settings.eval_gpu_resource).set_accelerator_limit(settings.eval_gpus)
    selector = settings.eval_node_selector_pair
    if selector:
        kubernetes.add_node_selector(task, label_key=selector[0], label_value=selector[1])


#: The task(s) of each compile-time step (see :data:`~.settings.STEPS`), by the keys :func:`_wire` files them under.
_TASKS_OF_STEP = {
    "dataset": ("dataset",),
    "launcher": ("train",),
    "eval": ("base_eval", "eval"),
    "registry": ("registry",),
}


def _components(settings: CompileSettings) -> dict[str, Any]:
    """The four components, each built for its step's image (or the prebuilt runtime image), by step."""
    from components.data_processing.dataset_download import dataset_download
    from components.deployment.kubeflow_model_registry import model_registry
    from components.evaluation.lm_eval import lm_eval
    from components.training.finetuning import train_model

    by_step = {"dataset": dataset_download, "launcher": train_model, "eval": lm_eval, "registry": model_registry}
    return {step: component.with_image(*settings.image_of(step)) for step, component in by_step.items()}


def _apply_resources(tasks: dict[str, Any], settings: CompileSettings) -> None:
    """CPU and memory requests and limits on every task, and ``imagePullPolicy: IfNotPresent`` (images are pinned)."""
    from kfp import kubernetes

    for step, keys in _TASKS_OF_STEP.items():
        for key in keys:
            task, resources = tasks[key], settings.resources_of(step)
            task.set_cpu_request(resources["cpu_request"]).set_cpu_limit(resources["cpu_limit"])
            task.set_memory_request(resources["memory_request"]).set_memory_limit(resources["memory_limit"])
            kubernetes.set_image_pull_policy(task, "IfNotPresent")


class _CallerOnlyInspect:
    """``inspect`` for KFP's task setters, with a ``stack()`` that names the frames without reading any source."""

    def __getattr__(self, name: str) -> Any:
        return getattr(inspect, name)

    @staticmethod
    def stack(context: int = 1) -> list[tuple[Any, str, int, str, None, None]]:
        """``(frame, filename, lineno, function, None, None)`` from the caller outwards, like ``inspect.stack(0)``."""
        frames, frame = [], sys._getframe(1)
        while frame is not None:
            code = frame.f_code
            frames.append((frame, code.co_filename, frame.f_lineno, code.co_name, None, None))
            frame = frame.f_back
        return frames


@contextlib.contextmanager
def _fast_task_setters() -> Iterator[None]:
    """Makes KFP's ``set_cpu_request`` & co. cheap while the pipeline is wired.

    Each of them calls ``inspect.stack()`` only to name itself in an error message; that reads source and searches
    ``sys.modules`` for every frame (~50 ms a call here, 18 calls a pipeline: seconds per ``compile --all``).
    """
    from kfp.dsl import pipeline_task

    original = pipeline_task.inspect
    pipeline_task.inspect = _CallerOnlyInspect()
    try:
        yield
    finally:
        pipeline_task.inspect = original


def _wire(values: dict[tuple[str, str], Any], settings: CompileSettings, algorithm: str) -> dict[str, Any]:
    """Calls the four components with the pipeline's values; returns the tasks by step."""
    from kfp import dsl

    components = _components(settings)
    dataset_download, train_model = components["dataset"], components["launcher"]
    lm_eval, model_registry = components["eval"], components["registry"]

    def args(step: str) -> dict[str, Any]:
        return {name: value for (s, name), value in values.items() if s == step}

    data = dataset_download(**args("dataset"), max_seq_len=values[("train", "training_max_seq_len")])
    data.set_display_name("Download and validate dataset").set_caching_options(True)
    train = train_model(
        **args("train"),
        training_algorithm=algorithm,
        dataset=data.outputs["train_dataset"],
        eval_dataset=data.outputs["eval_dataset"],
        pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER,
        run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        task_name=dsl.PIPELINE_TASK_NAME_PLACEHOLDER,
        hf_token_secret_name=settings.hf_token_secret,
        s3_secret_name=settings.s3_secret,
    )
    train.set_display_name(f"Fine-tune ({algorithm.upper()})").set_caching_options(False)
    eval_args = args("eval")
    evaluate_base_model = eval_args.pop("enabled")
    # The base model on the same tasks and settings, beside training (it needs only the base model and the split);
    # cached: free on a re-run with the same base model, data and tasks.
    base_evaluation = lm_eval(
        **eval_args,
        model_source=values[("train", "training_base_model")],
        eval_dataset=data.outputs["eval_dataset"],
        enabled=evaluate_base_model,
        skip_unloadable_model_source=True,
    )
    base_evaluation.set_display_name("Evaluate base model (lm-eval)").set_caching_options(True)
    _place_evaluation(base_evaluation, settings)
    evaluation = lm_eval(
        **eval_args,
        model=train.outputs["output_model"],
        eval_dataset=data.outputs["eval_dataset"],
        baseline_results=base_evaluation.outputs["results"],
    )
    evaluation.set_display_name("Evaluate (lm-eval)").set_caching_options(False)
    _place_evaluation(evaluation, settings)
    registry = model_registry(
        **args("registry"),
        model=train.outputs["output_model"],
        eval_metrics=evaluation.outputs["metrics"],
        eval_results=evaluation.outputs["results"],
        train_metrics=train.outputs["output_metrics"],
        dataset=data.outputs["train_dataset"],
        pipeline_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        pipeline_run_name=dsl.PIPELINE_JOB_NAME_PLACEHOLDER,
    )
    registry.set_display_name("Register model").set_caching_options(False)
    tasks = {"dataset": data, "train": train, "base_eval": base_evaluation, "eval": evaluation, "registry": registry}
    _apply_secrets(tasks, settings)
    _apply_resources(tasks, settings)
    return tasks


def build_pipeline(
    algorithm: str,
    flavor: str,
    name: str,
    description: str,
    defaults: dict[str, Any] | None = None,
    settings: CompileSettings | None = None,
) -> Callable[..., Any]:
    """Builds a fine-tuning pipeline (a KFP ``GraphComponent``) for one algorithm and flavor.

    Args:
        algorithm: ``sft``, ``osft`` or ``lora``.
        flavor: ``expert`` or ``minimal``.
        name: The pipeline's name (overridden by ``settings.pipeline_name`` when set).
        description: One paragraph shown in the dashboard.
        defaults: ``{"<step>.<name>": value}`` defaults that differ from the shared table's.
        settings: Compile-time settings (default: :meth:`CompileSettings.from_env`).

    Returns:
        The pipeline, ready for ``kfp.compiler.Compiler().compile`` or a ``kfp.local`` run.
    """
    from kfp import dsl

    settings = settings or CompileSettings.from_env()
    every = with_defaults(parameters_for(algorithm, "expert"), defaults or {})
    exposed_keys = {(p.step, p.name) for p in parameters_for(algorithm, flavor)}
    exposed = [p for p in every if (p.step, p.name) in exposed_keys]
    fixed = {(p.step, p.name): p.default for p in every if (p.step, p.name) not in exposed_keys}
    signature = _signature(exposed)
    by_dashboard_name = {p.dashboard_name: (p.step, p.name) for p in exposed}

    def pipeline_body(*args: Any) -> None:
        values = dict(fixed)
        values.update({by_dashboard_name[n]: value for n, value in zip(signature.parameters, args, strict=True)})
        with _fast_task_setters():
            _wire(values, settings, algorithm)

    pipeline_body.__signature__ = signature
    pipeline_body.__name__ = name.replace("-", "_")
    pipeline_body.__doc__ = _docstring(description, exposed)
    workspace = dsl.WorkspaceConfig(
        size=settings.pvc_size, kubernetes=dsl.KubernetesWorkspaceConfig(pvcSpecPatch=settings.workspace_pvc_patch())
    )
    return dsl.pipeline(
        name=settings.pipeline_name or name,
        description=description,
        pipeline_config=dsl.PipelineConfig(workspace=workspace),
    )(pipeline_body)


@dataclasses.dataclass(frozen=True)
class PipelineDeclaration:
    """What a pipeline module declares: everything else comes from the shared definition.

    Attributes:
        algorithm: ``sft``, ``osft`` or ``lora``.
        flavor: ``expert`` or ``minimal``.
        description: The module docstring; shown in the dashboard (whitespace collapsed).
        defaults: ``{"<step>.<name>": value}`` defaults that differ from the shared table's.
        compile_time: The module's compile-time constants (:func:`~.settings.constants_of`); ``KFP_FINETUNE_*``
            variables and ``kfp-finetune compile`` flags override them.
    """

    algorithm: str
    flavor: str
    description: str
    defaults: dict[str, Any] = dataclasses.field(default_factory=dict)
    compile_time: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        """``<algorithm>`` for the expert flavor, ``<algorithm>-minimal`` for the minimal one."""
        return self.algorithm if self.flavor == "expert" else f"{self.algorithm}-{self.flavor}"

    def settings(self, **overrides: Any) -> CompileSettings:
        """The module's constants, then ``KFP_FINETUNE_*`` variables, then ``overrides`` (e.g. CLI flags)."""
        return CompileSettings.from_env(base=self.compile_time, **overrides)

    def build(self, settings: CompileSettings | None = None) -> Callable[..., Any]:
        """The pipeline, built by :func:`build_pipeline` with ``settings`` (default: :meth:`settings`)."""
        description = " ".join(self.description.split())
        settings = settings or self.settings()
        return build_pipeline(self.algorithm, self.flavor, self.name, description, self.defaults, settings)

    def compile_beside(self, module_file: str) -> str:
        """Compiles the pipeline to ``pipeline.yaml`` beside ``module_file`` (the guide's compile command).

        Returns:
            The path written.
        """
        from pathlib import Path

        output = Path(module_file).resolve().with_name("pipeline.yaml")
        compile_pipeline(self.build(), str(output))
        print(f"Compiled pipeline {self.name!r} to {output}")
        return str(output)


def compile_pipeline(pipeline: Any, output_path: str) -> str:
    """Compiles ``pipeline`` to ``output_path`` (YAML) and returns the path."""
    from kfp import compiler

    compiler.Compiler().compile(pipeline, output_path)
    return output_path
