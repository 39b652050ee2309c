"""Typed component requests for tests: the component's own defaults (read from its signature) plus overrides.

Every default lives once, in the component's signature; tests that call a ``run_*`` function directly build its
request here rather than restating any default.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any


def component_defaults(component: Any) -> dict[str, Any]:
    """The default of every parameter of a KFP component that has one, from ``component.python_func``."""
    parameters = inspect.signature(component.python_func).parameters
    return {name: p.default for name, p in parameters.items() if p.default is not inspect.Parameter.empty}


def wrapper_arguments(component: Any, **arguments: Any) -> dict[str, Any]:
    """Every parameter of a KFP component as its wrapper's ``dict(locals())`` holds it: its default (``None`` where it
    has none: outputs, task config) with ``arguments`` changed; for the ``*_request`` builders."""
    parameters = inspect.signature(component.python_func).parameters
    return {name: None for name in parameters} | component_defaults(component) | arguments


def train_model_request(**arguments: Any) -> Any:
    """A ``TrainModelRequest``: ``train_model``'s defaults, no task config, and ``arguments`` (component names)."""
    from components.training.finetuning.component import train_model
    from components.training.finetuning.config import train_model_request as build

    return build(wrapper_arguments(train_model, **arguments))


def training_config(**fields: Any) -> Any:
    """A validated ``TrainingConfig``: ``train_model``'s defaults with ``fields`` (``TrainingConfig`` names) changed.

    Raises:
        TrainingConfigError: A field breaks a rule (named as the ``train_model`` parameter).
    """
    defaults = train_model_request(training_base_model=fields.get("base_model", "m")).training
    config = dataclasses.replace(defaults, **fields)
    config.validate()
    return config


def dataset_metadata(dataset_uri: str, **fields: Any) -> dict[str, Any]:
    """A dataset artifact's metadata as ``dataset_download`` writes it, for ``dataset_uri`` (other facts: fixed)."""
    from components._common.dataset_metadata import DATASET_METADATA_VERSION, DatasetMetadata

    values: dict[str, Any] = {
        "dataset_metadata_version": DATASET_METADATA_VERSION,
        "dataset_uri": dataset_uri,
        "dataset_revision": "rev-1",
        "dataset_sha256": "0" * 64,
        "dataset_rows": 10,
        "dataset_format": "messages",
        "dataset_split": "train",
        "dataset_split_seed": 7,
    }
    return DatasetMetadata(**{**values, **fields}).to_metadata()


def dataset_download_arguments(dataset_uri: str, **arguments: Any) -> dict[str, Any]:
    """``dataset_download``'s arguments as its wrapper hands them on: the defaults and ``arguments`` (outputs None)."""
    from components.data_processing.dataset_download.request import OUTPUTS

    return {**_dataset_defaults(), **dict.fromkeys(OUTPUTS), "dataset_uri": dataset_uri, **arguments}


def dataset_download_request(dataset_uri: str, **arguments: Any) -> Any:
    """A ``DatasetDownloadRequest``: ``dataset_download``'s defaults and ``arguments``, each in its group."""
    from components.data_processing.dataset_download.request import dataset_download_request as request

    return request(dataset_download_arguments(dataset_uri, **arguments))


def run_dataset_step(dataset_uri: str, out: Any, **arguments: Any) -> Any:
    """``run_dataset_download`` of :func:`dataset_download_request` into ``out/train.jsonl`` and ``out/eval.jsonl``."""
    from components.data_processing.dataset_download.run import run_dataset_download

    request = dataset_download_request(dataset_uri, **arguments)
    return run_dataset_download(request, out / "train.jsonl", out / "eval.jsonl")


def dataset_options(group: str, **fields: Any) -> Any:
    """One group of ``DatasetDownloadRequest`` (``source``, ``validation``...): the defaults and ``fields`` (others
    ignored)."""
    from components._common.arguments import option_group
    from components.data_processing.dataset_download.request import GROUPS

    return option_group(GROUPS, group, {**_dataset_defaults(), **fields})


def lm_eval_request(**arguments: Any) -> Any:
    """An ``LmEvalRequest``: ``lm_eval``'s defaults and ``arguments``; an artifact given as a path (``model``...) is an
    artifact at that path without metadata, one not given is absent."""
    from types import SimpleNamespace

    from components.evaluation.lm_eval import lm_eval
    from components.evaluation.lm_eval.config import ARTIFACTS
    from components.evaluation.lm_eval.config import lm_eval_request as build

    for name in ARTIFACTS:
        if isinstance(arguments.get(name), str):
            arguments[name] = SimpleNamespace(path=arguments[name], metadata={})
    return build(wrapper_arguments(lm_eval, **arguments))


def remote_evaluation(**fields: Any) -> Any:
    """A ``RemoteEvaluation`` of the held-out tasks of ``ws``'s ``models/m`` at ``lm_eval``'s defaults; ``fields``
    replace its fields, and any ``lm_eval`` parameter among them its option groups'."""
    from components._common.arguments import parameter_fields
    from components.evaluation.lm_eval.config import GROUPS, LmEvalRequest
    from components.evaluation.lm_eval.remote_evaluation import RemoteEvaluation

    request = lm_eval_request(
        **{name: fields.pop(name) for name in list(fields) if name in parameter_fields(LmEvalRequest, GROUPS)}
    )
    values = {"name": "lmeval-1", "namespace": "team-a", "pvc_name": "ws", "model_relative": "models/m"}
    values |= {"model_digest": "sha256:" + "0" * 64, "task_names": ("heldout_generation",), "tasks_relative": ""}
    values |= {"harness": request.harness, "remote": request.remote, "profile": None, "poll_seconds": 0.2, "log": print}
    return RemoteEvaluation(**{**values, **fields})


def model_registry_request(**arguments: Any) -> Any:
    """A ``ModelRegistryRequest`` as the wrapper builds it: the defaults, then ``arguments`` (``model`` among them)."""
    from components.deployment.kubeflow_model_registry import model_registry
    from components.deployment.kubeflow_model_registry.request import model_registry_request as build

    return build(wrapper_arguments(model_registry, **arguments))


def job_spec_settings(**fields: Any) -> dict[str, Any]:
    """The ``JobSpec`` settings that are ``train_model`` parameters, at the component's defaults, then ``fields``."""
    from components.training.finetuning.config import runtime_name_of

    defaults = component_defaults(_train_model())
    settings = {  # the runtime as the launcher resolves it ('' = the backend's runtime)
        "runtime_name": runtime_name_of(defaults["training_runtime_name"], defaults["training_backend"]),
        "runtime_kind": defaults["training_runtime_kind"],
        "num_nodes": defaults["training_num_nodes"],
        "gpus_per_node": defaults["training_gpus_per_node"],
        "gpu_resource_name": defaults["training_gpu_resource_name"],
        "progress_tracking": defaults["training_progress_tracking"],
        "metrics_port": defaults["training_progress_metrics_port"],
        "metrics_poll_interval_seconds": defaults["training_progress_poll_interval_seconds"],
    }
    return {**settings, **fields}


def job_spec(**fields: Any) -> Any:
    """A ``JobSpec`` with :func:`job_spec_settings` and ``fields`` (``run_id``, ``namespace``, ``command``, ...)."""
    from components.training.finetuning.manifests.spec import JobSpec

    return JobSpec(**job_spec_settings(**fields))


def _train_model() -> Any:
    from components.training.finetuning.component import train_model

    return train_model


def pod_run_config(algorithm: str = "sft", **fields: Any) -> Any:
    """A ``RunConfig`` as a pod reads it: ``train_model``'s defaults for ``algorithm``; ``fields`` replace its own
    fields, and a ``hyperparameters`` dict of changes replaces those."""
    from components.training.finetuning.contract import (
        RUN_CONFIG_VERSION,
        MlflowSettings,
        ProgressSettings,
        RunConfig,
    )

    changes = dict(fields.pop("hyperparameters", {}))
    settings = dataclasses.replace(training_config(algorithm=algorithm).training_settings(), **changes)
    values: dict[str, Any] = {
        "version": RUN_CONFIG_VERSION,
        "base_model": "org/model",
        "model_path": "",
        "data_path": "/ws/data/train.jsonl",
        "eval_data_path": "",
        "ckpt_output_dir": "/ws/ckpt",
        "model_cache_dir": "/ws/model_cache",
        "pvc_mounts": {},
        "nproc_per_node": 0,
        "hyperparameters": settings,
        "progress": ProgressSettings(enabled=False, port=28080, termination_log=""),
        "jit_checkpoint": True,
        "mlflow": MlflowSettings(tracking_uri="", experiment_name="", run_name=""),
    }
    return RunConfig(**{**values, **fields})


def pod_settings(**fields: Any) -> Any:
    """What ``train_model`` tells the pods besides the hyper-parameters: progress off, JIT checkpoints on, no MLflow;
    ``fields`` (``progress``, ``jit_checkpoint``, ``mlflow``) replace those."""
    from components.training.finetuning.contract import MlflowSettings, ProgressSettings
    from components.training.finetuning.launch import PodSettings

    values = {
        "progress": ProgressSettings(enabled=False, port=28080, termination_log=""),
        "jit_checkpoint": True,
        "mlflow": MlflowSettings(tracking_uri="", experiment_name="", run_name=""),
    }
    return PodSettings(**{**values, **fields})


def _dataset_defaults() -> dict[str, Any]:
    from components.data_processing.dataset_download import dataset_download

    return component_defaults(dataset_download)


def dataset_read_limits(**fields: Any) -> Any:
    """A ``ReadLimits`` at ``dataset_download``'s ``max_line_bytes`` / ``max_decompressed_bytes``, and ``fields``."""
    from components._common.chat_files import ReadLimits

    defaults = _dataset_defaults()
    names = ("max_line_bytes", "max_decompressed_bytes")
    return ReadLimits(**{**{name: defaults[name] for name in names}, **fields})


def fetch_dataset(uri: str, download_dir: Any, http: Any = None, **fields: Any) -> Any:
    """``sources.fetch_dataset`` of ``uri`` at ``dataset_download``'s defaults and the source ``fields``."""
    from components.data_processing.dataset_download import sources

    source = dataset_options("source", dataset_uri=uri, **fields)
    return sources.fetch_dataset(source, download_dir, http or sources.HttpOptions())


def validate_local_files(files: Any, source_uri: str, sink: Any = None, **fields: Any) -> Any:
    """``validate.validate_local_files`` at ``dataset_download``'s defaults and the validation ``fields``."""
    from components.data_processing.dataset_download import validate

    return validate.validate_local_files(files, source_uri, dataset_options("validation", **fields), sink=sink)


def validate_dataset_uri(uri: str, **fields: Any) -> Any:
    """``validate.validate_dataset_uri`` at ``dataset_download``'s defaults and ``fields`` (source or validation)."""
    from components.data_processing.dataset_download import validate

    source = dataset_options("source", dataset_uri=uri, **fields)
    return validate.validate_dataset_uri(source, dataset_options("validation", **fields))


def job_settings(**options: Any) -> Any:
    """``cluster.state.JobSettings`` as ``train_model`` builds it, at the component's defaults unless ``options`` say.

    ``options`` are fields of ``JobSettings`` (``metrics``, ``launcher_pod``, ``log``, ``clock``, ``sleep``) or of its
    ``Deadlines``, ``JobPolicy`` and ``ApiOptions`` groups (e.g. ``timeout_seconds``, ``use_watch``), each given to
    the group that has it. The fields that are ``training_*`` component parameters (``cleanup_policy``,
    ``timeout_seconds`` & co) default to the component's, the others to their own.
    """
    from components.training.finetuning import train_model
    from components.training.finetuning.cluster.state import ApiOptions, Deadlines, JobPolicy, JobSettings

    groups = {"deadlines": Deadlines, "policy": JobPolicy, "api": ApiOptions}
    owners = {field.name: group for group, cls in groups.items() for field in dataclasses.fields(cls)}
    values: dict[str, dict[str, Any]] = {group: {} for group in groups}
    for name, parameter in component_defaults(train_model).items():
        field = name.removeprefix("training_")
        if name.startswith("training_") and field in owners:
            values[owners[field]][field] = parameter
    top = {}
    for name, value in options.items():
        if name in owners:
            values[owners[name]][name] = value
        else:
            top[name] = value
    return JobSettings(**{group: cls(**values[group]) for group, cls in groups.items()}, **top)


def run_job(api_client: Any, manifest: Any, **options: Any) -> Any:
    """``cluster.runner.run_job`` with the settings :func:`job_settings` builds from ``options``."""
    from components.training.finetuning.cluster.runner import run_job as run

    return run(api_client, manifest, job_settings(**options))
