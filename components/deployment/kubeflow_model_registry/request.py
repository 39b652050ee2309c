"""``model_registry``'s arguments as typed option groups: ``deploy_gpus`` -> ``request.deploy.gpus``, no defaults."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from components._common import arguments

from .lineage import ArtifactInfo


@dataclasses.dataclass(frozen=True)
class RegistryOptions:
    """Where and how to reach the Model Registry (TLS, and whether the token may go over plain HTTP)."""

    registry_address: str
    registry_port: int
    is_secure: bool
    ca_bundle_path: str
    allow_token_over_http: bool


@dataclasses.dataclass(frozen=True)
class VersionOptions:
    """What is registered: the names, the version's author and description, the artifact's format and storage key."""

    model_name: str
    model_version: str
    author: str
    description: str
    model_format_name: str
    model_format_version: str
    storage_key: str


@dataclasses.dataclass(frozen=True)
class GateOptions:
    """The metric threshold gate and the continual-learning gates on the comparison with the base model."""

    min_metric_name: str
    min_metric_value: float
    min_improvement_metric: str
    min_improvement: float
    max_regression: float
    max_regression_relative: bool


@dataclasses.dataclass(frozen=True)
class StorageOptions:
    """Where the registered URI comes from (``model_uri``, an S3 upload) and the run's workspace."""

    model_uri: str
    s3_upload_prefix: str
    pvc_path: str


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """The pipeline run (``pipeline_<field>``), possibly unresolved placeholders."""

    run_id: str
    run_name: str


@dataclasses.dataclass(frozen=True)
class ModelcarOptions:
    """The modelcar group (``modelcar_<field>``): the OCI push target, its base image, LoRA choice and TLS."""

    uri: str
    base_image: str
    lora_weights: str
    insecure: bool


@dataclasses.dataclass(frozen=True)
class DeployOptions:
    """The deploy group (``deploy_<field>``): the KServe InferenceService serving the registered model."""

    inference_service: bool
    service_name: str
    namespace: str
    runtime: str
    runtime_image: str
    gpus: int
    timeout_seconds: int
    hardware_profile: str


@dataclasses.dataclass(frozen=True)
class ModelRegistryRequest:
    """``model_registry``'s arguments in groups, the input artifacts as :class:`ArtifactInfo` (``None``: absent)."""

    model: ArtifactInfo | None
    eval_metrics: ArtifactInfo | None
    train_metrics: ArtifactInfo | None
    dataset: ArtifactInfo | None
    eval_results: ArtifactInfo | None
    registry: RegistryOptions
    version: VersionOptions
    gates: GateOptions
    storage: StorageOptions
    run: RunOptions
    modelcar: ModelcarOptions
    deploy: DeployOptions


#: Each group of the request: its type, and the prefix its fields take as component parameters.
GROUPS: dict[str, tuple[type, str]] = {
    "registry": (RegistryOptions, ""),
    "version": (VersionOptions, ""),
    "gates": (GateOptions, ""),
    "storage": (StorageOptions, ""),
    "run": (RunOptions, "pipeline_"),
    "modelcar": (ModelcarOptions, "modelcar_"),
    "deploy": (DeployOptions, "deploy_"),
}
#: The output artifact: the summary file, handed to ``run_model_registration`` by the wrapper.
OUTPUTS = ("summary",)


def _artifact_info(name: str, artifact: Any) -> ArtifactInfo | None:
    path = arguments.artifact_path("model_registry", name, artifact)
    return None if artifact is None else ArtifactInfo(artifact.uri, path, dict(artifact.metadata))


def model_registry_request(values: Mapping[str, Any]) -> ModelRegistryRequest:
    """``model_registry``'s arguments (the wrapper's ``dict(locals())``) but the outputs, each in its group.

    Raises:
        TypeError: A name is missing or unknown, or an input artifact is not artifact-like.
    """
    return arguments.grouped_request(
        "model_registry", ModelRegistryRequest, GROUPS, values, OUTPUTS, own=_artifact_info
    )
