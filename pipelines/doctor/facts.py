"""What a compiled pipeline fixes at compile time, and a run's values by (step, component argument)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipelines.training.finetuning.interface import step_of_task

#: The run parameters doctor reads, as (step, component argument) keys.
DATASET_URI = ("dataset", "dataset_uri")
BASE_MODEL = ("train", "training_base_model")
LAUNCHER = ("train", "training_launcher")
BACKEND = ("train", "training_backend")
RUNTIME_NAME = ("train", "training_runtime_name")
RUNTIME_KIND = ("train", "training_runtime_kind")
TRAINING_IMAGE = ("train", "training_image")
JOB_NAMESPACE = ("train", "training_namespace")
NUM_NODES = ("train", "training_num_nodes")
GPUS_PER_NODE = ("train", "training_gpus_per_node")
GPU_RESOURCE = ("train", "training_gpu_resource_name")
TOLERATIONS = ("train", "training_tolerations")
NODE_SELECTOR = ("train", "training_node_selector")
REGISTRY_ADDRESS = ("registry", "registry_address")
REGISTRY_PORT = ("registry", "registry_port")
REGISTRY_MODEL_NAME = ("registry", "model_name")
REGISTRY_MODEL_VERSION = ("registry", "model_version")
REGISTRY_IS_SECURE = ("registry", "is_secure")
S3_UPLOAD_PREFIX = ("registry", "s3_upload_prefix")


@dataclasses.dataclass(frozen=True)
class SecretMount:
    """A secret mounted as env vars: ``{secret key: env var}``, its steps, whether every mount is optional."""

    name: str
    keys: dict[str, str]
    steps: tuple[str, ...]
    optional: bool


@dataclasses.dataclass(frozen=True)
class PipelineFacts:
    """The compile-time facts of one compiled pipeline.

    Attributes:
        source: Where the YAML came from (named in messages).
        pvc_size: The workspace PVC size (``""``: no workspace); ``storage_class`` ``""``: the default class.
        parameters: ``root.inputDefinitions.parameters`` (dashboard name -> definition).
        accelerators: ``{step: (resource name, count)}`` (``task_accelerators``: by task).
        task_steps: ``{task: step}`` of every task of the DAG (``lm-eval-2`` -> ``eval``).
        task_upstreams: ``{task: (task, ...)}``: the tasks each waits for (data and ``.after()``).
    """

    name: str
    source: str
    pvc_size: str
    storage_class: str
    access_modes: tuple[str, ...]
    secrets: dict[str, SecretMount]
    parameters: dict[str, dict[str, Any]]
    spec: dict[str, Any]
    accelerators: dict[str, tuple[str, int]] = dataclasses.field(default_factory=dict)
    tolerations: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    node_selectors: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    task_steps: dict[str, str] = dataclasses.field(default_factory=dict)
    task_upstreams: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    task_accelerators: dict[str, tuple[str, int]] = dataclasses.field(default_factory=dict)


def read_package(path: str | Path) -> PipelineFacts:
    """The facts of a compiled pipeline YAML; a :class:`ValueError` when it is not one."""
    from pipelines.kfp_api.arguments import read_pipeline_documents

    documents = read_pipeline_documents(str(path))
    spec = documents[0]
    platform = next((doc for doc in documents[1:] if "platforms" in doc), {})
    kubernetes = (platform.get("platforms") or {}).get("kubernetes") or {}
    executors = (kubernetes.get("deploymentSpec") or {}).get("executors") or {}
    containers = (spec.get("deploymentSpec") or {}).get("executors") or {}
    workspace = (kubernetes.get("pipelineConfig") or {}).get("workspace") or {}
    patch = ((workspace.get("kubernetes") or {}).get("pvcSpecPatch")) or {}
    facts = PipelineFacts(
        name=str((spec.get("pipelineInfo") or {}).get("name", "")),
        source=str(path),
        pvc_size=str(workspace.get("size", "")),
        storage_class=str(patch.get("storageClassName", "")),
        access_modes=tuple(patch.get("accessModes") or ()),
        secrets={},
        parameters=dict(((spec.get("root") or {}).get("inputDefinitions") or {}).get("parameters") or {}),
        spec=spec,
    )
    secrets = facts.secrets
    for task_name, task in ((spec.get("root") or {}).get("dag") or {}).get("tasks", {}).items():
        step = step_of_task(task_name)
        component = (spec.get("components") or {}).get((task.get("componentRef") or {}).get("name", ""), {})
        executor = component.get("executorLabel", "")
        resources = ((containers.get(executor) or {}).get("container") or {}).get("resources") or {}
        asked = resources.get("accelerator") or {}
        resource = asked.get("resourceType") or asked.get("type") or ""
        count = int(float(asked.get("resourceCount") or asked.get("count") or 0))
        accelerator = (str(resource), count) if resource and count else None
        kubernetes_executor = executors.get(executor) or {}
        facts.task_steps[task_name] = step
        facts.task_upstreams[task_name] = tuple(task.get("dependentTasks") or ())
        if accelerator:
            facts.task_accelerators[task_name] = accelerator
            if accelerator[1] >= facts.accelerators.get(step, ("", 0))[1]:
                facts.accelerators[step] = accelerator  # of a step's two tasks, the larger
        if kubernetes_executor.get("tolerations"):
            facts.tolerations[step] = list(kubernetes_executor["tolerations"])
        labels = (kubernetes_executor.get("nodeSelector") or {}).get("labels") or {}
        if labels:
            facts.node_selectors[step] = {str(key): str(value) for key, value in labels.items()}
        for mount in kubernetes_executor.get("secretAsEnv") or []:
            name = mount.get("secretName") or ((mount.get("secretNameParameter") or {}).get("runtimeValue") or {}).get(
                "constant", ""
            )
            keys = {item["secretKey"]: item["envVar"] for item in mount.get("keyToEnv") or []}
            known = secrets.get(name)
            secrets[name] = SecretMount(
                name,
                {**(known.keys if known else {}), **keys},
                (*(known.steps if known else ()), step),
                bool(mount.get("optional")) and (known.optional if known else True),
            )
    return facts


class RunValues:
    """The values a run with ``arguments`` (by dashboard name) gives each (step, component argument).

    Of a step of two tasks (the evaluations), the last task's; a :class:`ValueError` for a bad argument.
    """

    def __init__(self, facts: PipelineFacts, arguments: Mapping[str, Any]) -> None:
        from pipelines import kfp_api
        from pipelines.kfp_api.arguments import task_values

        relaxed = {name: {**definition, "isOptional": True} for name, definition in facts.parameters.items()}
        kfp_api.check_arguments({"root": {"inputDefinitions": {"parameters": relaxed}}}, arguments, facts.source)
        self.facts = facts
        self.values, self.sources = task_values(facts.spec, arguments)
        self.tasks = {step: task for task, step in facts.task_steps.items()}

    def parameter(self, key: tuple[str, str]) -> str | None:
        """The pipeline parameter wired to ``(step, component argument)``, or None when the pipeline fixes it."""
        return self.sources.get(self.tasks.get(key[0], ""), {}).get(key[1])

    def get(self, key: tuple[str, str]) -> Any:
        """The value of ``(step, component argument)`` for this run (``None``: required and not given)."""
        return self.values.get(self.tasks.get(key[0], ""), {}).get(key[1])

    def integer(self, key: tuple[str, str]) -> int:
        """:meth:`get` as an int (KFP writes integer defaults as floats, e.g. ``1.0``)."""
        value = self.get(key)
        return int(float(value)) if value not in (None, "") else 0

    def label(self, key: tuple[str, str]) -> str:
        """How a user sets it: the pipeline parameter, or a note that this pipeline fixes it."""
        name = self.parameter(key)
        if name is not None:
            return f"parameter {name}"
        return f"{key[1]} (fixed in this pipeline; use the expert flavor to change it)"
